// ringmaster-cli perf as torchrun would start it (one process per rank,
// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT in the environment) and with
// --np: the nccl-tests table, #wrong == 0 and the JSON rows.
#include <gtest/gtest.h>
#include <pwd.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "net/socket.h"
#include "process.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"
#include "ringmaster/types.h"
#include "ringmaster/version.h"

namespace ringmaster {
namespace {

using testing_support::free_port;

// Every millisecond of a rank's init is in a stage: each stage's time
// runs from the end of the one before, and the tuner's calibration is a
// stage of its own (before, it was drawn as TRANSPORT_CONNECT, and the
// work between stages belonged to none).
TEST(PerfCli, StagesCoverTheWholeInit) {
  const std::string port = std::to_string(free_port());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(testing_support::spawn(
        {RINGMASTER_CLI, "perf", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "--json"},
        {{"RANK", std::to_string(r)}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}}));
  }
  for (auto& r : ranks)
    r.finish();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[r].exit_code(), 0) << ranks[r].output;
    std::vector<std::string> names;
    double end_us = 0, first_us = 0, sum_ms = 0;
    std::istringstream lines(ranks[r].output);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] != '{') continue;
      const auto e = nlohmann::json::parse(line, nullptr, false);
      if (e.is_discarded() || e.value("type", "") != "stage") continue;
      const auto begin = static_cast<double>(e["begin_us"].get<long long>());
      const double duration = e["duration_ms"].get<double>();
      if (names.empty()) {
        first_us = begin;
      } else {
        EXPECT_NEAR(begin, end_us, 1000.0) << "rank " << r << ": a gap before " << e["stage"];
      }
      names.push_back(e["stage"]);
      end_us = begin + duration * 1000.0;
      sum_ms += duration;
    }
    ASSERT_FALSE(names.empty()) << ranks[r].output;
    EXPECT_EQ(names.back(), "READY");
    EXPECT_EQ(names[names.size() - 2], "CALIBRATE");
    EXPECT_NE(std::find(names.begin(), names.end(), "TRANSPORT_CONNECT"), names.end());
    EXPECT_NEAR(sum_ms, (end_us - first_us) / 1000.0, 1.0) << "rank " << r;
  }
}

TEST(PerfCli, TorchrunStyleProcesses) {
  const std::string port = std::to_string(free_port());
  const std::string json = ::testing::TempDir() + "perf-rows.json";
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> argv = {RINGMASTER_CLI, "perf", "all_gather", "-b", "1K", "-e", "1M",
                                     "-f",           "32",   "-n",         "3",  "-w", "1"};
    if (r == 0) argv.insert(argv.end(), {"--json-file", json});
    ranks.push_back(testing_support::spawn(
        argv, {{"RANK", std::to_string(r)}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}}));
  }
  for (auto& r : ranks)
    r.finish();
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(ranks[r].exit_code(), 0) << "rank " << r;
  const std::string& table = ranks[0].output;
  EXPECT_NE(table.find("# rank 0 init stages"), std::string::npos) << table;
  EXPECT_NE(table.find("TRANSPORT_CONNECT"), std::string::npos) << table;
  EXPECT_NE(table.find("#       size        count     type"), std::string::npos) << table;
  EXPECT_NE(table.find("# Out of bounds values : 0 OK"), std::string::npos) << table;
  EXPECT_NE(table.find("# Avg bus bandwidth"), std::string::npos) << table;
  EXPECT_TRUE(ranks[1].output.empty()) << "only rank 0 prints: " << ranks[1].output;

  std::ifstream in(json);
  const auto rows = nlohmann::json::parse(in);
  ASSERT_EQ(rows.size(), 3u);  // 1K, 32K, 1M
  for (const auto& row : rows) {
    EXPECT_EQ(row["collective"], "all_gather");
    EXPECT_EQ(row["out_of_place"]["wrong"], 0);
    EXPECT_EQ(row["in_place"]["wrong"], 0);
    EXPECT_GT(row["out_of_place"]["busbw"].get<double>(), 0.0);
  }
}

// A real mpirun starts two ranks of a program that is not an MPI program:
// each reads its rank and the size from Open MPI's OMPI_COMM_WORLD_*
// variables instead of running as rank 0 of 1.
TEST(Launchers, MpirunStartsTwoRanks) {
  const std::string mpirun = "/usr/bin/mpirun";
  if (::access(mpirun.c_str(), X_OK) != 0) GTEST_SKIP() << "no mpirun (Debian package openmpi-bin)";
  auto run = testing_support::spawn({mpirun,
                                     "--allow-run-as-root",
                                     "--oversubscribe",
                                     "-np",
                                     "2",
                                     "-x",
                                     "MASTER_PORT=" + std::to_string(free_port()),
                                     RINGMASTER_CLI,
                                     "perf",
                                     "all_reduce",
                                     "-c",
                                     "1",
                                     "-b",
                                     "8",
                                     "-e",
                                     "64K",
                                     "-f",
                                     "32",
                                     "-n",
                                     "2",
                                     "-w",
                                     "1",
                                     "--no-stages"},
                                    {{"OMPI_MCA_plm_rsh_agent", ""}, {"OMPI_MCA_btl", "self"}}, true);
  run.finish();
  ASSERT_EQ(run.exit_code(), 0) << run.output;
  EXPECT_NE(run.output.find("# Out of bounds values : 0 OK"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("nranks 2"), std::string::npos) << run.output;
}

// srun's variables, as srun sets them for two tasks on one node.
TEST(Launchers, SlurmVariablesStartTwoRanks) {
  const std::string port = std::to_string(free_port());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(testing_support::spawn(
        {RINGMASTER_CLI, "perf", "all_reduce", "-b", "8", "-e", "4K", "-n", "2", "-w", "1", "--no-stages"},
        {{"SLURM_PROCID", std::to_string(r)},
         {"SLURM_LOCALID", std::to_string(r)},
         {"SLURM_NODEID", "0"},
         {"SLURM_NTASKS", "2"},
         {"SLURM_STEP_NUM_TASKS", "2"},
         {"SLURM_STEP_ID", "0"},
         {"SLURM_STEP_TASKS_PER_NODE", "2"},
         {"SLURM_STEP_NODELIST", "localhost"},
         {"MASTER_PORT", port}},
        true));
  }
  for (auto& r : ranks)
    r.finish();
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ranks[static_cast<std::size_t>(r)].exit_code(), 0) << ranks[static_cast<std::size_t>(r)].output;
  EXPECT_NE(ranks[0].output.find("# Out of bounds values : 0 OK"), std::string::npos) << ranks[0].output;
  // A batch script's own process is not a rank: refused, not run as 1 of 1.
  auto batch = testing_support::spawn({RINGMASTER_CLI, "probe"}, {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}, true);
  batch.finish();
  EXPECT_NE(batch.exit_code(), 0) << batch.output;
  EXPECT_NE(batch.output.find("srun"), std::string::npos) << batch.output;
}

// torchrun's agent serves the store on MASTER_PORT before it starts the
// workers (TORCHELASTIC_USE_AGENT_STORE=True) and restarts them against the
// same store: rank 0 must connect rather than host, and the second attempt
// must not meet the first attempt's keys.
TEST(Launchers, TorchrunsAgentStoreAcrossARestart) {
  const std::string port = std::to_string(free_port());
  auto store = testing_support::spawn({RINGMASTER_CLI, "store", "serve", "--port", port}, {}, true);
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<testing_support::ChildProcess> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.push_back(testing_support::spawn(
          {RINGMASTER_CLI, "perf", "all_reduce", "-b", "8", "-e", "4K", "-n", "2", "-w", "1", "--no-stages"},
          {{"RANK", std::to_string(r)},
           {"WORLD_SIZE", "2"},
           {"LOCAL_RANK", std::to_string(r)},
           {"LOCAL_WORLD_SIZE", "2"},
           {"GROUP_RANK", "0"},
           {"MASTER_ADDR", "127.0.0.1"},
           {"MASTER_PORT", port},
           {"RINGMASTER_STORE_TIMEOUT", "20"},
           {"TORCHELASTIC_USE_AGENT_STORE", "True"},
           {"TORCHELASTIC_RUN_ID", "job-7"},
           {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)}},
          true));
    }
    for (auto& r : ranks)
      r.finish();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(ranks[static_cast<std::size_t>(r)].exit_code(), 0)
          << "attempt " << attempt << " rank " << r << ": " << ranks[static_cast<std::size_t>(r)].output;
    }
  }
  ::kill(store.pid, SIGTERM);
  store.finish();
}

// torch's own TCPStore client (PyPI's torch) against Ringmaster's store,
// every operation the client exposes, each checked for torch's answer:
// the store must serve them all and log no unknown command.
TEST(Launchers, TorchsTcpStoreClientUsesEveryOperation) {
  const std::string python = RINGMASTER_PYTHON_ENV "/bin/python";
  if (::access(python.c_str(), X_OK) != 0 || ::access(RINGMASTER_PYTHON_ENV "/bin/torchrun", X_OK) != 0)
    GTEST_SKIP() << "no torch in " RINGMASTER_PYTHON_ENV " (scripts/setup-deps installs torch there)";
  const std::string port = std::to_string(free_port());
  auto store = testing_support::spawn({RINGMASTER_CLI, "store", "serve", "--port", port}, {}, true);
  const std::string script = R"py(
import sys
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, False, timeout=timedelta(seconds=10))
def ok(name, got, want):
    print(("OK " if got == want else "WRONG ") + name + ": " + repr(got), flush=True)
s.set("k", "v"); ok("set/get", s.get("k"), b"v")
ok("add", s.add("c", 5), 5); ok("add again", s.add("c", -2), 3); ok("get counter", s.get("c"), b"3")
ok("compare_set", s.compare_set("k", "v", "w"), b"w")
ok("compare_set missing", s.compare_set("n", "", "d"), b"d")
ok("check", s.check(["k", "c"]), True); ok("check missing", s.check(["k", "zz"]), False)
s.wait(["k", "c"]); ok("wait", True, True)
s.append("a", "xy"); s.append("a", "z"); ok("append", s.get("a"), b"xyz")
s.multi_set(["p", "q"], ["1", "2"]); ok("multi_set/multi_get", s.multi_get(["q", "p"]), [b"2", b"1"])
ok("num_keys (the client's own init key too)", s.num_keys(), 7)
ok("list_keys", sorted(s.list_keys()), ["a", "c", "k", "n", "p", "q"])
ok("delete_key", s.delete_key("n"), True); ok("delete_key again", s.delete_key("n"), False)
s.queue_push("jobs", "first"); s.queue_push("jobs", b"second")
ok("queue_len", s.queue_len("jobs"), 2)
ok("queue_pop", s.queue_pop("jobs"), b"first")
ok("queue_pop nonblocking", s.queue_pop("jobs", block=False), b"second")
try:
    s.queue_pop("jobs", block=False); ok("queue_pop empty", "no error", "QueueEmptyError")
