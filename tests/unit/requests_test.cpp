// The typed requests clients send an agent (ringmaster/agent/requests.h):
// what each field reads as, what a bad one is refused with, and the command
// line each request becomes.
#include "ringmaster/agent/requests.h"
#include "ringmaster/agent/node_gate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "ringmaster/status.h"
#include "ringmaster/tools/topology.h"

namespace ringmaster::agent {
namespace {

using nlohmann::json;

// What parsing `message` as a Request is refused with; "accepted" if it is not.
template <class Request>
std::string refusal_of(const json& message) {
  try {
    Request::parse(message);
  } catch (const Error& e) {
    return e.status().message();
  }
  return "accepted";
}

std::string refusal(const json& perf) {
  return refusal_of<PerfRequest>(perf);
}

// Every field survives its way through JSON; a field at its default is
// left out of the message, and sizes read as numbers or as nccl-tests
// writes them.
TEST(PerfRequest, RoundTripsThroughJson) {
  PerfRequest r;
  r.collective = Collective::reduce_scatter;
  r.min_bytes = 8;
  r.max_bytes = 64u << 20;
  r.step_factor = 2;
  r.iters = 7;
  r.warmup = 0;
  r.warmup_ms = 250;
  r.check = false;
  r.type = DataType::bf16;
  r.op = RedOp::max;
  r.root = 3;
  r.blocking = true;
  r.algorithm = Algorithm::tree;
  r.protocol = Protocol::ll128;
  r.channels = 4;
  r.agg_iters = 2;
  r.run_cycles = 0;
  r.average = 3;
  EXPECT_EQ(PerfRequest::parse(r.to_json()), r);
  EXPECT_EQ(PerfRequest{}.to_json(), json({{"collective", "all_reduce"}}));
  const auto sizes = PerfRequest::parse({{"collective", "all_reduce_perf"}, {"min_bytes", "64K"}, {"max_bytes", 1024}});
  EXPECT_EQ(sizes.min_bytes, 64u << 10);
  EXPECT_EQ(sizes.max_bytes, 1024u);
  EXPECT_EQ(PerfRequest::parse({{"collective", "alltoall"}}).collective, Collective::all_to_all);
  EXPECT_EQ(PerfRequest::parse({{"collective", "sendrecv"}, {"algo", ""}}).algorithm, std::nullopt);
}

// A bad field is refused naming it and what is wrong with it; so is a
// field no request has.
TEST(PerfRequest, BadFieldsAreNamed) {
  EXPECT_EQ(refusal(json::array()), "run.perf must be an object, got array");
  EXPECT_EQ(refusal({{"iters", 2}}), "run.perf is missing field 'collective' (string)");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"iters", "2"}}), "run.perf.iters must be an integer, got string");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"iters", 0}}), "run.perf.iters must be an integer from 1, got 0");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"min_bytes", -8}}).rfind("run.perf.min_bytes must be a size", 0),
            0u);
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"max_bytes", "12Q"}}).rfind("run.perf.max_bytes is not a size", 0),
            0u);
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"algo", "nvls"}}),
            "run.perf.algo 'nvls' is not Ring, Tree or Pair");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"dtype", "float7"}}).rfind("run.perf.dtype 'float7' is not", 0),
            0u);
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"average", 4}}).rfind("run.perf.average must be 0", 0), 0u);
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"engine", "mpi"}}),
            "run.perf.engine must be ringmaster or nccl, got 'mpi'");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"engine", "nccl"}, {"dtype", "float"}}),
            "run.perf.dtype is not taken with engine nccl (fp32 sums, every size checked once)");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"iterations", 5}}).rfind("run.perf has no field 'iterations'", 0),
            0u);
  EXPECT_EQ(refusal({{"collective", "hypercube"}}).rfind("run.perf.collective 'hypercube' is none of", 0), 0u);
}

// A bisection after the sweep: always, or below a busbw; all_reduce only;
// on the ranks' command line as perf's own flags.
TEST(PerfRequest, Bisection) {
  const PerfRequest below = PerfRequest::parse({{"collective", "all_reduce"}, {"bisect_below", 120.5}});
  EXPECT_TRUE(below.bisect);
  EXPECT_EQ(PerfRequest::parse(below.to_json()), below);
  auto argv = below.to_argv();
  const auto at = std::find(argv.begin(), argv.end(), "--bisect-below");
  ASSERT_NE(at, argv.end());
  EXPECT_EQ(*(at + 1), "120.5");
  const PerfRequest always = PerfRequest::parse({{"collective", "all_reduce"}, {"bisect", true}});
  argv = always.to_argv();
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--bisect"), argv.end());
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--bisect"), argv.end() - 1);
  EXPECT_EQ(refusal({{"collective", "all_gather"}, {"bisect", true}}),
            "run.perf.bisect is taken with all_reduce only (its groups' all_reduce busbw is what it compares)");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"bisect_below", -1}}),
            "run.perf.bisect_below must be a number from 0, got -1");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"engine", "nccl"}, {"bisect", true}})
                .rfind("run.perf.bisect is not taken with engine nccl", 0),
            0u);
}

