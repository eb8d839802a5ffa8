// The agents' preflight (every node reaching every other on the ports a job
// uses) and link check (rounds of disjoint pairs, slow nodes and links
// named), against real agents on loopback.
#include "agent_test_support.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace ringmaster {
namespace {

using namespace agent_testing;

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
  // SIGTERM still stops each agent through its own handler (status 0),
  // although the preflight loaded libfabric's providers: PSM's backtrace
  // handler, which took SIGTERM and called exit() inside the signal (exit
  // status 1, and once a deadlock at exit), is kept off.
  for (Agent* x : {&a, &b, &c}) {
    ::kill(x->child.pid, SIGTERM);
    x->child.finish();
    EXPECT_TRUE(WIFEXITED(x->child.status) && WEXITSTATUS(x->child.status) == 0)
        << "agent on port " << x->port << " ended with status " << x->child.status;
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
  // What certify reads of a link a collective's run named slow: not slow
  // here (at least a fifth of the median), or slow.
  EXPECT_EQ(agent::measured_well(r, 0, 1), "the link check measured it alone at 1.20 GB/s (median 1.20 GB/s)");
  EXPECT_EQ(agent::measured_well(r, 3, 2), "");  // 10 MB/s
  EXPECT_EQ(agent::measured_well(r, 1, 0), "");
  // Slow in its round, measured again alone (certify): what it moved then.
  for (auto& l : r.links) {
    if (l.from == 3 && l.to == 2) l.alone_gbs = 0.9;
    if (l.from == 1 && l.to == 0) l.alone_gbs = 0.006;
  }
  EXPECT_EQ(agent::measured_well(r, 3, 2), "the link check measured it again alone at 0.90 GB/s (median 1.20 GB/s)");
  EXPECT_EQ(agent::measured_well(r, 1, 0), "");  // slow alone too
  set(0, 2, 0.3);                                // a quarter of the median: crowded, not slow
  EXPECT_EQ(agent::measured_well(r, 0, 2), "the link check measured it alone at 0.30 GB/s (median 1.20 GB/s)");
  set(0, 2, 1.2);
  EXPECT_EQ(agent::measured_well(r, 0, 0), "");  // no such link
  set(0, 3, 0);
  EXPECT_EQ(agent::measured_well(r, 0, 3), "");  // not measured
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

// Loss, from what each link's sender resent: a node most links into which
// lose packets is named (not its links one by one), and one lossy link
// elsewhere is named as a link.
TEST(LinkCheck, ALossyNodeAndALossyLinkAreNamed) {
  agent::LinkcheckReport r;
  r.nodes = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      if (i == j) continue;
      agent::LinkMeasure l{i, j, 1.2, "SOCKET", false, {}};
      l.segments = 5000;
      l.resent = 1;
      r.links.push_back(l);
    }
  }
  EXPECT_TRUE(agent::find_link_problems(r).empty());
  for (auto& l : r.links) {
    if (l.to == 2 && l.from != 3) l.resent = 150;  // 3%: two of the three links into node 2
    if (l.from == 0 && l.to == 1) l.resent = 100;  // 2%
  }
  // A link whose sender resent 2% but which ran at full speed is not named
  // (segments resent that were not lost: a busy sender); lost, they slow it.
  ASSERT_EQ(agent::find_link_problems(r).size(), 1u) << ::testing::PrintToString(agent::diagnose_links(r));
  for (auto& l : r.links)
    if (l.from == 0 && l.to == 1) l.gbs = 0.5;  // under half the median, not yet a fifth (slow)
  const auto problems = agent::find_link_problems(r);
  ASSERT_EQ(problems.size(), 2u) << ::testing::PrintToString(agent::diagnose_links(r));
  EXPECT_EQ(problems[0].kind, agent::LinkProblem::Kind::node_lossy);
  EXPECT_EQ(problems[0].node, 2);
  EXPECT_NE(problems[0].text.find("2 of 3 links into node 2 (10.0.0.3) lose packets"), std::string::npos)
      << problems[0].text;
  EXPECT_EQ(problems[1].kind, agent::LinkProblem::Kind::link_lossy);
  EXPECT_EQ(std::make_pair(problems[1].from, problems[1].to), std::make_pair(0, 1));
  EXPECT_NE(problems[1].text.find("resent 2.0% of its TCP segments (100 of 5000)"), std::string::npos)
      << problems[1].text;
  // Too few segments to tell: nothing said.
  for (auto& l : r.links)
    l.segments = 500;
  EXPECT_TRUE(agent::find_link_problems(r).empty());
}