except Exception as e:
    ok("queue_pop empty", type(e).__name__, "QueueEmptyError")
s.set_timeout(timedelta(milliseconds=500))
try:
    s.wait(["never"]); ok("wait timeout", "returned", "DistStoreError")
except Exception as e:
    ok("wait timeout", type(e).__name__, "DistStoreError")
try:
    s.queue_pop("jobs"); ok("queue_pop timeout", "returned", "DistStoreError")
except Exception as e:
    ok("queue_pop timeout", type(e).__name__, "DistStoreError")
c = s.clone(); ok("clone", c.get("k"), b"w")
ok("still served after timeouts", s.get("a"), b"xyz")
)py";
  auto client = testing_support::spawn({python, "-c", script, port}, {}, true);
  client.finish();
  ::kill(store.pid, SIGTERM);
  store.finish();
  EXPECT_EQ(client.exit_code(), 0) << client.output << store.output;
  EXPECT_EQ(client.output.find("WRONG"), std::string::npos) << client.output;
  for (const char* op : {"set/get", "add", "compare_set", "check", "wait", "append", "multi_set/multi_get",
                         "num_keys (the client's own init key too)", "list_keys", "delete_key", "queue_len",
                         "queue_pop", "queue_pop nonblocking", "queue_pop empty", "wait timeout", "queue_pop timeout",
                         "clone", "still served after timeouts"})
    EXPECT_NE(client.output.find(std::string("OK ") + op + ":"), std::string::npos) << op << "\n" << client.output;
  EXPECT_EQ(store.output.find("unknown command"), std::string::npos) << store.output;
}