// The ranks' command lines: ringmaster-cli perf with every flag (its own
// defaults where the request keeps them), NCCL's runner with the sweep
// and NCCL's variables for what the request forces.
TEST(PerfRequest, CommandLines) {
  PerfRequest r = PerfRequest::parse(
      {{"collective", "all_gather"}, {"min_bytes", "1K"}, {"max_bytes", "1M"}, {"step_factor", 4}, {"proto", "ll"}});
  const auto argv = r.to_argv();
  const std::vector<std::string> head = {"perf", "all_gather", "--json", "-b", "1024", "-e", "1048576", "-f", "4"};
  ASSERT_GE(argv.size(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), argv.begin()));
  auto after = [&](const std::vector<std::string>& v, const std::string& flag) {
    const auto it = std::find(v.begin(), v.end(), flag);
    return it == v.end() || it + 1 == v.end() ? std::string("(absent)") : *(it + 1);
  };
  EXPECT_EQ(after(argv, "-d"), "float");
  EXPECT_EQ(after(argv, "-o"), "sum");
  EXPECT_EQ(after(argv, "--proto"), "LL");
  EXPECT_EQ(after(argv, "--algo"), "(absent)");
  EXPECT_EQ(after(argv, "-i"), "(absent)");  // the factor steps the sizes
  r.engine = PerfRequest::Engine::nccl;
  r.channels = 2;
  const auto nccl = r.to_nccl_argv();
  EXPECT_EQ(nccl.front(), "all_gather");
  EXPECT_EQ(after(nccl, "-g"), "1");
  EXPECT_EQ(after(nccl, "-d"), "(absent)");
  const auto env = r.to_nccl_env();
  EXPECT_EQ(env.at("NCCL_PROTO"), "LL");
  EXPECT_EQ(env.at("NCCL_MIN_NCHANNELS"), "2");
  EXPECT_EQ(env.count("NCCL_ALGO"), 0u);
  EXPECT_EQ(r.nccl_refusal(), "");
  r.collective = Collective::all_to_all;
  EXPECT_NE(r.nccl_refusal().find("not 'all_to_all'"), std::string::npos) << r.nccl_refusal();
  // Ringmaster's own algorithm is not NCCL's to run.
  r.collective = Collective::all_reduce;
  r.algorithm = Algorithm::pair;
  EXPECT_NE(r.nccl_refusal().find("NCCL has no Pair algorithm"), std::string::npos) << r.nccl_refusal();
}

std::string run_refusal(const json& run) {
  return refusal_of<RunRequest>(run);
}

// A run survives its way through JSON; each field out of shape or range is
// refused naming it, the perf request's too, and a name a client made up
// is printed only when it is a plain name.
TEST(RunRequest, RoundTripsAndRefusesByName) {
  RunRequest r;
  r.run_id = "console-1";
  r.world_size = 4;
  r.ranks = {2, 3};
  r.master_addr = "10.0.0.1";
  r.master_port = 29500;
  r.perf.collective = Collective::broadcast;
  r.env = {{"NCCL_DEBUG", "INFO"}};
  r.coll_timeout_s = 30;
  const json j = r.to_json();
  EXPECT_EQ(j["type"], "run");
  EXPECT_EQ(RunRequest::parse(j), r);
  auto with = [&](const char* key, const json& value) {
    json m = j;
    m[key] = value;
    return run_refusal(m);
  };
  EXPECT_EQ(with("ranks", {1, 4}), "run.ranks holds 4, not a rank in [0, 4)");
  EXPECT_EQ(with("ranks", json::array()), "run.ranks is missing or empty: give the global ranks this agent runs");
  EXPECT_EQ(with("world_size", 0), "run.world_size must be an integer from 1, got 0");
  EXPECT_EQ(with("master_port", 70000), "run.master_port 70000 is not a TCP port");
  EXPECT_EQ(with("run_id", ""), "run.run_id is missing or empty");
  EXPECT_EQ(with("env", {{"NCCL_DEBUG", 1}}), "run.env.NCCL_DEBUG must be a string, got number");
  EXPECT_EQ(with("timeouts", {{"store_s", -1}}),
            "run.timeouts.store_s must be a positive number of seconds, at most 86400 (a day)");
  EXPECT_EQ(with("timeouts", {{"x\ny", 1}}),
            "run.timeouts.(a name of 3 bytes) is not one of store_s, bootstrap_s, coll_s");
  EXPECT_EQ(with("perf", {{"collective", "all_reduce"}, {"iters", -1}}),
            "run.perf.iters must be an integer from 1, got -1");
  json no_perf = j;
  no_perf.erase("perf");
  EXPECT_EQ(run_refusal(no_perf), "run is missing field 'perf' (object)");
}

