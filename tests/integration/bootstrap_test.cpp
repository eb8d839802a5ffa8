// Staged init with real processes on loopback: success from 1 to 16 ranks
// with every stage event in order, and each failure class provoked for
// real, asserting the stage, the hint and that the error arrives within
// the timeout + 20%.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "bootstrap/exchange.h"
#include "net/socket.h"
#include "process.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing_support::ChildProcess;

const std::vector<std::string> kStages = {"RESOLVE_MASTER",   "STORE_CONNECT",  "STORE_HANDSHAKE",  "STORE_BARRIER",
                                          "BOOTSTRAP_LISTEN", "BOOTSTRAP_RING", "ADDRESS_EXCHANGE", "READY"};

using testing_support::free_port;

struct RankResult {
  int exit_code = -1;
  std::vector<json> stages;  // in arrival order
  std::vector<json> failures;
  double wall_s = 0;
};

class Job {
 public:
  // `prefix` runs every rank through it (a network namespace's `ip netns exec NAME`).
  explicit Job(int world_size, std::vector<std::string> prefix = {})
      : world_size_(world_size), port_(free_port()), prefix_(std::move(prefix)) {}

  std::map<std::string, std::string> env(int rank) const {
    return {{"RANK", std::to_string(rank)},     {"WORLD_SIZE", std::to_string(world_size_)},
            {"MASTER_ADDR", "127.0.0.1"},       {"MASTER_PORT", std::to_string(port_)},
            {"RINGMASTER_STORE_TIMEOUT", "20"}, {"RINGMASTER_BOOTSTRAP_TIMEOUT", "20"}};
  }

  void start(int rank, std::map<std::string, std::string> extra = {}) {
    auto e = env(rank);
    for (auto& [k, v] : extra)
      e[k] = v;
    starts_.push_back(std::chrono::steady_clock::now());
    std::vector<std::string> argv = prefix_;
    argv.insert(argv.end(), {RINGMASTER_CLI, "probe", "--json"});
    children_.push_back(testing_support::spawn(argv, e));
  }

  std::vector<RankResult> finish() {
    std::vector<RankResult> results;
    for (std::size_t i = 0; i < children_.size(); ++i) {
      auto& child = children_[i];
      child.finish();
      RankResult r;
      r.exit_code = child.exit_code();
      r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - starts_[i]).count();
      std::istringstream lines(child.output);
      for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line.front() != '{') continue;
        auto j = json::parse(line);
        if (j["type"] == "stage") r.stages.push_back(j);
        if (j["type"] == "failure") r.failures.push_back(j);
      }
      results.push_back(std::move(r));
    }
    return results;
  }

  std::uint16_t port() const { return port_; }

 private:
  int world_size_;
  std::uint16_t port_;
  std::vector<std::string> prefix_;
  std::vector<ChildProcess> children_;
  std::vector<std::chrono::steady_clock::time_point> starts_;
};

void expect_all_stages_in_order(const RankResult& r, int rank) {
  ASSERT_EQ(r.exit_code, 0) << "rank " << rank;
  ASSERT_EQ(r.stages.size(), kStages.size()) << "rank " << rank;
  for (std::size_t i = 0; i < kStages.size(); ++i) {
    EXPECT_EQ(r.stages[i]["stage"], kStages[i]) << "rank " << rank;
    EXPECT_TRUE(r.stages[i]["ok"].get<bool>()) << "rank " << rank << " " << kStages[i];
    EXPECT_EQ(r.stages[i]["rank"], rank);
  }
}

class InitSucceeds : public testing::TestWithParam<int> {};