// A torch job this tool did not start, watched from outside (`watch`):
// ranks 1-3 of a job whose MASTER_PORT is dropped in their network
// namespace are each named at STORE_CONNECT, unanswered, with the
// bootstrap's hint, within 5 s of starting; then, where the store runs,
// rank 0 is seen hosting it and rank 1 connected.
TEST(Watch, ATorchJobsRendezvousSeenFromOutside) {
  const std::string python = RINGMASTER_PYTHON_ENV "/bin/python";
  if (::access(python.c_str(), X_OK) != 0 || ::access(RINGMASTER_PYTHON_ENV "/bin/torchrun", X_OK) != 0)
    GTEST_SKIP() << "no torch in " RINGMASTER_PYTHON_ENV " (scripts/setup-deps installs torch there)";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace and an nftables rule";
  const std::string ns = "rmwatch" + std::to_string(::getpid());
  auto run = [](std::vector<std::string> argv) {
    auto p = testing_support::spawn(argv, {}, true);
    p.finish();
    return p;
  };
  if (run({"/usr/sbin/ip", "netns", "add", ns}).exit_code() != 0) GTEST_SKIP() << "cannot make a network namespace";
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> in_ns = {"/usr/sbin/ip", "netns", "exec", ns};
  auto ns_cmd = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), in_ns.begin(), in_ns.end());
    return run(argv);
  };
  ns_cmd({"/usr/sbin/ip", "link", "set", "lo", "up"});
  ASSERT_EQ(ns_cmd({"/usr/sbin/nft", "add", "table", "inet", "rmwatch"}).exit_code(), 0);
  ns_cmd({"/usr/sbin/nft", "add", "chain", "inet", "rmwatch", "in", "{ type filter hook input priority 0; }"});
  ns_cmd({"/usr/sbin/nft", "add", "rule", "inet", "rmwatch", "in", "tcp", "dport", port, "drop"});
  // A torch rank: its store, then it stays a while.
  const std::string rank_script =
      "import os, sys, time\n"
      "from datetime import timedelta\n"
      "import torch.distributed as d\n"
      "s = d.TCPStore(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']), int(os.environ['WORLD_SIZE']),\n"
      "               os.environ['RANK'] == '0', timeout=timedelta(seconds=20), wait_for_workers=False)\n"
      "time.sleep(60)\n";
  const std::string run_id = "watched-" + std::to_string(::getpid());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 1; r <= 3; ++r) {
    std::vector<std::string> argv = in_ns;
    argv.insert(argv.end(), {python, "-c", rank_script});
    ranks.push_back(testing_support::spawn(argv,
                                           {{"RANK", std::to_string(r)},
                                            {"WORLD_SIZE", "4"},
                                            {"MASTER_ADDR", "127.0.0.1"},
                                            {"MASTER_PORT", port},
                                            {"TORCHELASTIC_RUN_ID", run_id}},
                                           true));
  }
  const auto watch = run({RINGMASTER_CLI, "watch", "--run-id", run_id, "--for", "20", "--interval", "0.2", "--json"});
  for (auto& r : ranks) {
    ::kill(r.pid, SIGKILL);
    r.finish();
  }
  run({"/usr/sbin/ip", "netns", "del", ns});
  EXPECT_EQ(watch.exit_code(), 0) << watch.output;
  // Each rank: its first SYN seen, then within 5 s the line that names
  // it unanswered with the hint (the kernel's first retransmission, 1 s).
  std::map<int, double> first_syn, named;
  std::istringstream lines(watch.output);
  for (std::string line; std::getline(lines, line);) {
    const auto e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.contains("rank") || e.value("outcome", "") != "unanswered") continue;
    const int r = e["rank"].get<int>();
    EXPECT_EQ(e["stage"], "STORE_CONNECT") << line;
    EXPECT_EQ(e["remote"], "127.0.0.1:" + port) << line;
    first_syn.emplace(r, e["seen_at"].get<double>());
    if (e["syn_retransmits"].get<int>() > 0 &&
        e["hint"].get<std::string>().find("got no answer at all") != std::string::npos)
      named.emplace(r, e["seen_at"].get<double>());
  }
  for (int r = 1; r <= 3; ++r) {
    ASSERT_TRUE(named.contains(r)) << "rank " << r << "\n" << watch.output;
    EXPECT_LT(named[r] - first_syn[r], 5.0) << "rank " << r << "\n" << watch.output;
  }
  // Where nothing drops: rank 0 hosts the store, rank 1 is connected.
  const std::string open_port = std::to_string(free_port());
  std::vector<testing_support::ChildProcess> job;
  for (int r = 0; r < 2; ++r) {
    job.push_back(testing_support::spawn(
        {python, "-c", rank_script},
        {{"RANK", std::to_string(r)}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", open_port}},
        true));
    if (r == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::string seen;
  for (int look = 0; look < 120; ++look) {  // torch's import takes seconds, more on a busy machine
    seen = run({RINGMASTER_CLI, "watch", "--master-port", open_port}).output;
    if (seen.find("rank 1 ") != std::string::npos &&
        seen.find("connected: connected to the store at 127.0.0.1:" + open_port) != std::string::npos &&
        seen.find("hosting") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::string outputs;
  for (auto& r : job) {
    ::kill(r.pid, SIGKILL);
    r.finish();
    outputs += "--- a rank's output:\n" + r.output;
  }
  EXPECT_NE(seen.find("STORE_BARRIER hosting: hosts the store on"), std::string::npos) << seen << outputs;
  EXPECT_NE(seen.find("rank 1 "), std::string::npos) << seen;
  EXPECT_NE(seen.find("STORE_HANDSHAKE connected: connected to the store at 127.0.0.1:" + open_port), std::string::npos)
      << seen << outputs;
  // Named nowhere: a usage error; nothing found: exit 1.
  EXPECT_EQ(run({RINGMASTER_CLI, "watch"}).exit_code(), 2);
  EXPECT_EQ(run({RINGMASTER_CLI, "watch", "--run-id", "no-such-job-" + run_id}).exit_code(), 1);
}

// A rule that rejects the store's port (a TCP reset), told apart from
// nothing listening: rank 0 of a torch job hosts its store and ranks 1-2,
// running as nobody, have every connect to MASTER_PORT reset by an
// nftables rule. The watch sees rank 0 listening and the ranks' failed
// connects in their namespace's counters, and names them rejected, with
// rank 0 named in the hint, within 5 s of their first line; without a
// host seen, the same resets read as refused.
TEST(Watch, ARuleThatRejectsTheStorePortToldFromNothingListening) {
  const std::string python = RINGMASTER_PYTHON_ENV "/bin/python";
  if (::access(python.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no torch in " RINGMASTER_PYTHON_ENV " (scripts/setup-deps installs torch there)";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace, an nftables rule and a second user";
  const passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user nobody here";
  const std::string ns = "rmreject" + std::to_string(::getpid());
  auto run = [](std::vector<std::string> argv) {
    auto p = testing_support::spawn(argv, {}, true);
    p.finish();
    return p;
  };
  if (run({"/usr/sbin/ip", "netns", "add", ns}).exit_code() != 0) GTEST_SKIP() << "cannot make a network namespace";
  const std::vector<std::string> in_ns = {"/usr/sbin/ip", "netns", "exec", ns};
  auto ns_cmd = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), in_ns.begin(), in_ns.end());
    return run(argv);
  };
  ns_cmd({"/usr/sbin/ip", "link", "set", "lo", "up"});
  const std::string port = std::to_string(free_port());
  ASSERT_EQ(ns_cmd({"/usr/sbin/nft", "add", "table", "inet", "rmreject"}).exit_code(), 0);
  ns_cmd({"/usr/sbin/nft", "add", "chain", "inet", "rmreject", "out", "{ type filter hook output priority 0; }"});
  const auto rule = ns_cmd({"/usr/sbin/nft", "add", "rule", "inet", "rmreject", "out", "meta", "skuid",
                            std::to_string(nobody->pw_uid), "tcp", "dport", port, "reject", "with", "tcp", "reset"});
  ASSERT_EQ(rule.exit_code(), 0) << rule.output;
  // Each rank writes when it starts its store (rank 0: listens) or its
  // connects (the others): the symptom begins at the later of its own and
  // rank 0's.
  const std::string started = ::testing::TempDir() + "rejected-" + std::to_string(::getpid()) + "/";
  std::filesystem::create_directories(started);
  std::filesystem::permissions(started, std::filesystem::perms::all);
  const std::string rank_script =
      "import os, time\n"
      "from datetime import timedelta\n"
      "import torch.distributed as d\n"
      "open(os.environ['STARTED'] + os.environ['RANK'], 'w').write(repr(time.time()))\n"
      "s = d.TCPStore('127.0.0.1', int(os.environ['MASTER_PORT']), 3, os.environ['RANK'] == '0',\n"
      "               timeout=timedelta(seconds=30), wait_for_workers=False)\n"
      "time.sleep(60)\n";
  const std::string run_id = "rejected-" + std::to_string(::getpid());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> argv = in_ns;
    if (r > 0) argv.insert(argv.end(), {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"});
    argv.insert(argv.end(), {python, "-c", rank_script});
    ranks.push_back(testing_support::spawn(argv,
                                           {{"RANK", std::to_string(r)},
                                            {"MASTER_PORT", port},
                                            {"TORCHELASTIC_RUN_ID", run_id},
                                            {"HOME", "/tmp"},
                                            {"STARTED", started}},
                                           true));
  }
  // Beside it, the same resets with rank 0 not among the watched: refused
  // (at the same time: torch's retries space out as they go on).
  auto refused = testing_support::spawn(
      {RINGMASTER_CLI, "watch", "--pid", std::to_string(ranks[1].pid), "--for", "16", "--interval", "0.25"}, {}, true);
  const auto watch = run({RINGMASTER_CLI, "watch", "--run-id", run_id, "--for", "16", "--interval", "0.25", "--json"});
  refused.finish();
  std::string outputs;
  for (auto& r : ranks) {
    ::kill(r.pid, SIGKILL);
    r.finish();
    outputs += "--- a rank's output:\n" + r.output;
  }
  run({"/usr/sbin/ip", "netns", "del", ns});
  EXPECT_EQ(watch.exit_code(), 0) << watch.output;
  std::map<int, double> start, named;
  for (int r = 0; r < 3; ++r)
    std::ifstream(started + std::to_string(r)) >> start[r];
  std::filesystem::remove_all(started);
  bool hosting = false;
  std::istringstream lines(watch.output);
  for (std::string line; std::getline(lines, line);) {
    const auto e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_discarded() || e.value("type", "") != "job_rank" || !e.contains("rank")) continue;
    const int r = e["rank"].get<int>();
    hosting |= r == 0 && e["outcome"] == "hosting";
    if (e["outcome"] == "rejected" &&
        e["hint"].get<std::string>().find("Rank 0 (pid " + std::to_string(ranks[0].pid) + ") listens on MASTER_PORT " +
                                          port) != std::string::npos)
      named.emplace(r, e["seen_at"].get<double>());
  }
  EXPECT_TRUE(hosting) << watch.output << outputs;
  for (int r = 1; r <= 2; ++r) {
    ASSERT_TRUE(named.contains(r)) << "rank " << r << "\n" << watch.output << outputs;
    ASSERT_GT(start[r] * start[0], 0) << "rank " << r << " or 0 wrote no start\n" << outputs;
    const double after = named[r] - std::max(start[r], start[0]);
    EXPECT_LT(after, 5.0) << "rank " << r << "\n" << watch.output;
    std::printf("rank %d named rejected %.2f s after its connects met rank 0's listener\n", r, after);
  }
  EXPECT_NE(refused.output.find("STORE_CONNECT refused:"), std::string::npos) << refused.output;
}

// A hang in a real torchrun job (4 Gloo ranks, the Flight Recorder on
// and torch's debug server started by the job): rank 2 stops before one
// all_reduce, and `watch --flight-recorder` names rank 2 and that call
// from the ranks' own records within 5 s of the stall.
TEST(Watch, AHangingTorchrunJobsLaggardNamedByItsFlightRecorder) {
  const std::string torchrun = RINGMASTER_PYTHON_ENV "/bin/torchrun";
  if (::access(torchrun.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no " << torchrun << " (scripts/setup-deps installs torch there)";
  const std::string dir = ::testing::TempDir() + "frjob-" + std::to_string(::getpid()) + "/";
  std::filesystem::create_directories(dir);
  {
    std::ofstream job(dir + "job.py");
    job << "import os, time, torch, torch.distributed as dist\n"
           "from torch.distributed.debug import start_debug_server\n"
           "dist.init_process_group('gloo')\n"
           "r = dist.get_rank()\n"
           "try:\n"
           "    start_debug_server(port=int(os.environ['DEBUG_PORT']))\n"
           "except Exception as e:  # rank 0's web front end needs packages the workers' servers do not\n"
           "    print('front end:', e, flush=True)\n"
           "t = torch.ones(4)\n"
           "for i in range(6):\n"
           "    if r == 2 and i == 4:\n"
           "        open(os.environ['STALL_FILE'], 'w').write(repr(time.time()))\n"
           "        time.sleep(40)\n"
           "    dist.all_reduce(t)\n";
  }
  const std::string port = std::to_string(free_port());
  auto job = testing_support::spawn(
      {torchrun, "--nnodes", "1", "--nproc-per-node", "4", "--master-port", port, dir + "job.py"},
      {{"TORCH_FR_BUFFER_SIZE", "2000"}, {"DEBUG_PORT", std::to_string(free_port())}, {"STALL_FILE", dir + "stall"}},
      true);
  double named_at = 0;
  std::string seen;
  const std::string expected =
      "process group 0 (default_pg): rank 2 has not called gloo:all_reduce #5 (ranks 0, 1, 3 have); its last call "
      "was gloo:all_reduce #4, completed";
  for (int look = 0; look < 120 && named_at == 0; ++look) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto watch = testing_support::spawn({RINGMASTER_CLI, "watch", "--master-port", port, "--flight-recorder", "--json"},
                                        {}, true);
    watch.finish();
    seen = watch.output;
    std::istringstream lines(seen);
    for (std::string line; std::getline(lines, line);) {
      const auto e = nlohmann::json::parse(line, nullptr, false);
      if (e.is_discarded() || e.value("type", "") != "job_wavefront") continue;
      for (const auto& sentence : e["wavefront"])
        if (sentence == expected) named_at = e["seen_at"].get<double>();
    }
  }
  double stalled_at = 0;
  std::ifstream(dir + "stall") >> stalled_at;
  ::kill(job.pid, SIGTERM);
  job.finish();
  ASSERT_GT(named_at, 0) << seen << job.output;
  ASSERT_GT(stalled_at, 0) << job.output;
  EXPECT_LT(named_at - stalled_at, 5.0) << seen;
  std::printf("rank 2 named %.2f s after its stall\n", named_at - stalled_at);
  std::filesystem::remove_all(dir);
}

// A job's NCCL_DEBUG_FILE read through the watch (NCCL's %h and %p
// filled in for the rank's process): the summary names the version,
// channels, rings, transports, the last pick and the last WARN line. The
// lines are NCCL's INFO and WARN forms (src/init.cc, src/graph/rings.cc,
// src/transport/net.cc, src/enqueue.cc, src/misc/socket.cc).
TEST(Watch, AJobsNcclDebugFileSummarised) {
  const std::string dir = ::testing::TempDir() + "ncclwatch-" + std::to_string(::getpid()) + "/";
  std::filesystem::create_directories(dir);
  const std::string port = std::to_string(free_port());
  auto rank = testing_support::spawn(
      {"/bin/sleep", "30"},
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", port}, {"NCCL_DEBUG_FILE", dir + "nccl.%h.%p.log"}}, true);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  {
    std::ofstream log(dir + "nccl." + host + "." + std::to_string(rank.pid) + ".log");
    log << "node-2:4022:4022 [0] NCCL INFO NCCL version 2.27.3+cuda12.9\n"
           "node-2:4022:4058 [0] NCCL INFO Channel 00/02 : 0 1\n"
           "node-2:4022:4058 [0] NCCL INFO Channel 01/02 : 0 1\n"
           "node-2:4022:4058 [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 "
           "p2p channels per peer\n"
           "node-2:4022:4066 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0\n"
           "node-2:4022:4022 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo Ring proto Simple channel{Lo..Hi}={0..1}\n"
           "node-2:4022:4070 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.5<43421> failed : "
           "Software caused connection abort\n";
  }
  auto watch = testing_support::spawn({RINGMASTER_CLI, "watch", "--master-port", port, "--nccl-log"}, {}, true);
  watch.finish();
  ::kill(rank.pid, SIGKILL);
  rank.finish();
  EXPECT_EQ(watch.exit_code(), 0) << watch.output;
  EXPECT_NE(watch.output.find("rank 1 (pid " + std::to_string(rank.pid) +
                              ") NCCL 2.27.3+cuda12.9, 2 coll channels, 2 rings, transports NET/Socket/0, last pick "
                              "AllReduce 1048576 B -> Ring/Simple; 1 warning, the last: socketStartConnect: Connect to "
                              "10.0.0.5<43421> failed : Software caused connection abort"),
            std::string::npos)
      << watch.output;
  std::filesystem::remove_all(dir);
}

// `watch --nccl-ras`: the rank's NCCL_RAS_ADDR asked in RAS's protocol
// (a peer answering as NCCL 2.29's server does, with the JSON report of
// tests/data/nccl_ras), its findings on one line; a port where nothing
// listens said as such. NCCL itself answers in tests/device/check.sh.
TEST(Watch, NcclRasPortOfTheRanksAsked) {
  const std::string port = std::to_string(free_port());
  const std::string peer_script =
      "import socket, sys\n"
      "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(1); print('listening', flush=True)\n"
      "c, _ = s.accept(); f = c.makefile('rb')\n"
      "for line in f:\n"
      "    cmd = line.decode().strip()\n"
      "    if cmd.startswith('CLIENT PROTOCOL'): c.sendall(b'SERVER PROTOCOL 2\\n')\n"
      "    elif cmd.startswith('TIMEOUT') or cmd == 'SET FORMAT json': c.sendall(b'OK\\n')\n"
      "    elif cmd.endswith('STATUS'): c.sendall(open(sys.argv[2], 'rb').read()); break\n"
      "    else: c.sendall(('ERROR: Unknown command ' + cmd + '\\n').encode())\n"
      "c.close()\n";
  auto peer = testing_support::spawn(
      {"/usr/bin/python3", "-u", "-c", peer_script, port, RINGMASTER_TEST_DATA_DIR "/nccl_ras/dead_and_behind.json"},
      {});
  char c = 0;
  std::string first;
  while (::read(peer.out_fd, &c, 1) == 1 && c != '\n')
    first += c;
  ASSERT_EQ(first, "listening");
  const std::string rank_port = std::to_string(free_port());
  auto rank = testing_support::spawn(
      {"/bin/sleep", "30"},
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", rank_port}, {"NCCL_RAS_ADDR", "127.0.0.1:" + port}});
  auto watch = testing_support::spawn({RINGMASTER_CLI, "watch", "--master-port", rank_port, "--nccl-ras"}, {}, true);
  watch.finish();
  ::kill(peer.pid, SIGKILL);
  peer.finish();
  EXPECT_EQ(watch.exit_code(), 0) << watch.output;
  EXPECT_NE(watch.output.find("NCCL RAS at 127.0.0.1:" + port +
                              ": communicator 0x6b21f0c3d9e84a55: rank 1 (pid 3302 on 10.1.0.11, GPU 1) is missing"),
            std::string::npos)
      << watch.output;
  EXPECT_NE(watch.output.find("ranks 2, 5 have launched 4811 AllReduce, the furthest 4812"), std::string::npos)
      << watch.output;
  // Nothing there now: the rank's port is said unreachable, with why.
  auto none =
      testing_support::spawn({RINGMASTER_CLI, "watch", "--master-port", rank_port, "--nccl-ras", "--json"}, {}, true);
  none.finish();
  ::kill(rank.pid, SIGKILL);
  rank.finish();
  EXPECT_NE(none.output.find("\"type\":\"job_ras\""), std::string::npos) << none.output;
  EXPECT_NE(none.output.find("cannot connect to NCCL's RAS port 127.0.0.1:" + port), std::string::npos) << none.output;
}

// The real torchrun (PyPI's torch): its agent holds the store, two workers
// run an all_reduce, rank 1 fails after the first attempt and torchrun
// restarts both against the same store. Both attempts must pass.
TEST(Launchers, RealTorchrunRestartsWorkers) {
  const std::string torchrun = RINGMASTER_PYTHON_ENV "/bin/torchrun";
  if (::access(torchrun.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no " << torchrun << " (scripts/setup-deps installs torch there)";
  const std::string dir = ::testing::TempDir() + "torchrun-" + std::to_string(::getpid()) + "/";
  std::filesystem::create_directories(dir);
  {
    std::ofstream worker(dir + "worker.sh");
    worker << "\"$RINGMASTER_CLI\" perf all_reduce -b 8 -e 4K -n 2 -w 1 --no-stages "
              ">\"$OUT_DIR/attempt$TORCHELASTIC_RESTART_COUNT-rank$RANK.log\" 2>&1 || exit 1\n"
              "echo \"attempt $TORCHELASTIC_RESTART_COUNT rank $RANK passed\"\n"
              "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then sleep 1; exit 3; fi\n";
  }
  auto run = testing_support::spawn(
      {torchrun, "--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1", "--master-port",
       std::to_string(free_port()), "--no-python", "/bin/sh", dir + "worker.sh"},
      {{"RINGMASTER_CLI", RINGMASTER_CLI}, {"OUT_DIR", dir}}, true);
  run.finish();
  std::string logs;
  for (const char* name : {"attempt0-rank0", "attempt0-rank1", "attempt1-rank0", "attempt1-rank1"}) {
    std::ifstream in(dir + name + ".log");
    logs += std::string("--- ") + name + "\n" + std::string(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(run.exit_code(), 0) << run.output << logs;
  // The first attempt ran (torchrun may stop rank 0 before its echo once
  // rank 1 has failed); the second passed on both ranks.
  EXPECT_NE(logs.find("--- attempt0-rank0\n# nranks 2"), std::string::npos) << logs;
  EXPECT_NE(logs.find("Out of bounds values : 0 OK"), std::string::npos) << logs;
  for (const char* line : {"attempt 1 rank 0 passed", "attempt 1 rank 1 passed"})
    EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output << logs;
  std::filesystem::remove_all(dir);
}

// Job files written for NCCL: NCCL_DEBUG=VERSION prints the banner alone,
// RINGMASTER_LOG_TAG=NCCL tags lines as NCCL's are, NCCL_ALGO=^NVLS and
// NCCL_NET="AWS Libfabric" are accepted, and NCCL_TOPO_DUMP_FILE is written.
TEST(NcclVariables, JobFilesWrittenForNcclRun) {
  const std::vector<std::string> perf = {RINGMASTER_CLI, "perf", "all_reduce", "--np", "2",  "-b", "8",
                                         "-e",           "8",    "-n",         "1",    "-w", "0",  "--no-stages"};
  auto version = testing_support::spawn(perf, {{"NCCL_DEBUG", "VERSION"}, {"NCCL_ALGO", "^NVLS"}}, true);
  version.finish();
  ASSERT_EQ(version.exit_code(), 0) << version.output;
  EXPECT_NE(version.output.find("Ringmaster version " RINGMASTER_VERSION_STRING "\n"), std::string::npos)
      << version.output;
  EXPECT_EQ(version.output.find(" INFO "), std::string::npos) << version.output;

  const std::string dump = ::testing::TempDir() + "nccl-topo-dump-" + std::to_string(::getpid()) + ".xml";
  auto tagged = testing_support::spawn(perf,
                                       {{"NCCL_DEBUG", "INFO"},
                                        {"RINGMASTER_LOG_TAG", "NCCL"},
                                        {"NCCL_ALGO", "Ring,NVLSTree"},
                                        {"NCCL_NET", "AWS Libfabric"},
                                        {"NCCL_TOPO_DUMP_FILE", dump}},
                                       true);
  tagged.finish();
  ASSERT_EQ(tagged.exit_code(), 0) << tagged.output;
  EXPECT_NE(tagged.output.find(" NCCL INFO "), std::string::npos) << tagged.output;
  EXPECT_EQ(tagged.output.find(" RINGMASTER INFO "), std::string::npos) << tagged.output;
  EXPECT_NE(tagged.output.find("NVLSTree do(es) not apply to a communicator here"), std::string::npos) << tagged.output;
  EXPECT_NE(tagged.output.find("Ringmaster version " RINGMASTER_VERSION_STRING), std::string::npos) << tagged.output;
  std::ifstream in(dump);
  const std::string xml((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(xml.find("<system"), std::string::npos) << "NCCL_TOPO_DUMP_FILE not written";
  std::remove(dump.c_str());
}

// `env` lists every variable a Ringmaster binary reads (tunables, the
// launchers', logging's, libfabric's) with its source, what this process
// would be, and the NCCL_* variables set here that nothing reads.
TEST(NcclVariables, EnvListsEverythingReadAndWhatIsIgnored) {
  auto child = testing_support::spawn({RINGMASTER_CLI, "env", "--json"}, {{"NCCL_IB_HCA", "mlx5_0"},
                                                                          {"NCCL_NO_SUCH_THING", "1"},
                                                                          {"NCCL_DEBUG", "INFO"},
                                                                          {"SLURM_PROCID", "1"},
                                                                          {"SLURM_NTASKS", "2"},
                                                                          {"SLURM_STEP_ID", "0"},
                                                                          {"SLURM_STEP_NODELIST", "node[04-05]"}});
  child.finish();
  ASSERT_EQ(child.exit_code(), 0) << child.output;
  const auto out = nlohmann::json::parse(child.output);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& v : out["variables"])
    by_name[v["name"]] = v;
  for (const char* name :
       {"NCCL_ALGO", "NCCL_TOPO_DUMP_FILE", "NCCL_NSOCKS_PERTHREAD", "NCCL_SOCKET_NTHREADS", "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "FI_PROVIDER", "RANK", "MASTER_ADDR", "OMPI_COMM_WORLD_RANK",
        "PMI_RANK", "SLURM_PROCID", "TORCHELASTIC_USE_AGENT_STORE", "RINGMASTER_LOG_TAG"})
    EXPECT_TRUE(by_name.count(name)) << name << " missing";
  EXPECT_EQ(by_name["NCCL_DEBUG"]["source"], "environment");
  EXPECT_EQ(by_name["NCCL_DEBUG"]["value"], "INFO");
  EXPECT_EQ(by_name["NCCL_ALGO"]["source"], "default");
  std::map<std::string, std::string> ignored;
  for (const auto& i : out["ignored"])
    ignored[i["name"]] = i["why"];
  EXPECT_NE(ignored["NCCL_IB_HCA"].find("InfiniBand"), std::string::npos);
  EXPECT_EQ(ignored["NCCL_NO_SUCH_THING"], "not read by Ringmaster");
  EXPECT_FALSE(ignored.count("NCCL_DEBUG"));
  const std::string placement = out["placement"];
  EXPECT_NE(placement.find("rank 1 of 2"), std::string::npos) << placement;
  EXPECT_NE(placement.find("node04"), std::string::npos) << placement;
}

// nccl-tests command lines as published (nccl-tests' README, AWS's EFA
// guide, cluster runbooks and vendors' how-tos), binary name first, run as
// `ringmaster-cli perf` with two local ranks. Sizes are cut to 64 KiB, -n
// to 2 and -w to 1 to keep the test short; every other flag is as
// published. Lines that ask for several GPUs or threads per process are
// refused with the reason (exit 2).
TEST(NcclTests, PublishedCommandLinesRun) {
  const std::vector<std::string> lines = {
      "all_reduce_perf -b 8 -e 128M -f 2 -g 1",
      "all_reduce_perf -b 8 -e 1G -f 2 -g 1 -c 1 -n 100",
      "all_reduce_perf -b 8 -e 8G -f 2 -g 1",
      "all_reduce_perf -t 1 -g 1 -b 4 -e 32M -f 2 -n 100",
      "all_reduce_perf -t 1 -g 1 -b 2M -e 32M -d float -o sum",
      "all_reduce_perf -b 1G -e 8G -f 2 -g 1",
      "all_reduce_perf -b 1G -e 1G -f 2 -g 1",
      "all_reduce_perf -b 1G -e 1G -n 20",
      "all_reduce_perf -b 8 -e 128M -f 2 -g 1 -n 5",
      "all_reduce_perf -b 8 -e 128M -f 2 -g 1 -n 100 -w 5",
      "all_reduce_perf -b 8 -e 128M -f 2 -g 1 -d half",
      "all_reduce_perf -b 8 -e 128M -f 2 -g 1 -c 0",
      "all_gather_perf -b 1G -e 4G -f 2 -n 50 -w 10 -g 1",
      "all_gather_perf -b 8M -e 1G -f 2 -g 1",
      "reduce_scatter_perf -b 8M -e 1G -f 2 -g 1",
      "reduce_scatter_perf -b 8 -e 256M -f 2 -d bfloat16 -c 1 -n 20 -w 5",
      "reduce_scatter_perf -b 1024M -e 4G -f 2 -g 1 -n 100",
      "reduce_scatter_perf -b 8 -e 16G -f 2 -g 1",
      "broadcast_perf -b 8 -e 16G -f 2 -g 1",
      "broadcast_perf -b 16M -e 16M -f 2 -g 1 -c 0",
      "alltoall_perf -b 8 -e 16G -f 2 -g 1",
      "gather_perf -b 8 -e 128M -f 2 -g 1",
      "scatter_perf -b 8 -e 128M -f 2 -g 1 -r 1",
  };
  auto shorten = [](const std::vector<std::string>& words) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < words.size(); ++i) {
      out.push_back(words[i]);
      if (i + 1 >= words.size()) continue;
      const std::string& v = words[i + 1];
      if (words[i] == "-b" || words[i] == "-e") {
        const double scale = v.back() == 'G' ? 1 << 30 : v.back() == 'M' ? 1 << 20 : v.back() == 'K' ? 1 << 10 : 1;
        out.push_back(std::stod(v) * scale > 65536 ? "64K" : v);
        ++i;
      } else if (words[i] == "-n") {
        out.push_back(std::min(std::stoi(v), 2) == 2 ? "2" : v);
        ++i;
      } else if (words[i] == "-w") {
        out.push_back(std::stoi(v) > 1 ? "1" : v);
        ++i;
      }
    }
    return out;
  };
  for (const auto& line : lines) {
    std::istringstream in(line);
    std::vector<std::string> words{std::istream_iterator<std::string>(in), {}};
    std::vector<std::string> argv = {RINGMASTER_CLI, "perf"};
    for (const auto& w : shorten(words))
      argv.push_back(w);
    argv.insert(argv.end(), {"--np", "2", "--no-stages"});
    auto child = testing_support::spawn(argv, {}, true);
    child.finish();
    EXPECT_EQ(child.exit_code(), 0) << line << ": " << child.output;
    EXPECT_NE(child.output.find("# Using devices"), std::string::npos) << line;
    EXPECT_NE(child.output.find("# Out of bounds values : 0 OK"), std::string::npos) << line << ": " << child.output;
  }
  for (const std::string line : {"all_reduce_perf -b 8 -e 128M -f 2 -g 8", "sendrecv_perf -b 8 -e 1G -f 2 -g 2",
                                 "all_reduce_perf -b 8 -e 128M -f 2 -g 1 -t 8"}) {
    std::istringstream in(line);
    std::vector<std::string> argv = {RINGMASTER_CLI, "perf"};
    for (std::istream_iterator<std::string> w(in), end; w != end; ++w)
      argv.push_back(*w);
    auto child = testing_support::spawn(argv, {}, true);
    child.finish();
    EXPECT_EQ(child.exit_code(), 2) << line << ": " << child.output;
    EXPECT_NE(child.output.find("one rank per process here"), std::string::npos) << line << ": " << child.output;
  }
}

// nccl-tests' flags beyond the sizes: -m (calls per iteration), -N (the
// sweep again), -a (rank 0's, average, min or max time), -T, -C, -S
// (timestamps), -J (nccl-tests' JSON), -d all / -o all, and the GPU-only
// flags refused with a reason.
TEST(NcclTests, FlagsBeyondTheSizes) {
  const std::string json = ::testing::TempDir() + "nccl-tests-" + std::to_string(::getpid()) + ".json";
  auto child = testing_support::spawn({RINGMASTER_CLI,
                                       "perf",
                                       "all_reduce_perf",
                                       "-b",
                                       "1K",
                                       "-e",
                                       "4K",
                                       "-f",
                                       "4",
                                       "-n",
                                       "2",
                                       "-w",
                                       "1",
                                       "-m",
                                       "3",
                                       "-N",
                                       "2",
                                       "-a",
                                       "3",
                                       "-T",
                                       "30",
                                       "-C",
                                       "1",
                                       "-S",
                                       "1",
                                       "-J",
                                       json,
                                       "-d",
                                       "all",
                                       "-o",
                                       "all",
                                       "--np",
                                       "2",
                                       "--no-stages"},
                                      {}, true);
  child.finish();
  ASSERT_EQ(child.exit_code(), 0) << child.output;
  EXPECT_NE(child.output.find("agg iters: 3"), std::string::npos) << child.output;
  // 2 cycles x 10 types x 5 operations x 2 sizes.
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["config"]["aggregated_iterations"], 3);
  EXPECT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["results"].size(), 2u * std::size(kAllDataTypes) * std::size(kAllRedOps) * 2u);
  EXPECT_TRUE(j["out_of_bounds"]["okay"].get<bool>());
  std::set<std::string> types, ops;
  for (const auto& r : j["results"]) {
    types.insert(r["type"].get<std::string>());
    ops.insert(r["redop"].get<std::string>());
  }
  EXPECT_EQ(types.size(), std::size(kAllDataTypes));
  EXPECT_EQ(ops.size(), std::size(kAllRedOps));
  // -S ends each row with the time it finished: "2026-12-02 03:12:45".
  EXPECT_TRUE(std::regex_search(child.output, std::regex(R"( \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n)"))) << child.output;
  std::remove(json.c_str());
  for (const auto& flags : {std::vector<std::string>{"-G", "1"}, {"-y", "1"}, {"-R", "1"}}) {
    std::vector<std::string> argv = {RINGMASTER_CLI, "perf", "all_reduce"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto gpu = testing_support::spawn(argv, {}, true);
    gpu.finish();
    EXPECT_EQ(gpu.exit_code(), 2) << gpu.output;
    EXPECT_NE(gpu.output.find("GPU only"), std::string::npos) << gpu.output;
  }
  auto hypercube = testing_support::spawn({RINGMASTER_CLI, "perf", "hypercube_perf"}, {}, true);
  hypercube.finish();
  EXPECT_EQ(hypercube.exit_code(), 2);
  EXPECT_NE(hypercube.output.find("not built yet"), std::string::npos) << hypercube.output;
  // gather and scatter (nccl-tests build them of sends and receives; here
  // they are collectives of their own): rows name their root, every
  // element right at every rank that receives, in and out of place.
  for (const std::string collective : {"gather", "scatter"}) {
    auto child = testing_support::spawn({RINGMASTER_CLI, "perf", collective, "--np", "3", "-b", "12", "-e", "3M", "-f",
                                         "16", "-n", "2", "-w", "1", "-r", "2", "--no-stages"},
                                        {}, true);
    child.finish();
    EXPECT_EQ(child.exit_code(), 0) << child.output;
    std::istringstream out(child.output);
    int rows = 0;
    for (std::string line; std::getline(out, line);) {
      std::istringstream cells(line);
      std::vector<std::string> c{std::istream_iterator<std::string>(cells), {}};
      if (c.size() < 13 || c[0] == "#" || !std::isdigit(static_cast<unsigned char>(c[0][0]))) continue;
      ++rows;
      EXPECT_EQ(c[4], "2") << collective << ": the root column: " << line;
      EXPECT_EQ(c[8], "0") << collective << " out of place: " << line;
      EXPECT_EQ(c[12], "0") << collective << " in place: " << line;
    }
    EXPECT_EQ(rows, 5) << child.output;  // 12 B to 3 MiB by 16
  }
}

// Two hosts of a p4d.24xlarge (NCCL_TOPO_FILE), four ranks each, each host
// a UTS namespace of its own: every rank's rings and trees are the
// topology search's, so each node is left and entered by the GPUs nearest
// its NIC (ring 0 2 3 1 on each node, not rank order) and the trees chain
// a node's ranks in that order. Needs root for the namespaces.
TEST(PerfCli, RanksOnTwoHostsFollowTheSearchAcrossNodes) {
  const std::string unshare = "/usr/bin/unshare";
  {
    auto probe = testing_support::spawn({unshare, "--uts", "true"}, {}, true);
    probe.finish();
    if (probe.exit_code() != 0) GTEST_SKIP() << "cannot make a UTS namespace: " << probe.output;
  }
  const std::string file = std::string(RINGMASTER_TOPOLOGY_DIR) + "/p4d-24xl-topo.xml";
  const auto topology = topo::Topology::load_file(file, topo::LoadOptions{"/sys"});
  const std::vector<topo::NodeRanks> nodes(2, topo::NodeRanks{&topology, 4});
  const auto plan = topo::search_channels(nodes, 2);
  constexpr int n = 8;
  const std::string port = std::to_string(free_port());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < n; ++r) {
    const std::string host = "p4d-node-" + std::to_string(r / 4);
    ranks.push_back(testing_support::spawn(
        {unshare, "--uts", "/bin/sh", "-c", "echo \"$0\" > /proc/sys/kernel/hostname && exec \"$@\"", host,
         RINGMASTER_CLI, "perf", "all_reduce", "-b", "4K", "-e", "4K", "-n", "2", "-w", "1", "--no-stages"},
        {{"RANK", std::to_string(r)},
         {"WORLD_SIZE", std::to_string(n)},
         {"LOCAL_RANK", std::to_string(r % 4)},
         {"LOCAL_WORLD_SIZE", "4"},
         {"RINGMASTER_STORE_TIMEOUT", "60"},
         {"RINGMASTER_BOOTSTRAP_TIMEOUT", "60"},
         {"MASTER_ADDR", "127.0.0.1"},
         {"MASTER_PORT", port},
         {"NCCL_TOPO_FILE", file},
         {"NCCL_MIN_NCHANNELS", "2"},
         {"NCCL_MAX_NCHANNELS", "2"},
         {"RINGMASTER_TUNE_CALIBRATE", "0"},
         {"NCCL_DEBUG", "INFO"},
         {"NCCL_DEBUG_SUBSYS", "GRAPH"}},
        true));
  }
  for (auto& r : ranks)
    r.finish();
  for (int r = 0; r < n; ++r) {
    const std::string& out = ranks[static_cast<std::size_t>(r)].output;
    ASSERT_EQ(ranks[static_cast<std::size_t>(r)].exit_code(), 0) << "rank " << r << ": " << out;
    for (const auto& ring : plan.rings) {
      std::string line = fmt::format("Channel {:02d} : {}", ring.channel, fmt::join(ring.ranks, " "));
      EXPECT_NE(out.find(line + "\n"), std::string::npos) << "rank " << r << " lacks '" << line << "': " << out;
    }
    // This rank's parent in the first tree is the search's.
    const int parent = plan.trees[0].parent[static_cast<std::size_t>(r)];
    const std::string tree = fmt::format("->{}->{} [1]", r, parent);
    EXPECT_NE(out.find(tree), std::string::npos) << "rank " << r << " lacks '" << tree << "': " << out;
  }
  EXPECT_EQ(plan.rings[0].ranks, (std::vector<int>{0, 2, 3, 1, 4, 6, 7, 5})) << plan.lines.front();
}

// A rank that asks for libfabric (NCCL_NET=OFI) never falls back to
// sockets to another node: with its peer's NCCL_NET unset (libfabric's tcp
// provider is not RDMA, so that rank would run over sockets) both ranks
// stop where the settings are exchanged, naming each rank's NCCL_NET and
// host, instead of a run that finishes at sockets' speed as if all were
// well.
TEST(PerfCli, RequiredLibfabricNeverFallsBackToSockets) {
  const std::string port = std::to_string(free_port());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < 2; ++r) {
    std::map<std::string, std::string> env{{"RANK", std::to_string(r)},
                                           {"WORLD_SIZE", "2"},
                                           {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", port},
                                           {"NCCL_HOSTID", "node-" + std::to_string(r)},
                                           {"RINGMASTER_BOOTSTRAP_TIMEOUT", "20"},
                                           {"RINGMASTER_TUNE_CALIBRATE", "0"}};
    if (r == 0) env["NCCL_NET"] = "OFI";
    ranks.push_back(
        testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "-b", "1K", "-e", "1K", "-n", "1"}, env, true));
  }
  for (auto& r : ranks)
    r.finish();
  for (int r = 0; r < 2; ++r) {
    const auto& out = ranks[static_cast<std::size_t>(r)].output;
    EXPECT_NE(ranks[static_cast<std::size_t>(r)].exit_code(), 0) << out;
    EXPECT_NE(out.find("ADDRESS_EXCHANGE failed on rank " + std::to_string(r)), std::string::npos) << out;
    EXPECT_NE(out.find("rank 0 (node-0) has NCCL_NET=OFI, rank 1 (node-1) has NCCL_NET unset"), std::string::npos)
        << out;
    EXPECT_NE(out.find("NCCL_NET alike"), std::string::npos) << out;
  }
}

// A calibration kept in the cache is checked against the links before it
// is taken: after the links degrade (a rate limit on the namespace's
// loopback, 800 Mbit/s with no burst to speak of, against GB/s) a 256 KiB
// all_reduce takes far longer than the cached figures predict, the ranks
// measure anew and the tuner's source says why; once the limit is gone
// they measure anew again (faster).
TEST(PerfCli, CachedCalibrationIsMeasuredAnewWhenTheLinksChange) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace and a qdisc on its loopback";
  const std::string ns = "rmcal" + std::to_string(::getpid());
  auto add = testing_support::spawn({"/usr/sbin/ip", "netns", "add", ns}, {}, true);
  add.finish();
  if (add.exit_code() != 0) GTEST_SKIP() << "cannot make a network namespace here: " << add.output;
  auto in_ns = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"/usr/sbin/ip", "netns", "exec", ns});
    auto p = testing_support::spawn(argv, {}, true);
    p.finish();
    return p;
  };
  in_ns({"/usr/sbin/ip", "link", "set", "lo", "up"});
  const std::string cache = ::testing::TempDir() + "calibration-" + std::to_string(::getpid()) + ".json";
  std::filesystem::remove(cache);
  auto calibrate = [&] {
    auto p = in_ns({"/usr/bin/env", "RINGMASTER_TUNE_CACHE=" + cache, "NCCL_SHM_DISABLE=1", RINGMASTER_CLI, "perf",
                    "all_reduce", "--np", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"});
    EXPECT_EQ(p.exit_code(), 0) << p.output;
    const auto at = p.output.find("CALIBRATE         ok");
    return at == std::string::npos ? p.output : p.output.substr(at, p.output.find('\n', at) - at);
  };
  const std::string first = calibrate();
  EXPECT_NE(first.find("calibrated at init"), std::string::npos) << first;
  // Unchanged links take the cache. A first calibration taken in a busy
  // spell (other tests share the machine) reads a hop over twice what the
  // next init's takes, and that init measures anew by the hop rule: only
  // that reason is allowed, a few times, before the cache must be taken.
  std::string again;
  for (int attempt = 0; attempt < 4; ++attempt) {
    again = calibrate();
    if (again.find("calibration of this shape measured") != std::string::npos) break;
    EXPECT_NE(again.find("over twice what the links take now"), std::string::npos) << again;
  }
  EXPECT_NE(again.find("calibration of this shape measured"), std::string::npos) << again;
  auto qdisc = in_ns({"/usr/sbin/tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10"});
  auto rate = in_ns({"/usr/sbin/tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate",
                     "800mbit", "burst", "16k", "cburst", "16k"});
  if (qdisc.exit_code() != 0 || rate.exit_code() != 0) {
    testing_support::spawn({"/usr/sbin/ip", "netns", "del", ns}, {}).finish();
    GTEST_SKIP() << "no htb qdisc here: " << qdisc.output << rate.output;
  }
  const std::string degraded = calibrate();
  EXPECT_NE(degraded.find("the links are not what was measured (slower since), so they were measured anew"),
            std::string::npos)
      << degraded;
  in_ns({"/usr/sbin/tc", "qdisc", "del", "dev", "lo", "root"});
  // Mended, the links read faster than the cache: by the 256 KiB call, or
  // first by the hop rule where the rate limit slowed small calls too.
  const std::string mended = calibrate();
  EXPECT_TRUE(mended.find("(faster since), so they were measured anew") != std::string::npos ||
              mended.find("over twice what the links take now") != std::string::npos)
      << mended;
  testing_support::spawn({"/usr/sbin/ip", "netns", "del", ns}, {}).finish();
  std::filesystem::remove(cache);
}

// NCCL_HOSTID makes the ranks of one machine two nodes, as two agents
// that each declare a p5 node rehearse them: across the two "hosts" the
// rings go over sockets (no shared memory), rank 0 reports each channel's
// ring with the GPU of every rank and the NIC each node is left and
// entered by (the search's), and every rank's samples name the NIC its
// channel's traffic crosses the node by.
TEST(PerfCli, HostIdSplitsOneMachineIntoNodesAndRanksReportTheirDevices) {
  const std::string file = std::string(RINGMASTER_TOPOLOGY_DIR) + "/p5.48xl-topo.xml";
  const auto topology = topo::Topology::load_file(file, topo::LoadOptions{"/sys"});
  const std::vector<topo::NodeRanks> nodes(2, topo::NodeRanks{&topology, 2});
  const auto plan = topo::search_channels(nodes, 2);
  constexpr int n = 4;
  const std::string port = std::to_string(free_port());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(testing_support::spawn(
        {RINGMASTER_CLI, "perf", "all_reduce", "-b", "1M", "-e", "1M", "-n", "5", "-w", "1", "--json"},
        {{"RANK", std::to_string(r)},
         {"WORLD_SIZE", std::to_string(n)},
         {"LOCAL_RANK", std::to_string(r % 2)},
         {"LOCAL_WORLD_SIZE", "2"},
         {"RINGMASTER_STORE_TIMEOUT", "60"},
         {"MASTER_ADDR", "127.0.0.1"},
         {"MASTER_PORT", port},
         {"NCCL_HOSTID", "p5-node-" + std::to_string(r / 2)},
         {"NCCL_TOPO_FILE", file},
         {"NCCL_MIN_NCHANNELS", "2"},
         {"NCCL_MAX_NCHANNELS", "2"},
         {"RINGMASTER_TUNE_CALIBRATE", "0"}},
        false));
  }
  for (auto& r : ranks)
    r.finish();
  auto events_of = [](const std::string& out, const std::string& type) {
    std::vector<nlohmann::json> found;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == type) found.push_back(j);
    }
    return found;
  };
  // The NIC of each node for each channel, by its network device's name.
  auto device = [&](int nic) {
    for (int child : topology.node(topology.nics()[static_cast<std::size_t>(nic)]).children) {
      if (topology.node(child).kind == topo::NodeKind::net) return topology.node(child).name;
    }
    return std::string();
  };
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ranks[static_cast<std::size_t>(r)].exit_code(), 0) << ranks[static_cast<std::size_t>(r)].output;
  const auto rings = events_of(ranks[0].output, "rings");
  ASSERT_EQ(rings.size(), 1u) << ranks[0].output;
  EXPECT_EQ(rings[0]["gpus"], nlohmann::json({0, 1, 0, 1})) << rings[0].dump();
  ASSERT_EQ(rings[0]["rings"].size(), 2u) << rings[0].dump();
  for (const auto& ring : plan.rings) {
    const auto& got = rings[0]["rings"][static_cast<std::size_t>(ring.channel)];
    EXPECT_EQ(got["ranks"].get<std::vector<int>>(), ring.ranks) << got.dump();
    for (std::size_t p = 0; p < ring.ranks.size(); ++p) {
      // Two ranks a node: each enters or leaves its node, by the node's NIC.
      const int nic = ring.nic[static_cast<std::size_t>(plan.node_of[static_cast<std::size_t>(ring.ranks[p])])];
      EXPECT_EQ(got["nics"][p], nic) << got.dump();
      EXPECT_EQ(got["devices"][p], device(nic)) << got.dump();
    }
  }
  EXPECT_NE(plan.rings[0].nic[0], plan.rings[1].nic[0]) << "channels take the NICs in turn";
  for (int r = 0; r < n; ++r) {
    const auto& out = ranks[static_cast<std::size_t>(r)].output;
    const auto samples = events_of(out, "sample");
    ASSERT_FALSE(samples.empty()) << out;
    for (const auto& c : samples.back()["channels"]) {
      const auto& ring = plan.rings[static_cast<std::size_t>(c["channel"].get<int>())];
      const auto at = static_cast<std::size_t>(std::find(ring.ranks.begin(), ring.ranks.end(), r) - ring.ranks.begin());
      const bool leaves = ring.ranks[(at + 1) % n] / 2 != r / 2;
      const bool enters = ring.ranks[(at + n - 1) % n] / 2 != r / 2;
      const std::string nic = device(ring.nic[static_cast<std::size_t>(r / 2)]);
      EXPECT_EQ(c.value("nic_out", ""), leaves ? nic : "") << "rank " << r << ": " << c.dump();
      EXPECT_EQ(c.value("nic_in", ""), enters ? nic : "") << "rank " << r << ": " << c.dump();
    }
    // Across the two nodes: sockets; within one: shared memory.
    const auto connections = events_of(out, "connections");
    ASSERT_FALSE(connections.empty()) << out;
    for (const auto& connection : connections.front()["connections"]) {
      const bool across = connection["peer"].get<int>() / 2 != r / 2;
      EXPECT_EQ(connection["transport"], across ? "SOCKET" : "SHM") << "rank " << r << ": " << connection.dump();
      EXPECT_EQ(connection["fallback"], "") << connection.dump();
    }
  }
}