// A watch: back as it went, `ringmaster-cli watch`'s arguments, and every
// bad field named.
TEST(WatchRequest, RoundTripsToTheWatchersArgumentsAndRefusesByName) {
  WatchRequest w;
  w.watch_id = "w-1";
  w.job_run_id = "job-7";
  w.pids = {4101, 4102};
  w.duration_s = 90;
  w.interval_s = 0.25;
  w.flight_recorder = true;
  EXPECT_EQ(WatchRequest::parse(w.to_json()), w);
  EXPECT_EQ(w.to_argv(), (std::vector<std::string>{"watch", "--json", "--for", "90", "--interval", "0.25", "--pid",
                                                   "4101", "--pid", "4102", "--run-id", "job-7", "--flight-recorder"}));
  auto refusal = [&](const char* key, const json& value) {
    json m = w.to_json();
    if (value.is_null()) {
      m.erase(key);
    } else {
      m[key] = value;
    }
    try {
      WatchRequest::parse(m);
      return std::string("accepted");
    } catch (const Error& e) {
      return e.status().message();
    }
  };
  EXPECT_EQ(refusal("watch_id", ""), "watch.watch_id is missing or empty");
  EXPECT_EQ(refusal("pids", {0}), "watch.pids holds 0, not a process id");
  EXPECT_EQ(refusal("pids", "4101"), "watch.pids must be an array of process ids, got string");
  EXPECT_EQ(refusal("master_port", 70000), "watch.master_port 70000 is not a TCP port");
  EXPECT_EQ(refusal("interval_s", 0), "watch.interval_s must be a number of seconds from 0.05 to 60, got 0");
  EXPECT_EQ(refusal("duration_s", 1e9),
            "watch.duration_s must be a number of seconds from 0 to 86400, got 1000000000.0");
  EXPECT_EQ(refusal("flight_recorder", "yes"), "watch.flight_recorder must be true, false, 0 or 1, got string");
  EXPECT_EQ(refusal("env", json::object()).rfind("watch.env is not a field of a watch (known: watch_id, pids,", 0), 0u);
  json nothing = {{"watch_id", "w-2"}};
  try {
    WatchRequest::parse(nothing);
    ADD_FAILURE() << "a watch of nothing was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(), "watch names no job: give pids, job_run_id or master_port");
  }
}

// Every node file the project carries (NCCL's and hwloc's) reads back as
// the engine wrote it: the console's typed view loses nothing of it.
TEST(Inventory, TopologyOfEveryNodeFileReadsBackAsWritten) {
  int files = 0;
  for (const char* dir : {RINGMASTER_TOPOLOGY_DIR, RINGMASTER_NODE_FILES_DIR}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".xml") continue;
      SCOPED_TRACE(entry.path().string());
      const json written = json::parse(topo::Topology::load_file(entry.path().string()).to_json());
      const TopologyInfo typed = TopologyInfo::parse(written);
      EXPECT_FALSE(typed.empty());
      EXPECT_EQ(typed.to_json(), written);
      EXPECT_EQ(TopologyInfo::parse(typed.to_json()), typed);
      ++files;
    }
  }
  EXPECT_GE(files, 15);
}

