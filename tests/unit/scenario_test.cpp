// The repro catalog library (ringmaster/agent/scenario.h), which
// ringmaster-cli repro and the console share: the shipped catalog reads,
// a bad scenario file is refused naming the file and the field, and the
// expectations are checked against a run's typed events.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "ringmaster/agent/scenario.h"
#include "ringmaster/status.h"

namespace {

using nlohmann::json;
using namespace ringmaster;
namespace ev = ringmaster::agent::events;
namespace fs = std::filesystem;

agent::Scenario scenario_named(const std::string& name) {
  for (auto& s : agent::load_catalog(RINGMASTER_SCENARIO_DIR)) {
    if (s.name == name) return s;
  }
  throw std::runtime_error("no scenario " + name);
}

TEST(Scenarios, TheShippedCatalogReads) {
  const auto catalog = agent::load_catalog(RINGMASTER_SCENARIO_DIR);
  ASSERT_GE(catalog.size(), 19u);
  std::set<std::string> names;
  for (const auto& s : catalog) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_FALSE(s.story.empty()) << s.file;
    EXPECT_EQ(static_cast<int>(s.placement().size()) > 0, true) << s.file;
  }
  EXPECT_EQ(catalog.front().file, "01-sg-ephemeral-lost.json");  // sorted by file name
  const auto slow = scenario_named("slow-link");
  EXPECT_EQ(slow.placement(), (std::vector<int>{0, 0, 1, 1, 2, 2}));
  ASSERT_EQ(slow.faults.size(), 1u);  // typed when the catalog is read
  EXPECT_EQ(agent::describe(slow.faults[0].fault), "limit eth0 to 40 Mbit/s");
  EXPECT_TRUE(slow.faults[0].on(1));
  EXPECT_FALSE(slow.faults[0].on(0));
  EXPECT_EQ(scenario_named("world-size-mismatch").world_size(), 3);
}

// Each bad file in a catalog of its own: the message names the file and
// what is wrong with it.
TEST(Scenarios, ABadFileIsRefusedByName) {
  const fs::path dir = fs::temp_directory_path() / ("scenario_test." + std::to_string(::getpid()));
  auto refused = [&](const std::string& text) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "07-bad.json") << text;
    try {
      agent::load_catalog(dir.string());
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::config);
      return e.status().message();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refused("{"), "scenario 07-bad.json: not valid JSON");
  EXPECT_EQ(refused(R"({"title": "x"})"), "scenario 07-bad.json: 'name' is missing");
  EXPECT_EQ(refused(R"({"name": "Bad Name"})"),
            "scenario 07-bad.json: name 'Bad Name' is not lowercase letters, digits and dashes");
  EXPECT_EQ(refused(R"({"name": "x", "hosts": 0})"), "scenario 07-bad.json: hosts 0 is not 1..16");
  EXPECT_EQ(refused(R"({"name": "x", "hosts": "2"})"), "scenario 07-bad.json: 'hosts' is string, of the wrong type");
  EXPECT_EQ(refused(R"({"name": "x", "expect": {"outcome": "hang"}})"),
            "scenario 07-bad.json: expect.outcome 'hang' is not fail, complete or refused");
  EXPECT_EQ(refused(R"({"name": "x", "expect": {"stages": ["READY"]}})"),
            "scenario 07-bad.json: expect.stages is not an expectation this build knows");
  EXPECT_EQ(refused(R"({"name": "x", "hosts": 2, "run": {"placement": [0, 2]}})"),
            "scenario 07-bad.json: run.placement names host 2, of 2");
  EXPECT_EQ(refused(R"({"name": "x", "faults": {}})"), "scenario 07-bad.json: 'faults' must be array");
  EXPECT_EQ(refused(R"({"name": "x", "faults": [{"fault": {"kind": "rate", "interface": "eth0", "mbit": "40"}}]})"),
            "scenario 07-bad.json: faults[0]: fault 'rate': 'mbit' is a string of 2 characters, not a number");
  EXPECT_EQ(
      refused(R"({"name": "x", "hosts": 2, "faults": [{"hosts": [2], "fault": {"kind": "shm_size", "bytes": 1}}]})"),
      "scenario 07-bad.json: faults[0].hosts holds 2, not a host of 0..1");
  EXPECT_EQ(refused(R"({"name": "x", "faults": [{"kind": "shm_size", "bytes": 1}]})"),
            "scenario 07-bad.json: faults[0] is not {\"fault\": {...}, \"hosts\": [...]}");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"mtu": 9000, "sysctl": {}}]})"),
            "scenario 07-bad.json: setup[0] must hold exactly one of mtu, sysctl, outbound_from_port, stray_traffic, "
            "address, agent_env, conntrack_full");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"conntrack_full": 1}]})"),
            "scenario 07-bad.json: setup[0].conntrack_full is not true");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"agent_env": {"nccl_proto": "Simple"}}]})"),
            "scenario 07-bad.json: setup[0].agent_env: 'nccl_proto' is not an upper-case variable name with a string "
            "value");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"agent_env": {"NCCL_PROTO": 1}}]})"),
            "scenario 07-bad.json: setup[0].agent_env: 'NCCL_PROTO' is not an upper-case variable name with a string "
            "value");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"agent_env": {}}]})"),
            "scenario 07-bad.json: setup[0].agent_env is not an object of NAME: value");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"address": "fd77::2"}]})"),
            "scenario 07-bad.json: setup[0].address is not an IPv4 or IPv6 address with its prefix length "
            "(fd77::2/64)");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"address": "fd77::2/64 dev lo"}]})"),
            "scenario 07-bad.json: setup[0].address is not an IPv4 or IPv6 address with its prefix length "
            "(fd77::2/64)");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"stray_traffic": {"ports": "40010-40000"}}]})"),
            "scenario 07-bad.json: setup[0].stray_traffic is not {\"ports\": \"P,LOW-HIGH,...\"} of at most 1024 "
            "ports");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"stray_traffic": {"ports": "1-2000"}}]})"),
            "scenario 07-bad.json: setup[0].stray_traffic is not {\"ports\": \"P,LOW-HIGH,...\"} of at most 1024 "
            "ports");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"sysctl": {"kernel.panic": "1"}}]})"),
            "scenario 07-bad.json: setup[0].sysctl: 'kernel.panic' is not a net.ipv4.* or net.ipv6.* key with a "
            "string value");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"sysctl": {"net.ipv4.a/../../b": "1"}}]})"),
            "scenario 07-bad.json: setup[0].sysctl: 'net.ipv4.a/../../b' is not a net.ipv4.* or net.ipv6.* key "
            "with a string value");
  EXPECT_EQ(refused(R"({"name": "x", "hosts": 2, "setup": [{"hosts": [2], "mtu": 9000}]})"),
            "scenario 07-bad.json: setup[0].hosts holds 2, not a host of 0..1");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"mtu": 100}]})"),
            "scenario 07-bad.json: setup[0].mtu is not an MTU of 1280..65535");
  EXPECT_EQ(refused(R"({"name": "x", "setup": [{"route": "x"}]})"),
            "scenario 07-bad.json: setup[0].route is not a setup step this build knows");
  std::ofstream(dir / "08-twin.json") << R"({"name": "x"})";
  std::ofstream(dir / "07-bad.json") << R"({"name": "x"})";
  try {
    agent::load_catalog(dir.string());
    ADD_FAILURE() << "two scenarios named x accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(), "scenario 08-twin.json: name 'x' is 07-bad.json's too");
  }
  fs::remove_all(dir);
  EXPECT_THROW(agent::load_catalog(dir.string()), Error);  // no such directory
}