// MASTER_ADDR as an IPv6 literal, as a dual-stack cluster gives it: the
// store, the bootstrap and the data connections all go over ::1.
TEST(PerfCli, Ipv6MasterAddr) {
  {
    int err = 0;
    auto loopback6 = net::SocketAddress::parse("[::1]:0");
    if (!loopback6 || !net::Socket::listen(*loopback6, 1, err).valid()) GTEST_SKIP() << "no IPv6 loopback here";
  }
  const std::string port = std::to_string(free_port());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(testing_support::spawn(
        {RINGMASTER_CLI, "perf", "all_reduce", "-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"},
        {{"RANK", std::to_string(r)},
         {"WORLD_SIZE", "2"},
         {"MASTER_ADDR", "::1"},
         {"MASTER_PORT", port},
         {"RINGMASTER_STORE_TIMEOUT", "60"},
         {"NCCL_DEBUG", "INFO"},
         {"NCCL_DEBUG_SUBSYS", "INIT"}},
        true));
  }
  for (auto& r : ranks)
    r.finish();
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ranks[static_cast<std::size_t>(r)].exit_code(), 0) << ranks[static_cast<std::size_t>(r)].output;
  const std::string& out = ranks[0].output;
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << out;
  EXPECT_NE(out.find("[::1]:" + port), std::string::npos) << "the store's address as rank 0 logs it: " << out;
}

