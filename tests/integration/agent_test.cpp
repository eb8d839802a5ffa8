// ringmaster-agent as real processes on loopback, driven through the client
// library and ringmaster-cli remote: a 4-rank sweep across two agents, the
// token handshake, malformed frames of every kind, and a rank killed
// mid-run.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <variant>

#include "agent/server/metrics.h"
#include "agent/server/nic_counters.h"
#include "agent/server/run_cgroup.h"
#include "agent/server/run_env.h"
#include "process.h"
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/command.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/agent/fault.h"
#include "ringmaster/agent/linkcheck.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"
#include "ringmaster/version.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing_support::kAddressSanitizer;
using testing_support::rss_kib;

// A ringmaster-agent child on a free loopback port.
struct Agent {
  testing_support::ChildProcess child;
  std::uint16_t port = 0;

  // `prefix` runs the agent through another command (ip netns exec NS).
  explicit Agent(std::vector<std::string> extra = {}, std::vector<std::string> prefix = {}) {
    static int serial = 0;
    state_dir = ::testing::TempDir() + "agent-state-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
    std::vector<std::string> argv = prefix;
    for (const char* a : {RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--print-port"})
      argv.push_back(a);
    if (const auto given = std::find(extra.begin(), extra.end(), "--state-dir"); given != extra.end()) {
      state_dir = *(given + 1);
    } else {
      argv.insert(argv.end(), {"--state-dir", state_dir});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    child = testing_support::spawn(argv, {});
    std::string line;
    char c = 0;
    pollfd p{child.out_fd, POLLIN, 0};
    while (::poll(&p, 1, 10000) > 0 && ::read(child.out_fd, &c, 1) == 1 && c != '\n')
      line += c;
    port = static_cast<std::uint16_t>(std::atoi(line.c_str()));
    if (port == 0) {
      ::kill(child.pid, SIGKILL);
      child.finish();
      throw std::runtime_error("agent did not print its port within 10 s");
    }
    // Without --token-file the agent made its own token in its state directory.
    if (std::find(extra.begin(), extra.end(), "--token-file") == extra.end()) {
      token = agent::read_token_file(agent::token_path(state_dir));
    }
    if (std::find(extra.begin(), extra.end(), "--metrics") != extra.end()) {
      line.clear();
      while (::poll(&p, 1, 10000) > 0 && ::read(child.out_fd, &c, 1) == 1 && c != '\n')
        line += c;
      metrics_port = static_cast<std::uint16_t>(std::atoi(line.c_str()));
    }
  }
  std::uint16_t metrics_port = 0;
  std::string state_dir;
  // The agent still answers (it did not crash).
  bool alive() const {
    try {
      return agent::AgentClient::connect(options())->call({{"type", "ping"}})["type"] == "reply";
    } catch (const Error&) {
      return false;
    }
  }
  std::string token;
  ~Agent() {
    ::kill(child.pid, SIGTERM);
    child.finish();
  }
  // With the agent's token unless told another.
  agent::ClientOptions options(std::optional<std::string> with_token = std::nullopt) const {
    agent::ClientOptions o;
    o.port = port;
    o.token = with_token.value_or(token);
    return o;
  }
};

// Messages from clients' I/O threads.
struct Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<json> messages;

  agent::AgentClient::MessageHandler handler() {
    return [this](const json& m) {
      std::lock_guard lock(mutex);
      messages.push_back(m);
      cv.notify_all();
    };
  }
  // Events of `run_id` until `done_count` run_done events, or the timeout.
  std::vector<json> run_events(const std::string& run_id, int done_count, std::chrono::seconds timeout) {
    std::vector<json> out;
    int done = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(mutex);
    while (done < done_count) {
      if (!cv.wait_until(lock, deadline, [&] { return !messages.empty(); })) {
        ADD_FAILURE() << "run " << run_id << ": " << done << " of " << done_count << " agents finished in time";
        break;
      }
      json m = std::move(messages.front());
      messages.pop_front();
      if (m.value("type", "") != "event" || m.value("run_id", "") != run_id) continue;
      if (m["event"].value("type", "") == "run_done") ++done;
      out.push_back(std::move(m));
    }
    return out;
  }
  // What has come and not been taken, left in place.
  std::vector<json> snapshot() {
    std::lock_guard lock(mutex);
    return {messages.begin(), messages.end()};
  }
};

// A token file as the agent wants it: mode 0600.
std::string write_token(const std::string& name, const std::string& token) {
  const std::string path = ::testing::TempDir() + name + "-" + std::to_string(::getpid());
  std::remove(path.c_str());
  std::ofstream(path) << token << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

// The client's auth message for a raw connection, as the client library
// sends it (its own nonce, the proof over both).
json auth_message(const std::string& token, const json& hello, int id) {
  const std::string client_nonce = agent::random_nonce();
  return {{"type", "auth"},
          {"id", id},
          {"v", 1},
          {"nonce", client_nonce},
          {"hmac", agent::client_proof(token, hello["nonce"].get<std::string>(), client_nonce, "")}};
}

json perf_spec(std::string min, std::string max, int iters) {
  return {{"collective", "all_reduce"}, {"min_bytes", min}, {"max_bytes", max},
          {"step_factor", 4},           {"iters", iters},   {"warmup", 1},
          {"dtype", "float"},           {"op", "sum"}};
}

// A perf run of `ranks` of `world_size` on this host, the store at
// `master_port` (0: this agent starts one).
json perf_run(const std::string& id, int world_size, std::vector<int> ranks, json perf, int master_port = 0) {
  return {{"type", "run"},
          {"run_id", id},
          {"world_size", world_size},
          {"ranks", ranks},
          {"master_addr", "127.0.0.1"},
          {"master_port", master_port},
          {"perf", std::move(perf)}};
}

// A run of one rank (rank 0, the store here) of an 8-byte all_reduce.
json one_rank_run(const std::string& id, json env = json::object()) {
  json run = perf_run(id, 1, {0}, perf_spec("8", "8", 1));
  run["env"] = std::move(env);
  return run;
}

json with_timeouts(json run, json timeouts) {
  run["timeouts"] = std::move(timeouts);
  return run;
}

std::set<std::string> keys_of(const json& j, const std::string& prefix = "") {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) {
    out.insert(prefix + k);
    if (v.is_object()) {
      for (const auto& sub : keys_of(v, prefix + k + "."))
        out.insert(sub);
    }
  }
  return out;
}

// Frames that arrive together past the first MiB decode whole: the decoder
// dropped consumed bytes before parsing the frame it had just cut out, and
// the frame ending past the first MiB read as invalid JSON.
TEST(FrameDecoder, ABurstOfLargeFramesDecodesWhole) {
  agent::FrameDecoder decoder;
  std::string burst;
  for (int i = 0; i < 3; ++i)
    burst += agent::encode_frame(json{{"type", "ping"}, {"id", i}, {"v", 1}, {"ping_us", std::string(600'000, 'x')}});
  decoder.feed(burst.data(), burst.size());
  for (int i = 0; i < 3; ++i) {
    const auto m = decoder.next();
    ASSERT_TRUE(m) << "frame " << i;
    EXPECT_EQ((*m)["id"], i);
    EXPECT_EQ((*m)["ping_us"].get<std::string>().size(), 600'000u);
  }
  EXPECT_FALSE(decoder.next());
}

// A "links" event as a rank sends it, read back as the agent relays it.
agent::events::Links links_event(const nlohmann::json& j) {
  return std::get<agent::events::Links>(agent::events::parse_event(j));
}

// The slow-link finder: one link a hundred times slower than the others is
// named, slowest first; uniform links name none; too few links name none.
TEST(SlowLinks, TheOutlierIsNamedAtItsReceiver) {
  auto links = [](int from, double gbs) {
    return links_event(
        nlohmann::json{{"type", "links"}, {"links", {{{"from", from}, {"bytes", 1 << 22}, {"gbs", gbs}}}}});
  };
  std::vector<std::pair<int, agent::events::Links>> ring = {
      {0, links(3, 0.5)}, {1, links(0, 0.45)}, {2, links(1, 0.004)}, {3, links(2, 0.52)}};
  const auto slow = agent::find_slow_links(ring);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].from, 1);
  EXPECT_EQ(slow[0].to, 2);
  EXPECT_NE(slow[0].describe().find("rank 1 -> rank 2 at 4.0 MB/s"), std::string::npos) << slow[0].describe();
  ring[2].second = links(1, 0.4);
  EXPECT_TRUE(agent::find_slow_links(ring).empty());
  ring.resize(2);
  ring[1].second = links(0, 0.001);
  EXPECT_TRUE(agent::find_slow_links(ring).empty());
}

// Links are compared within their transport: sockets beside shared memory
// ten times faster are not slow, a crawling socket among sockets is.
TEST(SlowLinks, SocketsAreNotComparedWithSharedMemory) {
  auto links = [](int from, double gbs, const char* transport) {
    return links_event(nlohmann::json{
        {"type", "links"}, {"links", {{{"from", from}, {"bytes", 1 << 22}, {"gbs", gbs}, {"transport", transport}}}}});
  };
  std::vector<std::pair<int, agent::events::Links>> ring = {{1, links(0, 9.0, "SHM")}, {2, links(1, 0.5, "SOCKET")},
                                                            {3, links(2, 8.0, "SHM")}, {4, links(3, 0.45, "SOCKET")},
                                                            {5, links(4, 9.5, "SHM")}, {0, links(5, 0.55, "SOCKET")}};
  EXPECT_TRUE(agent::find_slow_links(ring).empty());
  ring[3].second = links(3, 0.005, "SOCKET");
  const auto slow = agent::find_slow_links(ring);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].from, 3);
  EXPECT_EQ(slow[0].to, 4);
  EXPECT_NE(slow[0].describe().find("of the median SOCKET link"), std::string::npos) << slow[0].describe();
}

// Links whose data was waiting for their reader set no pace; they still
// count as healthy links, so one measured link beside them and a crawling
// one is enough to name the crawling one (a six-rank ring whose fast links
// all outran their readers measured only two links and named none).
TEST(SlowLinks, LinksAheadOfTheirReaderCountAsFast) {
  auto measured = [](int from, double gbs) {
    return links_event(nlohmann::json{
        {"type", "links"},
        {"links", {{{"from", from}, {"bytes", 1 << 22}, {"gbs", gbs}, {"ahead", 0}, {"transport", "SOCKET"}}}}});
  };
  auto ahead = [](int from) {
    return links_event(nlohmann::json{
        {"type", "links"}, {"links", {{{"from", from}, {"bytes", 0}, {"ahead", 12}, {"transport", "SOCKET"}}}}});
  };
  std::vector<std::pair<int, agent::events::Links>> ring = {
      {1, ahead(0)}, {2, ahead(1)}, {3, measured(2, 3.2)}, {4, measured(3, 0.0022)}, {5, ahead(4)}, {0, ahead(5)}};
  const auto slow = agent::find_slow_links(ring);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].from, 3);
  EXPECT_EQ(slow[0].to, 4);
  EXPECT_NE(slow[0].describe().find("of the median SOCKET link (3.20 GB/s)"), std::string::npos) << slow[0].describe();
  // Only the crawling link measured, every other one ahead of its reader
  // (the slow-link scenario, 40 Mbit/s out of one host: five links that
  // outran their readers and one at 2 MB/s): it is named.
  ring[2].second = ahead(2);
  auto slow_only = agent::find_slow_links(ring);
  ASSERT_EQ(slow_only.size(), 1u);
  EXPECT_EQ(slow_only[0].from, 3);
  EXPECT_NE(slow_only[0].describe().find("while every other SOCKET link outran its reader"), std::string::npos)
      << slow_only[0].describe();
  // Nothing measured at all: nothing to compare.
  ring[3].second = ahead(3);
  EXPECT_TRUE(agent::find_slow_links(ring).empty());
}

// A transfer or two held up for milliseconds (a rank descheduled on a busy
// host) is no slow link, however low its rate: two ranks per agent on one
// 2-core host raised false alarms in 8 of 18 runs. The same rate kept for
// a second is.
TEST(SlowLinks, ABriefHoldUpIsNoSlowLink) {
  auto measured = [](int from, double gbs, std::uint64_t bytes) {
    return links_event(nlohmann::json{
        {"type", "links"}, {"links", {{{"from", from}, {"bytes", bytes}, {"gbs", gbs}, {"transport", "SOCKET"}}}}});
  };
  std::vector<std::pair<int, agent::events::Links>> ring = {{1, measured(0, 2.5, 64 << 20)},
                                                            {2, measured(1, 2.4, 64 << 20)},
                                                            {3, measured(2, 0.05, 1 << 20)},  // 21 ms at 50 MB/s
                                                            {0, measured(3, 2.6, 64 << 20)}};
  EXPECT_TRUE(agent::find_slow_links(ring).empty());
  ring[2].second = measured(2, 0.05, 64 << 20);  // 1.3 s at 50 MB/s
  ASSERT_EQ(agent::find_slow_links(ring).size(), 1u);
}

// The inventory's transports come from what the host can use: an agent
// whose ranks may not share memory says so and why.
// The rails' counters, read from a sysfs laid out as the kernel does: an
// Ethernet device, an EFA port (hw_counters, bytes) and an InfiniBand port
// (counters, 4-byte words); a device whose counters cannot be read is
// left out.
TEST(AgentNics, CountersAreReadFromSysfs) {
  namespace fs = std::filesystem;
  const fs::path sys = fs::path(::testing::TempDir()) / ("sysfs-" + std::to_string(::getpid()));
  fs::remove_all(sys);
  auto put = [&](const fs::path& file, const std::string& text) {
    fs::create_directories((sys / file).parent_path());
    std::ofstream(sys / file) << text << "\n";
  };
  put("class/net/eth0/statistics/rx_bytes", "1000");
  put("class/net/eth0/statistics/tx_bytes", "2000");
  put("class/net/eth0/speed", "100000");
  put("class/net/tun0/statistics/rx_bytes", "5");
  put("class/net/tun0/statistics/tx_bytes", "6");
  put("class/net/tun0/speed", "-1");  // no speed: a tunnel, a link down
  fs::create_directories(sys / "class/net/broken/statistics");
  put("class/infiniband/rdmap79s0/ports/1/hw_counters/rx_bytes", "300");
  put("class/infiniband/rdmap79s0/ports/1/hw_counters/tx_bytes", "400");
  put("class/infiniband/rdmap79s0/ports/1/rate", "100 Gb/sec (4X EDR)");
  put("class/infiniband/mlx5_0/ports/1/counters/port_rcv_data", "10");
  put("class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "20");
  const auto sample = agent::read_nic_counters(sys.string());
  ASSERT_EQ(sample.nics.size(), 4u);
  EXPECT_EQ(sample.nics[0].name, "eth0");
  EXPECT_EQ(sample.nics[0].rx_bytes, 1000u);
  EXPECT_EQ(sample.nics[0].tx_bytes, 2000u);
  EXPECT_EQ(sample.nics[0].speed_mbps, 100000u);
  EXPECT_EQ(sample.nics[1].name, "tun0");
  EXPECT_EQ(sample.nics[1].speed_mbps, 0u);
  EXPECT_EQ(sample.nics[2].name, "mlx5_0:1");
  EXPECT_TRUE(sample.nics[2].rdma);
  EXPECT_EQ(sample.nics[2].rx_bytes, 40u);
  EXPECT_EQ(sample.nics[2].tx_bytes, 80u);
  EXPECT_EQ(sample.nics[3].name, "rdmap79s0:1");
  EXPECT_EQ(sample.nics[3].rx_bytes, 300u);
  EXPECT_EQ(sample.nics[3].speed_mbps, 100000u);
  EXPECT_GT(sample.t_us, 0);
  fs::remove_all(sys);
}

// A subscriber hears every second what the node's devices carried: here
// loopback, whose counters grow with the traffic of the client itself.
TEST(AgentNics, SubscribersGetTheDevicesCounters) {
  Agent a(std::vector<std::string>{});
  Inbox inbox;
  auto client = agent::AgentClient::connect(a.options(), inbox.handler());
  client->call({{"type", "subscribe"}});
  std::vector<agent::events::NicSample> samples;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (samples.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    for (const json& m : inbox.snapshot()) {
      const auto e = agent::events::parse_event_message(m);
      if (!e || !e->run_id.empty() || e->rank != -1) continue;
      if (const auto* s = std::get_if<agent::events::NicSample>(&e->event)) {
        if (samples.empty() || s->t_us > samples.back().t_us) samples.push_back(*s);
      }
    }
    client->call({{"type", "inventory"}});  // traffic on loopback
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(samples.size(), 2u) << "fewer than two nic_sample events in 10 s";
  auto lo = [](const agent::events::NicSample& s) {
    for (const auto& n : s.nics)
      if (n.name == "lo") return n;
    return agent::events::NicSample::Nic{};
  };
  EXPECT_EQ(lo(samples[0]).name, "lo");
  EXPECT_GT(lo(samples[1]).rx_bytes, lo(samples[0]).rx_bytes);
}

TEST(Agent, InventoryNamesTransportsThatCannotBeUsed) {
  Agent a({}, {"/usr/bin/env", "NCCL_SHM_DISABLE=1"});
  auto client = agent::AgentClient::connect(a.options(), {});
  const json inventory = client->call({{"type", "inventory"}});
  const json& transports = inventory["transports"];
  EXPECT_EQ(std::find(transports.begin(), transports.end(), "shm"), transports.end()) << transports.dump();
  bool said = false;
  for (const auto& t : inventory["transports_unusable"])
    said |= t["name"] == "shm" && t["why"] == "NCCL_SHM_DISABLE=1";
  EXPECT_TRUE(said) << inventory["transports_unusable"].dump();
}

TEST(Agent, FourRanksAcrossTwoAgentsStreamEverything) {
  Agent a, b;
  Inbox inbox;
  auto ca = agent::AgentClient::connect(a.options(), inbox.handler());
  auto cb = agent::AgentClient::connect(b.options(), inbox.handler());

  const json inventory = ca->call({{"type", "inventory"}});
  EXPECT_FALSE(inventory["hostname"].get<std::string>().empty());
  EXPECT_EQ(inventory["topology"]["origin"], "discovered");
  // What the host can use, against witnesses of its own: /dev/shm writable
  // here, libfabric's fi_info for an RDM endpoint of tcp;ofi_rxm.
  const json& transports = inventory["transports"];
  auto lists = [&](const char* name) {
    return std::find(transports.begin(), transports.end(), name) != transports.end();
  };
  ASSERT_FALSE(transports.empty());
  EXPECT_EQ(transports.back(), "socket") << transports.dump();
  EXPECT_EQ(lists("shm"), ::access("/dev/shm", W_OK) == 0) << transports.dump();
  EXPECT_EQ(lists("ofi"), std::system("fi_info -p 'tcp;ofi_rxm' -t FI_EP_RDM >/dev/null 2>&1") == 0)
      << transports.dump() << " " << inventory["transports_unusable"].dump();
  bool has_lo = false;
  for (const auto& i : inventory["interfaces"])
    has_lo |= i["name"] == "lo";
  EXPECT_TRUE(has_lo) << inventory["interfaces"].dump();
  // The GPUs as NVML sees them: here, where nvidia-smi lists none, that
  // there is no driver, and why.
  const json& gpus = inventory["gpus"];
  ASSERT_TRUE(gpus.is_object()) << inventory.dump();
  if (std::system("nvidia-smi -L >/dev/null 2>&1") != 0) {
    EXPECT_FALSE(gpus["loaded"].get<bool>()) << gpus.dump();
    EXPECT_NE(gpus["why"].get<std::string>().find("libnvidia-ml.so.1"), std::string::npos) << gpus.dump();
  } else {
    EXPECT_TRUE(gpus["loaded"].get<bool>()) << gpus.dump();
    EXPECT_FALSE(gpus["gpus"].empty()) << gpus.dump();
  }

  ca->call({{"type", "subscribe"}});
  cb->call({{"type", "subscribe"}});
  json run = perf_run("sweep", 4, {0, 1}, perf_spec("1M", "16M", 10));
  const json started = ca->call(run);
  ASSERT_GT(started["master_port"].get<int>(), 0);
  // Chosen above the kernel's ephemeral range (Linux's default leaves
  // 61000-65535), where no bind(0) or connect() can take it first.
  {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0, high = 0;
    if (range >> low >> high && high + 256 <= 65535) {
      EXPECT_GT(started["master_port"].get<int>(), high) << "ephemeral range " << low << "-" << high;
    }
  }
  run["ranks"] = {2, 3};
  run["master_port"] = started["master_port"];
  cb->call(run);
  const auto events = inbox.run_events("sweep", 2, 120s);

  std::map<int, std::vector<std::string>> stages;
  std::map<int, std::vector<json>> samples;
  std::map<int, std::vector<json>> results;
  int exits = 0, done_ok = 0;
  for (const auto& m : events) {
    const int rank = m["rank"].get<int>();
    const json& e = m["event"];
    const std::string type = e["type"];
    if (type == "stage") {
      EXPECT_TRUE(e["ok"].get<bool>()) << e.dump();
      stages[rank].push_back(e["stage"]);
    } else if (type == "sample") {
      samples[rank].push_back(e);
    } else if (type == "result") {
      results[rank].push_back(e);
    } else if (type == "rank_exit") {
      ++exits;
    } else if (type == "run_done") {
      done_ok += e["ok"].get<bool>() ? 1 : 0;
    } else if (type == "rank_failed" || type == "error" || type == "failure") {
      ADD_FAILURE() << m.dump();
    }
  }
  EXPECT_EQ(exits, 4);
  EXPECT_EQ(done_ok, 2);
  const std::vector<std::string> all_stages = {
      "RESOLVE_MASTER", "STORE_CONNECT",    "STORE_HANDSHAKE", "STORE_BARRIER",     "BOOTSTRAP_LISTEN",
      "BOOTSTRAP_RING", "ADDRESS_EXCHANGE", "TOPOLOGY",        "TRANSPORT_CONNECT", "CALIBRATE",
      "READY"};
  for (int r = 0; r < 4; ++r) {
    const std::set<std::string> seen(stages[r].begin(), stages[r].end());
    EXPECT_EQ(seen, std::set<std::string>(all_stages.begin(), all_stages.end())) << "rank " << r;
    ASSERT_FALSE(stages[r].empty());
    EXPECT_EQ(stages[r].back(), "READY") << "rank " << r;
    // 10 Hz per rank while the sweep runs.
    const auto& s = samples[r];
    ASSERT_GE(s.size(), 3u) << "rank " << r;
    const double seconds = (s.back()["t_us"].get<double>() - s.front()["t_us"].get<double>()) / 1e6;
    EXPECT_GE((static_cast<double>(s.size()) - 1) / seconds, 9.5)
        << "rank " << r << ": " << s.size() << " in " << seconds;
    EXPECT_GT(s.back()["channels"][0]["bytes_sent"].get<std::uint64_t>(), 16u << 20) << "rank " << r;
    ASSERT_EQ(results[r].size(), 3u) << "rank " << r;  // 1M, 4M, 16M
    for (const auto& row : results[r]) {
      EXPECT_EQ(row["out_of_place"]["wrong"], 0) << row.dump();
      EXPECT_EQ(row["in_place"]["wrong"], 0) << row.dump();
    }
  }
  // Rows carry what `perf --json-file` rows carry.
  const std::string direct = ::testing::TempDir() + "agent-direct-rows.json";
  auto perf = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "--np", "2", "-b", "1M", "-e", "1M", "-n",
                                      "2", "-w", "1", "--json-file", direct},
                                     {});
  perf.finish();
  ASSERT_EQ(perf.exit_code(), 0);
  std::ifstream in(direct);
  const json direct_rows = json::parse(in);
  json relayed = results[0][0];
  relayed.erase("rank");
  EXPECT_EQ(keys_of(relayed), keys_of(direct_rows[0]));
}

TEST(Agent, RemoteCliPrintsTheStageAndResultTables) {
  // Two nodes' agents sharing the cluster's token, as a deployment gives them.
  const std::string token_file = write_token("agent-token-remote", "remote-token-0123456789");
  Agent a({"--token-file", token_file}), b({"--token-file", token_file});
  const std::string agents = "127.0.0.1:" + std::to_string(a.port) + ",127.0.0.1:" + std::to_string(b.port);
  auto cli = testing_support::spawn({RINGMASTER_CLI,
                                     "remote",
                                     "--agents",
                                     agents,
                                     "--token-file",
                                     token_file,
                                     "--np-per-agent",
                                     "2",
                                     "perf",
                                     "all_reduce",
                                     "-b",
                                     "8",
                                     "-e",
                                     "32K",
                                     "-f",
                                     "8",
                                     "-n",
                                     "3",
                                     "-w",
                                     "1"},
                                    {});
  cli.finish();
  EXPECT_EQ(cli.exit_code(), 0) << cli.output;
  EXPECT_NE(cli.output.find("#   STORE_BARRIER     ok"), std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find("4/4 joined"), std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find("# nranks 4 nThread 1 nGpus 1 minBytes 8 maxBytes 32768"), std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find("       32768         8192    float    sum"), std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find("# Out of bounds values : 0 OK"), std::string::npos) << cli.output;
  // The flags beyond the sizes reach the ranks: -N 2 prints the sweep twice,
  // -r 3 is gather's root (the agents used to run one cycle at root 0).
  auto flags = testing_support::spawn({RINGMASTER_CLI,
                                       "remote",
                                       "--agents",
                                       agents,
                                       "--token-file",
                                       token_file,
                                       "--np-per-agent",
                                       "2",
                                       "perf",
                                       "gather",
                                       "-b",
                                       "1K",
                                       "-e",
                                       "1K",
                                       "-n",
                                       "2",
                                       "-w",
                                       "1",
                                       "-m",
                                       "2",
                                       "-N",
                                       "2",
                                       "-a",
                                       "0",
                                       "-r",
                                       "3"},
                                      {});
  flags.finish();
  EXPECT_EQ(flags.exit_code(), 0) << flags.output;
  const std::regex row(R"( +1024 +64 +float +none +3 .* 0)");
  std::istringstream printed(flags.output);
  int rows = 0;
  for (std::string line; std::getline(printed, line);)
    rows += std::regex_match(line, row) ? 1 : 0;
  EXPECT_EQ(rows, 2) << flags.output;
}

// A plain TCP connection for sending what the client library never would.
// Three nodes' agents and `ringmaster-cli preflight`: every port class is
// open between every pair on loopback, the facts are there, and the ports
// are given back when it ends.
TEST(AgentPreflight, ThreeAgentsReachEachOtherAndGiveTheirPortsBack) {
  const std::string token_file = write_token("agent-token-preflight", "preflight-token-0123456789");
  Agent a({"--token-file", token_file}), b({"--token-file", token_file}), c({"--token-file", token_file});
  std::string agents;
  for (const Agent* x : {&a, &b, &c})
    agents += (agents.empty() ? "127.0.0.1:" : ",127.0.0.1:") + std::to_string(x->port);
  const std::uint16_t master_port = testing_support::free_port();
  auto cli = testing_support::spawn(
      {RINGMASTER_CLI, "preflight", "--agents", agents, "--token-file", token_file, "--master-port",
       std::to_string(master_port), "--master-addr", "localhost", "--port-range", "45000-45099", "--json"},
      {});
  cli.finish();
  // Exit 0: no problem found (warnings, such as a low nofile limit, allowed).
  ASSERT_EQ(cli.exit_code(), 0) << cli.output;
  const json report = json::parse(cli.output.substr(cli.output.find('{')));
  ASSERT_EQ(report["nodes"].size(), 3u);
  for (const auto& node : report["nodes"]) {
    EXPECT_FALSE(node["facts"]["hostname"].get<std::string>().empty());
    EXPECT_FALSE(node["facts"]["master_resolves_to"].empty()) << node.dump();
    EXPECT_GT(node["facts"]["shm_bytes"].get<std::uint64_t>(), 0u);
  }
  std::set<std::string> classes;
  for (const auto& k : report["classes"])
    classes.insert(k["name"].get<std::string>());
  EXPECT_TRUE(classes.count("master") && classes.count("ephemeral") && classes.count("port_range"))
      << report["classes"].dump();
  for (const auto& [name, rows] : report["matrices"].items()) {
    for (std::size_t i = 0; i < 3; ++i) {
      for (std::size_t j = 0; j < 3; ++j)
        EXPECT_EQ(rows[i][j], i == j ? "-" : "ok") << name << " " << i << " -> " << j;
    }
  }
  // Every probe of RINGMASTER_PORT_RANGE went to a port inside it.
  int in_range = 0;
  for (const auto& p : report["probes"]) {
    if (p.value("class", "") != "port_range") continue;
    ++in_range;
    EXPECT_GE(p["port"].get<int>(), 45000);
    EXPECT_LE(p["port"].get<int>(), 45099);
  }
  EXPECT_GE(in_range, 6);
  // Released: the master port can be listened on again at once, as a
  // store would (SO_REUSEADDR: the probes' closed connections may leave it
  // in TIME_WAIT, which does not hold it; a listener still open would).
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(master_port);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
  ::close(fd);
}

// The agent answers `request` with an error whose message holds `says`.
void expect_refused(agent::AgentClient& client, const json& request, const std::string& says) {
  try {
    client.call(request);
    ADD_FAILURE() << request.dump() << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

// Preflight requests out of bounds are refused, naming the bound; the
// agent keeps serving.
TEST(AgentPreflight, RequestsOutOfBoundsAreRefused) {
  Agent a;
  auto client = agent::AgentClient::connect(a.options());
  auto refused = [&](const json& m, const std::string& says) { expect_refused(*client, m, says); };
  json many = json::array();
  for (int i = 0; i < 8193; ++i)
    many.push_back({{"host", "127.0.0.1"}, {"port", 1}});
  refused({{"type", "preflight_probe"}, {"targets", many}}, "at most 8192 targets");
  refused({{"type", "preflight_probe"}, {"targets", json::array()}, {"window_ms", 5}},
          "'window_ms' must be in [100, 10000]");
  refused({{"type", "preflight_probe"}, {"targets", {{{"host", "127.0.0.1"}, {"port", 70000}}}}},
          "'port' must be in [1, 65535]");
  refused({{"type", "preflight_probe"}, {"targets", {{{"host", std::string(300, 'h')}, {"port", 80}}}}}, "at most 255");
  refused({{"type", "preflight_listen"}, {"count", 9}}, "'count' must be in [1, 4]");
  refused({{"type", "preflight_listen"}, {"port_range", "9-1"}}, "LOW-HIGH");
  // Review (L2): a run token made the root agent listen on privileged
  // ports, on every address, for up to 600 s.
  refused({{"type", "preflight_listen"}, {"port_range", "1-1023"}}, "within 1024-65535 (no privileged ports)");
  refused({{"type", "preflight_listen"}, {"master_port", 22}}, "unprivileged ports only (1024-65535)");
  refused({{"type", "preflight_listen"}, {"hold_s", 100000}}, "'hold_s' must be in [1, 600]");
  EXPECT_TRUE(a.alive());
}

// Review (L2): preflight_listen took any unprivileged port a run token
// named. An agent listens for preflight only within its --preflight-ports:
// a MASTER_PORT or port_range outside them is refused, and the sampled
// classes are drawn where they meet them.
TEST(AgentPreflight, ListensOnlyWithinTheAgentsPreflightPorts) {
  Agent a({"--preflight-ports", "41000-41099"});
  auto client = agent::AgentClient::connect(a.options());
  auto refused = [&](const json& m, const std::string& says) { expect_refused(*client, m, says); };
  refused({{"type", "preflight_listen"}, {"master_port", 29500}}, "within 41000-41099 only (its --preflight-ports)");
  refused({{"type", "preflight_listen"}, {"master_port", 41000}, {"port_range", "41050-41200"}},
          "reaches beyond 41000-41099");
  const json reply =
      client->call({{"type", "preflight_listen"}, {"master_port", 41010}, {"port_range", "41050-41099"}, {"count", 4}});
  int ports = 0;
  for (const auto& c : reply.at("classes")) {
    for (const auto& p : c.at("ports")) {
      ++ports;
      EXPECT_GE(p.at("port").get<int>(), 41000) << c.dump();
      EXPECT_LE(p.at("port").get<int>(), 41099) << c.dump();
    }
  }
  EXPECT_GE(ports, 5) << reply.dump();  // the master port and the port range's samples at least
  client->call({{"type", "preflight_release"}});
  // The range itself is checked at start.
  for (const char* bad : {"80-1000", "41099-41000", "many"}) {
    auto child = testing_support::spawn(
        {RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--preflight-ports", bad, "--state-dir", a.state_dir + "-bad"},
        {}, true);
    child.finish();
    EXPECT_EQ(child.exit_code(), 2) << bad;
    EXPECT_NE(child.output.find("--preflight-ports must be LOW-HIGH within 1024-65535"), std::string::npos)
        << child.output;
  }
}

TEST(LinkCheck, RoundsOfDisjointPairsCoverEveryPairOnce) {
  for (int n = 2; n <= 9; ++n) {
    const auto rounds = agent::round_robin_pairs(n);
    EXPECT_EQ(static_cast<int>(rounds.size()), n % 2 == 0 ? n - 1 : n) << n;
    std::set<std::pair<int, int>> seen;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "node in two pairs of a round, n=" << n;
        EXPECT_TRUE(seen.insert({a, b}).second) << a << "," << b << " twice, n=" << n;
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), n * (n - 1) / 2) << n;
  }
}

TEST(LinkCheck, ASlowNodeIsNamedAndOneSlowLinkIsNamed) {
  agent::LinkcheckReport r;
  r.nodes = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      if (i != j) r.links.push_back({i, j, 1.2, "SOCKET", false, {}});
    }
  }
  auto set = [&](int from, int to, double gbs) {
    for (auto& l : r.links) {
      if (l.from == from && l.to == to) l.gbs = gbs;
    }
  };
  EXPECT_TRUE(agent::diagnose_links(r).empty());
  for (int j : {0, 2, 3})
    set(1, j, 0.005);
  set(3, 2, 0.01);
  auto findings = agent::diagnose_links(r);
  ASSERT_EQ(findings.size(), 2u) << ::testing::PrintToString(findings);
  EXPECT_NE(findings[0].find("every link leaving node 1 (10.0.0.2) is slow: at most 5.0 MB/s"), std::string::npos)
      << findings[0];
  EXPECT_NE(findings[1].find("the link node 3 -> node 2 (10.0.0.4 -> 10.0.0.3) is slow: 10.0 MB/s"), std::string::npos)
      << findings[1];
  set(0, 3, 0);
  r.links[2].error = "rank 1 failed at STORE_CONNECT: timeout";
  findings = agent::diagnose_links(r);
  EXPECT_NE(findings[0].find("node 0 <-> node 3"), std::string::npos) << findings[0];
  EXPECT_NE(agent::render_linkcheck(r, findings).find("failed"), std::string::npos);
}