TEST_P(InitSucceeds, EveryStageInOrderOnEveryRank) {
  const int n = GetParam();
  Job job(n);
  for (int r = 0; r < n; ++r)
    job.start(r);
  const auto results = job.finish();
  for (int r = 0; r < n; ++r)
    expect_all_stages_in_order(results[r], r);
  EXPECT_NE(results[0].stages[0]["detail"].get<std::string>().find("hosts the store"), std::string::npos);
  if (n > 1) {
    // Every rank knows every rank over a tree of depth ceil(log2 n) (the
    // ring all-gather took n - 1 steps).
    int depth = 0;
    while ((1 << depth) < n)
      ++depth;
    const std::string said = fmt::format("{} ranks on 1 host(s), over a tree of depth {}", n, depth);
    for (int r = 0; r < n; ++r) {
      const auto exchange = results[static_cast<std::size_t>(r)].stages[6]["detail"].get<std::string>();
      EXPECT_EQ(exchange, said) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, InitSucceeds, testing::Values(1, 2, 3, 4, 5, 8, 13, 16));

// Thousands of ranks: what each rank learns of the others is a record of
// 12 bytes, not every rank's PeerInfo (315 MB at 1,024 ranks as threads
// of one process, 1.03 GB at 2,048: every rank decoded and kept every
// rank's text). One job split over two processes (--first-rank), which
// also stand for two hosts (NCCL_HOSTID): every rank counts both.
TEST(InitAtScale, ThousandRanksHoldAFewKilobytesEachAndCountTheirHosts) {
  const int n = 1024;
  const std::uint16_t port = free_port();
  std::vector<ChildProcess> halves;
  for (int half = 0; half < 2; ++half) {
    halves.push_back(testing_support::spawn(
        {RINGMASTER_CLI, "probe", "--json", "--np", std::to_string(n / 2), "--first-rank", std::to_string(half * n / 2),
         "--world-size", std::to_string(n), "--master-addr", "127.0.0.1", "--master-port", std::to_string(port)},
        {{"NCCL_HOSTID", half == 0 ? "node-a" : "node-b"},
         {"RINGMASTER_STORE_TIMEOUT", "60"},
         {"RINGMASTER_BOOTSTRAP_TIMEOUT", "60"}}));
  }
  // Both read at once: a process whose pipe is full stops its ranks.
  std::vector<bool> ended(halves.size(), false);
  for (std::size_t open = halves.size(); open > 0;) {
    std::vector<pollfd> fds;
    for (std::size_t i = 0; i < halves.size(); ++i)
      fds.push_back({ended[i] ? -1 : halves[i].out_fd, POLLIN, 0});
    ASSERT_GT(::poll(fds.data(), fds.size(), 120000), 0) << "no output for 120 s";
    for (std::size_t i = 0; i < halves.size(); ++i) {
      if (ended[i] || fds[i].revents == 0) continue;
      char chunk[65536];
      const ssize_t got = ::read(halves[i].out_fd, chunk, sizeof(chunk));
      if (got > 0) {
        halves[i].output.append(chunk, static_cast<std::size_t>(got));
      } else {
        ended[i] = true;
        --open;
      }
    }
  }
  int exchanged = 0;
  for (auto& half : halves) {
    half.finish();
    EXPECT_EQ(half.exit_code(), 0) << half.output.substr(0, 4000);
    std::istringstream lines(half.output);
    std::optional<json> summary;
    for (std::string line; std::getline(lines, line);) {
      const json j = json::parse(line);
      if (j.value("type", "") == "summary") summary = j;
      if (j.value("stage", "") != "ADDRESS_EXCHANGE") continue;
      EXPECT_EQ(j["detail"], fmt::format("{} ranks on 2 host(s), over a tree of depth 10", n)) << line;
      ++exchanged;
    }
    ASSERT_TRUE(summary) << half.output.substr(0, 4000);
    EXPECT_EQ((*summary)["failed"], 0);
    // 512 ranks as threads: under 100 KB a rank with the thread stacks,
    // sockets and the store's share (67 MB for 1,024 in one process).
    if (!testing_support::kAddressSanitizer) {
      EXPECT_LT((*summary)["max_rss_kib"].get<long>(), 50 * 1024);
    }
  }
  EXPECT_EQ(exchanged, n);
}

// What rank 0 spreads down the exchange's tree is the job's layout, runs
// of ranks a host, not every rank's record: 4,096 ranks on 512 hosts of 8
// take 4 KiB where the records took 48 KiB to each rank (192 MiB for the
// job); ranks interleaved over hosts still read back rank by rank, and a
// layout that cannot be one of n ranks is refused.
TEST(AddressExchange, SpreadsTheJobsLayoutAsRunsOfRanksAHost) {
  JobLayout by_node;
  for (int r = 0; r < 4096; ++r)
    by_node.host_of.push_back(static_cast<std::uint32_t>(r / 8));
  by_node.host_count = 512;
  by_node.placement = 0x0123456789abcdefull;
  by_node.settings_groups = {{0, 4096}};
  const auto bytes = encode_layout(by_node);
  EXPECT_EQ(bytes.size(), kLayoutHeader + 8 + 512 * 8);
  EXPECT_LT(bytes.size(), 4096u * 12 / 10);
  const auto back = decode_layout(bytes, 4096);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->host_of, by_node.host_of);
  EXPECT_EQ(back->host_count, 512);
  EXPECT_EQ(back->placement, by_node.placement);
  ASSERT_EQ(back->settings_groups.size(), 1u);
  EXPECT_EQ(back->settings_groups[0].ranks, 4096);

  JobLayout interleaved;
  interleaved.host_of = {0, 0, 1, 0, 2, 2, 1};
  interleaved.host_count = 3;
  interleaved.settings_groups = {{0, 5}, {3, 2}};
  const auto mixed = encode_layout(interleaved);
  EXPECT_EQ(mixed.size(), kLayoutHeader + 2 * 8 + 5 * 8);
  const auto read = decode_layout(mixed, 7);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->host_of, interleaved.host_of);
  EXPECT_EQ(read->settings_groups[1].first_rank, 3);
  EXPECT_EQ(read->settings_groups[1].ranks, 2);

  EXPECT_FALSE(decode_layout(mixed, 6));  // seven ranks' layout for a job of six
  EXPECT_FALSE(decode_layout(mixed, 8));  // a rank left without a host
  auto bad_host = mixed;
  bad_host[kLayoutHeader + 2 * 8 + 4] = 3;  // the first run on host 3 of 3
  EXPECT_FALSE(decode_layout(bad_host, 7));
  auto cut = mixed;
  cut.pop_back();
  EXPECT_FALSE(decode_layout(cut, 7));
  EXPECT_EQ(layout_body_bytes(mixed.data(), 1), 0u);  // more hosts than ranks
}