TEST(PerfCli, LocalRanksWithNp) {
  auto child = testing_support::spawn({RINGMASTER_CLI, "perf", "reduce_scatter", "--np", "4", "-b", "64K", "-e", "64K",
                                       "-n", "2", "-w", "0", "-o", "max", "-d", "bfloat16", "--no-stages"},
                                      {});
  child.finish();
  EXPECT_EQ(child.exit_code(), 0) << child.output;
  EXPECT_NE(child.output.find("bfloat16"), std::string::npos) << child.output;
  EXPECT_NE(child.output.find("# Out of bounds values : 0 OK"), std::string::npos) << child.output;
}

// --np binds each rank to a CPU when there is one per rank, and says so;
// --warmup-ms warms the first size up for that long on every rank alike
// (the ranks would fail with a collective mismatch if their counts differed).
TEST(PerfCli, BindingAndTimedWarmUp) {
  auto bound = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "--np", "2", "--bind", "core", "-b", "8",
                                       "-e", "1K", "-f", "4", "-n", "50", "--warmup-ms", "100", "--no-stages"},
                                      {});
  bound.finish();
  EXPECT_EQ(bound.exit_code(), 0) << bound.output;
  EXPECT_NE(bound.output.find("# ranks 0..1 bound to CPUs"), std::string::npos) << bound.output;
  EXPECT_NE(bound.output.find("# Out of bounds values : 0 OK"), std::string::npos) << bound.output;
  auto free_ranks = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "--np", "3", "--bind", "none", "-b",
                                            "8", "-e", "8", "-n", "10", "--warmup-ms", "50", "--no-stages"},
                                           {});
  free_ranks.finish();
  EXPECT_EQ(free_ranks.exit_code(), 0) << free_ranks.output;
  EXPECT_EQ(free_ranks.output.find("bound to CPUs"), std::string::npos) << free_ranks.output;
  EXPECT_NE(free_ranks.output.find("# Out of bounds values : 0 OK"), std::string::npos) << free_ranks.output;
}