// Certify over three agents: every step runs and passes; then a third
// node whose agent gives its ranks another NCCL_PROTO is isolated by the
// first step and sits out the rest, which run over the other two.
TEST(AgentCertify, StepsRunInOrderAndAnOddNodeIsIsolated) {
  const std::string token_file = write_token("agent-token-certify", "certify-token-0123456789");
  Agent a({"--token-file", token_file}), b({"--token-file", token_file});
  auto certify = [&](const Agent& third) {
    std::string agents;
    for (const Agent* x : std::initializer_list<const Agent*>{&a, &b, &third})
      agents += (agents.empty() ? "127.0.0.1:" : ",127.0.0.1:") + std::to_string(x->port);
    auto cli =
        testing_support::spawn({RINGMASTER_CLI, "certify", "--agents", agents, "--token-file", token_file, "--env",
                                "NCCL_SHM_DISABLE=1", "--max-bytes", "1M", "--link-bytes", "1M", "--json"},
                               {});
    cli.finish();
    return std::make_pair(cli.exit_code(), cli.output);
  };
  {
    Agent c({"--token-file", token_file});
    const auto [code, output] = certify(c);
    ASSERT_NE(output.find('{'), std::string::npos) << output;
    const json report = json::parse(output.substr(output.find('{')));
    EXPECT_EQ(report["schema"], "ringmaster.certify/1");
    std::vector<std::string> steps;
    for (const auto& s : report["steps"]) {
      steps.push_back(s["name"].get<std::string>());
      EXPECT_NE(s["state"], "failed") << s.dump();
      if (s["name"] != "envelope") {
        EXPECT_NE(s["state"], "skipped") << s.dump();  // the envelope: no --instance, skipped
      }
    }
    EXPECT_EQ(steps, (std::vector<std::string>{"nodes", "preflight", "linkcheck", "sweeps", "envelope"}));
    ASSERT_EQ(report["nodes"].size(), 3u);
    for (const auto& n : report["nodes"])
      EXPECT_NE(n["verdict"], "ISOLATE") << n.dump();
    // Four collectives swept over the three nodes, each with its rows.
    const json& sweeps = report["steps"][3]["detail"];
    ASSERT_EQ(sweeps.size(), 4u) << sweeps.dump();
    for (const auto& sweep : sweeps) {
      EXPECT_EQ(sweep["error"], "") << sweep.dump();
      EXPECT_GT(sweep["peak_busbw"].get<double>(), 0) << sweep.dump();
    }
    EXPECT_EQ(report["steps"][3]["nodes"], (std::vector<int>{0, 1, 2}));
    // 0, or 1 when this busy machine made a link look slow even alone.
    EXPECT_TRUE(code == 0 || (code == 1 && report["verdict"] == "ISOLATE")) << output;
  }
  Agent odd({"--token-file", token_file}, {"/usr/bin/env", "NCCL_PROTO=Simple"});
  const auto [code, output] = certify(odd);
  EXPECT_EQ(code, 1) << output;
  const json report = json::parse(output.substr(output.find('{')));
  EXPECT_EQ(report["verdict"], "ISOLATE");
  EXPECT_EQ(report["nodes"][2]["verdict"], "ISOLATE") << report["nodes"].dump();
  EXPECT_EQ(report["nodes"][2]["reasons"][0]["step"], "nodes");
  EXPECT_NE(report["nodes"][2]["reasons"][0]["text"].get<std::string>().find("NCCL_PROTO=Simple on node 2"),
            std::string::npos);
  EXPECT_EQ(report["steps"][1]["nodes"], (std::vector<int>{0, 1})) << "the odd node sits out the later steps";
  EXPECT_EQ(report["steps"][3]["nodes"], (std::vector<int>{0, 1}));
}