// Ranks of one host need not be neighbours: hosts placed round the job
// (NCCL_HOSTID per process) are counted alike on every rank.
TEST(AddressExchange, RanksInterleavedOverHostsCountTheirHosts) {
  const char* hosts[] = {"a", "a", "b", "a", "c", "c", "b"};
  Job job(7);
  for (int r = 0; r < 7; ++r)
    job.start(r, {{"NCCL_HOSTID", hosts[r]}});
  const auto results = job.finish();
  for (int r = 0; r < 7; ++r) {
    expect_all_stages_in_order(results[static_cast<std::size_t>(r)], r);
    EXPECT_EQ(results[static_cast<std::size_t>(r)].stages[6]["detail"], "7 ranks on 3 host(s), over a tree of depth 3")
        << "rank " << r;
  }
}

// The failing rank's report: its last stage event failed, and the failure
// record names the stage and carries the hint.
json failure_of(const RankResult& r) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.stages.empty());
  if (!r.stages.empty()) {
    EXPECT_FALSE(r.stages.back()["ok"].get<bool>());
  }
  EXPECT_EQ(r.failures.size(), 1u);
  return r.failures.empty() ? json::object() : r.failures.front();
}

void expect_within_timeout(const json& f, double timeout_s) {
  const double elapsed = f["elapsed_ms"].get<double>() / 1000.0;
  EXPECT_GE(elapsed, timeout_s * 0.95) << f.dump();
  EXPECT_LE(elapsed, timeout_s * 1.2) << f.dump();
  EXPECT_EQ(f["timeout_ms"].get<double>(), timeout_s * 1000) << f.dump();
}

// Rank 1 of 2 alone (`probe --json`, through `prefix`, e.g. a network
// namespace's `ip netns exec`): the first stage_progress event it prints,
// how long after its start the test read it (the test's own clock), and
// everything it printed until it ended.
struct LoneRank {
  std::optional<json> first;
  double seen_s = 0;
  std::string output;
};

