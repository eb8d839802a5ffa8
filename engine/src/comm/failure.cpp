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
//
// The store lives in the communicator of the rank that hosts it (rank 0).
// When rank 0 failed first and its program ended at once, the store went
// with it and the ranks that failed later could not read the first
// failure: they blamed the neighbour they lost. So the host's
// communicator, after a failure, stays until every other rank has read
// the first failure or has closed its store connection (a rank that died,
// or ended), for at most kFailureReadersWait. An init that fails after
// the bootstrap keeps it the same way: the other ranks read from it the
// records they name in their own error (a rank whose settings differ).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <exception>
#include <string>
#include <thread>

#include "base/log.h"
#include "bootstrap/views.h"
#include "comm/communicator_impl.h"
#include "ringmaster/store.h"
#include "store/store.h"

namespace ringmaster {

Status Communicator::Impl::attribute(const Status& given, std::optional<std::uint64_t> seq) {
  std::lock_guard lock(failure_mutex);
  if (failure) return *failure;
  const BootstrapStore b = store_of(*bootstrap);
  std::string first;
  Status own = given;
  try {
    if (!b.client) throw Error(ErrorCategory::internal, "no store connection");
    std::lock_guard store_lock(store_mutex);
    if (seq && own.category() == ErrorCategory::timeout) {
      const std::string stall = store_key(b.config, fmt::format("stall_diagnosis_{}", *seq));
      if (b.client->check({stall})) {
        own = Status(own.category(),
                     fmt::format("{}; the stall report said: {}", own.message(), b.client->get_existing(stall)));
      }
    }
    first = b.client->compare_set(store_key(b.config, "failed_first"), "", fmt::format("{}\n{}", rank, own.message()));
    b.client->add(store_key(b.config, "failed_read"), 1);
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

void Communicator::Impl::keep_store_for_failure_readers() {
  if (!bootstrap) return;
  const BootstrapStore b = store_of(*bootstrap);
  if (!b.server || !b.client) return;
  try {
    if (!b.client->check({store_key(b.config, "failed_first")})) return;
    bool read_here = false;
    {
      std::lock_guard lock(failure_mutex);
      read_here = failure.has_value();
    }
    const auto deadline = std::chrono::steady_clock::now() + kFailureReadersWait;
    for (;;) {
      const std::int64_t read = b.client->add(store_key(b.config, "failed_read"), 0) - (read_here ? 1 : 0);
      // Done when every other rank has read it, or when no other rank is
      // connected any more (each holds one store connection; this rank's
      // is the last). Counting the gone beside the readers would count a
      // rank that read and then left twice, and close the store on a rank
      // still on its way to read (seen under load).
      const auto connected = static_cast<std::int64_t>(b.server->num_connections());
      if (read >= nranks - 1 || connected <= 1) return;
      if (std::chrono::steady_clock::now() >= deadline) {
        RM_INFO(coll, "closing the store after {} ms with {} rank(s) connected that have not read the first failure",
                std::chrono::duration_cast<std::chrono::milliseconds>(kFailureReadersWait).count(), connected - 1);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const std::exception& e) {
    RM_INFO(coll, "the store cannot say who has read the first failure ({})", e.what());
  }
}

void Communicator::Impl::keep_store_while_ranks_connected() noexcept {
  if (!bootstrap) return;
  const BootstrapStore b = store_of(*bootstrap);
  if (!b.server) return;
  // This rank's own connection is the last.
  const auto deadline = std::chrono::steady_clock::now() + kFailureReadersWait;
  while (b.server->num_connections() > 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace ringmaster