// --candidates: every size timed once per candidate in turn, in one run.
// A forced candidate's row carries that candidate's prediction, the tuner's
// own row the cheapest of them (it takes the argmin), and which candidate
// goes first turns with the size.
TEST(PerfCli, CandidatesTakeTurnsAtEverySize) {
  for (const bool sockets : {false, true}) {
    SCOPED_TRACE(sockets ? "sockets" : "shared memory");
    const std::string json = ::testing::TempDir() + "perf-candidates.json";
    auto child = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce",  "--np", "3", "-b", "8", "-e",
                                         "64K",          "-f",   "32",          "-n",   "3", "-w", "1", "--no-stages",
                                         "--candidates", "all",  "--json-file", json},
                                        {{"NCCL_SHM_DISABLE", sockets ? "1" : "0"}});
    child.finish();
    ASSERT_EQ(child.exit_code(), 0) << child.output;
    EXPECT_NE(child.output.find("# Out of bounds values : 0 OK"), std::string::npos) << child.output;
    EXPECT_NE(child.output.find("  auto ("), std::string::npos) << child.output;
    std::ifstream in(json);
    const auto rows = nlohmann::json::parse(in);
    // Over sockets LL128 is no candidate (a byte stream, not 128-byte lines).
    const std::size_t per_size = sockets ? 5 : 7;
    ASSERT_EQ(rows.size(), 3 * per_size);  // 8 B, 256 B, 8 KiB
    std::set<std::string> firsts;
    for (std::size_t s = 0; s < 3; ++s) {
      double cheapest = 1e300, auto_predicted = -1;
      std::set<std::string> names;
      for (std::size_t k = 0; k < per_size; ++k) {
        const auto& row = rows[s * per_size + k];
        EXPECT_EQ(row["bytes"], rows[s * per_size]["bytes"]);
        EXPECT_EQ(row["out_of_place"]["wrong"], 0);
        EXPECT_EQ(row["in_place"]["wrong"], 0);
        const std::string name = row["candidate"];
        names.insert(name);
        const auto& tuner = row["tuner"];
        const double predicted = tuner["predicted_us"];
        EXPECT_GT(predicted, 0.0);
        if (name == "auto") {
          auto_predicted = predicted;
        } else {
          EXPECT_EQ(name, tuner["algorithm"].get<std::string>() + "/" + tuner["protocol"].get<std::string>());
          cheapest = std::min(cheapest, predicted);
        }
      }
      EXPECT_EQ(names.size(), per_size);
      EXPECT_EQ(names.count("Ring/LL128"), sockets ? 0u : 1u);
      EXPECT_NEAR(auto_predicted, cheapest, 1e-6 * cheapest);
      firsts.insert(rows[s * per_size]["candidate"].get<std::string>());
    }
    EXPECT_EQ(firsts.size(), 3u);
  }
}