// Against the NICs: a node whose NIC runs slower than the others' is named
// (a link negotiated down), and so is a link under a hundredth of what its
// NICs carry, even when every link is that slow (a median of slow links
// calls none slow).
TEST(LinkCheck, NicsNegotiatedDownAndLinksFarUnderTheirNicsAreNamed) {
  agent::LinkcheckReport r;
  r.nodes = {"10.0.0.1", "10.0.0.2", "10.0.0.3"};
  r.nics = {{"eth0", 100000}, {"eth0", 100000}, {"eth0", 100000}};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      if (i != j) r.links.push_back({i, j, 1.0, "SOCKET", false, {}, 12.5});
    }
  }
  EXPECT_TRUE(agent::diagnose_links(r).empty()) << ::testing::PrintToString(agent::diagnose_links(r));
  r.nics[2].speed_mbps = 25000;
  for (auto& l : r.links)
    l.gbs = 0.9;
  auto findings = agent::diagnose_links(r);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0],
            "node 2 (10.0.0.3) reaches the others through eth0 at 25 Gb/s, where the fastest node's NIC runs at 100 "
            "Gb/s: a link negotiated down (cable, port, switch setting) or another NIC");
  // Every link at 100 MB/s on 100 Gb/s NICs: under a hundredth of them all.
  r.nics[2].speed_mbps = 100000;
  for (auto& l : r.links)
    l.gbs = 0.1;
  findings = agent::diagnose_links(r);
  ASSERT_EQ(findings.size(), 6u) << ::testing::PrintToString(findings);
  EXPECT_EQ(
      findings[0],
      "the link node 0 -> node 1 (10.0.0.1 -> 10.0.0.2) moved 100.0 MB/s, under a hundredth of its NICs' 100 Gb/s "
      "(SOCKET)");
  EXPECT_NE(agent::render_linkcheck(r, findings).find("node 0   10.0.0.1 (eth0 at 100 Gb/s)"), std::string::npos)
      << agent::render_linkcheck(r, findings);
  // Not known: nothing said about it.
  for (auto& l : r.links)
    l.nominal_gbs = 0;
  EXPECT_TRUE(agent::diagnose_links(r).empty());
}