// With a declared instance type, each sweep is held to that type's
// envelope: loopback sockets fall far short of two p5, said with the
// prediction and the published run it comes from; a gate above what two
// p5 have ever reached is refused before anything runs.
// An all_reduce sweep over four nodes under its envelope (loopback is no
// p5) is bisected inside its own job: rounds of groups of the nodes, each
// measured, a verdict in the sweeps step, and whatever it names judged
// with that reason.
TEST(AgentCertify, AShortSweepIsBisectedInsideItsJob) {
  const std::string token_file = write_token("agent-token-bisect", "bisect-token-0123456789");
  std::vector<std::unique_ptr<Agent>> agents;
  std::string list;
  for (int i = 0; i < 4; ++i) {
    agents.push_back(std::make_unique<Agent>(std::vector<std::string>{"--token-file", token_file}));
    list += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(agents.back()->port);
  }
  auto cli = testing_support::spawn({RINGMASTER_CLI, "certify", "--agents", list, "--token-file", token_file, "--env",
                                     "NCCL_SHM_DISABLE=1", "--max-bytes", "1M", "--link-bytes", "1M", "--collectives",
                                     "all_reduce", "--instance", "p5", "--history", "off", "--json"},
                                    {}, false);
  cli.finish();
  ASSERT_EQ(cli.exit_code(), 1) << cli.output;
  const json report = json::parse(cli.output.substr(cli.output.find('{')));
  const json& sweeps = report["steps"][3];
  ASSERT_EQ(sweeps["name"], "sweeps");
  const json& detail = sweeps["detail"][0];
  ASSERT_TRUE(detail.contains("bisect")) << sweeps.dump();
  const json& bisect = detail["bisect"];
  ASSERT_GE(bisect.size(), 2u) << bisect.dump();       // a round at least, then the verdict
  ASSERT_LE(bisect.size(), 1u + 4u) << bisect.dump();  // log2(4) + 2 rounds
  for (std::size_t i = 0; i + 1 < bisect.size(); ++i) {
    EXPECT_EQ(bisect[i]["round"], static_cast<int>(i) + 1);
    for (const auto& g : bisect[i]["groups"]) {
      EXPECT_EQ(g["nodes"].size(), 2u) << g.dump();
      EXPECT_GT(g["busbw"].get<double>(), 0) << g.dump();  // every group formed its communicator and ran
    }
  }
  EXPECT_EQ(bisect[0]["groups"][0]["nodes"], json({0, 1}));
  EXPECT_EQ(bisect[0]["groups"][1]["nodes"], json({2, 3}));
  const json& end = bisect.back();
  ASSERT_TRUE(end.contains("verdict")) << end.dump();
  EXPECT_NE(sweeps["findings"].dump().find("bisected inside its job: " + end["text"].get<std::string>()),
            std::string::npos)
      << sweeps.dump();
  if (end["verdict"] == "node") {  // loopback's noise can name one, watched unless far slower
    const json& node = report["nodes"][end["node"].get<int>()];
    EXPECT_NE(node["verdict"], "PASS");
    EXPECT_NE(node["reasons"].dump().find("its bisection inside the job"), std::string::npos) << node.dump();
  }
}