TEST(Scenarios, PortListsOfSetupSteps) {
  EXPECT_EQ(agent::parse_port_list("29500,40000-40002"), (std::vector<std::uint16_t>{29500, 40000, 40001, 40002}));
  EXPECT_EQ(agent::parse_port_list("1"), (std::vector<std::uint16_t>{1}));
  for (const char* bad : {"", "0", "65536", "40002-40000", "a", "1,,2", "1-", "-5", "29500 ", "1-1025"})
    EXPECT_FALSE(agent::parse_port_list(bad)) << bad;
}

ev::EventMessage on(int rank, ev::Event e) {
  return {"repro-x", rank, std::move(e), {}};
}

ev::StageFailed barrier_failure(int rank) {
  ev::StageFailed f;
  f.stage = Stage::store_barrier;
  f.rank = rank;
  f.summary = "2/3 ranks joined the store barrier";
  f.joined = 2;
  f.world_size = 3;
  f.missing = {2};
  return f;
}

TEST(Scenarios, StageFailuresAreCheckedPerRank) {
  const auto s = scenario_named("world-size-mismatch");  // ranks 0 and 1 fail at STORE_BARRIER: "2/3", "missing"
  agent::ScenarioRun run;
  run.add(on(0, barrier_failure(0)));
  ev::StageFailed other = barrier_failure(1);
  other.stage = Stage::store_connect;
  run.add(on(1, other));
  run.add(on(-1, ev::RunDone{false, false}));
  run.add(on(-1, ev::RunDone{false, false}));
  EXPECT_EQ(run.agents_done, 2);
  auto check = agent::check_run(s, run);
  ASSERT_EQ(check.reasons.size(), 1u);
  EXPECT_EQ(check.reasons[0], "rank 1 failed at STORE_CONNECT, expected STORE_BARRIER");
  ASSERT_EQ(check.report.size(), 2u);
  EXPECT_EQ(check.report[0], "rank 0 failed at STORE_BARRIER: 2/3 ranks joined the store barrier | hint: ");
  run.add(on(1, barrier_failure(1)));
  EXPECT_TRUE(agent::check_run(s, run).passed());
  // A run that completed is not the failure the scenario is about.
  run.all_ok = true;
  check = agent::check_run(s, run);
  ASSERT_EQ(check.reasons.size(), 1u);
  EXPECT_EQ(check.reasons[0], "expected a failure, the run completed");
}