LoneRank run_lone_rank(std::vector<std::string> prefix, const std::string& master_addr, std::uint16_t master_port,
                       const std::string& store_timeout_s) {
  prefix.insert(prefix.end(), {RINGMASTER_CLI, "probe", "--json"});
  const auto start = std::chrono::steady_clock::now();
  auto rank = testing_support::spawn(prefix, {{"RANK", "1"},
                                              {"WORLD_SIZE", "2"},
                                              {"MASTER_ADDR", master_addr},
                                              {"MASTER_PORT", std::to_string(master_port)},
                                              {"RINGMASTER_STORE_TIMEOUT", store_timeout_s}});
  LoneRank out;
  std::string buffer;
  while (!out.first) {
    pollfd p{rank.out_fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    char chunk[4096];
    const ssize_t n = ::read(rank.out_fd, chunk, sizeof(chunk));
    if (n <= 0) break;
    buffer.append(chunk, static_cast<std::size_t>(n));
    for (std::size_t eol; !out.first && (eol = buffer.find('\n')) != std::string::npos;) {
      const std::string line = buffer.substr(0, eol);
      buffer.erase(0, eol + 1);
      out.output += line + "\n";
      if (line.find("\"stage_progress\"") == std::string::npos) continue;
      out.first = json::parse(line);
      out.seen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  rank.finish();
  out.output += buffer + rank.output;
  return out;
}

// The one failure record in a rank's output.
json failure_in(const std::string& output) {
  std::vector<json> failures;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.front() != '{') continue;
    auto j = json::parse(line);
    if (j["type"] == "failure") failures.push_back(j);
  }
  EXPECT_EQ(failures.size(), 1u) << output;
  return failures.empty() ? json::object() : failures.front();
}

// For failures caused by real drops: the test's own clock (the rank's wall
// time, process start included) says the rank gave up when its timeout ran
// out, not sooner and not much later.
void expect_wall_within_timeout(const RankResult& r, const json& f, double timeout_s) {
  EXPECT_GE(r.wall_s, timeout_s * 0.95) << f.dump();
  EXPECT_LE(r.wall_s, timeout_s * 1.2 + 1.0) << f.dump();
  EXPECT_EQ(f["timeout_ms"].get<double>(), timeout_s * 1000) << f.dump();
}

// New TCP connections to 1025-65535 dropped in a namespace, as a security
// group without its self-referencing rule drops them; `except` stays open.
std::string drop_new_connections(std::uint16_t except = 0) {
  std::string rules = "table inet sg { chain input { type filter hook input priority 0; ";
  if (except != 0) rules += "tcp dport " + std::to_string(except) + " accept; ";
  return rules + "tcp flags & (syn | ack) == syn tcp dport 1025-65535 drop; }\n}\n";
}

bool contains(const json& f, const char* field, const std::string& text) {
  return f[field].get<std::string>().find(text) != std::string::npos;
}

TEST(InitSucceeds, BootstrapListensInsideThePortRange) {
  Job job(3);
  for (int r = 0; r < 3; ++r)
    job.start(r, {{"RINGMASTER_PORT_RANGE", "27100-27140"}});
  const auto results = job.finish();
  for (int r = 0; r < 3; ++r) {
    expect_all_stages_in_order(results[r], r);
    const auto detail = results[r].stages[4]["detail"].get<std::string>();  // "127.0.0.1:27101 on lo"
    const auto colon = detail.find(':');
    const int port = std::stoi(detail.substr(colon + 1));
    EXPECT_GE(port, 27100) << detail;
    EXPECT_LE(port, 27140) << detail;
  }
}

// Rank 0's store listened on every address of the host, whatever
// MASTER_ADDR said: with MASTER_ADDR=127.0.0.1 any machine that reached the
// host could read and write the job's keys. It now listens on MASTER_ADDR's
// address: 127.0.0.2 (loopback too, another address) is refused while the
// job still completes over 127.0.0.1.
TEST(InitSucceeds, StoreListensOnMasterAddrOnly) {
  Job job(2);
  job.start(0);
  auto connects = [&](const char* ip) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(job.port());
    ::inet_pton(AF_INET, ip, &a.sin_addr);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    return ok;
  };
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    up = connects("127.0.0.1");
    if (!up) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(up) << "rank 0's store did not listen within 5 s";
  EXPECT_FALSE(connects("127.0.0.2")) << "the store answers on an address other than MASTER_ADDR's";
  job.start(1);
  const auto results = job.finish();
  for (int r = 0; r < 2; ++r)
    expect_all_stages_in_order(results[r], r);
}

TEST(InitFails, NothingListensOnMasterPort) {
  Job job(2);
  job.start(1, {{"RINGMASTER_STORE_TIMEOUT", "1.5"}});
  const auto results = job.finish();
  const auto f = failure_of(results[0]);
  EXPECT_EQ(f["stage"], "STORE_CONNECT");
  EXPECT_TRUE(contains(f, "errno", "ECONNREFUSED")) << f.dump();
  EXPECT_TRUE(contains(f, "hint", "rank 0 has not started")) << f.dump();
  EXPECT_TRUE(contains(f, "remote", ":" + std::to_string(job.port()))) << f.dump();
  expect_within_timeout(f, 1.5);
  EXPECT_LE(results[0].wall_s, 1.5 * 1.2 + 0.5);
}

// The seed case: every port 1025-65535 dropped, MASTER_PORT included, by
// nftables in a network namespace of the test's own. (These ranks once ran
// against the engine's in-process connect filter, and the check read the
// product's own elapsed_ms, which that filter makes equal to the timeout by
// construction; now the drops are real and the clock is the test's.)
TEST(InitFails, SynsSwallowedOnMasterPortLikeASecurityGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace and nftables";
  testing_support::NetNamespace ns("rm-bootstrap-sg-");
  ns.nft(drop_new_connections());
  Job job(2, ns.exec());
  job.start(0, {{"RINGMASTER_STORE_TIMEOUT", "1.5"}});
  job.start(1, {{"RINGMASTER_STORE_TIMEOUT", "1.5"}});
  const auto results = job.finish();
  for (const auto& r : results) {
    const auto f = failure_of(r);
    EXPECT_EQ(f["stage"], "STORE_CONNECT");
    EXPECT_TRUE(contains(f, "errno", "ETIMEDOUT")) << f.dump();
    EXPECT_TRUE(contains(f, "hint", "security group")) << f.dump();
    EXPECT_TRUE(contains(f, "hint", "1025-65535")) << f.dump();
    expect_wall_within_timeout(r, f, 1.5);
    // No later stage was ever entered.
    for (const auto& s : r.stages)
      EXPECT_NE(s["stage"], "BOOTSTRAP_LISTEN");
  }
}