Inventory sample_inventory() {
  Inventory inv;
  inv.hostname = "node2";
  inv.agent_version = "0.9.0";
  inv.protocol = 3;
  inv.topology = TopologyInfo::parse(
      json::parse(topo::Topology::load_file(RINGMASTER_TOPOLOGY_DIR "/p4d-24xl-topo.xml").to_json()));
  inv.topology_summary = inv.topology.summary;
  inv.gpus = {{"driver", "none"}};
  inv.interfaces = {{"lo", "inet", "127.0.0.1", true, true, 0}, {"eth0", "inet6", "fd77::2", true, false, 100000}};
  inv.clock_us = 1'780'000'000'000'000;
  inv.uptime_s = 12.5;
  inv.runs = {{"run-1", {{0, 4242, false}, {1, 4243, true}}, false}};
  inv.runs_started = 7;
  inv.runs_failed = 2;
  inv.faults = {{1, Rate{"eth0", 40, {}}, {}, {}, "htb", {"run-1"}}};
  inv.fault_injection = true;
  inv.pid = 99;
  inv.transports = {"socket", "shm"};
  inv.transports_unusable = {{"ofi", "no libfabric provider"}};
  inv.stack = {{"ringmaster", "0.9.0"}, {"nccl", "2.21.5"}, {"libfabric", "1.18"}, {"nvidia_driver", "550.54.15"}};
  inv.rank_env = {{"NCCL_SOCKET_IFNAME", "eth0"}, {"FI_PROVIDER", "efa"}};
  return inv;
}

// An inventory survives its way through JSON field for field; fields a
// newer agent adds are left alone, and a fault of a kind this build does
// not know is kept, with why, rather than failing the whole inventory.
TEST(Inventory, RoundTripsAndKeepsWhatItCannotRead) {
  const Inventory inv = sample_inventory();
  EXPECT_EQ(Inventory::parse(inv.to_json()), inv);

  json newer = inv.to_json();
  newer["numa_balancing"] = true;
  newer["faults"].push_back({{"fault_id", 5}, {"fault", {{"kind", "flap"}, {"interface", "eth0"}}}});
  const Inventory read = Inventory::parse(newer);
  ASSERT_EQ(read.faults.size(), 2u);
  EXPECT_FALSE(read.faults[1].fault.has_value());
  EXPECT_NE(read.faults[1].why_unread.find("unknown fault kind"), std::string::npos) << read.faults[1].why_unread;
  EXPECT_EQ(read.to_json()["faults"][1]["fault"], newer["faults"][1]["fault"]);
}

std::string inventory_refusal(const json& reply) {
  return refusal_of<Inventory>(reply);
}

// A known field of the wrong type, or an id that is no node, is refused
// naming where it is.
TEST(Inventory, BadFieldsAreNamed) {
  const json good = sample_inventory().to_json();
  json bad = good;
  bad["interfaces"][1]["speed_mbps"] = "100G";
  EXPECT_EQ(inventory_refusal(bad), "inventory: interfaces[1]: 'speed_mbps' is a string, not an integer");
  bad = good;
  bad["topology"]["nodes"][3]["parent"] = "0";
  EXPECT_EQ(inventory_refusal(bad), "inventory: topology: nodes[3]: 'parent' is a string, not an integer");
  bad = good;
  bad["topology"]["nodes"][0]["children"].push_back(4096);
  EXPECT_EQ(inventory_refusal(bad), "inventory: topology: nodes[0]: child 4096 is not another node");
  bad = good;
  bad["topology"]["matrix"]["paths"][2][1]["hops"] = -1.5;
  EXPECT_EQ(inventory_refusal(bad), "inventory: topology: matrix: paths[2][1]: 'hops' is a number, not an integer");
  bad = good;
  bad["topology"]["matrix"]["paths"].erase(0);
  EXPECT_NE(inventory_refusal(bad).find("matrix: paths has"), std::string::npos) << inventory_refusal(bad);
  bad = good;
  bad["runs"][0].erase("run_id");
  EXPECT_EQ(inventory_refusal(bad), "inventory: runs[0]: 'run_id' is missing");
  EXPECT_EQ(inventory_refusal(json::array()), "inventory is an array, not an object");
  bad = good;
  bad["rank_env"]["NCCL_PROTO"] = 1;
  EXPECT_EQ(inventory_refusal(bad), "inventory: 'rank_env' is an integer, not an object of strings");
  bad = good;
  bad["stack"][1].erase("component");
  EXPECT_EQ(inventory_refusal(bad), "inventory: stack[1]: 'component' is missing");
}

