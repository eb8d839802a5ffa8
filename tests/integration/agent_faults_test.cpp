// Faults the agents inject for real (nftables rules, qdiscs) in network
// namespaces of the tests' own, through the client and ringmaster-cli
// remote, and nothing of them left behind.
#include "agent_test_support.h"

namespace ringmaster {
namespace {

using namespace agent_testing;

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

// loss: a random share of what leaves the interface is dropped by an
// nftables rule (the kernel may lack sch_netem), gone with fault_clear.
TEST(AgentFaults, LossDropsAShareOfWhatLeavesTheInterface) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: network namespaces and nftables";
  if (::system("command -v nft >/dev/null && command -v ip >/dev/null") != 0) GTEST_SKIP() << "needs nft and ip";
  NetNamespace ns;
  Agent agent(std::vector<std::string>{"--allow-fault-injection"}, ns.exec());
  auto client = ns.connect(agent.options());
  const json applied =
      client->call({{"type", "fault"}, {"fault", {{"kind", "loss"}, {"interface", "lo"}, {"percent", 12.5}}}});
  EXPECT_EQ(applied["mechanism"], "nftables") << applied.dump();
  EXPECT_NE(ns.ruleset().find("oifname \"lo\" numgen random mod 10000 < 1250"), std::string::npos) << ns.ruleset();
  EXPECT_EQ(ns.ruleset().find("iifname \"lo\" numgen"), std::string::npos) << ns.ruleset();
  // The agent's own port stays reachable: its exemption comes first.
  EXPECT_EQ(client->call({{"type", "ping"}})["type"], "reply");
  client->call({{"type", "fault_clear"}});
  EXPECT_EQ(ns.ruleset().find("numgen"), std::string::npos) << ns.ruleset();
  // direction in: what arrives, the loss a sender elsewhere sees as a wire's.
  client->call(
      {{"type", "fault"}, {"fault", {{"kind", "loss"}, {"interface", "lo"}, {"percent", 3}, {"direction", "in"}}}});
  EXPECT_NE(ns.ruleset().find("iifname \"lo\" numgen random mod 10000 < 300"), std::string::npos) << ns.ruleset();
  EXPECT_EQ(ns.ruleset().find("oifname \"lo\" numgen"), std::string::npos) << ns.ruleset();
  EXPECT_EQ(client->call({{"type", "ping"}})["type"], "reply");
  client->call({{"type", "fault_clear"}});
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

}  // namespace
}  // namespace ringmaster