// The port takes the connection (the kernel completes the TCP handshake
// into the backlog) and nothing ever answers: reported live as stuck after
// the handshake about 2 s in, then the stage fails at its timeout.
TEST(InitFails, ListenerThatNeverAnswers) {
  const int port = testing_support::free_port();
  int err = 0;
  auto address = net::SocketAddress::parse("127.0.0.1:" + std::to_string(port));
  auto silent = net::Socket::listen(*address, 16, err);  // never accepts, never answers
  ASSERT_TRUE(silent.valid()) << net::errno_text(err);
  const auto rank = run_lone_rank({}, "127.0.0.1", port, "4");
  ASSERT_TRUE(rank.first) << "no stage_progress event: " << rank.output;
  const json& first = *rank.first;
  EXPECT_EQ(first["stage"], "STORE_HANDSHAKE") << first.dump();
  EXPECT_EQ(first["outcome"], "stuck_after_handshake") << first.dump();
  EXPECT_NE(first["detail"].get<std::string>().find("has not answered the TCPStore handshake"), std::string::npos)
      << first.dump();
  EXPECT_GE(rank.seen_s, 1.9) << first.dump();
  EXPECT_LT(rank.seen_s, 3.5) << first.dump();
  const auto f = failure_in(rank.output);
  EXPECT_EQ(f["stage"], "STORE_HANDSHAKE");
  EXPECT_EQ(f["category"], "timeout");
  EXPECT_TRUE(contains(f, "hint", "no TCPStore answered")) << f.dump();
  expect_within_timeout(f, 4);
}

TEST(InitFails, MissingRankIsNamed) {
  Job job(3);
  job.start(0, {{"RINGMASTER_STORE_TIMEOUT", "2"}});
  job.start(1, {{"RINGMASTER_STORE_TIMEOUT", "2"}});
  const auto results = job.finish();
  for (const auto& r : results) {
    const auto f = failure_of(r);
    EXPECT_EQ(f["stage"], "STORE_BARRIER");
    EXPECT_EQ(f["joined"], 2);
    EXPECT_EQ(f["missing"], json::array({2}));
    EXPECT_TRUE(contains(f, "summary", "2/3 joined; missing: 2")) << f.dump();
    EXPECT_TRUE(contains(f, "hint", "never reached the store")) << f.dump();
    expect_within_timeout(f, 2);
  }
}

TEST(InitFails, DuplicateRankIsNamed) {
  Job job(3);
  job.start(0, {{"RINGMASTER_STORE_TIMEOUT", "2"}});
  job.start(1, {{"RINGMASTER_STORE_TIMEOUT", "2"}});
  job.start(1, {{"RINGMASTER_STORE_TIMEOUT", "2"}});
  const auto results = job.finish();
  int duplicates = 0;
  for (const auto& r : results) {
    const auto f = failure_of(r);
    EXPECT_EQ(f["stage"], "STORE_BARRIER");
    if (contains(f, "summary", "rank 1 is used twice")) {
      ++duplicates;
      EXPECT_TRUE(contains(f, "hint", "RANK=1")) << f.dump();
    } else {
      EXPECT_EQ(f["missing"], json::array({2}));
    }
  }
  EXPECT_EQ(duplicates, 1);
}

// A name that does not resolve is asked again until the store's timeout
// (a headless Service's record comes with its ready pod), reported live at
// once, and named in the failure with the attempts.
TEST(InitFails, UnresolvableMasterAddr) {
  const auto rank = run_lone_rank({}, "ringmaster-no-such-service.invalid", 29500, "3");
  ASSERT_TRUE(rank.first) << "no stage_progress event: " << rank.output;
  const json& first = *rank.first;
  EXPECT_EQ(first["stage"], "RESOLVE_MASTER") << first.dump();
  EXPECT_EQ(first["outcome"], "unresolved") << first.dump();
  EXPECT_NE(first["detail"].get<std::string>().find("'ringmaster-no-such-service.invalid' does not resolve"),
            std::string::npos)
      << first.dump();
  EXPECT_LT(rank.seen_s, 1.0) << first.dump();
  const auto f = failure_in(rank.output);
  EXPECT_EQ(f["stage"], "RESOLVE_MASTER");
  EXPECT_EQ(f["category"], "config");
  EXPECT_TRUE(contains(f, "hint", "headless Service")) << f.dump();
  EXPECT_TRUE(contains(f, "summary", "attempt(s) in")) << f.dump();
  expect_within_timeout(f, 3);
}

TEST(InitFails, SocketIfnameMatchesNothing) {
  Job job(2);
  job.start(0, {{"NCCL_SOCKET_IFNAME", "=nosuchif0"}});
  job.start(1, {{"NCCL_SOCKET_IFNAME", "=nosuchif0"}});
  const auto results = job.finish();
  const auto f = failure_of(results[0]);
  EXPECT_EQ(f["stage"], "BOOTSTRAP_LISTEN");
  EXPECT_TRUE(contains(f, "summary", "NCCL_SOCKET_IFNAME==nosuchif0")) << f.dump();
  EXPECT_TRUE(contains(f, "summary", "lo (127.0.0.1")) << f.dump();  // the interfaces that exist
}