// The node gate: what differs, between which nodes, and whether the run
// is refused for it or only told.
TEST(NodeGate, NamesTheNodesAndWhatDiffers) {
  std::vector<Inventory> nodes(3, sample_inventory());
  for (int i = 0; i < 3; ++i)
    nodes[static_cast<std::size_t>(i)].hostname = "node" + std::to_string(i);
  EXPECT_TRUE(check_nodes_alike(nodes, PerfRequest::Engine::nccl).passed());
  EXPECT_TRUE(check_nodes_alike(nodes, PerfRequest::Engine::nccl).notes.empty());

  // Two versions of a library every run loads: refused.
  nodes[2].stack[2].second = "1.22";
  NodeGate gate = check_nodes_alike(nodes, PerfRequest::Engine::ringmaster);
  ASSERT_EQ(gate.refusals.size(), 1u);
  EXPECT_EQ(gate.refusals[0],
            "the nodes differ in libfabric: 1.18 on nodes 0 (node0), 1 (node1); 1.22 on node 2 (node2)");
  // The odd node out, for certify's verdict; with no majority, none.
  ASSERT_EQ(gate.differences.size(), 1u);
  EXPECT_EQ(gate.differences[0].outliers, std::vector<int>{2});
  EXPECT_TRUE(gate.differences[0].breaks_a_run);
  EXPECT_TRUE(check_nodes_alike({nodes[0], nodes[2]}, PerfRequest::Engine::ringmaster).differences[0].outliers.empty());
  EXPECT_EQ(
      gate.refusal("launch with --allow-mixed-nodes").rfind("refused before launch: the nodes differ in libfabric", 0),
      0u);
  EXPECT_NE(gate.refusal("launch with --allow-mixed-nodes").find("or launch with --allow-mixed-nodes"),
            std::string::npos);
  nodes[2] = nodes[0];
  nodes[2].hostname = "node2";

  // NCCL counts for a run through NCCL only; its absence reads alike
  // whatever each node's reason.
  nodes[1].stack[1].second = "not found (libnccl.so.2: cannot open shared object file)";
  nodes[2].stack[1].second = "not found (no ncclGetVersion)";
  gate = check_nodes_alike(nodes, PerfRequest::Engine::ringmaster);
  EXPECT_TRUE(gate.passed());
  ASSERT_EQ(gate.notes.size(), 1u);
  EXPECT_EQ(gate.notes[0],
            "the nodes differ in nccl: 2.21.5 on node 0 (node0); not found on nodes 1 (node1), 2 (node2)");
  EXPECT_FALSE(check_nodes_alike(nodes, PerfRequest::Engine::nccl).passed());
  nodes[1].stack[1].second = nodes[2].stack[1].second = "2.21.5";

  // A driver on some nodes only is their transport's business; two
  // drivers are refused.
  nodes[1].stack[3].second = "not found (no nvidia kernel module loaded)";
  EXPECT_TRUE(check_nodes_alike(nodes, PerfRequest::Engine::ringmaster).passed());
  nodes[1].stack[3].second = "535.104.05";
  EXPECT_FALSE(check_nodes_alike(nodes, PerfRequest::Engine::ringmaster).passed());
  nodes[1].stack[3].second = nodes[0].stack[3].second;

  // Another Ringmaster is refused even where the other does not say.
  nodes[0].stack[0].second = "0.8.0";
  EXPECT_FALSE(check_nodes_alike(nodes, PerfRequest::Engine::ringmaster).passed());
  nodes[0].stack[0].second = "0.9.0";

  // A setting one node's agent gives its ranks: refused, "unset" where
  // the others have none; a node's own interface name is only told.
  nodes[1].rank_env["NCCL_PROTO"] = "Simple";
  nodes[2].rank_env["NCCL_SOCKET_IFNAME"] = "ens5";
  gate = check_nodes_alike(nodes, PerfRequest::Engine::ringmaster);
  ASSERT_EQ(gate.refusals.size(), 1u);
  EXPECT_EQ(gate.refusals[0],
            "the nodes' agents give their ranks different NCCL_PROTO: unset on nodes 0 (node0), 2 (node2); "
            "NCCL_PROTO=Simple on node 1 (node1)");
  ASSERT_EQ(gate.notes.size(), 1u);
  EXPECT_EQ(gate.notes[0],
            "the nodes' agents give their ranks different NCCL_SOCKET_IFNAME (a node's own): "
            "NCCL_SOCKET_IFNAME=eth0 on nodes 0 (node0), 1 (node1); NCCL_SOCKET_IFNAME=ens5 on node 2 (node2)");

  // An agent that says nothing of its stack (an older one) is left out of
  // that comparison; one node alone is always alike.
  nodes[1].rank_env.erase("NCCL_PROTO");
  nodes[2].rank_env["NCCL_SOCKET_IFNAME"] = "eth0";
  nodes[2].stack.clear();
  EXPECT_TRUE(check_nodes_alike(nodes, PerfRequest::Engine::nccl).passed());
  nodes.resize(1);
  nodes[0].rank_env["NCCL_PROTO"] = "LL";
  EXPECT_TRUE(check_nodes_alike(nodes, PerfRequest::Engine::nccl).passed());
}

}  // namespace
}  // namespace ringmaster::agent