// NCCL_ALGO narrows the user's collectives only, as under nccl-tests
// (whose own bookkeeping runs over MPI): perf's gathering of where the
// ranks run and of the rows' times runs whatever the filter allows, so
// NCCL_ALGO=tree times Tree; a collective the filter leaves nothing for
// (all_gather under tree) is refused by name, as NCCL refuses it.
TEST(PerfCli, NcclAlgoNarrowsTheUsersCollectivesOnly) {
  const std::string json = ::testing::TempDir() + "perf-algo-tree.json";
  for (const std::string algo : {"tree", "Tree", "allreduce:tree"}) {
    SCOPED_TRACE(algo);
    auto child = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "--np", "2", "-b", "8", "-e", "1M", "-f",
                                         "16", "-n", "3", "-w", "1", "--no-stages", "--json-file", json},
                                        {{"NCCL_ALGO", algo}});
    child.finish();
    ASSERT_EQ(child.exit_code(), 0) << child.output;
    EXPECT_NE(child.output.find("# Out of bounds values : 0 OK"), std::string::npos) << child.output;
    std::ifstream in(json);
    const auto rows = nlohmann::json::parse(in);
    ASSERT_EQ(rows.size(), 5u);  // 8 B to 512 KiB by 16
    for (const auto& row : rows)
      EXPECT_EQ(row["tuner"]["algorithm"], "Tree") << row.dump();
  }
  auto refused = testing_support::spawn(
      {RINGMASTER_CLI, "perf", "all_gather", "--np", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "--no-stages"},
      {{"NCCL_ALGO", "tree"}}, true);
  refused.finish();
  EXPECT_NE(refused.exit_code(), 0) << refused.output;
  EXPECT_NE(refused.output.find("NCCL_ALGO=tree"), std::string::npos) << refused.output;
}

// --version from the project's version, usage errors exit 2 and failures
// keep their own codes (docs/cli.md): CLI11's own codes (105-109) leaked
// before.
TEST(CliConventions, VersionAndExitCodes) {
  for (const std::string binary : {RINGMASTER_CLI, RINGMASTER_AGENT}) {
    auto version = testing_support::spawn({binary, "--version"}, {}, true);
    version.finish();
    EXPECT_EQ(version.exit_code(), 0) << version.output;
    EXPECT_NE(version.output.find(RINGMASTER_VERSION_STRING), std::string::npos) << version.output;
    auto unknown = testing_support::spawn({binary, "--no-such-flag"}, {}, true);
    unknown.finish();
    EXPECT_EQ(unknown.exit_code(), 2) << unknown.output;
  }
  const std::vector<std::vector<std::string>> usage = {
      {"perf", "all_reduce", "-b"},            // a value missing (CLI11: 105 or 107)
      {"perf", "all_reduce", "-n", "many"},    // not a number
      {"perf", "all_reduce", "--extra", "x"},  // unknown
      {"no-such-command"},
      {},
  };
  for (const auto& args : usage) {
    std::vector<std::string> argv = {RINGMASTER_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    auto child = testing_support::spawn(argv, {}, true);
    child.finish();
    EXPECT_EQ(child.exit_code(), 2) << fmt::format("{}", fmt::join(args, " ")) << ": " << child.output;
  }
  auto bad_env = testing_support::spawn({RINGMASTER_CLI, "probe"}, {{"RANK", "abc"}}, true);
  bad_env.finish();
  EXPECT_EQ(bad_env.exit_code(), 2) << bad_env.output;
  // A rank that cannot join exits 3: nobody serves the store.
  auto lonely = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "-b", "8", "-e", "8"},
                                       {{"RANK", "1"},
                                        {"WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "127.0.0.1"},
                                        {"MASTER_PORT", std::to_string(free_port())},
                                        {"RINGMASTER_STORE_TIMEOUT", "1"}},
                                       true);
  lonely.finish();
  EXPECT_EQ(lonely.exit_code(), 3) << lonely.output;
  auto help = testing_support::spawn({RINGMASTER_CLI, "perf", "--help"}, {}, true);
  help.finish();
  EXPECT_EQ(help.exit_code(), 0);
}

// One spelling per idea (docs/cli.md): --json is machine-readable output
// on stdout, --json-file a file; sizes as nccl-tests spells them; --listen
// ADDR:PORT. Earlier spellings still run as hidden aliases.
TEST(CliConventions, OneSpellingPerIdea) {
  auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), RINGMASTER_CLI);
    auto child = testing_support::spawn(args, {});
    child.finish();
    return child;
  };
  // tune: perf's size flags, and the old ones meaning the same.
  auto tune_new = run({"tune", "-b", "8", "-e", "512K", "-f", "16"});
  auto tune_old = run({"tune", "--bytes", "8:512K", "--step-factor", "16"});
  EXPECT_EQ(tune_new.exit_code(), 0) << tune_new.output;
  EXPECT_NE(tune_new.output.find("# all_reduce 512 KiB"), std::string::npos) << tune_new.output;
  EXPECT_EQ(tune_new.output, tune_old.output);
  // perf --json: every line of stdout is a JSON object, results among them;
  // --events (the old spelling) the same kinds of lines.
  for (const char* flag : {"--json", "--events"}) {
    auto perf = run({"perf", "all_reduce", "--np", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", flag});
    EXPECT_EQ(perf.exit_code(), 0) << perf.output;
    std::istringstream lines(perf.output);
    std::string line;
    int rows = 0, objects = 0;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line, nullptr, false);
      ASSERT_TRUE(j.is_object()) << flag << ": not JSON: " << line;
      ++objects;
      rows += j.value("type", "") == "result" ? 1 : 0;
    }
    EXPECT_GT(objects, 2) << flag;
    EXPECT_GE(rows, 1) << flag << ": " << perf.output;
  }
  // The old `perf --json FILE` is refused rather than read another way.
  EXPECT_EQ(run({"perf", "all_reduce", "--json", "rows.json"}).exit_code(), 2);
  // --help shows the new spellings only.
  auto help = run({"perf", "--help"});
  EXPECT_NE(help.output.find("--json-file"), std::string::npos);
  EXPECT_EQ(help.output.find("--events"), std::string::npos) << help.output;
  auto tune_help = run({"tune", "--help"});
  EXPECT_NE(tune_help.output.find("--minbytes"), std::string::npos);
  EXPECT_EQ(tune_help.output.find("--step-factor"), std::string::npos) << tune_help.output;
  // topo export --json: the console's JSON on stdout.
  auto topo = run({"topo", "export", "--file", std::string(RINGMASTER_TOPOLOGY_DIR) + "/p4d-24xl-topo.xml", "--json"});
  EXPECT_EQ(topo.exit_code(), 0);
  EXPECT_EQ(nlohmann::json::parse(topo.output, nullptr, false).value("origin", ""), "declared") << topo.output;
  // store serve --listen ADDR:PORT, as the agent's; the old ADDR --port N.
  for (const std::vector<std::string>& listen :
       {std::vector<std::string>{"--listen", "127.0.0.1:0"}, std::vector<std::string>{"--listen", "[::1]:0"},
        std::vector<std::string>{"--listen", "127.0.0.1", "--port", "0"}}) {
    std::vector<std::string> argv = {RINGMASTER_CLI, "store", "serve"};
    argv.insert(argv.end(), listen.begin(), listen.end());
    auto serve = testing_support::spawn(argv, {});
    std::string first;
    char c = 0;
    while (::read(serve.out_fd, &c, 1) == 1 && c != '\n')
      first += c;
    ::kill(serve.pid, SIGTERM);
    serve.finish();
    EXPECT_TRUE(std::regex_match(first, std::regex(R"(store listening on (127\.0\.0\.1|::1):[1-9]\d*)")))
        << fmt::format("{}", fmt::join(listen, " ")) << ": " << first;
  }
  EXPECT_EQ(run({"store", "serve", "--listen", "127.0.0.1:http"}).exit_code(), 2);
}