// MASTER_PORT open, every other port dropped (real drops, as above): the
// store works and the ranks stop at BOOTSTRAP_RING.
TEST(InitFails, BootstrapRingBlockedWhileStoreWorks) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace and nftables";
  testing_support::NetNamespace ns("rm-bootstrap-ring-");
  Job job(2, ns.exec());
  ns.nft(drop_new_connections(job.port()));
  job.start(0, {{"RINGMASTER_BOOTSTRAP_TIMEOUT", "1.5"}});
  job.start(1, {{"RINGMASTER_BOOTSTRAP_TIMEOUT", "1.5"}});
  const auto results = job.finish();
  for (const auto& r : results) {
    const auto f = failure_of(r);
    EXPECT_EQ(f["stage"], "BOOTSTRAP_RING");
    EXPECT_TRUE(contains(f, "errno", "ETIMEDOUT")) << f.dump();
    EXPECT_TRUE(contains(f, "hint", "ephemeral ports are blocked")) << f.dump();
    EXPECT_GE(f["peer_rank"].get<int>(), 0);
    // From the start of the job: the store stages passed first.
    EXPECT_GE(r.wall_s, 1.5 * 0.95) << f.dump();
    EXPECT_LE(r.wall_s, 1.5 * 1.2 + 2.0) << f.dump();
    EXPECT_EQ(f["timeout_ms"].get<double>(), 1500) << f.dump();
  }
}

// Each failing connect attempt is classified while the stage still retries
// (refused, unanswered, rejected, no route) and reported at once as a
// stage_progress event, long before the stage's timeout: the first one read
// on the rank's stdout, timed with the test's own clock from the rank's
// start. Before, a dropped SYN was reported only when the whole timeout ran
// out, after "1 attempt(s)".
TEST(InitFails, ConnectAttemptsAreClassifiedWhileTheyRetry) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace and nftables";
  struct Case {
    std::string outcome;
    std::string rules;  // nftables in the namespace
    std::string master_addr;
    double within_s;  // the first classified event by then
    std::string says;
  };
  const std::vector<Case> cases = {
      {"refused", "", "127.0.0.1", 1.0, "refused the connection"},
      {"unanswered", drop_new_connections(), "127.0.0.1", 5.0, "likely dropped by a firewall or security group"},
      {"rejected",
       "table inet sg { chain input { type filter hook input priority 0; tcp dport 1025-65535 reject with icmp type "
       "admin-prohibited; }\n}\n",
       "127.0.0.1", 1.0, "rejected with an ICMP error"},
      {"no_route", "", "10.255.0.1", 1.0, "no route to 10.255.0.1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.outcome);
    testing_support::NetNamespace ns("rm-classify-");
    if (!c.rules.empty()) ns.nft(c.rules);
    const auto rank = run_lone_rank(ns.exec(), c.master_addr, 29500, "3");
    ASSERT_TRUE(rank.first) << "no stage_progress event: " << rank.output;
    const json& first = *rank.first;
    EXPECT_EQ(first["stage"], "STORE_CONNECT") << first.dump();
    EXPECT_EQ(first["outcome"], c.outcome) << first.dump();
    EXPECT_NE(first["detail"].get<std::string>().find(c.says), std::string::npos) << first.dump();
    EXPECT_LT(rank.seen_s, c.within_s) << first.dump();
    // The final failure keeps the counts.
    EXPECT_NE(rank.output.find(" attempt(s): "), std::string::npos) << rank.output;
  }
}

// Two hosts at MTU 9000 behind a router whose link on to the second
// carries 1500-byte packets and whose ICMP "fragmentation needed" is
// dropped (nftables): a path-MTU black hole, as when jumbo-frame nodes
// meet a smaller hop. Handshakes and small messages pass, full-size
// segments vanish. Torn down with everything in it.
struct MtuBlackHole {
  std::string h1, h2, router;
  MtuBlackHole() {
    const std::string id = std::to_string(::getpid());
    h1 = "rm-mtu-a-" + id, h2 = "rm-mtu-b-" + id, router = "rm-mtu-r-" + id;
    const std::string script = fmt::format(
        "set -e\n"
        "for n in {0} {1} {2}; do ip netns add $n; ip netns exec $n ip link set lo up; done\n"
        "ip link add rmmtua{3} netns {0} type veth peer name ra netns {2}\n"
        "ip link add rmmtub{3} netns {1} type veth peer name rb netns {2}\n"
        "ip -n {0} link set rmmtua{3} name eth0; ip -n {0} link set eth0 mtu 9000 up\n"
        "ip -n {0} addr add 198.19.7.1/24 dev eth0; ip -n {0} route add default via 198.19.7.254\n"
        "ip -n {1} link set rmmtub{3} name eth0; ip -n {1} link set eth0 mtu 9000 up\n"
        "ip -n {1} addr add 198.19.8.1/24 dev eth0; ip -n {1} route add default via 198.19.8.254\n"
        "ip -n {2} link set ra mtu 9000 up; ip -n {2} addr add 198.19.7.254/24 dev ra\n"
        "ip -n {2} link set rb mtu 1500 up; ip -n {2} addr add 198.19.8.254/24 dev rb\n"
        "ip netns exec {2} sysctl -qw net.ipv4.ip_forward=1\n"
        "printf 'table inet hop {{ chain icmp_out {{ type filter hook output priority 0; icmp type "
        "destination-unreachable drop; }}; }}\\n' | ip netns exec {2} nft -f -\n",
        h1, h2, router, id);
    if (::system(script.c_str()) != 0) {
      remove();
      throw std::runtime_error("cannot build the hosts and the router");
    }
  }
  ~MtuBlackHole() { remove(); }
  void remove() const {
    ::system(("ip netns del " + h1 + " 2>/dev/null; ip netns del " + h2 + " 2>/dev/null; ip netns del " + router +
              " 2>/dev/null")
                 .c_str());
  }
  MtuBlackHole(const MtuBlackHole&) = delete;
  MtuBlackHole& operator=(const MtuBlackHole&) = delete;
};