TEST(Scenarios, StallsAndErrorsAreChecked) {
  const auto s = scenario_named("rank-skips-a-call");
  agent::ScenarioRun run;
  run.add(on(-1, ev::RunDone{false, false}));
  auto check = agent::check_run(s, run);
  EXPECT_NE(std::find(check.reasons.begin(), check.reasons.end(), "expected a stall report; none came"),
            check.reasons.end());
  EXPECT_NE(std::find(check.reasons.begin(), check.reasons.end(), "no rank's error mentions 'rank 2'"),
            check.reasons.end());
  ev::Stall stall;
  stall.report.reporter = 0;
  stall.report.seq = 50;
  stall.report.stalled_for = std::chrono::milliseconds(3000);
  stall.report.gathered_in = std::chrono::milliseconds(200);
  stall.report.diagnosis = "rank 0 waits on rank 2 at all_reduce #50 step 0; rank 2 is at #49 and has not called #50";
  run.add(on(0, stall), 3.4);
  ASSERT_EQ(run.report.size(), 1u);
  EXPECT_NE(run.report[0].find("(3.4 s after the rank was stopped)"), std::string::npos) << run.report[0];
  run.add(on(0, ev::CollectiveError{"peer",
                                    "rank 2 did not call all_reduce #50; the stall report said: rank 0 "
                                    "waits on rank 2 at all_reduce #50 step 0"}));
  check = agent::check_run(s, run);
  EXPECT_TRUE(check.passed()) << check.reasons.front();
  // Reported after the scenario's 10 s.
  run.stalls[0].report.stalled_for = std::chrono::milliseconds(12'000);
  check = agent::check_run(s, run);
  ASSERT_EQ(check.reasons.size(), 1u);
  EXPECT_EQ(check.reasons[0], "the stall was reported 12.2 s after the last progress, over 10.0 s");
}

TEST(Scenarios, TheSlowLinkIsChecked) {
  const auto s = scenario_named("slow-link");  // completes; rank 3 -> rank 4 slowest
  agent::ScenarioRun run;
  auto links = [](int from, double gbs) {
    ev::Links l;
    l.links.push_back({from, 8 << 20, 1000, 0, gbs, "SOCKET"});
    return l;
  };
  for (const auto& [to, from, gbs] : std::vector<std::tuple<int, int, double>>{
           {0, 5, 1.0}, {1, 0, 1.1}, {2, 1, 0.9}, {3, 2, 1.2}, {4, 3, 0.01}, {5, 4, 1.0}}) {
    run.add(on(to, links(from, gbs)));
  }
  EXPECT_TRUE(agent::check_run(s, run).passed());
  run.links[4].second = links(3, 1.0);
  run.links[1].second = links(0, 0.01);
  const auto check = agent::check_run(s, run);
  ASSERT_EQ(check.reasons.size(), 1u);
  EXPECT_NE(check.reasons[0].find("expected the link rank 3 -> rank 4 flagged slowest; flagged rank 0 -> rank 1"),
            std::string::npos)
      << check.reasons[0];
}

// "exits": the agent's word on how a rank ended (rank-oom-killed: its
// cgroup's memory limit, not a bare SIGKILL).
TEST(Scenarios, HowARankEndedIsChecked) {
  const auto s = scenario_named("rank-oom-killed");
  agent::ScenarioRun run;
  run.add(on(0, ev::CollectiveError{"peer", "rank 0: receiving from rank 1 failed (the peer probably died)"}));
  ev::RankFailed killed;
  killed.signal = 9;
  killed.summary = "rank 1 was killed by SIGKILL";
  run.add(on(1, killed));
  run.add(on(-1, ev::RunDone{false, false}));
  auto check = agent::check_run(s, run);
  ASSERT_FALSE(check.passed());
  EXPECT_EQ(check.reasons[0],
            "rank 1's end ('rank 1 was killed by SIGKILL') does not mention 'rank 1 was killed by the memory limit of "
            "its cgroup (128 MiB)'");
  killed.summary =
      "rank 1 was killed by the memory limit of its cgroup (128 MiB): the kernel's OOM killer sent SIGKILL (1 OOM "
      "kill(s) in /sys/fs/cgroup/x during the run). Give the ranks more memory (the Pod's limits.memory, the unit's "
      "MemoryMax=) or run smaller sizes";
  run.add(on(1, killed));
  check = agent::check_run(s, run);
  EXPECT_TRUE(check.passed()) << check.reasons.front();
  run.exits.clear();
  check = agent::check_run(s, run);
  ASSERT_EQ(check.reasons.size(), 1u);
  EXPECT_EQ(check.reasons[0], "rank 1's agent did not report it ending badly");
}

}  // namespace
