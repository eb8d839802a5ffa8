// Which rank failed first. A communicator's ranks fail in a cascade: the
// rank that found the problem (a mismatch, a timeout, a peer whose
// connection closed) aborts, its neighbours then see their connections
// to it close and abort in turn, and theirs after them. Each used to name
// the neighbour it lost ("the peer probably died"), blaming live ranks.
//
// Now a failing rank puts its reason in the store (one key per job, the
// first writer wins) before it aborts, so before any peer can see
// anything; every rank then reports the first reason, with its own error
// beside it. A rank that dies without a word is named by the first rank
// that lost it. When the store is gone (its host died) the rank's own
// error stands.
#include <fmt/format.h>

#include <charconv>
#include <exception>
#include <string>

#include "base/log.h"
#include "bootstrap/bootstrap_impl.h"
#include "comm/communicator_impl.h"

namespace ringmaster {

Status Communicator::Impl::attribute(const Status& own) {
  std::lock_guard lock(failure_mutex);
  if (failure) return *failure;
  auto& b = bootstrap->impl();
  std::string first;
  try {
    if (!b.store) throw Error(ErrorCategory::internal, "no store connection");
    first = b.store->compare_set(store_key(b.config, "failed_first"), "", fmt::format("{}\n{}", rank, own.message()));
  } catch (const std::exception& e) {
    RM_INFO(coll, "the store cannot say which rank failed first ({}); reporting this rank's error", e.what());
    failure = own;
    return own;
  }
  // "<rank>\n<message>"
  const auto newline = first.find('\n');
  int first_rank = -1;
  if (newline != std::string::npos) std::from_chars(first.data(), first.data() + newline, first_rank);
  if (first_rank < 0 || first_rank == rank) {
    failure = own;
  } else {
    failure = Status(own.category(), fmt::format("rank {} failed first: {} (on rank {}: {})", first_rank,
                                                 first.substr(newline + 1), rank, own.message()));
  }
  return *failure;
}

}  // namespace ringmaster