TEST(AgentCertify, SweepsAreHeldToTheInstancesEnvelope) {
  const std::string token_file = write_token("agent-token-envelope", "envelope-token-0123456789");
  Agent a({"--token-file", token_file}), b({"--token-file", token_file});
  const std::string agents = "127.0.0.1:" + std::to_string(a.port) + ",127.0.0.1:" + std::to_string(b.port);
  auto certify = [&](std::vector<std::string> extra, bool with_stderr = false) {
    std::vector<std::string> argv = {RINGMASTER_CLI,  "certify",
                                     "--agents",      agents,
                                     "--token-file",  token_file,
                                     "--env",         "NCCL_SHM_DISABLE=1",
                                     "--max-bytes",   "1M",
                                     "--link-bytes",  "1M",
                                     "--collectives", "all_reduce,all_to_all",
                                     "--history",     "off",
                                     "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto cli = testing_support::spawn(argv, {}, with_stderr);
    cli.finish();
    return std::make_pair(cli.exit_code(), cli.output);
  };
  const auto [code, output] = certify({"--instance", "p5"});
  EXPECT_EQ(code, 1) << output;
  const json report = json::parse(output.substr(output.find('{')));
  EXPECT_TRUE(report["short_of_envelope"].get<bool>());
  const json& step = report["steps"][4];
  EXPECT_EQ(step["name"], "envelope");
  EXPECT_EQ(step["state"], "found") << step.dump();
  ASSERT_EQ(step["detail"].size(), 1u) << step.dump();  // all_to_all: no model of it
  const json& all_reduce = step["detail"][0];
  EXPECT_FALSE(all_reduce["within"].get<bool>());
  EXPECT_GT(all_reduce["predicted_busbw"].get<double>(), all_reduce["busbw"].get<double>());
  ASSERT_FALSE(all_reduce["published"].empty());
  EXPECT_EQ(all_reduce["published"][0]["nodes"], 2);
  EXPECT_NE(step["findings"].dump().find("under the envelope: p5.48xlarge x 2, all_reduce at 1 MiB"), std::string::npos)
      << step.dump();
  EXPECT_NE(step["findings"].dump().find("all_to_all: no envelope"), std::string::npos) << step.dump();

  const auto [refused, says] = certify({"--instance", "p5", "--gate", "800"}, true);
  EXPECT_EQ(refused, 2) << says;
  EXPECT_NE(says.find("a gate of 800.0 GB/s for all_reduce over 2 x p5.48xlarge is above what such a cluster "
                      "reaches"),
            std::string::npos)
      << says;
  EXPECT_NE(says.find("the best published run 479.3 GB/s at 8 GiB on 2 nodes"), std::string::npos) << says;
  EXPECT_EQ(says.find("# nodes:"), std::string::npos) << "nothing ran: " << says;
  // A node's topology file declares the cluster as well: AWS's p5 file is
  // a p5, held to the same envelope, and the step says what declared it.
  const std::string p5_file = std::string(RINGMASTER_TOPOLOGY_DIR) + "/p5.48xl-topo.xml";
  const auto [by_file, by_file_output] = certify({"--topology", p5_file}, true);
  EXPECT_EQ(by_file, 1) << by_file_output;
  EXPECT_NE(by_file_output.find("# envelope: declared by " + p5_file + ": 8 GPUs (sm_90), 32 NICs, a p5.48xlarge"),
            std::string::npos)
      << by_file_output;
  const std::size_t json_at = by_file_output.find("\n{") + 1;
  const json file_report = json::parse(by_file_output.substr(json_at, by_file_output.find('\n', json_at) - json_at));
  const json& file_step = file_report["steps"][4];
  EXPECT_EQ(file_step["state"], "found") << file_step.dump();
  EXPECT_NE(file_step["summary"].get<std::string>().find("p5.48xlarge (declared by " + p5_file), std::string::npos)
      << file_step.dump();
  EXPECT_DOUBLE_EQ(file_step["detail"][0]["predicted_busbw"].get<double>(),
                   all_reduce["predicted_busbw"].get<double>());
  // A file that is not the type named beside it is refused before anything runs.
  const auto [mismatch, mismatch_says] =
      certify({"--topology", std::string(RINGMASTER_TOPOLOGY_DIR) + "/p4d-24xl-topo.xml", "--instance", "p5"}, true);
  EXPECT_EQ(mismatch, 2) << mismatch_says;
  EXPECT_NE(mismatch_says.find("4 NICs; a p5.48xlarge has 8 GPUs and 32 NICs"), std::string::npos) << mismatch_says;
  EXPECT_EQ(mismatch_says.find("# nodes:"), std::string::npos) << "nothing ran: " << mismatch_says;
  // Without a type, no envelope: the step says why it did not run.
  const auto [plain, plain_output] = certify({});
  const json plain_report = json::parse(plain_output.substr(plain_output.find('{')));
  EXPECT_EQ(plain_report["steps"][4]["state"], "skipped");
  EXPECT_NE(plain_report["steps"][4]["summary"].get<std::string>().find("no instance type declared"),
            std::string::npos);
  EXPECT_FALSE(plain_report["short_of_envelope"].get<bool>());
}

// --state: a certification stopped after its link check (the program
// killed) resumes from the file: the three steps it finished are kept as
// they were, only the sweeps and the envelope run; once it ran to its
// end, the next one starts afresh.
TEST(AgentCertify, AStoppedCertificationResumesFromItsLastStep) {
  const std::string token_file = write_token("agent-token-resume", "resume-token-0123456789");
  Agent a({"--token-file", token_file}), b({"--token-file", token_file});
  const std::string agents = "127.0.0.1:" + std::to_string(a.port) + ",127.0.0.1:" + std::to_string(b.port);
  const std::string state = ::testing::TempDir() + "certify-state-" + std::to_string(::getpid()) + ".json";
  std::filesystem::remove(state);
  const std::vector<std::string> argv = {
      RINGMASTER_CLI,       "certify",     "--agents", agents,         "--token-file", token_file, "--env",
      "NCCL_SHM_DISABLE=1", "--max-bytes", "1M",       "--link-bytes", "1M",           "--state",  state};
  auto first = testing_support::spawn(argv, {}, true);
  // Until the sweeps begin (the link check ended and kept), then killed.
  std::string seen;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen.find("# sweeps: Collective sweeps") == std::string::npos && std::chrono::steady_clock::now() < until) {
    pollfd p{first.out_fd, POLLIN, 0};
    char buf[512];
    if (::poll(&p, 1, 200) > 0) {
      const ssize_t n = ::read(first.out_fd, buf, sizeof(buf));
      if (n <= 0) break;
      seen.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::kill(first.pid, SIGKILL);
  first.finish();
  ASSERT_NE(seen.find("# sweeps: Collective sweeps"), std::string::npos) << seen << first.output;
  std::ifstream saved_in(state);
  const json saved = json::parse(saved_in);
  EXPECT_FALSE(saved["complete"].get<bool>());
  ASSERT_EQ(saved["report"]["steps"].size(), 3u) << saved.dump();
  const double linkcheck_seconds = saved["report"]["steps"][2]["seconds"].get<double>();

  auto second = testing_support::spawn(argv, {}, true);
  second.finish();
  EXPECT_EQ(second.exit_code(), 0) << second.output;
  EXPECT_NE(second.output.find("resuming the certification in " + state + ": 3 step(s) finished before are kept"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(second.output.find("# nodes: Nodes alike"), std::string::npos) << "nodes ran again: " << second.output;
  EXPECT_EQ(second.output.find("# linkcheck: Every link"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("# sweeps: 4 collective(s)"), std::string::npos) << second.output;
  std::ifstream done_in(state);
  const json done = json::parse(done_in);
  EXPECT_TRUE(done["complete"].get<bool>());
  ASSERT_EQ(done["report"]["steps"].size(), 5u);
  EXPECT_EQ(done["report"]["steps"][2]["seconds"].get<double>(), linkcheck_seconds) << "kept as it was";
  // Complete: the next starts afresh.
  auto third = testing_support::spawn(argv, {}, true);
  third.finish();
  EXPECT_EQ(third.output.find("resuming"), std::string::npos) << third.output;
  EXPECT_NE(third.output.find("# nodes: Nodes alike"), std::string::npos) << third.output;
  std::filesystem::remove(state);
}

// The HTML report, rendered by a real browser (headless Chromium, to
// PDF) and read back as the text it shows: the verdict, the odd node
// isolated with why, the steps, the link check's matrix and the sweep's
// plot against its envelope.
TEST(AgentCertify, TheHtmlReportRendersInChromium) {
  if (::access("/usr/bin/chromium", X_OK) != 0 || ::access("/usr/bin/pdftotext", X_OK) != 0) {
    GTEST_SKIP() << "chromium or pdftotext (poppler-utils) is not installed (scripts/setup-deps installs both)";
  }
  const std::string token_file = write_token("agent-token-html", "html-token-0123456789");
  Agent a({"--token-file", token_file}), b({"--token-file", token_file});
  Agent odd({"--token-file", token_file}, {"/usr/bin/env", "NCCL_PROTO=Simple"});
  const std::string agents = "127.0.0.1:" + std::to_string(a.port) + ",127.0.0.1:" + std::to_string(b.port) +
                             ",127.0.0.1:" + std::to_string(odd.port);
  const std::string dir = ::testing::TempDir() + "certify-html-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  auto cli = testing_support::spawn({RINGMASTER_CLI, "certify", "--agents", agents, "--token-file", token_file, "--env",
                                     "NCCL_SHM_DISABLE=1", "--max-bytes", "1M", "--link-bytes", "1M", "--collectives",
                                     "all_reduce", "--instance", "p5", "--report", dir + "/report.html"},
                                    {});
  cli.finish();
  EXPECT_EQ(cli.exit_code(), 1) << cli.output;
  std::ifstream in(dir + "/report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_NE(html.find("<svg"), std::string::npos) << html.substr(0, 400);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos) << "self-contained: nothing fetched";
  auto browser = testing_support::spawn(
      {"/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + dir + "/profile",
       "--print-to-pdf=" + dir + "/report.pdf", "file://" + dir + "/report.html"},
      {{"HOME", dir}}, true);
  browser.finish();
  ASSERT_EQ(browser.exit_code(), 0) << browser.output;
  auto text = testing_support::spawn({"/usr/bin/pdftotext", dir + "/report.pdf", "-"}, {});
  text.finish();
  ASSERT_EQ(text.exit_code(), 0);
  // What the page shows, as laid out (pdftotext joins what wraps).
  std::string shown;
  for (const char c : text.output)
    shown += c == '\n' ? ' ' : c;
  for (const char* want : {"Ringmaster certification", "ISOLATE: 3 node(s)", "Steps", "nodes", "preflight", "linkcheck",
                           "sweeps", "envelope", "Nodes", "node 2", "NCCL_PROTO=Simple", "Link check",
                           "all_reduce busbw (GB/s) by size", "expected"}) {
    EXPECT_NE(shown.find(want), std::string::npos) << "the rendered page does not show '" << want << "': " << shown;
  }
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

}  // namespace
}  // namespace ringmaster