// What the README shows and nothing else tested: probe --np N runs N ranks
// through every stage; perf's -i, -r, -z, --algo, --proto and --channels
// change what runs (the sizes, the root column, the engine's decisions).
TEST(PerfCli, ProbeNpAndTheFlagsThatShapeARun) {
  auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), RINGMASTER_CLI);
    auto child = testing_support::spawn(args, {}, true);
    child.finish();
    return child;
  };
  auto probe = run({"probe", "--np", "3"});
  EXPECT_EQ(probe.exit_code(), 0) << probe.output;
  EXPECT_NE(probe.output.find("3 rank(s), 0 failed"), std::string::npos) << probe.output;
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(std::regex_search(probe.output, std::regex(fmt::format(R"(\n +{} +STORE_BARRIER +ok )", r))))
        << "rank " << r << ": " << probe.output;
  }
  // -i: sizes 1K, 2K, 3K, 4K (step bytes with -f 1); -r 2: the root column.
  auto stepped = run({"perf", "broadcast", "--np", "3",  "-b", "1K", "-e", "4K", "-f", "1",          "-i",
                      "1K",   "-r",        "2",    "-z", "1",  "-n", "2",  "-w", "1",  "--no-stages"});
  EXPECT_EQ(stepped.exit_code(), 0) << stepped.output;
  std::vector<std::string> sizes;
  std::istringstream rows(stepped.output);
  for (std::string line; std::getline(rows, line);) {
    std::istringstream cells(line);
    std::vector<std::string> c{std::istream_iterator<std::string>(cells), {}};
    if (c.size() < 13 || !std::isdigit(static_cast<unsigned char>(c[0][0]))) continue;
    sizes.push_back(c[0]);
    EXPECT_EQ(c[4], "2") << line;
    EXPECT_EQ(c[8], "0") << line;
  }
  EXPECT_EQ(sizes, (std::vector<std::string>{"1024", "2048", "3072", "4096"})) << stepped.output;
  // --algo/--proto/--channels: every decision rank 0 reports is that one.
  for (const auto& [algo, proto, channels] :
       {std::tuple{"Tree", "Simple", 1}, std::tuple{"Ring", "LL", 2}, std::tuple{"Ring", "Simple", 3}}) {
    auto forced = run({"perf", "all_reduce", "--np", "2", "-b", "64K", "-e", "64K", "-n", "1", "-w", "0", "--algo",
                       algo, "--proto", proto, "--channels", std::to_string(channels), "--json"});
    EXPECT_EQ(forced.exit_code(), 0) << forced.output;
    int decisions = 0;
    std::istringstream lines(forced.output);
    for (std::string line; std::getline(lines, line);) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || j.value("type", "") != "decision" || j.value("bytes", 0) != 65536) continue;
      ++decisions;
      EXPECT_EQ(j.value("algorithm", ""), algo) << line;
      EXPECT_EQ(j.value("protocol", ""), proto) << line;
      EXPECT_EQ(j.value("nchannels", 0), channels) << line;
    }
    EXPECT_GT(decisions, 0) << forced.output;
  }
}

TEST(PerfCli, BadFlagsAreRefused) {
  auto bad_type = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "-d", "float8"}, {});
  bad_type.finish();
  EXPECT_EQ(bad_type.exit_code(), 2);  // usage errors exit 2 (docs/cli.md)
  auto bad_collective = testing_support::spawn({RINGMASTER_CLI, "perf", "all_scatter"}, {});
  bad_collective.finish();
  EXPECT_EQ(bad_collective.exit_code(), 2);
  auto bad_bind = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "--np", "2", "--bind", "socket"}, {});
  bad_bind.finish();
  EXPECT_EQ(bad_bind.exit_code(), 2);
  // --candidates: each mistake named.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad_candidates = {
      {{"--candidates", "Mesh/LL"}, "--candidates entry 'Mesh/LL'"},
      {{"--candidates", "Ring/LL64"}, "the protocol after '/' must be LL, LL128 or Simple"},
      {{"--candidates", "ring/ll,Ring/LL"}, "--candidates lists Ring/LL twice"},
      {{"--candidates", "Tree/LL,auto", "--algo", "Ring"}, "drop --algo / --proto"},
  };
  for (const auto& [flags, message] : bad_candidates) {
    // Through sh for the message on stderr.
    std::vector<std::string> argv = {
        "/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", RINGMASTER_CLI, "perf", "all_reduce", "--np", "2", "-b", "8",
        "-e",      "8"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto child = testing_support::spawn(argv, {});
    child.finish();
    EXPECT_NE(child.exit_code(), 0) << flags[1];
    EXPECT_NE(child.output.find(message), std::string::npos) << child.output;
  }
}

// `simulate`: nccl-tests' table for a declared cluster, the same rows as
// JSON lines, the profiles listed, and clear errors for what is missing.
TEST(Simulate, PrintsTheNcclTestsTableOfAnInstanceProfile) {
  auto run = [](std::vector<std::string> args) {  // stdout and stderr together
    args.insert(args.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", RINGMASTER_CLI});
    auto child = testing_support::spawn(args, {});
    child.finish();
    return child;
  };
  auto table =
      run({"simulate", "all_reduce_perf", "--instance", "p4d", "--nodes", "2", "-b", "16", "-e", "1G", "-f", "4"});
  ASSERT_EQ(table.exit_code(), 0) << table.output;
  EXPECT_NE(table.output.find("16 ranks on 2 nodes"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("busbw"), std::string::npos) << table.output;
  int rows = 0;
  std::istringstream lines(table.output);
  std::string line;
  std::string last;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++rows;
    last = line;
  }
  EXPECT_EQ(rows, 14) << table.output;  // 16 B x 4^k up to 1 GiB
  std::istringstream fields(last);
  std::size_t bytes = 0, count = 0;
  std::string type, redop, root, algo;
  double time = 0, algbw = 0, busbw = 0;
  fields >> bytes >> count >> type >> redop >> root >> time >> algbw >> busbw >> algo;
  EXPECT_EQ(bytes, std::size_t{1} << 30);
  EXPECT_EQ(count, std::size_t{1} << 28);
  EXPECT_EQ(type, "float");
  EXPECT_NEAR(busbw, algbw * 30 / 16, 0.02);
  EXPECT_EQ(algo, "Tree") << last;

  auto json = run(
      {"simulate", "reduce_scatter", "--instance", "p5.48xlarge", "--nodes", "4", "-b", "1M", "-e", "4M", "--json"});
  ASSERT_EQ(json.exit_code(), 0) << json.output;
  std::istringstream json_lines(json.output);
  int results = 0;
  while (std::getline(json_lines, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not JSON: " << line;
    if (j.value("type", "") == "simulation") {
      EXPECT_EQ(j.value("nranks", 0), 32);
    }
    if (j.value("type", "") != "result") continue;
    ++results;
    EXPECT_EQ(j.value("collective", ""), "reduce_scatter");
    EXPECT_GT(j["out_of_place"].value("busbw", 0.0), 0.0) << line;
    EXPECT_EQ(j["tuner"].value("algorithm", ""), "Ring") << line;
  }
  EXPECT_EQ(results, 3) << json.output;

  // Two p5: the NVSwitch reduces (NVLink SHARP), and the table names
  // NCCL's NVLSTree for the large sizes.
  auto p5 = run({"simulate", "all_reduce_perf", "--instance", "p5", "--nodes", "2", "-b", "1G", "-e", "1G"});
  ASSERT_EQ(p5.exit_code(), 0) << p5.output;
  EXPECT_NE(p5.output.find("(NVLink SHARP)"), std::string::npos) << p5.output;
  EXPECT_NE(p5.output.find(" NVLSTree Simple "), std::string::npos) << p5.output;

  // A stack's own EFA share: more of the line, more bus bandwidth; a
  // share outside (0, 1] and one without a profile are refused by name.
  auto busbw_at_1g = [&](const std::string& share) {
    std::vector<std::string> args = {"simulate", "--instance", "p4de", "--nodes", "2",
                                     "-b",       "1G",         "-e",   "1G",      "--json"};
    if (!share.empty()) args.insert(args.end(), {"--efa-share", share});
    auto r = run(args);
    EXPECT_EQ(r.exit_code(), 0) << r.output;
    std::istringstream lines(r.output);
    std::string l;
    while (std::getline(lines, l)) {
      const auto j = nlohmann::json::parse(l, nullptr, false);
      if (j.is_object() && j.value("type", "") == "result") return j["out_of_place"].value("busbw", 0.0);
    }
    return 0.0;
  };
  const double profile_share = busbw_at_1g("");
  EXPECT_GT(profile_share, 0.0);
  EXPECT_GT(busbw_at_1g("0.9"), profile_share * 1.1);
  auto too_much = run({"simulate", "--instance", "p4de", "--nodes", "2", "--efa-share", "1.5"});
  EXPECT_NE(too_much.exit_code(), 0);
  EXPECT_NE(too_much.output.find("--efa-share 1.5: expected a share above 0, at most 1"), std::string::npos)
      << too_much.output;

  auto list = run({"simulate", "--list"});
  EXPECT_EQ(list.exit_code(), 0);
  EXPECT_NE(list.output.find("NVLink 450 GB/s, SHARP"), std::string::npos) << list.output;
  for (const char* name :
       {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "g5.48xlarge", "g6e.48xlarge"})
    EXPECT_NE(list.output.find(name), std::string::npos) << name << "\n" << list.output;

  auto unknown = run({"simulate", "--instance", "p9.huge", "--nodes", "2"});
  EXPECT_NE(unknown.exit_code(), 0);
  EXPECT_NE(unknown.output.find("instance type p9.huge: no profile; known: p4d.24xlarge"), std::string::npos)
      << unknown.output;
  auto nothing = run({"simulate", "--nodes", "2"});
  EXPECT_NE(nothing.exit_code(), 0);
  EXPECT_NE(nothing.output.find("--instance"), std::string::npos) << nothing.output;
}

}  // namespace
}  // namespace ringmaster