// Three agents: every link measured in both directions by a real
// two-rank run, over the transport the ranks chose.
TEST(AgentLinkcheck, EveryLinkOfThreeAgentsIsMeasured) {
  const std::string token_file = write_token("agent-token-linkcheck", "linkcheck-token-0123456789");
  Agent a({"--token-file", token_file}), b({"--token-file", token_file}), c({"--token-file", token_file});
  std::string agents;
  for (const Agent* x : {&a, &b, &c})
    agents += (agents.empty() ? "127.0.0.1:" : ",127.0.0.1:") + std::to_string(x->port);
  auto cli = testing_support::spawn({RINGMASTER_CLI, "linkcheck", "--agents", agents, "--token-file", token_file,
                                     "--env", "NCCL_SHM_DISABLE=1", "-b", "4M", "-n", "3", "--json"},
                                    {});
  cli.finish();
  // 0, or 1 when this busy machine made one link look slow: both measured everything.
  ASSERT_TRUE(cli.exit_code() == 0 || cli.exit_code() == 1) << cli.output;
  const json report = json::parse(cli.output.substr(cli.output.find('{')));
  EXPECT_EQ(report["rounds"], 3);
  ASSERT_EQ(report["links"].size(), 6u) << report.dump();
  for (const auto& l : report["links"]) {
    EXPECT_TRUE(l["gbs"].get<double>() > 0 || l.value("ahead", false)) << l.dump();
    EXPECT_EQ(l["transport"], "SOCKET") << l.dump();
  }
  // Each node's NIC from its agent's inventory: loopback, of no speed.
  ASSERT_EQ(report["nics"].size(), 3u) << report.dump();
  for (const auto& nic : report["nics"]) {
    EXPECT_EQ(nic["name"], "lo") << nic.dump();
    EXPECT_EQ(nic["speed_mbps"], 0) << nic.dump();
  }
}

struct RawConnection {
  int fd = -1;
  explicit RawConnection(std::uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) throw std::runtime_error("connect failed");
  }
  ~RawConnection() { ::close(fd); }
  void send(const std::string& bytes) const {
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), (ssize_t)bytes.size());
  }
  void send(const json& m) const { send(agent::encode_frame(m)); }
  // The next message; nothing at EOF or after 10 s.
  std::optional<json> read() const {
    agent::FrameDecoder d;
    char buf[4096];
    for (;;) {
      if (auto m = d.next()) return m;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return std::nullopt;
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n <= 0) return std::nullopt;
      d.feed(buf, static_cast<std::size_t>(n));
    }
  }
};

TEST(Agent, TokenHandshake) {
  const std::string secret = "s3cret-token-0123456789";
  Agent a({"--token-file", write_token("agent-token", secret)});
  try {
    agent::AgentClient::connect(a.options("wrong-token"));
    ADD_FAILURE() << "connected with a wrong token";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wrong HMAC"), std::string::npos) << e.what();
  }
  std::this_thread::sleep_for(150ms);  // the backoff after a wrong HMAC
  {
    RawConnection raw(a.port);
    const auto hello = raw.read();
    ASSERT_TRUE(hello);
    EXPECT_EQ((*hello)["auth"], "hmac-sha256");
    EXPECT_EQ((*hello)["nonce"].get<std::string>().size(), 64u);
    raw.send(json{{"type", "inventory"}, {"id", 1}, {"v", 1}});
    const auto refused = raw.read();
    ASSERT_TRUE(refused);
    EXPECT_EQ((*refused)["type"], "error");
    EXPECT_EQ((*refused)["re"], 1);
    EXPECT_FALSE((*refused)["fatal"].get<bool>());
    EXPECT_NE((*refused)["message"].get<std::string>().find("not authenticated"), std::string::npos);
    raw.send(auth_message(secret, *hello, 2));
    const auto ok = raw.read();
    ASSERT_TRUE(ok);
    EXPECT_EQ((*ok)["type"], "reply") << ok->dump();
    raw.send(json{{"type", "inventory"}, {"id", 3}, {"v", 1}});
    auto inv = raw.read();
    while (inv && (*inv)["type"] == "heartbeat")
      inv = raw.read();
    ASSERT_TRUE(inv);
    EXPECT_EQ((*inv)["re"], 3);
    EXPECT_TRUE(inv->contains("topology"));
  }
  auto client = agent::AgentClient::connect(a.options(secret));
  EXPECT_EQ(client->call({{"type", "ping"}})["type"], "reply");
}

TEST(Agent, TlsWithAVerifiedCertificate) {
  const std::string dir = ::testing::TempDir();
  const std::string cert = dir + "agent-tls.crt", key = dir + "agent-tls.key", other = dir + "other-ca.crt",
                    other_key = dir + "other-ca.key";
  const std::string make =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
      "subjectAltName=IP:127.0.0.1 2>/dev/null";
  if (::system((make + " -keyout " + key + " -out " + cert).c_str()) != 0 ||
      ::system((make + " -keyout " + other_key + " -out " + other).c_str()) != 0) {
    GTEST_SKIP() << "openssl (Debian package openssl) cannot make a test certificate";
  }
  Agent a({"--tls-cert", cert, "--tls-key", key});
  auto options = a.options();
  options.tls = true;
  options.tls_ca_file = cert;
  auto client = agent::AgentClient::connect(options);
  EXPECT_EQ(client->hello()["agent"], "ringmaster-agent");
  EXPECT_FALSE(client->call({{"type", "inventory"}})["hostname"].get<std::string>().empty());

  // A certificate from another CA is refused by the client.
  options.tls_ca_file = other;
  try {
    agent::AgentClient::connect(options);
    ADD_FAILURE() << "connected to an agent whose certificate the CA did not sign";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TLS handshake"), std::string::npos) << e.what();
  }
  // A plain client gets no hello, and is told why.
  auto plain = a.options();
  plain.connect_timeout = 1500ms;
  try {
    agent::AgentClient::connect(plain);
    ADD_FAILURE() << "a plain client got through to a TLS agent";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("connect with TLS"), std::string::npos) << e.what();
  }
  // ringmaster-cli remote --tls-ca: the same verification from the command line.
  const std::string token_file = agent::token_path(a.state_dir);
  auto remote_tls = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {RINGMASTER_CLI, "remote",  "--agents", "127.0.0.1:" + std::to_string(a.port),
                                     "--token-file", token_file};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("inventory");
    auto cli = testing_support::spawn(argv, {}, true);
    cli.finish();
    return cli;
  };
  auto remote = [&](const std::string& ca) { return remote_tls({"--tls-ca", ca}); };
  auto verified = remote(cert);
  EXPECT_EQ(verified.exit_code(), 0) << verified.output;
  EXPECT_NE(verified.output.find("\"hostname\""), std::string::npos) << verified.output;
  auto unverified = remote(other);
  EXPECT_NE(unverified.exit_code(), 0) << unverified.output;
  EXPECT_NE(unverified.output.find("TLS handshake"), std::string::npos) << unverified.output;
  // The agent keeps serving the verified client.
  EXPECT_EQ(client->call({{"type", "ping"}})["type"], "reply");
  // Only TLS 1.3 (review, a low finding: TLS 1.2 without Extended Master
  // Secret was accepted, under which a man in the middle could share the
  // session's exporter that binds a client's proof): every 1.2 client,
  // whatever its suites, and TLS 1.1 are refused.
  auto handshake = [&](const std::string& flags) {
    const std::string command = "echo | timeout 10 openssl s_client -connect 127.0.0.1:" + std::to_string(a.port) +
                                " " + flags + " >/dev/null 2>&1";
    return ::system(command.c_str()) == 0;
  };
  EXPECT_TRUE(handshake("-tls1_3"));
  EXPECT_FALSE(handshake("-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256")) << "TLS 1.2 accepted";
  EXPECT_FALSE(handshake("-tls1_2 -cipher AES128-SHA")) << "static RSA with CBC and SHA-1 accepted";
  EXPECT_FALSE(handshake("-tls1_1")) << "TLS 1.1 accepted";
  // Review (a low finding): `remote --tls` without a CA sent its proof
  // before it could check who answered. A client without a CA now refuses
  // before it connects, unless told --tls-insecure.
  auto no_ca = a.options();
  no_ca.tls = true;
  try {
    agent::AgentClient::connect(no_ca);
    ADD_FAILURE() << "TLS without a CA connected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without --tls-ca cannot check who answers"), std::string::npos) << e.what();
  }
  no_ca.tls_insecure = true;
  EXPECT_EQ(agent::AgentClient::connect(no_ca)->call({{"type", "ping"}})["type"], "reply");
  auto refused = remote_tls({"--tls"});
  EXPECT_NE(refused.exit_code(), 0) << refused.output;
  EXPECT_NE(refused.output.find("--tls-insecure"), std::string::npos) << refused.output;
  auto insecure = remote_tls({"--tls-insecure"});
  EXPECT_EQ(insecure.exit_code(), 0) << insecure.output;
}

// Optional client certificates (mutual TLS): an agent started with
// --tls-client-ca serves only clients whose certificate that CA signed,
// on top of the token; a client with none, or one another CA signed, does
// not get past the handshake.
TEST(Agent, TlsClientCertificatesWhenAsked) {
  const std::string dir = ::testing::TempDir() + "mtls-" + std::to_string(::getpid()) + "/";
  std::filesystem::create_directories(dir);
  const std::string make = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 2>/dev/null";
  const std::string sign = "openssl x509 -req -days 1 -CA " + dir + "ca.crt -CAkey " + dir + "ca.key -CAcreateserial";
  const bool made =
      ::system((make + " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " + dir + "agent.key -out " +
                dir + "agent.crt")
                   .c_str()) == 0 &&
      ::system((make + " -subj /CN=clients -keyout " + dir + "ca.key -out " + dir + "ca.crt").c_str()) == 0 &&
      ::system(("openssl req -newkey rsa:2048 -nodes -subj /CN=console -keyout " + dir + "client.key -out " + dir +
                "client.csr 2>/dev/null")
                   .c_str()) == 0 &&
      ::system((sign + " -in " + dir + "client.csr -out " + dir + "client.crt 2>/dev/null").c_str()) == 0 &&
      ::system((make + " -subj /CN=stranger -keyout " + dir + "stranger.key -out " + dir + "stranger.crt").c_str()) ==
          0;
  if (!made) GTEST_SKIP() << "openssl (Debian package openssl) cannot make the test certificates";
  Agent a({"--tls-cert", dir + "agent.crt", "--tls-key", dir + "agent.key", "--tls-client-ca", dir + "ca.crt"});
  auto options = a.options();
  options.tls = true;
  options.tls_ca_file = dir + "agent.crt";
  options.connect_timeout = 3000ms;
  auto refused = [&](const agent::ClientOptions& o, const char* who) {
    try {
      agent::AgentClient::connect(o);
      ADD_FAILURE() << who << " got through";
    } catch (const Error& e) {
      SUCCEED() << e.what();
    }
  };
  refused(options, "a client without a certificate");
  auto stranger = options;
  stranger.tls_cert_file = dir + "stranger.crt";
  stranger.tls_key_file = dir + "stranger.key";
  refused(stranger, "a client whose certificate another CA signed");
  auto known = options;
  known.tls_cert_file = dir + "client.crt";
  known.tls_key_file = dir + "client.key";
  auto client = agent::AgentClient::connect(known);
  EXPECT_EQ(client->call({{"type", "ping"}})["type"], "reply");
  // The agent refuses the option without TLS, at start.
  auto child = testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--tls-client-ca", dir + "ca.crt",
                                       "--state-dir", dir + "state-plain"},
                                      {}, true);
  child.finish();
  EXPECT_NE(child.exit_code(), 0);
  EXPECT_NE(child.output.find("--tls-client-ca needs TLS"), std::string::npos) << child.output;
  std::filesystem::remove_all(dir);
}

// The agent's log through spdlog: an ISO 8601 timestamp and a level on
// every line; under systemd (JOURNAL_STREAM) journald's priority prefix and
// no timestamp; --log-level filters, a bad level is a usage error.
TEST(AgentLog, LevelsTimestampsAndJournald) {
  const std::string dir = ::testing::TempDir() + "agent-log-" + std::to_string(::getpid()) + "/";
  const std::vector<std::string> refused = {RINGMASTER_AGENT,      "--listen",    "127.0.0.1:0", "--tls-client-ca",
                                            "/nonexistent/ca.pem", "--state-dir", dir + "state"};
  auto plain = testing_support::spawn(refused, {}, true);
  plain.finish();
  EXPECT_EQ(plain.exit_code(), 2) << plain.output;
  EXPECT_TRUE(std::regex_search(
      plain.output,
      std::regex(
          R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d.\d{3}[+-]\d\d:?\d\d ringmaster-agent error: .*--tls-client-ca needs TLS)")))
      << plain.output;
  auto journal = testing_support::spawn(refused, {{"JOURNAL_STREAM", "8:12345"}}, true);
  journal.finish();
  EXPECT_EQ(journal.output.rfind("<3>ringmaster-agent: ", 0), 0u) << journal.output;
  auto bad = testing_support::spawn({RINGMASTER_AGENT, "--log-level", "chatty"}, {}, true);
  bad.finish();
  EXPECT_EQ(bad.exit_code(), 2) << bad.output;
  EXPECT_NE(bad.output.find("--log-level chatty"), std::string::npos) << bad.output;
  // A running agent: its start-up line is info, so --log-level warn hides it.
  auto started = [&](const std::string& level) {
    auto child =
        testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--print-port", "--log-level", level,
                                "--state-dir", dir + level, "--rank-user", agent::effective_user_name()},
                               {}, true);
    // Until the port is printed (the agent is serving), then TERM.
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    char buf[4096];
    while (!std::regex_search(child.output, std::regex(R"((^|\n)\d+\n)")) &&
           std::chrono::steady_clock::now() < deadline) {
      pollfd p{child.out_fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(child.out_fd, buf, sizeof(buf));
      if (n <= 0) break;
      child.output.append(buf, static_cast<std::size_t>(n));
    }
    ::kill(child.pid, SIGTERM);
    child.finish();
    return child.output;
  };
  const std::string info = started("info");
  EXPECT_TRUE(
      std::regex_search(info, std::regex(R"(ringmaster-agent info: ringmaster-agent \S+ listening on port \d+)")))
      << info;
  const std::string warn = started("warn");
  EXPECT_EQ(warn.find("listening on port"), std::string::npos) << warn;
  std::filesystem::remove_all(dir);
}

TEST(Agent, CancelDeclaredTopologyAndShutdown) {
  Agent a({"--topology-file", RINGMASTER_TOPOLOGY_DIR "/p4d-24xl-topo.xml"});
  Inbox inbox;
  auto client = agent::AgentClient::connect(a.options(), inbox.handler());
  const json inventory = client->call({{"type", "inventory"}});
  EXPECT_EQ(inventory["topology"]["origin"], "declared");
  EXPECT_NE(inventory["topology_summary"].get<std::string>().find("8 GPUs, 4 NICs"), std::string::npos);

  client->call({{"type", "subscribe"}});
  client->call(perf_run("long", 2, {0, 1}, perf_spec("4M", "4M", 100000)));
  EXPECT_EQ(client->call({{"type", "inventory"}})["runs"].size(), 1u);
  const auto cancelled_at = std::chrono::steady_clock::now();
  client->call({{"type", "cancel"}, {"run_id", "long"}});
  int terminated = 0;
  bool cancelled = false;
  for (const auto& m : inbox.run_events("long", 1, 30s)) {
    const json& e = m["event"];
    if (e["type"] == "rank_failed" && e.value("signal_name", "") == "SIGTERM") ++terminated;
    if (e["type"] == "run_done") cancelled = e["cancelled"].get<bool>();
  }
  EXPECT_EQ(terminated, 2);
  EXPECT_TRUE(cancelled);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count(), 5.0);
  try {
    client->call({{"type", "cancel"}, {"run_id", "long"}});
    ADD_FAILURE() << "cancelled a run that is over";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no run long"), std::string::npos) << e.what();
  }
  client->call({{"type", "shutdown"}});
  a.child.finish();
  EXPECT_EQ(a.child.exit_code(), 0);
}

