// ADDRESS_EXCHANGE over the bootstrap's binomial tree (exchange.h).
#include "bootstrap/exchange.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <unordered_map>

#include "base/hash.h"
#include "base/log.h"
#include "bootstrap/hints.h"
#include "ringmaster/status.h"

namespace ringmaster {

using Clock = net::Clock;

int tree_span(int r, int n) {
  return r == 0 ? n : std::min(r & -r, n - r);
}
int tree_parent(int r) {
  return r - (r & -r);
}
std::vector<int> tree_children(int r, int n) {
  std::vector<int> children;
  for (int step = 1; step < tree_span(r, n); step *= 2)
    children.push_back(r + step);
  return children;
}
bool is_tree_child(int child, int parent, int n) {
  return child > 0 && child < n && tree_parent(child) == parent;
}

namespace {

// What ADDRESS_EXCHANGE carries of each rank: its host's hash and its
// settings' hash, 12 bytes little-endian whatever the CPU.
constexpr std::size_t kRecordBytes = 12;

void put_record(unsigned char* at, std::uint64_t host, std::uint32_t settings) {
  for (std::size_t i = 0; i < 8; ++i)
    at[i] = static_cast<unsigned char>(host >> (8 * i));
  for (std::size_t i = 0; i < 4; ++i)
    at[8 + i] = static_cast<unsigned char>(settings >> (8 * i));
}

std::uint64_t record_host(const unsigned char* at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i)
    v |= static_cast<std::uint64_t>(at[i]) << (8 * i);
  return v;
}

std::uint32_t record_settings(const unsigned char* at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(at[8 + i]) << (8 * i);
  return v;
}

// Waits until every tree child of this rank has connected (those that
// came during BOOTSTRAP_RING are in s.tree_children already). A rank done
// with the exchange connects for its channels: any other connection with
// a 16-byte hello waits for TRANSPORT_CONNECT, which takes or drops it by
// that hello. Returns the errno of the accept, with the first missing
// child in `missing`.
int accept_tree_children(Bootstrap::Impl& s, const Config& c, Clock::time_point deadline, int& missing) {
  const int n = c.world_size;
  for (const int child : tree_children(c.rank, n)) {
    while (s.tree_children.count(child) == 0) {
      int err = 0;
      net::Socket candidate = s.listener.accept(deadline, err);
      if (err != 0) {
        missing = child;
        return err;
      }
      std::uint32_t got[4] = {};
      const auto hello_deadline = std::min(deadline, Clock::now() + kHelloWait);
      int hello_err = candidate.recv_all(got, 2 * sizeof(got[0]), hello_deadline);
      if (hello_err == 0 && got[0] == kTreeHelloMagic && is_tree_child(static_cast<int>(got[1]), c.rank, n) &&
          s.tree_children.count(static_cast<int>(got[1])) == 0) {
        candidate.set_nodelay();
        s.tree_children[static_cast<int>(got[1])] = std::move(candidate);
        continue;
      }
      if (hello_err == 0 && got[0] != kTreeHelloMagic && got[0] != kRingHelloMagic) {
        hello_err = candidate.recv_all(&got[2], 2 * sizeof(got[0]), hello_deadline);
        if (hello_err == 0) {
          s.early_connections.emplace_back(std::array<std::uint32_t, 4>{got[0], got[1], got[2], got[3]},
                                           std::move(candidate));
          continue;
        }
      }
      RM_INFO(bootstrap, "dropped a connection on the bootstrap port from {} during the address exchange",
              candidate.peer_address().to_string());
    }
  }
  return 0;
}

}  // namespace

std::string exchange_addresses(Bootstrap::Impl& s, const std::string& settings, Clock::time_point deadline,
                               const std::function<StageFailure(std::string)>& failure) {
  const Config& c = s.config;
  const int n = c.world_size;
  const std::uint32_t my_settings = static_cast<std::uint32_t>(fnv1a(settings));
  if (n == 1) {
    s.host_of.assign(1, 0);
    s.placement = (fnv1a("") ^ fnv1a(s.self.host)) * 1099511628211ull;  // as below, over one host
    s.settings_groups = {{0, 1}};
    return std::string("single rank");
  }
  // Every rank's record (12 bytes: not its PeerInfo, whose N copies on
  // each of N ranks held 315 MB at 1,024 ranks), gathered up the
  // binomial tree to rank 0 and spread back down it: each rank keeps
  // one connection, to its parent, besides the ring. (Bruck's
  // all-gather took a connection a round, ceil(log2 n) of them a rank:
  // at 1,024 ranks as threads on 2 cores the stage took 0.62 s on rank
  // 0 against 35 ms for the tree; the ring all-gather before it took
  // n-1 steps, 3 s.)
  // Up, rank r holds the records of its subtree, ranks r .. r+span-1.
  const int span = tree_span(c.rank, n);
  std::vector<unsigned char> subtree(static_cast<std::size_t>(span) * kRecordBytes);
  put_record(subtree.data(), fnv1a(s.self.host), my_settings);
  auto broke = [&](int peer, int err, const std::string& what) {
    auto f = failure(fmt::format("address exchange with rank {} broke: {}", peer, what));
    f.category = err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::peer;
    f.peer_rank = peer;
    f.errno_text = net::errno_text(err);
    f.timeout = c.bootstrap_timeout;
    f.hint = hint_exchange_broken(peer);
    throw StageError(f);
  };
  auto bytes = [](int records) { return static_cast<std::size_t>(records) * kRecordBytes; };
  const std::vector<int> children = tree_children(c.rank, n);
  int missing = -1;
  if (const int err = accept_tree_children(s, c, deadline, missing); err != 0)
    broke(missing, err, "it did not connect to this rank");
  for (const int child : children) {
    const int err = s.tree_children.at(child).recv_all(subtree.data() + bytes(child - c.rank),
                                                       bytes(tree_span(child, n)), deadline);
    if (err != 0) broke(child, err, "receiving its ranks' records failed");
  }
  const int parent = tree_parent(c.rank);
  if (c.rank != 0) {
    if (const int err = s.tree_parent.send_all(subtree.data(), subtree.size(), deadline))
      broke(parent, err, "sending it this rank's records failed");
    subtree = {};
  }
  // Down, in pieces: each piece passed on to the children as it comes
  // and read into host numbers and settings groups, so that no rank but
  // rank 0 holds every record (48 KB a rank at 4,096 ranks; a piece is
  // 12 KB). Each piece wakes every rank once more: at 4,096 ranks as
  // threads on 2 cores, pieces of 256 records took the stage's median
  // to 1.33 s against 0.83 s with these (one run each).
  constexpr int kPiece = 1024;
  std::vector<unsigned char> piece(c.rank == 0 ? 0 : bytes(std::min(kPiece, n)));
  s.host_of.resize(static_cast<std::size_t>(n));
  std::unordered_map<std::uint64_t, std::uint32_t> host_numbers;
  std::unordered_map<std::uint32_t, std::size_t> group_of;
  s.placement = fnv1a("");  // FNV-1a over the ranks' host hashes
  for (int first = 0; first < n; first += kPiece) {
    const int count = std::min(kPiece, n - first);
    const unsigned char* records = subtree.data() + bytes(first);
    if (c.rank != 0) {
      if (const int err = s.tree_parent.recv_all(piece.data(), bytes(count), deadline))
        broke(parent, err, "receiving every rank's records failed");
      records = piece.data();
    }
    // The largest subtree first: the longest chain starts soonest.
    for (auto child = children.rbegin(); child != children.rend(); ++child) {
      if (const int err = s.tree_children.at(*child).send_all(records, bytes(count), deadline))
        broke(*child, err, "sending it every rank's records failed");
    }
    // Hosts and settings words numbered in rank order, by their lowest rank.
    for (int i = 0; i < count; ++i) {
      const unsigned char* record = records + bytes(i);
      const std::uint64_t host_hash = record_host(record);
      s.placement = (s.placement ^ host_hash) * 1099511628211ull;
      const auto host = host_numbers.emplace(host_hash, static_cast<std::uint32_t>(host_numbers.size()));
      s.host_of[static_cast<std::size_t>(first + i)] = host.first->second;
      const auto group = group_of.emplace(record_settings(record), s.settings_groups.size());
      if (group.second) s.settings_groups.push_back({first + i, 0});
      ++s.settings_groups[group.first->second].ranks;
    }
  }
  s.tree_children.clear();
  s.tree_parent = net::Socket();
  s.ring_next = net::Socket();
  s.ring_prev = net::Socket();
  s.host_count = static_cast<int>(host_numbers.size());
  int depth = 0;
  for (int have = 1; have < n; have *= 2)
    ++depth;
  return fmt::format("{} ranks on {} host(s), over a tree of depth {}", n, s.host_count, depth);
}

}  // namespace ringmaster