// The ranks' links stall; instead of "the peer is stuck, dead, or running
// something else" each rank names the black hole and the largest packet
// that passes, found by probing its peer's listener with segments of
// every size (the hop's 1500 bytes in the direction the router drops).
TEST(InitFails, PathMtuBlackHoleIsNamedWithTheLargestPacketThatPasses) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces, a router and nftables";
  if (::system("command -v nft >/dev/null && command -v ip >/dev/null") != 0) GTEST_SKIP() << "needs nft and ip";
  MtuBlackHole net;
  std::vector<ChildProcess> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(testing_support::spawn({"/usr/sbin/ip", "netns", "exec", rank == 0 ? net.h1 : net.h2,
                                            RINGMASTER_CLI, "perf", "all_reduce", "-b", "4M", "-e", "4M", "-n", "2"},
                                           {{"RANK", std::to_string(rank)},
                                            {"WORLD_SIZE", "2"},
                                            {"MASTER_ADDR", "198.19.7.1"},
                                            {"MASTER_PORT", "29500"},
                                            {"NCCL_SOCKET_IFNAME", "eth0"},
                                            {"RINGMASTER_COLL_TIMEOUT", "5"},
                                            {"RINGMASTER_BOOTSTRAP_TIMEOUT", "20"}},
                                           /*with_stderr=*/true));
  }
  for (auto& r : ranks)
    r.finish();
  EXPECT_NE(ranks[0].exit_code(), 0);
  const std::string& out = ranks[0].output;
  EXPECT_NE(out.find("packets of up to 1500 bytes reach 198.19.8.1 but larger ones vanish"), std::string::npos) << out;
  EXPECT_NE(out.find("9000-byte packets"), std::string::npos) << out;
  EXPECT_NE(out.find("A path-MTU black hole"), std::string::npos) << out;
  EXPECT_NE(out.find("ip link set dev IFACE mtu 1500"), std::string::npos) << out;
  EXPECT_EQ(out.find("the peer is stuck, dead"), std::string::npos) << out;
  EXPECT_NE(ranks[1].output.find("A path-MTU black hole"), std::string::npos) << ranks[1].output;
}

