// ADDRESS_EXCHANGE over the bootstrap's binomial tree (exchange.h).
#include "bootstrap/exchange.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>
#include <span>
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

void put_le(std::vector<unsigned char>& out, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i)
    out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

std::uint64_t get_le(const unsigned char* at, int width) {
  std::uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= static_cast<std::uint64_t>(at[i]) << (8 * i);
  return v;
}

}  // namespace

std::vector<unsigned char> encode_layout(const JobLayout& layout) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;  // (ranks, host)
  for (const std::uint32_t host : layout.host_of) {
    if (!runs.empty() && runs.back().second == host) {
      ++runs.back().first;
    } else {
      runs.push_back({1, host});
    }
  }
  std::vector<unsigned char> out;
  out.reserve(kLayoutHeader + 8 * (layout.settings_groups.size() + runs.size()));
  put_le(out, layout.placement, 8);
  put_le(out, static_cast<std::uint64_t>(layout.host_count), 4);
  put_le(out, layout.settings_groups.size(), 4);
  put_le(out, runs.size(), 4);
  for (const auto& g : layout.settings_groups) {
    put_le(out, static_cast<std::uint64_t>(g.first_rank), 4);
    put_le(out, static_cast<std::uint64_t>(g.ranks), 4);
  }
  for (const auto& [ranks, host] : runs) {
    put_le(out, ranks, 4);
    put_le(out, host, 4);
  }
  return out;
}

std::size_t layout_body_bytes(const unsigned char* header, int n) {
  const auto hosts = get_le(header + 8, 4), groups = get_le(header + 12, 4), runs = get_le(header + 16, 4);
  const auto most = static_cast<std::uint64_t>(n);
  if (hosts == 0 || groups == 0 || runs == 0 || hosts > most || groups > most || runs > most) return 0;
  return static_cast<std::size_t>(8 * (groups + runs));
}

std::optional<JobLayout> decode_layout(std::span<const unsigned char> bytes, int n) {
  if (bytes.size() < kLayoutHeader || layout_body_bytes(bytes.data(), n) != bytes.size() - kLayoutHeader)
    return std::nullopt;
  const unsigned char* at = bytes.data();
  JobLayout layout;
  layout.placement = get_le(at, 8);
  layout.host_count = static_cast<int>(get_le(at + 8, 4));
  const auto groups = get_le(at + 12, 4), runs = get_le(at + 16, 4);
  at += kLayoutHeader;
  std::uint64_t grouped = 0;
  for (std::uint64_t g = 0; g < groups; ++g, at += 8) {
    const auto first = get_le(at, 4), ranks = get_le(at + 4, 4);
    if (first >= static_cast<std::uint64_t>(n) || ranks == 0) return std::nullopt;
    grouped += ranks;
    layout.settings_groups.push_back({static_cast<int>(first), static_cast<int>(ranks)});
  }
  layout.host_of.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t r = 0; r < runs; ++r, at += 8) {
    const auto ranks = get_le(at, 4), host = get_le(at + 4, 4);
    if (ranks == 0 || host >= static_cast<std::uint64_t>(layout.host_count) ||
        layout.host_of.size() + ranks > static_cast<std::size_t>(n))
      return std::nullopt;
    layout.host_of.insert(layout.host_of.end(), static_cast<std::size_t>(ranks), static_cast<std::uint32_t>(host));
  }
  if (grouped != static_cast<std::uint64_t>(n) || layout.host_of.size() != static_cast<std::size_t>(n))
    return std::nullopt;
  return layout;
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
      // The exchange's own hellos are 8 bytes (magic, rank), a
      // transport's 16 (net::Hello): the first 8 tell them apart.
      net::Hello hello;
      const auto hello_deadline = std::min(deadline, Clock::now() + kHelloWait);
      int hello_err = candidate.recv_all(&hello, 2 * sizeof(std::uint32_t), hello_deadline);
      const int from = static_cast<int>(hello.rank);
      if (hello_err == 0 && hello.magic == kTreeHelloMagic && is_tree_child(from, c.rank, n) &&
          s.tree_children.count(from) == 0) {
        candidate.set_nodelay();
        s.tree_children[from] = std::move(candidate);
        continue;
      }
      if (hello_err == 0 && hello.magic != kTreeHelloMagic && hello.magic != kRingHelloMagic) {
        hello_err = candidate.recv_all(&hello.connection, 2 * sizeof(std::uint32_t), hello_deadline);
        if (hello_err == 0) {
          s.early_connections.emplace_back(hello, std::move(candidate));
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
  // Down: not every record (each rank then received N of them, N^2 for
  // the job: ADDRESS_EXCHANGE grew 7.7x from 1,024 to 4,096 ranks) but
  // what every rank needs of them, worked out once by rank 0: hosts
  // numbered by their lowest rank, as runs of consecutive ranks on one
  // host (a run a node where ranks are placed by node, as launchers do),
  // the settings words' groups and the placement hash.
  std::vector<unsigned char> layout;
  std::optional<JobLayout> job;
  if (c.rank == 0) {
    job.emplace();
    std::unordered_map<std::uint64_t, std::uint32_t> host_numbers;
    std::unordered_map<std::uint32_t, std::size_t> group_of;
    job->host_of.resize(static_cast<std::size_t>(n));
    job->placement = fnv1a("");  // FNV-1a over the ranks' host hashes
    for (int r = 0; r < n; ++r) {
      const unsigned char* record = subtree.data() + bytes(r);
      const std::uint64_t host_hash = record_host(record);
      job->placement = (job->placement ^ host_hash) * 1099511628211ull;
      const auto host = host_numbers.emplace(host_hash, static_cast<std::uint32_t>(host_numbers.size()));
      job->host_of[static_cast<std::size_t>(r)] = host.first->second;
      const auto group = group_of.emplace(record_settings(record), job->settings_groups.size());
      if (group.second) job->settings_groups.push_back({r, 0});
      ++job->settings_groups[group.first->second].ranks;
    }
    job->host_count = static_cast<int>(host_numbers.size());
    subtree = {};
    layout = encode_layout(*job);
  } else {
    layout.resize(kLayoutHeader);
    int err = s.tree_parent.recv_all(layout.data(), layout.size(), deadline);
    if (err == 0) {
      const std::size_t body = layout_body_bytes(layout.data(), n);
      if (body == 0) broke(parent, EPROTO, "it sent a job layout this rank cannot read");
      layout.resize(kLayoutHeader + body);
      err = s.tree_parent.recv_all(layout.data() + kLayoutHeader, body, deadline);
    }
    if (err != 0) broke(parent, err, "receiving the job's layout failed");
  }
  // The largest subtree first: the longest chain starts soonest.
  for (auto child = children.rbegin(); child != children.rend(); ++child) {
    if (const int err = s.tree_children.at(*child).send_all(layout.data(), layout.size(), deadline))
      broke(*child, err, "sending it the job's layout failed");
  }
  if (c.rank != 0) job = decode_layout(layout, n);  // rank 0 keeps what it encoded
  if (!job) broke(parent, EPROTO, "it sent a job layout this rank cannot read");
  s.host_of = std::move(job->host_of);
  s.host_count = job->host_count;
  s.placement = job->placement;
  s.settings_groups = std::move(job->settings_groups);
  s.tree_children.clear();
  s.tree_parent = net::Socket();
  s.ring_next = net::Socket();
  s.ring_prev = net::Socket();
  int depth = 0;
  for (int have = 1; have < n; have *= 2)
    ++depth;
  return fmt::format("{} ranks on {} host(s), over a tree of depth {}", n, s.host_count, depth);
}

}  // namespace ringmaster