TEST(Agent, MalformedInputIsAnsweredAndOthersAreServed) {
  Agent a;
  auto bystander = agent::AgentClient::connect(a.options());
  auto frame_of = [](const std::string& body) {
    const auto n = static_cast<std::uint32_t>(body.size());
    std::string f = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                     static_cast<char>(n)};
    return f + body;
  };
  struct Case {
    std::string name;
    std::string bytes;
    bool half_close;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"over the limit", std::string("\x01\x00\x00\x01", 4), false, "over the limit"},
      {"invalid JSON", frame_of("{\"type\": \"inventory\", "), false, "not valid JSON"},
      {"not an object", frame_of("[1,2]"), false, "must be a JSON object"},
      {"unknown type", frame_of(R"({"type":"launch_missiles","id":1,"v":1})"), false, "unknown message type"},
      {"missing field", frame_of(R"({"type":"cancel","id":1,"v":1})"), false, "missing field 'run_id'"},
      {"mistyped field",
       frame_of(R"({"type":"run","id":1,"v":1,"run_id":"x","world_size":"four","ranks":[0],)"
                R"("master_addr":"127.0.0.1","master_port":0,"perf":{"collective":"all_reduce"}})"),
       false, "field 'world_size' of run must be an integer"},
      {"wrong version", frame_of(R"({"type":"inventory","id":1,"v":2})"), false, "protocol version 2"},
      {"no id", frame_of(R"({"type":"inventory","v":1})"), false, "no integer 'id'"},
      {"truncated", frame_of(R"({"type":"inventory","id":1,"v":1})").substr(0, 12), true, "truncated frame"},
  };
  for (const auto& c : cases) {
    RawConnection raw(a.port);
    ASSERT_TRUE(raw.read()) << c.name;  // hello
    raw.send(c.bytes);
    if (c.half_close) ::shutdown(raw.fd, SHUT_WR);
    const auto error = raw.read();
    ASSERT_TRUE(error) << c.name;
    EXPECT_EQ((*error)["type"], "error") << c.name;
    EXPECT_TRUE((*error)["fatal"].get<bool>()) << c.name;
    EXPECT_NE((*error)["message"].get<std::string>().find(c.expect), std::string::npos)
        << c.name << ": " << error->dump();
    EXPECT_FALSE(raw.read()) << c.name << ": the connection should be closed";
    // The agent keeps serving the other client.
    EXPECT_EQ(bystander->call({{"type", "ping"}})["type"], "reply") << c.name;
  }
  EXPECT_TRUE(bystander->connected());
}

// Everything the server sends until it closes (or 10 s of silence).
std::string read_until_closed(const RawConnection& raw) {
  std::string response;
  char buf[4096];
  pollfd p{raw.fd, POLLIN, 0};
  while (::poll(&p, 1, 10000) > 0) {
    const ssize_t n = ::read(raw.fd, buf, sizeof(buf));
    if (n <= 0) break;
    response.append(buf, static_cast<std::size_t>(n));
  }
  return response;
}

std::string http_get(std::uint16_t port, const std::string& path) {
  RawConnection raw(port);
  // One request: the server keeps HTTP/1.1 connections open otherwise.
  raw.send("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  return read_until_closed(raw);
}

TEST(Agent, PrometheusMetricsAfterRuns) {
  Agent a({"--metrics", "127.0.0.1:0"});
  ASSERT_GT(a.metrics_port, 0);
  Inbox inbox;
  auto client = agent::AgentClient::connect(a.options(), inbox.handler());
  client->call({{"type", "subscribe"}});
  json run = perf_run("measured", 2, {0, 1}, perf_spec("1M", "1M", 3));
  client->call(run);
  inbox.run_events("measured", 1, 60s);
  // A run whose second rank never comes: rank 0 fails at STORE_BARRIER.
  run["run_id"] = "alone";
  run["ranks"] = {0};
  run["timeouts"] = {{"store_s", 1}};
  client->call(run);
  inbox.run_events("alone", 1, 60s);

  const std::string response = http_get(a.metrics_port, "/metrics");
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << response;
  EXPECT_NE(response.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << response;
  EXPECT_NE(response.find("\nringmaster_runs_started_total 2\n"), std::string::npos) << response;
  EXPECT_NE(response.find("\nringmaster_runs_failed_total 1\n"), std::string::npos) << response;
  EXPECT_NE(response.find("ringmaster_stage_failures_total{stage=\"STORE_BARRIER\"} 1\n"), std::string::npos)
      << response;
  // Bandwidth in bytes per second (Prometheus' base units), not GB/s.
  const std::string busbw =
      "ringmaster_bus_bandwidth_bytes_per_second{run=\"measured\",rank=\"0\",collective=\"all_reduce\","
      "bytes=\"1048576\"} ";
  const auto busbw_at = response.find(busbw);
  ASSERT_NE(busbw_at, std::string::npos) << response;
  EXPECT_GT(std::stod(response.substr(busbw_at + busbw.size())), 1e6) << response;
  EXPECT_NE(response.find("\nringmaster_build_info{version=\"" RINGMASTER_VERSION_STRING "\",hwloc=\""),
            std::string::npos)
      << response;
  const std::string sent = "ringmaster_channel_bytes_sent_total{run=\"measured\",rank=\"1\",channel=\"0\"} ";
  const auto at = response.find(sent);
  ASSERT_NE(at, std::string::npos) << response;
  EXPECT_GT(std::stoull(response.substr(at + sent.size())), 1u << 20);
  // Per-rank operation counters (the flight recorder's): every collective
  // the run started has ended by its last sample.
  auto value_of = [&](const std::string& series) -> std::uint64_t {
    const auto found = response.find(series);
    return found == std::string::npos ? 0 : std::stoull(response.substr(found + series.size()));
  };
  const auto started = value_of("ringmaster_rank_collectives_started_total{run=\"measured\",rank=\"1\"} ");
  EXPECT_GE(started, 3u) << response;
  EXPECT_EQ(value_of("ringmaster_rank_collectives_ended_total{run=\"measured\",rank=\"1\"} "), started) << response;
  EXPECT_NE(response.find("# TYPE ringmaster_stalls_total counter"), std::string::npos);
  EXPECT_NE(response.find("# TYPE ringmaster_agent_uptime_seconds gauge"), std::string::npos);
  EXPECT_EQ(http_get(a.metrics_port, "/").rfind("HTTP/1.1 404", 0), 0u);

  // Prometheus' own linter accepts the exposition (names, types, help,
  // counters ending in _total, base units).
  const char* promtool = std::getenv("RINGMASTER_PROMTOOL");
  ASSERT_TRUE(promtool && *promtool) << "promtool not found: scripts/setup-deps --tests extracts it from Debian's "
                                        "prometheus package";
  const std::string scrape_file = ::testing::TempDir() + "agent-metrics.txt";
  std::ofstream(scrape_file) << response.substr(response.find("\r\n\r\n") + 4);
  auto lint = testing_support::spawn({"/bin/sh", "-c", std::string(promtool) + " check metrics < " + scrape_file}, {},
                                     /*with_stderr=*/true);
  lint.finish();
  EXPECT_EQ(lint.status, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << "promtool check metrics found problems";
}

// /healthz and /readyz for probes (a DaemonSet's liveness and readiness),
// without authentication and saying nothing but their state; HEAD as GET
// without the body; other methods 405; requests one after another on one
// connection (Prometheus keeps its connections open).
TEST(Agent, HealthEndpointsForProbes) {
  Agent a({"--metrics", "127.0.0.1:0", "--token-file", write_token("health-token", "health-token-0123456789abcdef")});
  ASSERT_GT(a.metrics_port, 0);
  const std::string healthz = http_get(a.metrics_port, "/healthz");
  EXPECT_EQ(healthz.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << healthz;
  EXPECT_EQ(healthz.substr(healthz.find("\r\n\r\n") + 4), "ok\n");
  const std::string readyz = http_get(a.metrics_port, "/readyz");
  EXPECT_EQ(readyz.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << readyz;
  EXPECT_EQ(readyz.substr(readyz.find("\r\n\r\n") + 4), "ready\n");

  RawConnection raw(a.metrics_port);
  raw.send(std::string(
      "HEAD /readyz HTTP/1.1\r\nHost: x\r\n\r\nPOST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
      "GET /healthz?verbose=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string replies = read_until_closed(raw);
  // HEAD: the headers GET would have (Content-Length 6), no body; then 405
  // naming the methods; then the health answer, the query ignored.
  const auto second = replies.find("HTTP/1.1 405 Method Not Allowed\r\n");
  ASSERT_NE(second, std::string::npos) << replies;
  const std::string head = replies.substr(0, second);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << replies;
  EXPECT_NE(head.find("Content-Length: 6\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.find("\r\n\r\n") + 4), "") << "HEAD answered with a body";
  EXPECT_NE(replies.find("Allow: GET, HEAD\r\n", second), std::string::npos) << replies;
  const auto third = replies.find("HTTP/1.1 200 OK\r\n", second);
  ASSERT_NE(third, std::string::npos) << replies;
  EXPECT_EQ(replies.substr(replies.find("\r\n\r\n", third) + 4), "ok\n") << replies;

  // A request that is not HTTP ends its connection and nothing else.
  RawConnection junk(a.metrics_port);
  junk.send(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11));
  pollfd j{junk.fd, POLLIN, 0};
  ASSERT_GT(::poll(&j, 1, 8000), 0);
  char byte = 0;
  EXPECT_LE(::recv(junk.fd, &byte, 1, 0), 0);
  EXPECT_EQ(http_get(a.metrics_port, "/readyz").rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
}

TEST(Agent, SilentAgentIsNoticedWithinThreeSeconds) {
  Agent a;
  std::mutex mutex;
  std::condition_variable cv;
  std::string why;
  auto client = agent::AgentClient::connect(a.options(), {}, [&](const std::string& reason) {
    std::lock_guard lock(mutex);
    why = reason;
    cv.notify_all();
  });
  EXPECT_EQ(client->call({{"type", "ping"}})["type"], "reply");
  // The client's heartbeat pings measure the round trip: once one is
  // answered it is above zero and, on loopback, far below a second.
  const auto measure_until = std::chrono::steady_clock::now() + 5s;
  while (client->round_trip().count() == 0 && std::chrono::steady_clock::now() < measure_until)
    std::this_thread::sleep_for(20ms);
  EXPECT_GT(client->round_trip().count(), 0);
  EXPECT_LT(client->round_trip(), std::chrono::seconds(1));
  ASSERT_EQ(::kill(a.child.pid, SIGSTOP), 0);
  const auto stopped = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex);
  const bool noticed = cv.wait_for(lock, 10s, [&] { return !why.empty(); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  lock.unlock();
  ::kill(a.child.pid, SIGCONT);
  ASSERT_TRUE(noticed);
  EXPECT_LE(seconds, 4.5) << why;
  EXPECT_NE(why.find("silent for 3000 ms"), std::string::npos) << why;
  EXPECT_FALSE(client->connected());
}

TEST(Agent, KilledRankIsReportedAndTheNextRunWorks) {
  Agent a;
  Inbox inbox;
  auto client = agent::AgentClient::connect(a.options(), inbox.handler());
  client->call({{"type", "subscribe"}});
  json run = with_timeouts(perf_run("doomed", 3, {0, 1, 2}, perf_spec("16M", "16M", 100000)), {{"coll_s", 10}});
  const json started = client->call(run);
  int victim = -1;
  for (const auto& r : started["ranks"]) {
    if (r["rank"] == 1) victim = r["pid"].get<int>();
  }
  ASSERT_GT(victim, 0);
  // Kill rank 1 once data moves.
  {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    bool moving = false;
    std::unique_lock lock(inbox.mutex);
    while (!moving && inbox.cv.wait_until(lock, deadline, [&] { return !inbox.messages.empty(); })) {
      while (!inbox.messages.empty()) {
        const json m = std::move(inbox.messages.front());
        inbox.messages.pop_front();
        const json& e = m.value("event", json::object());
        if (e.value("type", "") == "sample" && e["channels"][0]["bytes_sent"].get<std::uint64_t>() > 0) moving = true;
      }
    }
    ASSERT_TRUE(moving);
  }
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto events = inbox.run_events("doomed", 1, 60s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LT(seconds, 15.0);
  std::map<int, json> failed;
  std::map<int, std::string> errors;
  bool done_ok = true;
  for (const auto& m : events) {
    const json& e = m["event"];
    if (e["type"] == "rank_failed") failed[m["rank"].get<int>()] = e;
    if (e["type"] == "error") errors[m["rank"].get<int>()] = e["message"];
    if (e["type"] == "run_done") done_ok = e["ok"].get<bool>();
  }
  EXPECT_FALSE(done_ok);
  ASSERT_TRUE(failed.count(1));
  EXPECT_EQ(failed[1]["signal_name"], "SIGKILL") << failed[1].dump();
  // Both survivors fail, not hang. Rank 1's ring neighbours see it die
  // first, but a survivor may see a neighbour's abort before its own
  // connection to rank 1 breaks, so at least one of them names rank 1.
  bool named = false;
  for (int survivor : {0, 2}) {
    ASSERT_TRUE(failed.count(survivor)) << "rank " << survivor << " should fail, not hang";
    EXPECT_NE(errors[survivor].find("the peer probably died"), std::string::npos)
        << "rank " << survivor << ": " << errors[survivor];
    named |= errors[survivor].find("rank 1") != std::string::npos;
    // What the rank wrote on stderr before it exited comes with the report.
    const std::string tail = failed[survivor].value("stderr_tail", "");
    EXPECT_NE(tail.find("rank " + std::to_string(survivor) + ": "), std::string::npos) << tail;
    EXPECT_NE(tail.find("the peer probably died"), std::string::npos) << tail;
  }
  EXPECT_TRUE(named) << errors[0] << "\n" << errors[2];
  // The agent is fine: the next run completes.
  run["run_id"] = "after";
  run["perf"] = perf_spec("1K", "1K", 2);
  client->call(run);
  bool after_ok = false;
  for (const auto& m : inbox.run_events("after", 1, 60s)) {
    if (m["event"]["type"] == "run_done") after_ok = m["event"]["ok"].get<bool>();
  }
  EXPECT_TRUE(after_ok);
}

// A run with engine "nccl" starts ringmaster-nccl-perf from beside the CLI
// instead of the engine's perf: on a GPU node its rows come back as
// "NCCL <version>" rows; here, without a driver, each rank fails saying
// why; in a build without the CUDA toolkit the agent refuses it, naming
// the missing program. What NCCL cannot take is refused up front.
TEST(Agent, NcclEngineRunsThroughNcclOrSaysWhy) {
  Agent a;
  Inbox inbox;
  auto client = agent::AgentClient::connect(a.options(), inbox.handler());
  client->call({{"type", "subscribe"}});
  auto refused = [&](json run, const std::string& says) {
    try {
      client->call(run);
      ADD_FAILURE() << run.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  json run = one_rank_run("nccl");
  run["perf"] = {
      {"collective", "all_reduce"}, {"min_bytes", "8"}, {"max_bytes", "1K"}, {"iters", 2}, {"engine", "mpi"}};
  refused(run, "run.perf.engine must be ringmaster or nccl, got 'mpi'");
  run["perf"]["engine"] = "nccl";
  run["perf"]["collective"] = "alltoall";
  refused(run, "engine nccl: NCCL's runner takes all_reduce, all_gather, reduce_scatter or broadcast, not 'all_to_all'");
  run["perf"]["collective"] = "all_reduce";
  run["perf"]["dtype"] = "half";
  refused(run, "run.perf.dtype is not taken with engine nccl");
  run["perf"].erase("dtype");

  const bool built =
      std::filesystem::exists(std::filesystem::path(RINGMASTER_CLI).parent_path() / "ringmaster-nccl-perf");
  if (!built) {
    refused(run, "engine nccl: this agent has no ");
    return;
  }
  client->call(run);
  std::string error;
  bool done_ok = true, rows = false;
  for (const auto& m : inbox.run_events("nccl", 1, 60s)) {
    const json& e = m["event"];
    if (e["type"] == "error") error = e["message"];
    if (e["type"] == "result") {
      rows = true;
      EXPECT_EQ(e["candidate"].get<std::string>().rfind("NCCL ", 0), 0u) << e.dump();
      EXPECT_EQ(e["out_of_place"]["wrong"], 0) << e.dump();
    }
    if (e["type"] == "run_done") done_ok = e["ok"].get<bool>();
  }
  if (std::system("nvidia-smi -L >/dev/null 2>&1") == 0) {
    EXPECT_TRUE(done_ok) << error;
    EXPECT_TRUE(rows);
  } else {
    EXPECT_FALSE(done_ok);
    EXPECT_FALSE(rows);
    EXPECT_NE(error.find("NCCL side by side not run on "), std::string::npos) << error;
    EXPECT_NE(error.find("no NVIDIA driver"), std::string::npos) << error;
  }
}

// `ringmaster-cli remote perf --engine both`: the sweep through Ringmaster,
// then through NCCL, then both engines' busbw size by size. Here, without
// a GPU, NCCL's column is "-" with the reason, and the exit is 1; what
// NCCL's runner cannot take is refused before any agent is asked.
TEST(Agent, RemoteCliComparesTheEnginesOrSaysWhyNot) {
  const std::string token_file = write_token("agent-token-both", "both-engines-token-0123456789");
  for (const auto& [collective, engine, says] :
       {std::tuple{"all_to_all", "both",
                   "--engine both: NCCL's runner takes all_reduce, all_gather, reduce_scatter or broadcast, not "
                   "'all_to_all'"},
        std::tuple{"all_reduce", "gloo", "--engine gloo: ringmaster, nccl or both"}}) {
    // Nothing listens on port 1: the refusal comes before any connection.
    auto refused = testing_support::spawn({RINGMASTER_CLI, "remote", "--agents", "127.0.0.1:1", "--token-file",
                                           token_file, "perf", collective, "--engine", engine},
                                          {}, true);
    refused.finish();
    EXPECT_EQ(refused.exit_code(), 2) << refused.output;
    EXPECT_NE(refused.output.find(says), std::string::npos) << refused.output;
  }

  Agent a({"--token-file", token_file}), b({"--token-file", token_file});
  auto cli = testing_support::spawn(
      {RINGMASTER_CLI, "remote",
       "--agents",     "127.0.0.1:" + std::to_string(a.port) + ",127.0.0.1:" + std::to_string(b.port),
       "--token-file", token_file,
       "perf",         "all_reduce",
       "--engine",     "both",
       "-b",           "8",
       "-e",           "1K",
       "-f",           "4",
       "-n",           "2",
       "-w",           "1"},
      {});
  cli.finish();
  // Ringmaster's table, then the comparison with a row per size.
  EXPECT_NE(cli.output.find("# Out of bounds values : 0 OK"), std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find("# Ringmaster against NCCL, out-of-place busbw (GB/s)"), std::string::npos) << cli.output;
  const bool gpu = std::system("nvidia-smi -L >/dev/null 2>&1") == 0;
  const std::regex compared(gpu ? R"( +(8|32|128|512) +[0-9.e+-]+ +[0-9.e+-]+ +[0-9.e+-]+)"
                                : R"( +(8|32|128|512) +[0-9.e+-]+ +- +-)");
  std::istringstream printed(cli.output);
  int rows = 0;
  for (std::string line; std::getline(printed, line);)
    rows += std::regex_match(line, compared) ? 1 : 0;
  EXPECT_EQ(rows, 4) << cli.output;
  if (gpu) {
    EXPECT_EQ(cli.exit_code(), 0) << cli.output;
    return;
  }
  EXPECT_EQ(cli.exit_code(), 1) << cli.output;
  // Without the runner the agents refuse the NCCL run, naming it; with it
  // each rank says there is no driver.
  const bool built =
      std::filesystem::exists(std::filesystem::path(RINGMASTER_CLI).parent_path() / "ringmaster-nccl-perf");
  const auto reason = cli.output.find("# NCCL did not run: ");
  ASSERT_NE(reason, std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find(built ? "NCCL side by side not run on " : "engine nccl: this agent has no ", reason),
            std::string::npos)
      << cli.output;
  if (built) {
    EXPECT_NE(cli.output.find("no NVIDIA driver"), std::string::npos) << cli.output;
  }
}

// A network namespace of this test's own, with loopback up.
struct NetNamespace : testing_support::NetNamespace {
  NetNamespace() : testing_support::NetNamespace("rm-agent-test-") {}
  // A client whose socket lives in this namespace.
  std::unique_ptr<agent::AgentClient> connect(const agent::ClientOptions& options,
                                              agent::AgentClient::MessageHandler handler = {}) const {
    std::unique_ptr<agent::AgentClient> client;
    std::string error;
    std::thread([&] {
      const int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
        error = "setns failed";
        return;
      }
      ::close(fd);
      try {
        client = agent::AgentClient::connect(options, std::move(handler));
      } catch (const std::exception& e) {
        error = e.what();
      }
    }).join();
    if (!client) throw std::runtime_error(error);
    return client;
  }
};

TEST(AgentFaults, PortRangeDropBreaksStoreConnectAndNoRuleOutlivesIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces and nftables";
  if (::system("command -v nft >/dev/null && command -v ip >/dev/null") != 0) GTEST_SKIP() << "needs nft and ip";
  NetNamespace ns;
  auto agent = std::make_unique<Agent>(std::vector<std::string>{"--allow-fault-injection"}, ns.exec());
  Inbox inbox;
  auto client = ns.connect(agent->options(), inbox.handler());
  client->call({{"type", "subscribe"}});
  Inbox watched;  // a second subscriber, whose messages nothing takes
  auto watcher = ns.connect(agent->options(), watched.handler());
  watcher->call({{"type", "subscribe"}});
  const json drop = {{"type", "fault"},
                     {"fault", {{"kind", "drop_ports"}, {"ports", "1025-65535"}, {"direction", "both"}}}};
  const json applied = client->call(drop);
  EXPECT_EQ(applied["mechanism"], "nftables") << applied.dump();
  EXPECT_NE(ns.ruleset().find("tcp dport 1025-65535"), std::string::npos) << ns.ruleset();
  EXPECT_EQ(client->call({{"type", "inventory"}})["faults"].size(), 1u);
  // Subscribers hear of it, typed, as the agent read it.
  const auto fault_events = [&](const std::string& run_id, std::size_t n) {
    std::vector<agent::events::EventMessage> out;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      out.clear();
      for (const json& m : watched.snapshot()) {
        const auto e = agent::events::parse_event_message(m);
        if (!e || e->run_id != run_id) continue;
        if (std::holds_alternative<agent::events::FaultApplied>(e->event) ||
            std::holds_alternative<agent::events::FaultReverted>(e->event)) {
          out.push_back(*e);
        }
      }
      std::this_thread::sleep_for(20ms);
    }
    return out;
  };
  {
    const auto heard = fault_events("", 1);
    ASSERT_EQ(heard.size(), 1u);
    const auto& a = std::get<agent::events::FaultApplied>(heard[0].event);
    EXPECT_EQ(a.fault_id, applied["fault_id"].get<int>());
    EXPECT_EQ(a.mechanism, "nftables");
    EXPECT_EQ(agent::describe(a.fault), "drop TCP to ports 1025-65535 both ways");
    EXPECT_EQ(heard[0].rank, -1);
  }

  // The seed case: MASTER_PORT inside the dropped range.
  client->call(with_timeouts(perf_run("blocked", 2, {0, 1}, perf_spec("1K", "1K", 1), 29500), {{"store_s", 2}}));
  std::map<int, json> failures;
  bool done_ok = true;
  for (const auto& m : inbox.run_events("blocked", 1, 60s)) {
    const json& e = m["event"];
    if (e["type"] == "failure") failures[m["rank"].get<int>()] = e;
    if (e["type"] == "stage") {
      const bool before_store = e["stage"] == "RESOLVE_MASTER" || (e["stage"] == "STORE_CONNECT" && !e["ok"]);
      EXPECT_TRUE(before_store) << "no stage past the store connect should be entered: " << e.dump();
    }
    if (e["type"] == "run_done") done_ok = e["ok"].get<bool>();
  }
  EXPECT_FALSE(done_ok);
  ASSERT_EQ(failures.size(), 2u);
  for (const auto& [rank, f] : failures) {
    EXPECT_EQ(f["stage"], "STORE_CONNECT") << f.dump();
    EXPECT_EQ(f["category"], "timeout") << f.dump();
    EXPECT_NE(f["hint"].get<std::string>().find("security group"), std::string::npos) << f.dump();
  }
  // Reverted when the run ended, and said so under the run's id.
  EXPECT_EQ(ns.ruleset().find("ringmaster_agent_"), std::string::npos) << ns.ruleset();
  {
    const auto heard = fault_events("blocked", 1);
    ASSERT_EQ(heard.size(), 1u);
    const auto& r = std::get<agent::events::FaultReverted>(heard[0].event);
    EXPECT_EQ(r.fault_id, applied["fault_id"].get<int>());
    EXPECT_EQ(r.reason, "run_ended");
  }

  // Reverted by fault_clear.
  client->call(drop);
  EXPECT_NE(ns.ruleset().find("ringmaster_agent_"), std::string::npos);
  client->call({{"type", "fault_clear"}});
  EXPECT_EQ(ns.ruleset().find("ringmaster_agent_"), std::string::npos) << ns.ruleset();
  {
    const auto heard = fault_events("", 3);  // applied, applied, cleared
    ASSERT_EQ(heard.size(), 3u);
    EXPECT_EQ(std::get<agent::events::FaultReverted>(heard[2].event).reason, "cleared");
  }

  // A killed agent leaves its table; the next agent removes it.
  client->call(drop);
  client.reset();
  watcher.reset();
  ::kill(agent->child.pid, SIGKILL);
  agent.reset();
  EXPECT_NE(ns.ruleset().find("ringmaster_agent_"), std::string::npos) << "the killed agent's table should be there";
  Agent next({"--allow-fault-injection"}, ns.exec());
  EXPECT_EQ(ns.ruleset().find("ringmaster_agent_"), std::string::npos) << ns.ruleset();
}

// ringmaster-cli remote inventory, fault and fault-clear against a real
// agent in a network namespace: the rule is in the namespace's ruleset
// after `fault` and gone after `fault-clear`.
TEST(AgentFaults, RemoteCliInjectsAndClears) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces and nftables";
  if (::system("command -v nft >/dev/null && command -v ip >/dev/null") != 0) GTEST_SKIP() << "needs nft and ip";
  NetNamespace ns;
  const std::string token_file = write_token("agent-token-faults", "faults-token-0123456789");
  Agent agent({"--allow-fault-injection", "--token-file", token_file}, ns.exec());
  auto remote = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = ns.exec();
    argv.insert(argv.end(), {RINGMASTER_CLI, "remote", "--agents", "127.0.0.1:" + std::to_string(agent.port),
                             "--token-file", token_file});
    argv.insert(argv.end(), args.begin(), args.end());
    auto cli = testing_support::spawn(argv, {}, true);
    cli.finish();
    return cli;
  };
  auto inventory = remote({"inventory"});
  ASSERT_EQ(inventory.exit_code(), 0) << inventory.output;
  const json inv = json::parse(inventory.output.substr(inventory.output.find('{')), nullptr, false);
  EXPECT_TRUE(inv.is_object() && inv.contains("topology") && inv.contains("hostname")) << inventory.output;
  auto fault = remote({"fault", "drop_ports", "--ports", "40000-40100", "--direction", "in"});
  EXPECT_EQ(fault.exit_code(), 0) << fault.output;
  EXPECT_NE(ns.ruleset().find("tcp dport 40000-40100"), std::string::npos) << ns.ruleset();
  auto clear = remote({"fault-clear"});
  EXPECT_EQ(clear.exit_code(), 0) << clear.output;
  EXPECT_EQ(ns.ruleset().find("40000-40100"), std::string::npos) << ns.ruleset();
}

// An agent killed with its faults applied leaves its nftables table;
// `ringmaster-agent --clear-faults` (the unit's ExecStopPost) removes it,
// and a table of a live agent stays.
TEST(AgentFaults, ClearFaultsRemovesWhatAKilledAgentLeft) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces and nftables";
  if (::system("command -v nft >/dev/null && command -v ip >/dev/null") != 0) GTEST_SKIP() << "needs nft and ip";
  NetNamespace ns;
  Agent live({"--allow-fault-injection"}, ns.exec());
  auto live_client = ns.connect(live.options());
  live_client->call({{"type", "fault"}, {"fault", {{"kind", "drop_ports"}, {"ports", "41000-41010"}}}});
  auto killed = std::make_unique<Agent>(std::vector<std::string>{"--allow-fault-injection"}, ns.exec());
  auto client = ns.connect(killed->options());
  client->call({{"type", "fault"}, {"fault", {{"kind", "drop_ports"}, {"ports", "40000-40010"}}}});
  client.reset();
  ::kill(killed->child.pid, SIGKILL);
  const std::string state_dir = killed->state_dir;
  killed.reset();  // reaped
  ASSERT_NE(ns.ruleset().find("40000-40010"), std::string::npos) << ns.ruleset();
  // In a container every agent is pid 1: a table an earlier agent left
  // under the live agent's pid, from another start, is stale too (it was
  // kept as "its agent lives" while the tables were named by pid alone).
  const std::string reused = "ringmaster_agent_" + std::to_string(live.child.pid) + "_1";
  // Matched whole: the live agent's own table (its start time in clock
  // ticks after it) begins with the same characters whenever that time
  // begins with 1, as it does from 17 to 33 minutes after boot.
  const std::string reused_table = "table inet " + reused + " {";
  std::vector<std::string> add = ns.exec();
  add.insert(add.end(), {"nft", "add", "table", "inet", reused});
  auto added = testing_support::spawn(add, {}, true);
  added.finish();
  ASSERT_EQ(added.exit_code(), 0) << added.output;
  std::vector<std::string> argv = ns.exec();
  argv.insert(argv.end(), {RINGMASTER_AGENT, "--clear-faults", "--state-dir", state_dir});
  auto clear = testing_support::spawn(argv, {}, true);
  clear.finish();
  EXPECT_EQ(clear.exit_code(), 0) << clear.output;
  EXPECT_NE(clear.output.find("removed nftables table ringmaster_agent_"), std::string::npos) << clear.output;
  EXPECT_EQ(ns.ruleset().find("40000-40010"), std::string::npos) << ns.ruleset();
  EXPECT_NE(ns.ruleset().find("41000-41010"), std::string::npos) << "the live agent's rule went too: " << ns.ruleset();
  EXPECT_EQ(ns.ruleset().find(reused_table), std::string::npos)
      << "a table from an earlier start stayed: " << ns.ruleset();
}

// Agents found through one name, as a Kubernetes headless Service gives
// them: agents.test resolves (the namespace's /etc/hosts) to two loopback
// addresses, each with an agent on port 29600; `remote --agents
// agents.test:29600` reaches both and runs one job over them. The same
// agents listed in --agents-file.
TEST(AgentDiscovery, OneNameForEveryAgent) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace with its own /etc/hosts";
  NetNamespace ns;
  const std::string etc = "/etc/netns/" + ns.name;
  std::filesystem::create_directories(etc);
  struct RemoveAfter {
    std::string dir;
    ~RemoveAfter() { std::filesystem::remove_all(dir); }
  } remove_after{etc};
  std::ofstream(etc + "/hosts") << "127.0.0.1 localhost\n127.0.0.2 agents.test\n127.0.0.3 agents.test\n";
  std::ofstream(etc + "/host.conf") << "multi on\n";
  const std::string token_file = write_token("agent-token-discovery", "discovery-token-0123456789");
  std::vector<testing_support::ChildProcess> agents;
  for (const char* address : {"127.0.0.2", "127.0.0.3"}) {
    std::vector<std::string> argv = ns.exec();
    argv.insert(argv.end(),
                {RINGMASTER_AGENT, "--listen", std::string(address) + ":29600", "--print-port", "--token-file",
                 token_file, "--state-dir", ::testing::TempDir() + "agent-discovery-" + address});
    agents.push_back(testing_support::spawn(argv, {}));
    std::string line;
    char c = 0;
    pollfd p{agents.back().out_fd, POLLIN, 0};
    while (::poll(&p, 1, 10000) > 0 && ::read(agents.back().out_fd, &c, 1) == 1 && c != '\n')
      line += c;
    ASSERT_EQ(line, "29600") << address;
  }
  auto remote = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = ns.exec();
    argv.insert(argv.end(), {RINGMASTER_CLI, "remote", "--token-file", token_file});
    argv.insert(argv.end(), args.begin(), args.end());
    auto cli = testing_support::spawn(argv, {}, true);
    cli.finish();
    return cli;
  };
  // Lines "ADDRESS:PORT {inventory}": the agents that answered.
  auto inventories = [](const std::string& output) {
    std::vector<std::string> agents;
    std::istringstream lines(output);
    for (std::string line; std::getline(lines, line);) {
      const auto brace = line.find(" {");
      if (brace != std::string::npos && json::parse(line.substr(brace + 1), nullptr, false).contains("topology"))
        agents.push_back(line.substr(0, brace));
    }
    return agents;
  };
  const std::vector<std::string> both = {"127.0.0.2:29600", "127.0.0.3:29600"};
  auto inventory = remote({"--agents", "agents.test:29600", "inventory"});
  EXPECT_EQ(inventory.exit_code(), 0) << inventory.output;
  EXPECT_NE(inventory.output.find("agents.test is 2 agents: 127.0.0.2, 127.0.0.3 (port 29600)"), std::string::npos)
      << inventory.output;
  EXPECT_EQ(inventories(inventory.output), both) << inventory.output;
  auto run =
      remote({"--agents", "agents.test:29600", "perf", "all_reduce", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"});
  EXPECT_EQ(run.exit_code(), 0) << run.output;
  EXPECT_NE(run.output.find("# nranks 2 "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("# Out of bounds values : 0 OK"), std::string::npos) << run.output;
  const std::string list = ::testing::TempDir() + "agents-" + std::to_string(::getpid()) + ".txt";
  std::ofstream(list) << "# the agents\n127.0.0.2:29600\n\n127.0.0.3:29600  # second\n";
  auto from_file = remote({"--agents", "", "--agents-file", list, "inventory"});
  EXPECT_EQ(from_file.exit_code(), 0) << from_file.output;
  EXPECT_EQ(inventories(from_file.output), both) << from_file.output;
  for (auto& a : agents) {
    ::kill(a.pid, SIGTERM);
    a.finish();
  }
}

TEST(AgentFaults, RefusedUnlessAllowed) {
  Agent a;
  auto client = agent::AgentClient::connect(a.options());
  try {
    client->call({{"type", "fault"}, {"fault", {{"kind", "drop_ports"}, {"ports", "1-2"}}}});
    ADD_FAILURE() << "fault accepted without --allow-fault-injection";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--allow-fault-injection"), std::string::npos) << e.what();
  }
}

// A run's environment: the loader's variables are refused (an LD_PRELOAD
// ran the client's code as the agent's user), a file-naming variable may
// not leave the run's directory, and one inside it lands under the agent's
// state directory.
TEST(AgentHardening, RunEnvironmentIsAllowlistedAndConfined) {
  Agent a;
  auto client = agent::AgentClient::connect(a.options());
  const std::string outside = ::testing::TempDir() + "ringmaster-owned-" + std::to_string(::getpid());
  for (const auto& [name, value, expect] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"LD_PRELOAD", "/tmp/evil.so", "run.env.LD_PRELOAD is not allowed"},
           {"PATH", "/tmp", "run.env.PATH is not allowed"},
           {"FI_PROVIDER_PATH", "/tmp", "run.env.FI_PROVIDER_PATH is not allowed"},
           {"NCCL_DEBUG_FILE", outside, "names a file"},
           {"NCCL_DEBUG_FILE", "../../escape.log", "names a file"}}) {
    try {
      client->call(one_rank_run("refused-" + name, {{name, value}}));
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find(value), std::string::npos) << "the value is echoed: " << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(outside));
  Inbox inbox;
  auto watcher = agent::AgentClient::connect(a.options(), inbox.handler());
  watcher->call({{"type", "subscribe"}});
  client->call(one_rank_run("debug-file", {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_FILE", "debug.log"}}));
  const auto events = inbox.run_events("debug-file", 1, 60s);
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back()["event"].value("ok", false)) << events.back().dump();
  const std::string log = a.state_dir + "/runs/debug-file/debug.log";
  EXPECT_TRUE(std::filesystem::exists(log)) << log;
  // Others may pass through to a run's directory (ranks run as another
  // user when the agent is root), never list or write it.
  using std::filesystem::perms;
  EXPECT_EQ(std::filesystem::status(a.state_dir).permissions() &
                (perms::others_read | perms::others_write | perms::group_read | perms::group_write),
            perms::none);
}

// The uid that owns the file a run's rank wrote (its NCCL_DEBUG_FILE).
static uid_t debug_file_owner(Agent& a, const std::string& run_id) {
  Inbox inbox;
  auto watcher = agent::AgentClient::connect(a.options(), inbox.handler());
  watcher->call({{"type", "subscribe"}});
  auto client = agent::AgentClient::connect(a.options());
  client->call(one_rank_run(run_id, {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_FILE", "debug.log"}}));
  const auto events = inbox.run_events(run_id, 1, 60s);
  EXPECT_FALSE(events.empty());
  if (!events.empty()) {
    EXPECT_TRUE(events.back()["event"].value("ok", false)) << events.back().dump();
  }
  struct stat st = {};
  const std::string log = a.state_dir + "/runs/" + run_id + "/debug.log";
  EXPECT_EQ(::stat(log.c_str(), &st), 0) << log;
  return st.st_uid;
}

// An agent running as root started its ranks as root: a client's run ran
// with every privilege the agent has. Ranks now run as `nobody` unless
// --rank-user names another user (root must be named), with that user's
// groups, in a run directory that user owns; a user that does not exist
// stops the agent at start.
TEST(AgentHardening, RanksRunAsAnUnprivilegedUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the agent switches users only as root";
  {
    // Each run a uid of its own from --rank-uids (61000-61183 by default),
    // with nobody's groups.
    Agent a;
    const uid_t owner = debug_file_owner(a, "as-nobody");
    EXPECT_GE(owner, 61000u);
    EXPECT_LE(owner, 61183u);
  }
  {
    Agent a({"--rank-uids", ""});
    EXPECT_EQ(debug_file_owner(a, "as-nobody-itself"), ::getpwnam("nobody")->pw_uid);
  }
  {
    Agent a({"--rank-user", "root"});
    EXPECT_EQ(debug_file_owner(a, "as-root"), 0u);
  }
  auto refused = testing_support::spawn(
      {RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--state-dir",
       ::testing::TempDir() + "agent-state-nouser-" + std::to_string(::getpid()), "--rank-user", "no-such-user-here"},
      {}, true);
  refused.finish();
  EXPECT_NE(refused.exit_code(), 0);
  EXPECT_NE(refused.output.find("rank user 'no-such-user-here' does not exist"), std::string::npos) << refused.output;
  // A state directory the rank user cannot reach stops the agent at start,
  // naming the directory in the way, rather than failing every run.
  const std::string closed = ::testing::TempDir() + "agent-closed-" + std::to_string(::getpid());
  std::filesystem::create_directories(closed);
  ::chmod(closed.c_str(), 0700);
  auto blocked =
      testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--state-dir", closed + "/state"}, {}, true);
  blocked.finish();
  EXPECT_NE(blocked.exit_code(), 0);
  EXPECT_NE(blocked.output.find("ranks run as user 'nobody', who cannot reach " + closed + "/state/runs: " + closed +
                                " (mode 0700"),
            std::string::npos)
      << blocked.output;
  std::filesystem::remove_all(closed);
}

// Review (L7): every run's ranks ran as one uid, and a rank wrote into
// another run's directory. Each run now takes a uid of its own from
// --rank-uids: two runs at once run as two uids, each owns its directory
// (mode 0700), neither can write the other's, and once a run ends its
// directory is the agent's again (a later run given the same uid cannot
// reach it).
TEST(AgentHardening, RunsAreFencedFromEachOther) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the agent switches users only as root";
  Agent a({"--rank-uids", "61100-61109"});
  auto client = agent::AgentClient::connect(a.options());
  Inbox inbox;
  auto watcher = agent::AgentClient::connect(a.options(), inbox.handler());
  watcher->call({{"type", "subscribe"}});
  std::map<std::string, uid_t> uid_of;
  for (const std::string id : {"fence-a", "fence-b"}) {
    // Rank 0 of 2, its peer never started: it waits at the store, alive.
    const json started = client->call(
        with_timeouts(perf_run(id, 2, {0}, perf_spec("8", "8", 1)), {{"store_s", 60}, {"bootstrap_s", 60}}));
    const int pid = started["ranks"][0]["pid"].get<int>();
    struct stat st = {};
    ASSERT_EQ(::stat(("/proc/" + std::to_string(pid)).c_str(), &st), 0);
    uid_of[id] = st.st_uid;
  }
  EXPECT_NE(uid_of["fence-a"], uid_of["fence-b"]);
  for (const auto& [id, uid] : uid_of) {
    EXPECT_GE(uid, 61100u);
    EXPECT_LE(uid, 61109u);
    struct stat st = {};
    ASSERT_EQ(::stat((a.state_dir + "/runs/" + id).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, uid) << id;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << id;
  }
  // As run A's uid: its own directory takes a file, run B's does not.
  auto try_as = [&](uid_t uid, const std::string& dir) {
    const pid_t child = ::fork();
    if (child == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(uid) != 0) ::_exit(2);
      const int fd = ::open((dir + "/written-by-" + std::to_string(uid)).c_str(), O_WRONLY | O_CREAT, 0600);
      ::_exit(fd >= 0 ? 0 : errno == EACCES ? 1 : 3);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(try_as(uid_of["fence-a"], a.state_dir + "/runs/fence-a"), 0);
  EXPECT_EQ(try_as(uid_of["fence-a"], a.state_dir + "/runs/fence-b"), 1) << "run A's uid wrote into run B's directory";
  for (const std::string id : {"fence-a", "fence-b"}) {
    client->call({{"type", "cancel"}, {"run_id", id}});
    inbox.run_events(id, 1, 60s);
  }
  struct stat st = {};
  ASSERT_EQ(::stat((a.state_dir + "/runs/fence-b").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "a finished run's directory still belongs to its uid";
  EXPECT_EQ(try_as(uid_of["fence-b"], a.state_dir + "/runs/fence-b"), 1) << "the uid reached its finished run";
}

// Nesting: a 160 KB frame of nested arrays before authentication crashed
// an agent that requires a token, and a nested ping_us after it. Both are
// refused now, and nothing but auth fits before authentication.
TEST(AgentHardening, NestedAndOversizedFramesAreRefusedBeforeAndAfterAuth) {
  Agent a({"--token-file", write_token("agent-token-nested", "nested-token-0123456789")});
  a.token = "nested-token-0123456789";
  auto frame_of = [](const std::string& body) {
    const auto n = static_cast<std::uint32_t>(body.size());
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                       static_cast<char>(n)} +
           body;
  };
  const std::string deep = std::string(80'000, '[') + std::string(80'000, ']');
  const std::string shallow_deep = std::string(1'000, '[') + std::string(1'000, ']');
  const std::vector<std::pair<std::string, std::string>> before_auth = {
      {frame_of(R"({"type":"run","id":1,"v":1,"run_id":"x","world_size":4,"ranks":[)" + deep +
                R"(],"master_addr":"127.0.0.1","master_port":1,"perf":{"collective":"all_reduce"}})"),
       "before authentication"},
      {frame_of(R"({"type":"auth","id":1,"v":1,"hmac":)" + shallow_deep + "}"), "deeper than 32 levels"},
  };
  for (const auto& [bytes, expect] : before_auth) {
    RawConnection raw(a.port);
    ASSERT_TRUE(raw.read());  // hello
    raw.send(bytes);
    const auto error = raw.read();
    ASSERT_TRUE(error) << expect;
    EXPECT_TRUE((*error)["fatal"].get<bool>());
    EXPECT_NE((*error)["message"].get<std::string>().find(expect), std::string::npos) << error->dump();
    EXPECT_TRUE(a.alive()) << expect;
  }
  {
    RawConnection raw(a.port);
    const auto hello = raw.read();
    ASSERT_TRUE(hello);
    raw.send(auth_message(a.token, *hello, 1));
    ASSERT_TRUE(raw.read());
    raw.send(frame_of(R"({"type":"ping","id":2,"v":1,"ping_us":)" + deep + "}"));
    auto error = raw.read();
    while (error && (*error)["type"] == "heartbeat")
      error = raw.read();
    ASSERT_TRUE(error);
    EXPECT_NE((*error)["message"].get<std::string>().find("deeper than 32 levels"), std::string::npos) << error->dump();
  }
  EXPECT_TRUE(a.alive());
}

// A client that has not authenticated is dropped after a few seconds, even
// when it trickles a byte now and then (the silence rule alone kept it).
TEST(AgentHardening, UnauthenticatedClientsAreDroppedWithinTheDeadline) {
  Agent a({"--token-file", write_token("agent-token-deadline", "deadline-token-0123456789")});
  RawConnection raw(a.port);
  ASSERT_TRUE(raw.read());  // hello
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  const std::string header("\x00\x00\x01\x00", 4);
  for (std::size_t i = 0; i < header.size() * 3 && !closed; ++i) {
    if (::send(raw.fd, header.data() + i % header.size(), 1, MSG_NOSIGNAL) != 1) closed = true;
    pollfd p{raw.fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0) {
      char c;
      closed = ::recv(raw.fd, &c, 1, 0) <= 0;
    }
  }
  const auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(closed) << "still connected after " << waited << " s of trickling";
  EXPECT_LT(waited, 8.0);
}

// Whatever a request or a rank's output holds, the agent answers and goes
// on: a fault spec with a wrongly typed field, a run naming a rank twice,
// ranks that print {"type":1} and {"type":"result"}. A line that is not an
// event every client can read is relayed as output, word for word; an
// event with a field this build does not know, or of a type it does not
// know, is relayed whole.
TEST(AgentHardening, MalformedRequestsAndRankOutputNeverStopTheAgent) {
  const std::string fake_cli = ::testing::TempDir() + "fake-cli.sh";
  {
    std::ofstream out(fake_cli);
    out << "#!/bin/sh\necho '{\"type\":1}'\necho '{\"type\":\"result\"}'\necho '{\"type\":\"links\",\"links\":7}'\n"
           "echo '{\"type\":\"stage\",\"stage\":[]}'\necho '{\"type\":\"done\",\"exit_code\":0,\"gpus\":8}'\n"
           "echo '{\"type\":\"gpu_sample\",\"util\":[0.9]}'\nexit 0\n";
  }
  ::chmod(fake_cli.c_str(), 0755);
  Agent a({"--cli", fake_cli, "--allow-fault-injection"});
  auto client = agent::AgentClient::connect(a.options());
  try {
    client->call({{"type", "fault"}, {"fault", {{"kind", "delay"}, {"interface", "lo"}, {"ms", "fifty"}}}});
    ADD_FAILURE() << "a delay of 'fifty' ms was accepted";
  } catch (const Error& e) {
    // The kind and the field named, the value not echoed.
    EXPECT_NE(std::string(e.what()).find("fault 'delay': 'ms' is a string of 5 characters, not a number"),
              std::string::npos)
        << e.what();
  }
  try {
    client->call(perf_run("twice", 2, {1, 1}, perf_spec("8", "8", 1), 29999));
    ADD_FAILURE() << "rank 1 twice was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("names rank 1 twice"), std::string::npos) << e.what();
  }
  Inbox inbox;
  auto watcher = agent::AgentClient::connect(a.options(), inbox.handler());
  watcher->call({{"type", "subscribe"}});
  client->call(one_rank_run("odd-output"));
  const auto events = inbox.run_events("odd-output", 1, 30s);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["event"]["type"], "run_done");
  std::vector<std::string> outputs;
  for (const auto& e : events) {
    if (e["event"]["type"] == "output") outputs.push_back(e["event"]["text"]);
    if (e["event"]["type"] == "done") {
      EXPECT_EQ(e["event"]["gpus"], 8) << e.dump();
    }
    if (e["event"]["type"] == "gpu_sample") {
      EXPECT_EQ(e["event"]["util"], json::array({0.9})) << e.dump();
    }
  }
  EXPECT_EQ(outputs, (std::vector<std::string>{R"({"type":1})", R"({"type":"result"})", R"({"type":"links","links":7})",
                                               R"({"type":"stage","stage":[]})"}));
  EXPECT_EQ(events.size(), 8u);  // four outputs, done, gpu_sample, rank_exit, run_done
  EXPECT_TRUE(a.alive());
  EXPECT_EQ(client->call({{"type", "ping"}})["type"], "reply");
}

// shm_size: the tmpfs goes over /dev/shm in the mount namespace the agent
// made for itself, never the machine's, wherever the agent was started (an
// agent in a network namespace only, whose guard could not read PID 1's
// mount namespace, once mounted it over the machine's /dev/shm).
TEST(AgentHardening, ShmSizeFaultNeverShrinksTheMachinesDevShm) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (mounts)";
  struct statvfs before = {};
  ASSERT_EQ(::statvfs("/dev/shm", &before), 0);
  Agent a({"--allow-fault-injection"});
  auto client = agent::AgentClient::connect(a.options());
  const json reply = client->call({{"type", "fault"}, {"fault", {{"kind", "shm_size"}, {"bytes", 1 << 20}}}});
  EXPECT_EQ(reply["mechanism"], "tmpfs") << reply.dump();
  struct statvfs after = {};
  ASSERT_EQ(::statvfs("/dev/shm", &after), 0);
  EXPECT_EQ(after.f_blocks * after.f_frsize, before.f_blocks * before.f_frsize)
      << "the machine's /dev/shm changed size";
  client->call({{"type", "fault_clear"}});
}

// Loopback is no longer trusted: an agent started without a token makes
// one (0600, in its state directory) and asks every client for it.
TEST(AgentHardening, EveryClientAuthenticatesOnLoopbackToo) {
  Agent a;
  const std::string path = agent::token_path(a.state_dir);
  struct stat st = {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(a.token.size(), 64u);
  RawConnection raw(a.port);
  const auto hello = raw.read();
  ASSERT_TRUE(hello);
  EXPECT_EQ((*hello)["auth"], "hmac-sha256");
  raw.send(json{{"type", "run"},
                {"id", 1},
                {"v", 1},
                {"run_id", "x"},
                {"world_size", 1},
                {"ranks", {0}},
                {"master_addr", "127.0.0.1"},
                {"master_port", 0},
                {"perf", perf_spec("8", "8", 1)}});
  const auto refused = raw.read();
  ASSERT_TRUE(refused);
  EXPECT_NE((*refused)["message"].get<std::string>().find("not authenticated"), std::string::npos) << refused->dump();
  EXPECT_TRUE(a.alive());
}

// Token files: one open to group or others, or a short token, keeps the
// agent from starting, and the reason names the file.
TEST(AgentHardening, TokenFilesOpenToOthersOrShortAreRefused) {
  const std::string open_file = write_token("agent-token-open", "long-enough-token-0123456789");
  ::chmod(open_file.c_str(), 0644);
  const std::string short_file = write_token("agent-token-short", "short");
  for (const auto& [file, expect] :
       std::vector<std::pair<std::string, std::string>>{{open_file, "chmod 600"}, {short_file, "at least 16"}}) {
    auto child = testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--token-file", file,
                                         "--state-dir", ::testing::TempDir() + "agent-state-refused"},
                                        {}, true);
    child.finish();
    EXPECT_NE(child.exit_code(), 0) << file;
    EXPECT_NE(child.output.find(expect), std::string::npos) << child.output;
    EXPECT_NE(child.output.find(file), std::string::npos) << child.output;
  }
}

// A Kubernetes Secret mounted as a volume gives each key as a symbolic
// link into a timestamped directory (token -> ..data/token -> ..2026_.../
// token). The agent refused to open it through the links, so the DaemonSet
// could not start; now the file reached counts: private, and owned by the
// agent's user or root (one another user owns is refused).
TEST(AgentHardening, TokenFromAKubernetesSecretVolume) {
  namespace fs = std::filesystem;
  const std::string secret = "secret-volume-token-0123456789";
  const fs::path volume = ::testing::TempDir() + "secret-volume-" + std::to_string(::getpid());
  fs::remove_all(volume);
  fs::create_directories(volume / "..2026_12_02_08_00_00.123456789");
  std::ofstream(volume / "..2026_12_02_08_00_00.123456789" / "token") << secret << "\n";
  fs::permissions(volume / "..2026_12_02_08_00_00.123456789" / "token", fs::perms::owner_read);
  fs::create_directory_symlink("..2026_12_02_08_00_00.123456789", volume / "..data");
  fs::create_symlink("..data/token", volume / "token");
  Agent a({"--token-file", (volume / "token").string()});
  EXPECT_NO_THROW(agent::AgentClient::connect(a.options(secret))->call({{"type", "ping"}}));

  if (::geteuid() == 0) {
    const std::string foreign = write_token("agent-token-foreign", "long-enough-token-0123456789");
    const passwd* nobody = ::getpwnam("nobody");
    ASSERT_NE(nobody, nullptr);
    ASSERT_EQ(::chown(foreign.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
    auto child = testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--token-file", foreign,
                                         "--state-dir", ::testing::TempDir() + "agent-state-foreign"},
                                        {}, true);
    child.finish();
    EXPECT_NE(child.exit_code(), 0);
    EXPECT_NE(child.output.find("neither this user nor root"), std::string::npos) << child.output;
  }
  fs::remove_all(volume);
}

// Every token could do everything. Tokens now carry roles, as the
// kubelet splits read from write: --role-tokens gives a dashboard a
// read-only token and a launcher one that may run but not inject faults;
// the agent's own token keeps every role. The reply to auth names them.
TEST(AgentHardening, TokensCarryRoles) {
  const std::string reader = "reader-token-0123456789abcdef";
  const std::string runner = "runner-token-0123456789abcdef";
  const std::string file =
      write_token("agent-role-tokens", "# a dashboard\nread " + reader + "\n\nread,run " + runner + "\n");
  Agent a({"--role-tokens", file, "--allow-fault-injection"});
  auto refused = [](agent::AgentClient& c, const json& m, const std::string& needs) {
    try {
      c.call(m);
      ADD_FAILURE() << m["type"] << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("needs " + needs), std::string::npos) << e.what();
    }
  };
  // A fault the agent refuses for its value, after the role check.
  const json fault = {{"type", "fault"}, {"fault", {{"kind", "delay"}, {"interface", "lo"}, {"ms", "fifty"}}}};
  {
    auto c = agent::AgentClient::connect(a.options(reader));
    EXPECT_EQ(c->call({{"type", "inventory"}})["type"], "reply");
    EXPECT_EQ(c->call({{"type", "subscribe"}})["type"], "reply");
    refused(*c, one_rank_run("by-reader"), "run");
    refused(*c, {{"type", "cancel"}, {"run_id", "x"}}, "run");
    refused(*c, fault, "fault");
    refused(*c, {{"type", "shutdown"}}, "every role");
  }
  {
    Inbox inbox;
    auto c = agent::AgentClient::connect(a.options(runner), inbox.handler());
    c->call({{"type", "subscribe"}});
    c->call(one_rank_run("by-runner"));
    const auto events = inbox.run_events("by-runner", 1, 60s);
    ASSERT_FALSE(events.empty());
    EXPECT_TRUE(events.back()["event"].value("ok", false)) << events.back().dump();
    refused(*c, fault, "fault");
    refused(*c, {{"type", "fault_clear"}}, "fault");
  }
  {
    // The agent's own token: every role (the fault is refused for its
    // value, not its role).
    auto c = agent::AgentClient::connect(a.options());
    try {
      c->call(fault);
      ADD_FAILURE() << "a delay of 'fifty' ms was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("needs"), std::string::npos) << e.what();
    }
    c->call({{"type", "fault_clear"}});
  }
  EXPECT_TRUE(a.alive());
  // A bad line stops the agent, naming the file and the line.
  const std::string bad = write_token("agent-role-tokens-bad", "read " + reader + "\nadmin " + runner + "\n");
  auto child = testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--role-tokens", bad, "--state-dir",
                                       ::testing::TempDir() + "agent-state-bad-roles"},
                                      {}, true);
  child.finish();
  EXPECT_NE(child.exit_code(), 0);
  EXPECT_NE(child.output.find(bad + " line 2: unknown role"), std::string::npos) << child.output;
  EXPECT_EQ(child.output.find(runner), std::string::npos) << "the token is echoed: " << child.output;
}

// After a wrong HMAC the client's address waits, longer each time: two
// seconds of guessing get a handful of tries, not thousands.
TEST(AgentHardening, WrongHmacsAreSlowedDown) {
  Agent a;
  int tries = 0;
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until) {
    RawConnection raw(a.port);
    const auto hello = raw.read();
    if (!hello) continue;  // closed at once: backing off
    raw.send(
        json{{"type", "auth"}, {"id", 1}, {"v", 1}, {"nonce", agent::random_nonce()}, {"hmac", std::string(64, '0')}});
    if (const auto answer = raw.read();
        answer && (*answer)["message"].get<std::string>().find("wrong HMAC") != std::string::npos) {
      ++tries;
    }
  }
  EXPECT_GE(tries, 1);
  EXPECT_LE(tries, 8) << "wrong HMACs tried in 2 s";
}

// Review (L6): the log's 20 lines a second were shared by every client, so
// one flooding client hid the failures of everyone else. Each client
// address now has its own share (20 a second), under a cap for all.
TEST(AgentLog, OneFloodingAddressHidesNoOtherAddresssLines) {
  const std::string dir = ::testing::TempDir() + "agent-log-share-" + std::to_string(::getpid());
  auto child = testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--print-port", "--state-dir", dir},
                                      {}, true);
  std::uint16_t port = 0;
  {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    std::smatch m;
    char buf[4096];
    while (port == 0 && std::chrono::steady_clock::now() < deadline) {
      if (std::regex_search(child.output, m, std::regex(R"((^|\n)(\d+)\n)"))) {
        port = static_cast<std::uint16_t>(std::stoi(m[2]));
        break;
      }
      pollfd p{child.out_fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(child.out_fd, buf, sizeof(buf));
      if (n <= 0) break;
      child.output.append(buf, static_cast<std::size_t>(n));
    }
  }
  ASSERT_NE(port, 0) << child.output;
  // A frame that breaks the protocol, from a given loopback address.
  auto broken_from = [&](const char* source) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0 &&
        ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0) {
      const std::string garbage(64, '\xff');
      [[maybe_unused]] const auto n = ::write(fd, garbage.data(), garbage.size());
      char c;
      pollfd p{fd, POLLIN, 0};
      while (::poll(&p, 1, 2000) > 0 && ::read(fd, &c, 1) > 0) {
      }
    }
    ::close(fd);
  };
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i)
    broken_from("127.0.0.2");
  broken_from("127.0.0.1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::this_thread::sleep_for(1100ms);
  broken_from("127.0.0.2");  // a new second: what was held back is counted
  ::kill(child.pid, SIGTERM);
  child.finish();
  std::filesystem::remove_all(dir);
  const auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto at = child.output.find(what); at != std::string::npos; at = child.output.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("client 127.0.0.1:"), 1u) << "the one broken client of 127.0.0.1 was hidden by 127.0.0.2's flood";
  EXPECT_LE(count("client 127.0.0.2:"), 20 * (seconds + 2) + 1) << "in " << seconds << " s";
  EXPECT_GE(count("client 127.0.0.2:"), 5u);
  EXPECT_NE(child.output.find("lines about 127.0.0.2 held back in the last second)"), std::string::npos)
      << child.output.substr(0, 4000);
}

// Review (M2): 9 wrong HMACs in about 21 s, then 0 of 100 legitimate
// connections from that address got in (every user on loopback, behind a
// NAT or a port-forward). A wrong HMAC now only delays its own answer; a
// right one from the same address is taken at once.
TEST(AgentHardening, AFailingClientLocksNobodyOutOfItsAddress) {
  Agent a;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread bad([&] {
    while (!stop) {
      try {
        RawConnection raw(a.port);
        const auto hello = raw.read();
        if (!hello) continue;
        raw.send(json{
            {"type", "auth"}, {"id", 1}, {"v", 1}, {"nonce", agent::random_nonce()}, {"hmac", std::string(64, '0')}});
        ++failures;
        // Does not wait for the answer: the next try at once.
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(20ms);
    }
  });
  std::this_thread::sleep_for(1s);  // failing well before the first good client
  int good = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    try {
      if (agent::AgentClient::connect(a.options())->call({{"type", "ping"}})["type"] == "reply") ++good;
    } catch (const Error& e) {
      ADD_FAILURE() << "good connection " << i << ": " << e.what();
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  bad.join();
  EXPECT_EQ(good, 100) << "while a client on the same address kept failing";
  EXPECT_GE(failures.load(), 20) << "the failing client did not keep trying";
  EXPECT_LT(seconds, 30.0) << "100 good connections took " << seconds << " s";
  EXPECT_TRUE(a.alive());
}

// Review (H1): every rank inherited the root agent's sockets, its listener
// and open client sessions among them; a rank accepted the administrator's
// next connection and relayed it. A rank now holds nothing of the agent's
// but its own output pipes: input /dev/null, output and error the pipes
// the agent reads, and no other descriptor the agent has.
TEST(AgentHardening, RanksInheritNoDescriptorOfTheAgent) {
  Agent a;
  auto client = agent::AgentClient::connect(a.options());  // a session the rank must not hold
  Inbox inbox;
  auto watcher = agent::AgentClient::connect(a.options(), inbox.handler());
  watcher->call({{"type", "subscribe"}});
  // Rank 0 of 2, its peer never started: it waits at the store, alive.
  const json started = client->call(
      with_timeouts(perf_run("fds", 2, {0}, perf_spec("8", "8", 1)), {{"store_s", 60}, {"bootstrap_s", 60}}));
  ASSERT_EQ(started["ranks"].size(), 1u) << started.dump();
  const int rank_pid = started["ranks"][0]["pid"].get<int>();
  auto descriptors = [](pid_t pid) {
    std::map<int, std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
      const auto target = std::filesystem::read_symlink(e.path(), ec);
      if (!ec) out[std::atoi(e.path().filename().c_str())] = target.string();
    }
    return out;
  };
  // Once it listens for its store, the rank is past its start.
  std::map<int, std::string> rank;
  for (int i = 0; i < 100; ++i) {
    rank = descriptors(rank_pid);
    if (rank.size() > 3) break;
    std::this_thread::sleep_for(50ms);
  }
  const auto agent_fds = descriptors(a.child.pid);
  ASSERT_FALSE(rank.empty()) << "cannot read /proc/" << rank_pid << "/fd";
  ASSERT_GT(agent_fds.size(), 4u);
  EXPECT_EQ(rank[0], "/dev/null");
  // kcmp(KCMP_FILE) tells whether two descriptors are one open file (a
  // path cannot: two opens of /dev/null read alike).
  for (const auto& [fd, target] : rank) {
    if (fd == 1 || fd == 2) {
      EXPECT_TRUE(target.starts_with("pipe:")) << "fd " << fd << ": " << target;
      continue;
    }
    for (const auto& [agent_fd, agent_target] : agent_fds) {
      const long same = ::syscall(SYS_kcmp, rank_pid, a.child.pid, KCMP_FILE, fd, agent_fd);
      EXPECT_NE(same, 0) << "the rank's fd " << fd << " is the agent's fd " << agent_fd << " (" << target << ")";
    }
  }
  client->call({{"type", "cancel"}, {"run_id", "fds"}});
  inbox.run_events("fds", 1, 60s);
}

// Review (L4): processes a rank started outlived its run (the agent
// signalled the run's process group only, which a process in a session of
// its own leaves). Each run now has a cgroup of its own below the agent's,
// and the run's end kills everything in it.
TEST(AgentHardening, EachRunIsACgroupAndNothingOutlivesIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a cgroup below the agent's";
  const auto home = agent::find_cgroup_home();
  if (home.dir.empty()) GTEST_SKIP() << "no cgroup v2 for the agent here: " << home.why_not;
  Agent a;
  auto client = agent::AgentClient::connect(a.options());
  Inbox inbox;
  auto watcher = agent::AgentClient::connect(a.options(), inbox.handler());
  watcher->call({{"type", "subscribe"}});
  // Rank 0 of 2, its peer never started: it waits at the store, alive.
  const json started = client->call(
      with_timeouts(perf_run("cg", 2, {0}, perf_spec("8", "8", 1)), {{"store_s", 60}, {"bootstrap_s", 60}}));
  const int rank_pid = started["ranks"][0]["pid"].get<int>();
  const std::string dir = home.dir + "/ringmaster-" + std::to_string(a.child.pid) + "-cg";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::ifstream procs(dir + "/cgroup.procs");
  std::set<int> members{std::istream_iterator<int>(procs), std::istream_iterator<int>()};
  EXPECT_TRUE(members.contains(rank_pid)) << "rank " << rank_pid << " is not in " << dir;
  // A process of the run in a session of its own, as a daemon a rank
  // started would be: setsid, then into the run's cgroup.
  auto helper = testing_support::spawn({"/usr/bin/setsid", "/bin/sleep", "300"}, {});
  std::this_thread::sleep_for(100ms);
  {
    std::ofstream join(dir + "/cgroup.procs");
    join << helper.pid << std::flush;
    ASSERT_TRUE(join.good()) << "cannot move " << helper.pid << " into " << dir;
  }
  client->call({{"type", "cancel"}, {"run_id", "cg"}});
  const auto events = inbox.run_events("cg", 1, 60s);
  ASSERT_FALSE(events.empty());
  helper.finish();
  EXPECT_TRUE(WIFSIGNALED(helper.status) && WTERMSIG(helper.status) == SIGKILL)
      << "the run's helper outlived the run (status " << helper.status << ")";
  for (int i = 0; i < 100 && std::filesystem::exists(dir); ++i)
    std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir << " outlived its run";
}

// Review (H2, and a low finding): variables that load code passed the run
// environment's allowlist (RINGMASTER_CUDA_MODULE, RINGMASTER_NCCL_LIBRARY
// with absolute paths), and a client could replace the connect filter the
// agent sets for its faults. Every loader and plugin variable that NCCL,
// libfabric, CUDA, glibc, Python and Ringmaster read is refused.
TEST(RunEnvironment, NoVariableCanNameCodeToLoad) {
  for (const char* name :
       {// NCCL's plugins and its config file (which sets any NCCL_*)
        "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN", "NCCL_GIN_PLUGIN",
        "NCCL_RAS_PLUGIN", "NCCL_CONF_FILE",
        // libfabric
        "FI_PROVIDER_PATH",
        // CUDA
        "CUDA_INJECTION64_PATH", "CUDA_INJECTION32_PATH", "CUDA_MODULE_LOADING",
        // glibc's loader and its other code paths
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH",
        "HOSTALIASES",
        // Python and torch
        "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONBREAKPOINT", "PYTHONEXECUTABLE",
        "TORCH_EXTENSIONS_DIR",
        // other stacks a rank may load
        "OMPI_MCA_mca_base_component_path", "UCX_MODULE_DIR", "HWLOC_PLUGINS_PATH", "HWLOC_COMPONENTS",
        // Ringmaster's own, and what the agent sets
        "RINGMASTER_CUDA_MODULE", "RINGMASTER_NCCL_LIBRARY", "RINGMASTER_CONNECT_FILTER", "RINGMASTER_RUN_ID",
        // the shell's
        "PATH", "SHELL", "BASH_ENV", "ENV", "IFS"}) {
    EXPECT_FALSE(agent::run_env_name_allowed(name)) << name << " is allowed";
    EXPECT_FALSE(agent::run_env_refusal(name).empty()) << name;
  }
  for (const char* name : {"NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_ALGO", "NCCL_DEBUG_FILE", "FI_PROVIDER",
                           "FI_LOG_LEVEL", "RINGMASTER_CUDA_IPC", "RINGMASTER_PORT_RANGE", "MASTER_ADDR",
                           "CUDA_VISIBLE_DEVICES", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "SLURM_JOB_ID"}) {
    EXPECT_TRUE(agent::run_env_name_allowed(name)) << name << ": " << agent::run_env_refusal(name);
  }
  try {
    (void)agent::checked_run_env(json{{"RINGMASTER_CUDA_MODULE", "/tmp/evil.so"}}, "/nonexistent/runs/x");
    ADD_FAILURE() << "RINGMASTER_CUDA_MODULE was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("run.env.RINGMASTER_CUDA_MODULE is not allowed: it names the CUDA module to load"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("the agent's own configuration"), std::string::npos) << what;
    EXPECT_EQ(what.find("/tmp/evil.so"), std::string::npos) << what;
  }
}

// Review (a low finding): timeouts of 1e308 reached the ranks as a
// negative number of seconds. A timeout is now at most a day.
TEST(AgentHardening, TimeoutsBeyondADayAreRefused) {
  Agent a;
  for (const double seconds : {1e308, 86401.0, -1.0, 0.0}) {
    try {
      // A broken field closes the connection: a new one each time.
      agent::AgentClient::connect(a.options())->call(with_timeouts(one_rank_run("too-long"), {{"store_s", seconds}}));
      ADD_FAILURE() << "store_s " << seconds << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("run.timeouts.store_s must be a positive number of seconds, at most 86400"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(a.alive());
}

// Agent CPU seconds so far (utime + stime).
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string f;
  long utime = 0, stime = 0;
  for (int i = 3; fields >> f; ++i) {
    if (i == 14) utime = std::atol(f.c_str());
    if (i == 15) stime = std::atol(f.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Out of descriptors, the accept loop spun at 99.6 % CPU; now it pauses.
// And a flood of clients that never authenticate cannot lock out one that
// does: past the per-address cap the oldest of them makes room.
TEST(AgentHardening, FloodsAndFullDescriptorTablesLeaveTheAgentServing) {
  Agent a({}, {"/usr/bin/prlimit", "--nofile=48:48", "--"});
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 120; ++i)
    flood.push_back(std::make_unique<RawConnection>(a.port));
  const double before = cpu_seconds(a.child.pid);
  std::this_thread::sleep_for(2s);
  const double spent = cpu_seconds(a.child.pid) - before;
  EXPECT_LT(spent, 0.5) << "the agent spent " << spent << " CPU s in 2 s with its descriptors full";
  flood.clear();
  std::this_thread::sleep_for(200ms);

  Agent b;
  for (int i = 0; i < 200; ++i)
    flood.push_back(std::make_unique<RawConnection>(b.port));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(b.alive());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "an authenticating client waited behind the flood";
}

// tc's qdiscs survived an agent killed with SIGKILL. The agent records the
// interfaces it shaped in its state directory and the next agent removes
// them, but only a qdisc that still has the agent's handle: one somebody
// else put there since stays.
TEST(AgentHardening, QdiscsOfAKilledAgentAreRemovedByTheNextOne) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (veth, tc)";
  const std::string suffix = std::to_string(::getpid() % 100000);
  const std::string ours = "rmqa" + suffix, theirs = "rmqb" + suffix;
  ASSERT_EQ(agent::run_command({"ip", "link", "add", ours, "type", "veth", "peer", "name", theirs}).first, 0);
  agent::run_command({"ip", "link", "set", ours, "up"});
  agent::run_command({"ip", "link", "set", theirs, "up"});
  auto qdisc_of = [](const std::string& dev) {
    return agent::run_command({"tc", "qdisc", "show", "dev", dev, "root"}).second;
  };
  const std::string state = ::testing::TempDir() + "agent-state-qdisc-" + suffix;
  {
    auto first = std::make_unique<Agent>(std::vector<std::string>{"--allow-fault-injection", "--state-dir", state});
    auto client = agent::AgentClient::connect(first->options());
    for (const auto& dev : {ours, theirs})
      client->call({{"type", "fault"}, {"fault", {{"kind", "rate"}, {"interface", dev}, {"mbit", 100}}}});
    EXPECT_NE(qdisc_of(ours).find(" 5247: "), std::string::npos) << qdisc_of(ours);
    ::kill(first->child.pid, SIGKILL);
    client.reset();
    first.reset();
  }
  EXPECT_NE(qdisc_of(ours).find(" 5247: "), std::string::npos) << "SIGKILL leaves the qdisc: " << qdisc_of(ours);
  // Somebody else's qdisc on the other interface since.
  agent::run_command({"tc", "qdisc", "replace", "dev", theirs, "root", "handle", "77:", "htb"});
  {
    Agent second({"--allow-fault-injection", "--state-dir", state});
    EXPECT_EQ(qdisc_of(ours).find(" 5247: "), std::string::npos) << qdisc_of(ours);
    EXPECT_NE(qdisc_of(theirs).find(" 77: "), std::string::npos) << qdisc_of(theirs);
  }
  agent::run_command({"ip", "link", "del", ours});
}

// Review (M4): a refused delay or rate fault ran `tc qdisc del dev IF
// root`, and so did clearing a fault: an operator's htb qdisc and its
// classes were gone. The agent now deletes a root qdisc only by its own
// handle, so what it did not create stays.
TEST(AgentHardening, FaultsNeverRemoveAQdiscTheyDidNotCreate) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (veth, tc)";
  const std::string suffix = std::to_string(::getpid() % 100000);
  const std::string dev = "rmqc" + suffix, peer = "rmqd" + suffix;
  ASSERT_EQ(agent::run_command({"ip", "link", "add", dev, "type", "veth", "peer", "name", peer}).first, 0);
  agent::run_command({"ip", "link", "set", dev, "up"});
  auto qdisc_of = [&] { return agent::run_command({"tc", "qdisc", "show", "dev", dev, "root"}).second; };
  Agent a({"--allow-fault-injection"});
  auto client = agent::AgentClient::connect(a.options());
  // The operator's qdisc is there first: the fault is refused, theirs stays.
  ASSERT_EQ(agent::run_command({"tc", "qdisc", "add", "dev", dev, "root", "handle", "77:", "htb"}).first, 0);
  ASSERT_EQ(
      agent::run_command({"tc", "class", "add", "dev", dev, "parent", "77:", "classid", "77:1", "htb", "rate", "1gbit"})
          .first,
      0);
  for (const json& fault : {json{{"kind", "delay"}, {"interface", dev}, {"ms", 5}},
                            json{{"kind", "rate"}, {"interface", dev}, {"mbit", 100}}}) {
    EXPECT_THROW(client->call({{"type", "fault"}, {"fault", fault}}), Error) << fault.dump();
    EXPECT_NE(qdisc_of().find(" 77: "), std::string::npos) << "after a refused " << fault["kind"] << ": " << qdisc_of();
  }
  EXPECT_NE(agent::run_command({"tc", "class", "show", "dev", dev}).second.find("77:1"), std::string::npos);
  // Ours, then replaced by the operator's before it is cleared: clearing
  // leaves theirs.
  agent::run_command({"tc", "qdisc", "del", "dev", dev, "root"});
  client->call({{"type", "fault"}, {"fault", {{"kind", "rate"}, {"interface", dev}, {"mbit", 100}}}});
  EXPECT_NE(qdisc_of().find(" 5247: "), std::string::npos) << qdisc_of();
  ASSERT_EQ(agent::run_command({"tc", "qdisc", "replace", "dev", dev, "root", "handle", "78:", "htb"}).first, 0);
  client->call({{"type", "fault_clear"}});
  EXPECT_NE(qdisc_of().find(" 78: "), std::string::npos) << "clearing removed the operator's qdisc: " << qdisc_of();
  agent::run_command({"ip", "link", "del", dev});
}

// A client that asks and never reads held the agent's memory without
// bound (its replies queued for ever); past the cap it is dropped and the
// agent's memory stays put.
TEST(AgentHardening, AClientThatNeverReadsIsDroppedAtTheQueueCap) {
  Agent a({"--max-client-queue", "8388608"});
  RawConnection raw(a.port);
  const auto hello = raw.read();
  ASSERT_TRUE(hello);
  int small = 1 << 20;
  ::setsockopt(raw.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  raw.send(auth_message(a.token, *hello, 1));
  const long before = rss_kib(a.child.pid);
  // 200 pings echoing 1 MiB each: 200 MiB of replies it never reads.
  const std::string payload(1 << 20, 'p');
  bool closed = false;
  for (int i = 0; i < 200 && !closed; ++i) {
    const std::string frame =
        agent::encode_frame(json{{"type", "ping"}, {"id", 2 + i}, {"v", 1}, {"ping_us", payload}});
    for (std::size_t sent = 0; sent < frame.size();) {
      pollfd p{raw.fd, POLLOUT, 0};
      if (::poll(&p, 1, 5000) <= 0 || (p.revents & (POLLERR | POLLHUP)) != 0) {
        closed = true;
        break;
      }
      const ssize_t n = ::send(raw.fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        closed = true;
        break;
      }
      sent += static_cast<std::size_t>(n);
    }
  }
  const long after = rss_kib(a.child.pid);
  EXPECT_TRUE(closed) << "the agent took 200 MiB of requests whose replies were never read";
  if (!kAddressSanitizer) {  // ASan's quarantine keeps freed memory resident
    EXPECT_LT(after - before, 64 * 1024) << "agent RSS grew by " << (after - before) / 1024 << " MiB";
  }
  EXPECT_TRUE(a.alive());
}

// Review (L3): a rank's output could make a million metric series (+118 MB,
// a 150 MB /metrics, a 1.1 s stall): its samples name their channels.
// Channels past 256 a rank, or past the series cap, are counted and not kept.
TEST(AgentMetrics, ARankCannotMakeAMillionSeries) {
  agent::Metrics metrics;
  agent::events::Sample sample;
  auto channel = [](int c) {
    agent::events::Sample::Channel one;
    one.channel = c;
    one.bytes_sent = 1;
    return one;
  };
  for (int c = 0; c < 1'000'000; c += 7)
    sample.channels.push_back(channel(c));
  sample.channels.push_back(channel(-5));
  metrics.observe({"flood", 0, sample, {}});
  const std::string text = metrics.render(1, 1, 0);
  std::size_t series = 0;
  for (auto at = text.find("\nringmaster_channel_bytes_sent_total{"); at != std::string::npos;
       at = text.find("\nringmaster_channel_bytes_sent_total{", at + 1))
    ++series;
  EXPECT_EQ(series, 37u) << "channels 0, 7, ..., 252 are kept";  // 0..252 step 7
  EXPECT_NE(text.find("ringmaster_metric_series_dropped_total " + std::to_string(sample.channels.size() - 37)),
            std::string::npos);
  EXPECT_LT(text.size(), 64u * 1024) << "/metrics of " << text.size() << " bytes";
}

// Review (a low finding): a FIFO as the token file hung the agent at its
// start (opening it waited for a writer). It is refused at once now, as
// any file that is not a regular one.
TEST(AgentHardening, AFifoAsTheTokenFileIsRefusedAtOnce) {
  const std::string fifo = ::testing::TempDir() + "agent-token-fifo-" + std::to_string(::getpid());
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto child = testing_support::spawn({RINGMASTER_AGENT, "--listen", "127.0.0.1:0", "--token-file", fifo, "--state-dir",
                                       ::testing::TempDir() + "agent-state-fifo-" + std::to_string(::getpid())},
                                      {}, true);
  pollfd p{child.out_fd, POLLIN, 0};
  std::string out;
  char buf[4096];
  while (std::chrono::steady_clock::now() - start < 10s && ::poll(&p, 1, 200) >= 0) {
    const ssize_t n = ::read(child.out_fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  const bool ended = std::chrono::steady_clock::now() - start < 10s;
  if (!ended) ::kill(child.pid, SIGKILL);
  child.finish();
  std::remove(fifo.c_str());
  ASSERT_TRUE(ended) << "the agent still waited on the FIFO after 10 s";
  EXPECT_NE(child.exit_code(), 0);
  EXPECT_NE((out + child.output).find("is not a regular file"), std::string::npos) << out + child.output;
}

// Review (L1): the unit and the image served plain TCP on 0.0.0.0:29600.
// Beyond loopback an agent now refuses plain TCP unless told the network
// is private (--allow-plaintext), and --tls-self-signed (what we ship)
// serves TLS with a certificate the agent makes once and keeps: a client
// that trusts that file gets in, across restarts; one that trusts another
// agent's certificate does not.
TEST(AgentHardening, PlainTcpBeyondLoopbackIsRefusedAndTheShippedDefaultServesTls) {
  const std::string dir = ::testing::TempDir() + "agent-tls-default-" + std::to_string(::getpid());
  auto plain = testing_support::spawn(
      {RINGMASTER_AGENT, "--listen", "0.0.0.0:0", "--print-port", "--state-dir", dir + "-plain"}, {}, true);
  plain.finish();
  EXPECT_EQ(plain.exit_code(), 2) << plain.output;
  EXPECT_NE(plain.output.find("plain TCP beyond loopback"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("--tls-self-signed"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("--allow-plaintext"), std::string::npos) << plain.output;
  {
    auto allowed = testing_support::spawn(
        {RINGMASTER_AGENT, "--listen", "0.0.0.0:0", "--print-port", "--allow-plaintext", "--state-dir", dir + "-plain"},
        {});
    std::string line;
    char c = 0;
    pollfd p{allowed.out_fd, POLLIN, 0};
    while (::poll(&p, 1, 10000) > 0 && ::read(allowed.out_fd, &c, 1) == 1 && c != '\n')
      line += c;
    EXPECT_GT(std::atoi(line.c_str()), 0) << "--allow-plaintext did not start the agent";
    ::kill(allowed.pid, SIGTERM);
    allowed.finish();
  }
  const std::string state = dir + "-tls";
  std::string fingerprint;
  for (int start = 0; start < 2; ++start) {
    Agent a({"--tls-self-signed", "--state-dir", state});
    struct stat key {};
    ASSERT_EQ(::stat((state + "/tls/agent.key").c_str(), &key), 0);
    EXPECT_EQ(key.st_mode & 0777, 0600u);
    std::ifstream in(state + "/tls/agent.crt");
    const std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (start == 0) fingerprint = pem;
    EXPECT_EQ(pem, fingerprint) << "a restart made a new certificate: clients that trusted the old one are cut off";
    auto options = a.options();
    options.connect_timeout = 3000ms;
    options.tls = true;
    options.tls_ca_file = state + "/tls/agent.crt";
    auto client = agent::AgentClient::connect(options);
    EXPECT_EQ(client->call({{"type", "ping"}})["type"], "reply");
    auto plain_client = a.options();
    plain_client.connect_timeout = 3000ms;
    EXPECT_THROW(agent::AgentClient::connect(plain_client), Error) << "plain TCP to the TLS agent";
  }
  // Another agent's certificate is no proof of this one.
  Agent other({"--tls-self-signed"});
  auto options = other.options();
  options.connect_timeout = 3000ms;
  options.tls = true;
  options.tls_ca_file = state + "/tls/agent.crt";
  EXPECT_THROW(agent::AgentClient::connect(options), Error);
  std::filesystem::remove_all(dir + "-plain");
  std::filesystem::remove_all(state);
}

// Review (M6): the cap on what waits to be sent was per client only
// (64 MiB x 1,024 connections): 12 read-token clients that never read held
// 635 MB in 20 s. What waits for all clients together has a cap too, and
// the client whose message would pass it is dropped.
TEST(AgentHardening, WhatWaitsForAllClientsTogetherIsCapped) {
  Agent a({"--max-queued-total", "8388608"});
  const std::string payload(1 << 20, 'p');
  std::vector<std::unique_ptr<RawConnection>> hoarders;
  for (int c = 0; c < 3; ++c) {
    auto raw = std::make_unique<RawConnection>(a.port);
    const auto hello = raw->read();
    ASSERT_TRUE(hello);
    int small = 1 << 16;
    ::setsockopt(raw->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    raw->send(auth_message(a.token, *hello, 1));
    // 12 pings echoing 1 MiB each, none of their replies read: within the
    // 64 MiB a client may have waiting, not within 8 MiB for all three.
    for (int i = 0; i < 12; ++i) {
      const std::string frame =
          agent::encode_frame(json{{"type", "ping"}, {"id", 2 + i}, {"v", 1}, {"ping_us", payload}});
      for (std::size_t sent = 0; sent < frame.size();) {
        pollfd p{raw->fd, POLLOUT, 0};
        if (::poll(&p, 1, 2000) <= 0 || (p.revents & (POLLERR | POLLHUP)) != 0) break;
        const ssize_t n = ::send(raw->fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
      }
    }
    hoarders.push_back(std::move(raw));
  }
  std::this_thread::sleep_for(500ms);
  // Read each to its end: a dropped one ends, a kept one goes quiet.
  int dropped = 0;
  for (auto& raw : hoarders) {
    char buf[1 << 16];
    for (;;) {
      pollfd p{raw->fd, POLLIN, 0};
      if (::poll(&p, 1, 1500) <= 0) break;
      const ssize_t n = ::read(raw->fd, buf, sizeof(buf));
      if (n <= 0) {
        ++dropped;
        break;
      }
    }
  }
  EXPECT_GE(dropped, 1) << "3 clients held 36 MiB of unread replies under an 8 MiB total";
  EXPECT_TRUE(a.alive());
}

// Review (M3): a read-only token could hold all 1,024 connection places,
// and the administrator was refused meanwhile. Read-only tokens now hold
// at most three quarters of --max-connections, and when every place is
// taken a client that may run takes the place of the read-only connection
// heard from least recently.
TEST(AgentHardening, ReadOnlyTokensCannotStarveTheOthers) {
  const std::string reader = "reader-token-0123456789abcdef";
  const std::string runner = "runner-token-0123456789abcdef";
  const std::string file = write_token("agent-role-tokens-share", "read " + reader + "\nread,run " + runner + "\n");
  Agent a({"--role-tokens", file, "--max-connections", "8"});
  std::vector<std::unique_ptr<agent::AgentClient>> readers;
  int refused = 0;
  for (int i = 0; i < 8; ++i) {
    try {
      readers.push_back(agent::AgentClient::connect(a.options(reader)));
    } catch (const Error& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find("read-only tokens hold 6 connections, their share of the agent's 8"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(readers.size(), 6u);
  EXPECT_EQ(refused, 2);
  auto run_1 = agent::AgentClient::connect(a.options(runner));
  auto run_2 = agent::AgentClient::connect(a.options(runner));
  // Every place taken: the administrator still gets in, in a reader's place.
  auto admin = agent::AgentClient::connect(a.options());
  EXPECT_EQ(admin->call({{"type", "ping"}})["type"], "reply");
  EXPECT_EQ(run_1->call({{"type", "ping"}})["type"], "reply");
  int gone = 0;
  for (auto& r : readers) {
    try {
      r->call({{"type", "ping"}});
    } catch (const Error&) {
      ++gone;
    }
  }
  EXPECT_EQ(gone, 1);
}

// Mutual authentication: an impostor listening where the agent should be,
// that does not hold the token but says yes to any auth, is refused by the
// client (it once accepted any "ok" and went on to send runs there).
TEST(AgentHardening, AnImpostorAgentIsRefusedByTheClient) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::thread impostor([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    auto write_frame = [fd](const json& m) {
      const std::string frame = agent::encode_frame(m);
      (void)::write(fd, frame.data(), frame.size());
    };
    write_frame({{"type", "hello"},
                 {"id", 1},
                 {"v", 1},
                 {"agent", "ringmaster-agent"},
                 {"version", "0.1.0"},
                 {"protocol", 1},
                 {"host", "impostor"},
                 {"nonce", std::string(64, 'a')},
                 {"auth", "hmac-sha256"}});
    agent::FrameDecoder decoder;
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n <= 0) break;
      decoder.feed(buffer, static_cast<std::size_t>(n));
      if (auto m = decoder.next()) {
        write_frame({{"type", "reply"}, {"id", 2}, {"v", 1}, {"re", (*m)["id"]}, {"ok", true}});
        break;
      }
    }
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 2000);
    ::close(fd);
  });
  agent::ClientOptions options;
  options.port = ntohs(address.sin_port);
  options.token = "the-real-token-0123456789";
  try {
    agent::AgentClient::connect(options);
    ADD_FAILURE() << "the client accepted an agent that never proved the token";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not prove it holds the token"), std::string::npos) << e.what();
  }
  impostor.join();
  ::close(listener);
}

// /metrics had no read timeout and no cap: an idle connection stayed for
// ever. Now a request must come within 5 s, and a flood of idle
// connections gives way to a scrape.
TEST(AgentHardening, MetricsConnectionsAreBoundedInTimeAndNumber) {
  Agent a({"--metrics", "127.0.0.1:0"});
  ASSERT_NE(a.metrics_port, 0);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 100; ++i)
    idle.push_back(std::make_unique<RawConnection>(a.metrics_port));
  const auto start = std::chrono::steady_clock::now();
  const std::string scrape = http_get(a.metrics_port, "/metrics");
  EXPECT_NE(scrape.find("200 OK"), std::string::npos) << scrape.substr(0, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "the scrape waited behind idle connections";
  // The last idle one is closed by the read deadline.
  pollfd p{idle.back()->fd, POLLIN, 0};
  ASSERT_GT(::poll(&p, 1, 8000), 0) << "an idle /metrics connection was still open after 8 s";
  char c;
  EXPECT_LE(::recv(idle.back()->fd, &c, 1, 0), 0);
}

// A rank that prints megabytes without a newline, or bytes that are not
// UTF-8, is relayed in pieces as output; the agent neither grows with it
// nor stops, and the run ends normally.
TEST(AgentHardening, EndlessOrInvalidRankOutputIsRelayedInPieces) {
  const std::string fake_cli = ::testing::TempDir() + "fake-cli-endless.sh";
  {
    std::ofstream out(fake_cli);
    out << "#!/bin/sh\nhead -c 3000000 /dev/zero | tr '\\0' x\nprintf '\\n\\377\\376 not utf-8\\n'\nexit 0\n";
  }
  ::chmod(fake_cli.c_str(), 0755);
  Agent a({"--cli", fake_cli});
  Inbox inbox;
  auto watcher = agent::AgentClient::connect(a.options(), inbox.handler());
  watcher->call({{"type", "subscribe"}});
  auto client = agent::AgentClient::connect(a.options());
  client->call(one_rank_run("endless"));
  const auto events = inbox.run_events("endless", 1, 30s);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["event"]["type"], "run_done");
  std::size_t relayed = 0;
  int cut = 0;
  for (const auto& e : events) {
    if (e["event"]["type"] != "output") continue;
    relayed += e["event"]["text"].get<std::string>().size();
    cut += e["event"].value("cut", false) ? 1 : 0;
  }
  EXPECT_GE(relayed, 3'000'000u);
  EXPECT_GE(cut, 2) << "a 3 MB line comes in pieces of at most 1 MiB";
  EXPECT_TRUE(a.alive());
}

}  // namespace
}  // namespace ringmaster