TEST(InitFails, BadEnvironmentNamesTheVariable) {
  // Fails before any stage, with a configuration error that names the
  // variable and its value.
  auto check = [](std::map<std::string, std::string> env, const std::string& named) {
    auto child = testing_support::spawn({RINGMASTER_CLI, "probe"}, env, /*with_stderr=*/true);
    child.finish();
    EXPECT_NE(child.exit_code(), 0) << child.output;
    EXPECT_NE(child.output.find("config error: " + named), std::string::npos) << child.output;
    EXPECT_EQ(child.output.find("RESOLVE_MASTER"), std::string::npos) << "a stage ran: " << child.output;
  };
  check({{"RANK", "abc"}, {"WORLD_SIZE", "2"}}, "RANK=abc is not an integer");
  check({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 must be in [0, WORLD_SIZE=2)");
  check({{"MASTER_PORT", "70000"}}, "MASTER_PORT=70000 is out of range");
}

std::string run_cli(const std::vector<std::string>& args, int* exit_code = nullptr) {
  std::vector<std::string> argv = {RINGMASTER_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = testing_support::spawn(argv, {});
  child.finish();
  if (exit_code != nullptr) *exit_code = child.exit_code();
  return child.output;
}

// Ranks in one process need descriptors: a hard limit too low for them
// is refused before any rank starts, naming what they need and the
// limit, instead of ranks failing one by one after their timeouts; a soft
// limit below the hard one is raised and the ranks run.
TEST(Cli, ProbeChecksTheDescriptorsItsRanksNeed) {
  const std::string cli = RINGMASTER_CLI;
  const auto started = std::chrono::steady_clock::now();
  auto refused = testing_support::spawn(
      {"/bin/bash", "-c",
       "ulimit -n 200 && exec " + cli + " probe --np 64 --master-port " + std::to_string(free_port())},
      {}, /*with_stderr=*/true);
  refused.finish();
  EXPECT_EQ(refused.exit_code(), 2) << refused.output;
  EXPECT_NE(refused.output.find("64 ranks in one process need about 576 file descriptors"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("this process may open 200 (ulimit -n; hard limit 200)"), std::string::npos)
      << refused.output;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 5.0);
  auto raised = testing_support::spawn(
      {"/bin/bash", "-c",
       "ulimit -Sn 200 && exec " + cli + " probe --np 64 --master-port " + std::to_string(free_port())},
      {}, /*with_stderr=*/true);
  raised.finish();
  EXPECT_EQ(raised.exit_code(), 0) << raised.output;
  EXPECT_NE(raised.output.find("64 rank(s), 0 failed"), std::string::npos) << raised.output;
}

TEST(Cli, StoreCommandsPokeARunningStore) {
  const std::string port = std::to_string(free_port());
  auto server = testing_support::spawn({RINGMASTER_CLI, "store", "serve", "--port", port}, {});
  int code = -1;
  // `ping` connects with backoff, so it also waits for the server to come up.
  run_cli({"store", "ping", "--port", port, "--timeout", "10"}, &code);
  EXPECT_EQ(code, 0);
  run_cli({"store", "set", "--port", port, "greeting", "hello"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(run_cli({"store", "get", "--port", port, "greeting"}), "hello\n");
  EXPECT_EQ(run_cli({"store", "add", "--port", port, "counter", "5"}), "5\n");
  EXPECT_EQ(run_cli({"store", "add", "--port", port, "counter", "2"}), "7\n");
  EXPECT_EQ(run_cli({"store", "check", "--port", port, "greeting", "counter"}, &code), "ready\n");
  EXPECT_EQ(code, 0);
  EXPECT_EQ(run_cli({"store", "check", "--port", port, "greeting", "absent"}, &code), "not ready\n");
  EXPECT_EQ(code, 1);
  run_cli({"store", "wait", "--port", port, "--timeout", "0.3", "absent"}, &code);
  EXPECT_EQ(code, 1);
  ::kill(server.pid, SIGTERM);
  server.finish();
  EXPECT_EQ(server.exit_code(), 0);
  EXPECT_NE(server.output.find("store listening on *:" + port), std::string::npos) << server.output;
}

TEST(Cli, InitTimingsLineAtInfo) {
  const std::string log = ::testing::TempDir() + "ringmaster-init-timings.log";
  std::remove(log.c_str());
  auto child = testing_support::spawn({RINGMASTER_CLI, "probe", "--master-port", std::to_string(free_port())},
                                      {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_FILE", log}});
  child.finish();
  EXPECT_EQ(child.exit_code(), 0);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("[0] RINGMASTER INFO INIT Init timings - total"), std::string::npos) << text;
  EXPECT_NE(text.find("RINGMASTER INFO BOOTSTRAP STORE_BARRIER done"), std::string::npos) << text;
}

// NCCL_DEBUG_FILE's %h and %p become the host name and the pid, one file
// per process as NCCL writes them; NCCL_DEBUG_SUBSYS keeps the named
// subsystems, and ^ keeps all but them.
TEST(Cli, DebugFileNamesHostAndPidAndSubsystemsFilter) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string dir = ::testing::TempDir() + "ringmaster-debug-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  auto run = [&](const std::string& subsystems) {
    auto child = testing_support::spawn({RINGMASTER_CLI, "probe", "--master-port", std::to_string(free_port())},
                                        {{"NCCL_DEBUG", "INFO"},
                                         {"NCCL_DEBUG_SUBSYS", subsystems},
                                         {"NCCL_DEBUG_FILE", dir + "/" + subsystems + ".%h.%p.log"}});
    child.finish();
    EXPECT_EQ(child.exit_code(), 0);
    const std::string path = dir + "/" + subsystems + "." + host + "." + std::to_string(child.pid) + ".log";
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << "no " << path;
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string init_only = run("INIT");
  EXPECT_NE(init_only.find("RINGMASTER INFO INIT Init timings"), std::string::npos) << init_only;
  EXPECT_EQ(init_only.find("RINGMASTER INFO BOOTSTRAP"), std::string::npos) << init_only;
  const std::string all_but_init = run("^INIT");
  EXPECT_EQ(all_but_init.find("RINGMASTER INFO INIT"), std::string::npos) << all_but_init;
  EXPECT_NE(all_but_init.find("RINGMASTER INFO BOOTSTRAP STORE_BARRIER done"), std::string::npos) << all_but_init;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringmaster
