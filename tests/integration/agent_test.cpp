// ringmaster-agent as real processes on loopback, driven through the client
// library and ringmaster-cli remote: a 4-rank sweep across two agents, the
// token handshake and TLS, malformed frames, a rank killed mid-run, the
// metrics and health endpoints, the log, NIC counters and slow links.
#include "agent_test_support.h"
#include "ringmaster/agent/requests.h"

namespace ringmaster {
namespace {

using namespace agent_testing;

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

// A lossy link is named from what its sender's TCP resent, whatever rate
// it kept: a share well above the other links' and 1% or more, over
// enough segments; a few resent segments everywhere name none.
TEST(SlowLinks, ALossyLinkIsNamedFromWhatItsSenderResent) {
  auto event = [](int from, double gbs, int to, std::uint64_t segments, std::uint64_t resent) {
    return links_event(
        nlohmann::json{{"type", "links"},
                       {"links", {{{"from", from}, {"bytes", 64 << 20}, {"gbs", gbs}, {"transport", "SOCKET"}}}},
                       {"sent", {{{"to", to}, {"segments", segments}, {"resent", resent}}}}});
  };
  // Rank r receives from r-1 and sends to r+1 on a ring of four.
  std::vector<std::pair<int, agent::events::Links>> ring = {{0, event(3, 2.5, 1, 30000, 2)},
                                                            {1, event(0, 2.4, 2, 31000, 1000)},
                                                            {2, event(1, 2.3, 3, 30000, 0)},
                                                            {3, event(2, 2.6, 0, 30000, 3)}};
  const auto lossy = agent::find_slow_links(ring);
  ASSERT_EQ(lossy.size(), 1u);
  EXPECT_TRUE(lossy[0].lossy());
  EXPECT_EQ(lossy[0].from, 1);
  EXPECT_EQ(lossy[0].to, 2);
  EXPECT_NE(lossy[0].describe().find("rank 1 -> rank 2 resent 3.2% of its TCP segments (1000 of 31000)"),
            std::string::npos)
      << lossy[0].describe();
  EXPECT_NE(lossy[0].describe().find("it ran at 2.30 GB/s"), std::string::npos) << lossy[0].describe();
  ring[1].second = event(0, 2.4, 2, 31000, 200);  // 0.6%: under the floor
  EXPECT_TRUE(agent::find_slow_links(ring).empty());
  ring[1].second = event(0, 2.4, 2, 900, 200);  // too few segments to say
  EXPECT_TRUE(agent::find_slow_links(ring).empty());
  for (auto& [rank, e] : ring)  // every link resends alike: no outlier
    e.sent[0].resent = e.sent[0].segments / 20;
  EXPECT_TRUE(agent::find_slow_links(ring).empty());
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

// The node gate: `remote perf` asks every agent what its ranks would load
// and inherit before it starts one, and refuses nodes that differ, naming
// them; --allow-mixed-nodes launches anyway (and the ranks, comparing
// their settings, then stop at ADDRESS_EXCHANGE).
TEST(Agent, RemoteCliRefusesNodesThatDiffer) {
  const std::string token_file = write_token("agent-token-gate", "gate-token-0123456789abc");
  Agent a({"--token-file", token_file});
  Agent b({"--token-file", token_file},
          {"/usr/bin/env", "NCCL_PROTO=Simple", "NCCL_DEBUG=WARN", "RINGMASTER_WEBHOOK_TOKEN=hidden"});
  auto options = b.options();
  options.token = agent::read_token_file(token_file);
  auto client = agent::AgentClient::connect(options, {});
  const agent::Inventory inventory = agent::Inventory::parse(client->call({{"type", "inventory"}}));
  EXPECT_EQ(inventory.rank_env.at("NCCL_PROTO"), "Simple");
  EXPECT_FALSE(inventory.rank_env.contains("RINGMASTER_WEBHOOK_TOKEN")) << "a secret's value left the agent";
  ASSERT_FALSE(inventory.stack.empty());
  EXPECT_EQ(inventory.stack[0].first, "ringmaster");
  const std::string agents = "127.0.0.1:" + std::to_string(a.port) + ",127.0.0.1:" + std::to_string(b.port);
  const std::vector<std::string> perf = {RINGMASTER_CLI,
                                         "remote",
                                         "--agents",
                                         agents,
                                         "--token-file",
                                         token_file,
                                         "--store-timeout",
                                         "5",
                                         "--bootstrap-timeout",
                                         "5",
                                         "perf",
                                         "all_reduce",
                                         "-b",
                                         "1K",
                                         "-e",
                                         "1K",
                                         "-n",
                                         "1",
                                         "-w",
                                         "0"};
  auto refused = testing_support::spawn(perf, {}, true);
  refused.finish();
  EXPECT_EQ(refused.exit_code(), 2) << refused.output;
  // Both agents run on this host: the nodes are told apart by their place.
  const std::string host = inventory.hostname;
  EXPECT_NE(refused.output.find("refused before launch: the nodes' agents give their ranks different NCCL_PROTO: "
                                "unset on node 0 (" +
                                host + "); NCCL_PROTO=Simple on node 1 (" + host + ")"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("# note: the nodes' agents give their ranks different NCCL_DEBUG (a node's own)"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(refused.output.find("STORE_BARRIER"), std::string::npos) << "a rank started: " << refused.output;
  std::vector<std::string> anyway = perf;
  anyway.push_back("--allow-mixed-nodes");
  auto launched = testing_support::spawn(anyway, {}, true);
  launched.finish();
  EXPECT_NE(launched.exit_code(), 0) << launched.output;
  EXPECT_NE(launched.output.find("# going ahead (--allow-mixed-nodes) although the nodes' agents give their ranks "
                                 "different NCCL_PROTO"),
            std::string::npos)
      << launched.output;
  EXPECT_NE(launched.output.find("ADDRESS_EXCHANGE"), std::string::npos) << launched.output;
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
  refused(run,
          "engine nccl: NCCL's runner takes all_reduce, all_gather, reduce_scatter or broadcast, not 'all_to_all'");
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

}  // namespace
}  // namespace ringmaster
