// Preflight's parts on this node: probes over real sockets (ok, refused,
// unresolved), listeners, node facts; and the diagnosis of reports built
// the way run_preflight builds them.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <optional>

#include <algorithm>
#include <future>
#include <regex>
#include <thread>
#include <tuple>

#include "ringmaster/agent/preflight.h"
#include "ringmaster/tools/preflight.h"

namespace ringmaster {
namespace {

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t length = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(Reach, ClassifiesWhatEachTargetMeets) {
  PortListeners listeners;
  const auto open = listeners.listen_in(20000, 29999, 1);
  ASSERT_EQ(open.size(), 1u);
  ASSERT_TRUE(open[0].listening) << open[0].note;
  const std::uint16_t closed = free_port();
  const auto results = probe_reach(
      {{"127.0.0.1", open[0].port}, {"127.0.0.1", closed}, {"no-such-host.invalid", 80}, {"127.0.0.1", open[0].port}},
      std::chrono::milliseconds(2000));
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].reach, Reach::ok) << results[0].detail;
  EXPECT_GT(results[0].path_mtu, 0);
  EXPECT_EQ(results[1].reach, Reach::refused) << results[1].detail;
  EXPECT_EQ(results[2].reach, Reach::unresolved);
  EXPECT_NE(results[2].detail.find("no-such-host.invalid"), std::string::npos);
  EXPECT_EQ(results[3].reach, Reach::ok);
  // The listener's thread accepted (and closed) both handshakes.
  for (int i = 0; i < 100 && listeners.accepted() < 2; ++i)
    ::usleep(10000);
  EXPECT_EQ(listeners.accepted(), 2u);
}

TEST(Reach, MoreTargetsThanOneBatchAllAnswer) {
  PortListeners listeners;
  const auto ports = listeners.listen_in(20000, 29999, 4);
  std::vector<ReachTarget> targets;
  for (int i = 0; i < 1200; ++i)
    targets.push_back({"127.0.0.1", ports[static_cast<std::size_t>(i) % ports.size()].port});
  const auto results = probe_reach(targets, std::chrono::milliseconds(3000));
  EXPECT_TRUE(std::all_of(results.begin(), results.end(), [](const ReachResult& r) { return r.reach == Reach::ok; }));
}

TEST(Reach, APortTakenIsSaidToBeInUse) {
  PortListeners first, second;
  const auto taken = first.listen_in(20000, 29999, 1).front();
  ASSERT_TRUE(taken.listening);
  const auto again = second.listen_on(taken.port);
  EXPECT_FALSE(again.listening);
  EXPECT_EQ(again.note, "in use");
  // listen_in walks past it.
  const auto next = second.listen_in(taken.port, static_cast<std::uint16_t>(taken.port + 10), 1).front();
  EXPECT_TRUE(next.listening);
  EXPECT_NE(next.port, taken.port);
}

TEST(Reach, NamesRoundTrip) {
  for (int r = 0; r <= static_cast<int>(Reach::untested); ++r)
    EXPECT_EQ(reach_from_name(name_of(static_cast<Reach>(r))), static_cast<Reach>(r));
  EXPECT_FALSE(reach_from_name("maybe"));
}

TEST(NodeFacts, ReadsThisNode) {
  const NodeFacts f = gather_node_facts({"localhost", "lo"});
  EXPECT_FALSE(f.hostname.empty());
  EXPECT_GT(f.ephemeral_hi, f.ephemeral_lo);
  EXPECT_FALSE(f.master_resolves_to.empty()) << f.master_error;
  EXPECT_EQ(f.socket_ifname_matches, std::vector<std::string>{"lo"});
  EXPECT_GT(f.shm_bytes, 0u);
  EXPECT_NE(f.nofile_soft, 0);
  // Where the kernel tracks connections, the table's fill is read.
  if (std::FILE* max = std::fopen("/proc/sys/net/netfilter/nf_conntrack_max", "r")) {
    std::fclose(max);
    EXPECT_GT(f.conntrack_max, 0);
    EXPECT_GE(f.conntrack_count, 0);
  } else {
    EXPECT_EQ(f.conntrack_max, -1);
  }
}

// The stack as this node has it: every component, in order; a version
// read through the library itself where it loads, the reason where not.
TEST(NodeFacts, ReadsTheSoftwareStack) {
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(21903), "2.19.3");
  EXPECT_EQ(nccl_version_text(2803), "2.8.3");
  const auto stack = read_software_stack();
  std::vector<std::string> components;
  for (const auto& [component, version] : stack)
    components.push_back(component);
  EXPECT_EQ(components, (std::vector<std::string>{"nvidia_driver", "cuda_driver", "nccl", "libfabric", "aws_ofi_nccl",
                                                  "efa_driver"}));
  // Where a library loads here, its version has the form its own call
  // gives; where it does not, the loader's reason.
  for (const auto& [component, library, pattern] :
       {std::tuple<std::string, const char*, const char*>{"nccl", "libnccl.so.2", R"(\d+\.\d+\.\d+)"},
        {"libfabric", "libfabric.so.1", R"(\d+\.\d+)"},
        {"cuda_driver", "libcuda.so.1", R"(\d+\.\d+)"}}) {
    const auto found = std::find_if(stack.begin(), stack.end(), [&](const auto& e) { return e.first == component; });
    ASSERT_NE(found, stack.end());
    void* handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle != nullptr) {
      ::dlclose(handle);
      EXPECT_TRUE(std::regex_match(found->second, std::regex(pattern))) << component << ": " << found->second;
    } else {
      EXPECT_TRUE(found->second.starts_with("not found (")) << component << ": " << found->second;
      EXPECT_NE(found->second.find(library), std::string::npos) << found->second;
    }
  }
  EXPECT_EQ(gather_node_facts({}).stack.size(), stack.size());
}

// A report of `n` healthy nodes with two ports per class, every probe
// `fill`; `set` then changes single probes.
struct ReportBuilder {
  PreflightReport r;
  explicit ReportBuilder(int n, Reach fill = Reach::ok) {
    r.master_port = 29500;
    r.master_addr = "10.0.0.1";
    r.classes = {{"master", "MASTER_PORT 29500"},
                 {"ephemeral", "ephemeral ports 32768-60999 (ip_local_port_range)"},
                 {"below_ephemeral", "ports 1025-32767 (below the ephemeral range)"}};
    for (int i = 0; i < n; ++i) {
      PreflightNode node;
      node.name = "node" + std::to_string(i);
      node.address = "10.0.0." + std::to_string(i + 1);
      node.facts.hostname = node.name;
      node.facts.ephemeral_lo = 32768;
      node.facts.ephemeral_hi = 60999;
      node.facts.shm_bytes = node.facts.shm_free_bytes = 8ULL << 30;
      node.facts.nofile_soft = node.facts.nofile_hard = 65536;
      node.facts.memlock_soft = node.facts.memlock_hard = -1;
      node.facts.transports = {"shm", "socket"};
      node.facts.interfaces = {{"eth0", {node.address}, true, false, 9001, 100000}};
      r.nodes.push_back(node);
    }
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        r.probes.push_back({i, j, "master", {}, r.nodes[j].address, 29500, {fill, 1, 0, {}}});
        for (std::uint16_t port : {std::uint16_t{40000}, std::uint16_t{50000}})
          r.probes.push_back({i, j, "ephemeral", {}, r.nodes[j].address, port, {fill, 1, 0, {}}});
        for (std::uint16_t port : {std::uint16_t{9000}, std::uint16_t{20000}})
          r.probes.push_back({i, j, "below_ephemeral", {}, r.nodes[j].address, port, {fill, 1, 0, {}}});
        r.probes.push_back({i, j, {}, "eth0", r.nodes[j].address, 29500, {fill, 1, 0, {}}});
      }
    }
  }
  // Every probe of `cls` (any class when empty) matching from/to/port (-1: any).
  ReportBuilder& set(const std::string& cls, int from, int to, int port, Reach reach) {
    for (auto& p : r.probes) {
      if ((cls.empty() || p.port_class == cls) && (from < 0 || p.from == from) && (to < 0 || p.to == to) &&
          (port < 0 || p.port == port) && !p.port_class.empty()) {
        p.result.reach = reach;
      }
    }
    return *this;
  }
};

std::vector<PreflightFinding> problems(const PreflightReport& r) {
  auto all = diagnose_preflight(r);
  std::erase_if(all, [](const PreflightFinding& f) { return f.severity != PreflightFinding::Severity::problem; });
  return all;
}

bool any_says(const std::vector<PreflightFinding>& findings, std::initializer_list<const char*> words) {
  return std::any_of(findings.begin(), findings.end(), [&](const PreflightFinding& f) {
    return std::all_of(words.begin(), words.end(), [&](const char* w) { return f.text.find(w) != std::string::npos; });
  });
}

std::string all_text(const std::vector<PreflightFinding>& findings) {
  std::string out;
  for (const auto& f : findings)
    out += std::string(name_of(f.severity)) + ": " + f.text + "\n";
  return out;
}

TEST(PreflightDiagnosis, AHealthyClusterHasNoProblemAndNamesTheInterface) {
  ReportBuilder b(4);
  const auto findings = diagnose_preflight(b.r);
  EXPECT_TRUE(problems(b.r).empty()) << all_text(findings);
  EXPECT_TRUE(any_says(findings, {"NCCL_SOCKET_IFNAME=eth0 reaches every node"})) << all_text(findings);
  EXPECT_EQ(b.r.cell_text(0, 1, "ephemeral"), "ok");
  EXPECT_EQ(b.r.cell_text(1, 1, "ephemeral"), "-");
}

TEST(PreflightDiagnosis, EverythingDroppedIsTheMissingSelfReference) {
  ReportBuilder b(3, Reach::dropped);
  const auto p = problems(b.r);
  ASSERT_EQ(p.size(), 2u) << all_text(p);  // the ports, and no interface reaching every node
  EXPECT_TRUE(any_says(p, {"every port sampled from 1025 to 65535", "dropped", "self-referencing"})) << all_text(p);
}

TEST(PreflightDiagnosis, OnlyMasterPortOpenNamesTheNarrowedRule) {
  ReportBuilder b(3, Reach::dropped);
  b.set("master", -1, -1, -1, Reach::ok);
  const auto p = problems(b.r);
  EXPECT_TRUE(any_says(p, {"ephemeral ports 32768-60999", "while MASTER_PORT 29500 is open", "narrowed"}))
      << all_text(p);
  EXPECT_FALSE(any_says(p, {"every port sampled"})) << all_text(p);
}

TEST(PreflightDiagnosis, ANodeThatNobodyReachesIsNamed) {
  ReportBuilder b(4);
  b.set("ephemeral", -1, 2, -1, Reach::rejected);
  const auto p = problems(b.r);
  EXPECT_TRUE(any_says(p, {"on node 2 (node2)", "rejected", "from every other node"})) << all_text(p);
  // About that node's side: certify isolates it by this.
  const auto about = std::find_if(p.begin(), p.end(), [](const PreflightFinding& f) {
    return f.text.find("from every other node") != std::string::npos;
  });
  ASSERT_NE(about, p.end());
  EXPECT_EQ(about->nodes, std::vector<int>{2});
  EXPECT_EQ(b.r.cell(0, 2, "ephemeral"), Reach::rejected);
  EXPECT_EQ(b.r.cell(2, 0, "ephemeral"), Reach::ok);
}

TEST(PreflightDiagnosis, APairClosedEverywhereIsSaidOnceWithItsDirection) {
  ReportBuilder b(3);
  b.set("", 1, 0, -1, Reach::dropped);
  const auto p = problems(b.r);
  ASSERT_EQ(p.size(), 1u) << all_text(p);
  EXPECT_TRUE(any_says(p, {"closed on every port class", "node 1 -> node 0", "one-way rule"})) << all_text(p);
}

TEST(PreflightDiagnosis, PartOfARangeOpenIsANarrowedRange) {
  ReportBuilder b(3);
  b.set("ephemeral", -1, -1, 50000, Reach::dropped);
  EXPECT_EQ(b.r.cell_text(0, 1, "ephemeral"), "1/2 ok");
  EXPECT_EQ(b.r.cell(0, 1, "ephemeral"), Reach::dropped);
  const auto p = problems(b.r);
  EXPECT_TRUE(any_says(p, {"only part of ephemeral ports", "40000 ok", "50000 dropped"})) << all_text(p);
}

// RINGMASTER_PORT_RANGE held by outbound connections inside a node's
// ephemeral range is a problem naming the sysctl that reserves it; inside
// the range but free, a warning; outside it, nothing.
TEST(PreflightDiagnosis, PortRangeAgainstTheEphemeralRange) {
  ReportBuilder b(2);
  b.r.port_range = "40000-40001";
  b.r.nodes[1].ports.push_back(
      {"port_range",
       {{40000, false, "in use by an outbound connection (ESTABLISHED to 10.0.0.1:29600)"}, {40001, true, ""}}});
  const auto p = problems(b.r);
  EXPECT_TRUE(any_says(
      p, {"RINGMASTER_PORT_RANGE 40000-40001: 1 of the 2 port(s) tried are taken on node 1",
          "ESTABLISHED to 10.0.0.1:29600", "ip_local_port_range 32768-60999", "ip_local_reserved_ports=40000-40001"}))
      << all_text(p);
  const auto all = diagnose_preflight(b.r);
  EXPECT_TRUE(any_says(all, {"RINGMASTER_PORT_RANGE 40000-40001 overlaps node 0's"})) << all_text(all);
  b.r.port_range = "61000-61001";
  b.r.nodes[1].ports.clear();
  EXPECT_FALSE(any_says(diagnose_preflight(b.r), {"RINGMASTER_PORT_RANGE"})) << all_text(diagnose_preflight(b.r));
}

// The master's name: loopback on its own node (Debian's 127.0.1.1 line),
// or another node's address on one node. And MASTER_PORT held by an
// outbound connection inside the ephemeral range.
TEST(PreflightDiagnosis, MasterNameAndPortAsTheNodesSeeThem) {
  ReportBuilder b(3);
  for (auto& n : b.r.nodes) {
    n.facts.master_addr = "trainer-0";
    n.facts.master_resolves_to = {"10.0.0.1"};
  }
  b.r.master_addr = "trainer-0";
  b.r.nodes[0].facts.master_resolves_to = {"127.0.1.1"};
  b.r.nodes[2].facts.master_resolves_to = {"10.0.0.2"};
  b.r.nodes[0].facts.ephemeral_lo = 20000;
  b.r.nodes[0].facts.ephemeral_hi = 40000;
  b.r.nodes[0].ports.push_back(
      {"master", {{29500, false, "in use by an outbound connection (ESTABLISHED to 10.0.0.2:29600)"}}});
  const auto p = problems(b.r);
  EXPECT_TRUE(any_says(p, {"MASTER_ADDR trainer-0 resolves to 127.0.1.1, a loopback address, on node 0"}))
      << all_text(p);
  EXPECT_TRUE(any_says(p, {"resolves differently across nodes", "10.0.0.1", "10.0.0.2", "127.0.1.1"})) << all_text(p);
  EXPECT_TRUE(
      any_says(p, {"MASTER_PORT 29500 is taken on node 0", "outbound connection (ESTABLISHED to 10.0.0.2:29600)",
                   "ip_local_port_range 20000-40000", "ip_local_reserved_ports=29500"}))
      << all_text(p);
  // Every node on loopback: agents of one machine (MASTER_ADDR=localhost).
  ReportBuilder local(3);
  for (auto& n : local.r.nodes) {
    n.facts.master_addr = "localhost";
    n.facts.master_resolves_to = {"127.0.0.1"};
  }
  EXPECT_TRUE(problems(local.r).empty()) << all_text(problems(local.r));
  // One node alone: its loopback answer is a single-node job's, not a problem.
  ReportBuilder one(1);
  one.r.nodes[0].facts.master_addr = "trainer-0";
  one.r.nodes[0].facts.master_resolves_to = {"127.0.1.1"};
  EXPECT_TRUE(problems(one.r).empty()) << all_text(problems(one.r));
}

TEST(PreflightDiagnosis, NodeFactsThatBreakAJob) {
  ReportBuilder b(3);
  b.r.socket_ifname = "ib0";
  for (auto& n : b.r.nodes) {
    n.facts.master_addr = "trainer-0";
    n.facts.master_resolves_to = {"10.0.0.1"};
    n.facts.socket_ifname = "ib0";
  }
  b.r.nodes[0].facts.socket_ifname_matches = {"ib0"};
  b.r.nodes[1].facts.socket_ifname_matches = {"ib0"};
  b.r.nodes[2].facts.master_resolves_to.clear();
  b.r.nodes[2].facts.master_error = "Name or service not known";
  b.r.nodes[1].facts.shm_bytes = 64 << 20;
  b.r.nodes[0].facts.efa_devices = {"rdmap16s27"};
  b.r.nodes[0].facts.memlock_soft = 65536;
  b.r.nodes[0].facts.transports_unusable = {{"ofi", "no provider"}};
  b.r.nodes[2].clock_offset_ms = 2500;
  b.r.nodes[1].facts.conntrack_count = 250'000;
  b.r.nodes[1].facts.conntrack_max = 262'144;
  b.r.nodes[2].facts.conntrack_count = 190'000;
  b.r.nodes[2].facts.conntrack_max = 262'144;
  const auto findings = diagnose_preflight(b.r);
  const auto p = problems(b.r);
  EXPECT_TRUE(any_says(p, {"NCCL_SOCKET_IFNAME=ib0 matches no interface on node 2", "NCCL_SOCKET_IFNAME=eth0"}))
      << all_text(p);
  EXPECT_TRUE(any_says(p, {"MASTER_ADDR trainer-0 does not resolve on node 2"})) << all_text(p);
  EXPECT_TRUE(any_says(p, {"/dev/shm on node 1", "64 MiB"})) << all_text(p);
  for (const auto& f : p) {
    if (f.text.find("/dev/shm on node 1") != std::string::npos) {
      EXPECT_EQ(f.nodes, std::vector<int>{1}) << f.text;
    }
  }
  EXPECT_TRUE(any_says(p, {"node 0", "EFA", "memlock", "65536"})) << all_text(p);
  EXPECT_TRUE(any_says(p, {"node 0", "EFA devices (rdmap16s27)", "no provider"})) << all_text(p);
  EXPECT_TRUE(any_says(findings, {"node 2 (node2)'s clock is +2.5 s off"})) << all_text(findings);
  // A conntrack table 95% full is a problem, 72% a warning, an empty one nothing.
  EXPECT_TRUE(any_says(
      p, {"node 1 (node1): the connection-tracking table holds 250000 of 262144 entries (95%)", "nf_conntrack_max"}))
      << all_text(p);
  EXPECT_FALSE(any_says(p, {"node 2 (node2): the connection-tracking table"})) << all_text(p);
  EXPECT_TRUE(
      any_says(findings, {"node 2 (node2): the connection-tracking table holds 190000 of 262144 entries (72%)"}))
      << all_text(findings);
  EXPECT_FALSE(any_says(findings, {"node 0 (node0): the connection-tracking table"})) << all_text(findings);
  // Problems come first.
  EXPECT_EQ(findings.front().severity, PreflightFinding::Severity::problem);
}

// A node whose connection-tracking table is full drops every new
// connection to it and from it: the probes it left unanswered are put on
// the table, not read as a firewall rule, and the rest is read as usual.
TEST(PreflightDiagnosis, AFullConntrackTableExplainsTheProbesItDropped) {
  ReportBuilder b(4);
  b.set("", 1, -1, -1, Reach::dropped).set("", -1, 1, -1, Reach::dropped);
  for (auto& p : b.r.probes) {
    if (p.port_class.empty() && (p.from == 1 || p.to == 1)) p.result.reach = Reach::dropped;
  }
  b.set("ephemeral", 3, 2, 50000, Reach::rejected);  // a rule of its own between two other nodes
  b.r.nodes[1].facts.conntrack_count = b.r.nodes[1].facts.conntrack_max = 262'144;
  const auto p = problems(b.r);
  EXPECT_TRUE(any_says(p, {"node 1 (node1): the connection-tracking table holds 262144 of 262144 entries (100%)",
                           "36 of this preflight's probes to or from the node got no answer for that reason"}))
      << all_text(p);
  EXPECT_FALSE(any_says(p, {"node 1"}) && any_says(p, {"firewall, or a security group"})) << all_text(p);
  EXPECT_FALSE(any_says(p, {"no interface reaches every node"})) << all_text(p);
  EXPECT_TRUE(any_says(p, {"node 3 -> node 2 rejected"})) << all_text(p);
  // The same drops without a full table are a node nobody reaches.
  b.r.nodes[1].facts.conntrack_count = 1000;
  EXPECT_TRUE(any_says(problems(b.r), {"on node 1 (node1)", "from every other node"})) << all_text(problems(b.r));
}

// Nodes whose NCCL (or driver, or plugin) differ are named with their
// versions; a component missing everywhere, for whatever reason, is not a
// difference. So are the NCCL_* settings their ranks would inherit: one
// the ranks must share is a problem, a node's own (its interface, its
// debug level) a note, and a node that did not say is left out.
TEST(PreflightDiagnosis, SoftwareAndSettingsThatDifferAreNamed) {
  ReportBuilder b(3);
  for (auto& n : b.r.nodes) {
    n.facts.stack = {{"nvidia_driver", "580.159.04"},
                     {"nccl", "2.27.3"},
                     {"aws_ofi_nccl", "not found (libnccl-net.so: cannot open shared object file)"}};
    n.facts.settings = {{"NCCL_SOCKET_IFNAME", "eth0"}};
    n.facts.settings_known = true;
  }
  EXPECT_FALSE(any_says(diagnose_preflight(b.r), {"differ"})) << all_text(diagnose_preflight(b.r));
  b.r.nodes[2].facts.stack[1].second = "2.26.2";
  b.r.nodes[1].facts.stack[2].second = "not found (libnccl-net.so: wrong ELF class)";
  b.r.nodes[1].facts.settings["NCCL_PROTO"] = "Simple";
  b.r.nodes[2].facts.settings["NCCL_DEBUG"] = "INFO";
  const auto findings = diagnose_preflight(b.r);
  auto severity_of = [&](const std::string& words) {
    for (const auto& f : findings) {
      if (f.text.find(words) != std::string::npos) return std::optional(f.severity);
    }
    return std::optional<PreflightFinding::Severity>();
  };
  EXPECT_EQ(severity_of("the nodes differ in nccl: 2.27.3 on nodes 0 (node0), 1 (node1); 2.26.2 on node 2 (node2)"),
            PreflightFinding::Severity::problem)
      << all_text(findings);
  EXPECT_EQ(severity_of("different NCCL_PROTO: unset on nodes 0 (node0), 2 (node2); NCCL_PROTO=Simple on node 1 "
                        "(node1); every node of a job must"),
            PreflightFinding::Severity::problem)
      << all_text(findings);
  EXPECT_EQ(severity_of("different NCCL_DEBUG (a node's own): unset on nodes 0 (node0), 1 (node1); NCCL_DEBUG=INFO on "
                        "node 2 (node2)"),
            PreflightFinding::Severity::info)
      << all_text(findings);
  EXPECT_FALSE(any_says(findings, {"aws_ofi_nccl"})) << all_text(findings);
  EXPECT_FALSE(any_says(findings, {"nvidia_driver"})) << all_text(findings);
  EXPECT_FALSE(any_says(findings, {"different NCCL_SOCKET_IFNAME"})) << all_text(findings);
  EXPECT_NE(render_preflight(b.r, findings).find("stack: nvidia_driver 580.159.04, nccl 2.26.2, aws_ofi_nccl -"),
            std::string::npos)
      << render_preflight(b.r, findings);
  // A node that did not say what its ranks inherit is left out.
  b.r.nodes[1].facts.settings_known = false;
  EXPECT_FALSE(any_says(diagnose_preflight(b.r), {"NCCL_PROTO"})) << all_text(diagnose_preflight(b.r));
}

TEST(PreflightDiagnosis, TheTextHasAMatrixPerClassAndLettersBeyondEightNodes) {
  ReportBuilder small(2);
  const std::string text = render_preflight(small.r, diagnose_preflight(small.r));
  EXPECT_NE(text.find("MASTER_PORT 29500, ports"), std::string::npos) << text;
  EXPECT_NE(text.find("node 1"), std::string::npos);
  ReportBuilder big(10);
  big.set("master", 3, 7, -1, Reach::dropped);
  const std::string letters = render_preflight(big.r, diagnose_preflight(big.r));
  EXPECT_NE(letters.find("D dropped"), std::string::npos) << letters;
  EXPECT_NE(letters.find("node 3 . . . - . . . D . ."), std::string::npos) << letters;
}

}  // namespace
}  // namespace ringmaster

// Nodes that answer one after another (agents sharing a host's CPUs) are
// each given the limit after the latest reply from any node: the first in
// the list, answering after its own limit but within the limit of another
// node's reply, counts; one that never answers is given up the limit after
// the last reply, named; a node not asked has neither.
TEST(PreflightReplies, EachNodeIsGivenTheLimitAfterTheLatestReply) {
  using namespace std::chrono_literals;
  using nlohmann::json;
  constexpr auto kLimit = 300ms;
  std::vector<std::promise<json>> promises(4);
  std::vector<std::future<json>> pending;
  for (int i = 0; i < 3; ++i)
    pending.push_back(promises[static_cast<std::size_t>(i)].get_future());
  pending.emplace_back();  // node 3 not asked
  std::chrono::steady_clock::time_point last_answer;
  std::thread answers([&] {
    std::this_thread::sleep_for(200ms);
    promises[1].set_value({{"type", "preflight_listen"}, {"node", 1}});
    std::this_thread::sleep_for(250ms);  // 450 ms: past node 0's own limit, within node 1's
    last_answer = std::chrono::steady_clock::now();
    promises[0].set_value({{"type", "preflight_listen"}, {"node", 0}});
  });
  std::vector<json> replies;
  const auto started = std::chrono::steady_clock::now();
  const auto errors = ringmaster::agent::wait_for_replies(pending, kLimit, "preflight_listen", replies);
  const auto finished = std::chrono::steady_clock::now();
  answers.join();
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(replies[0]["node"], 0);
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(replies[1]["node"], 1);
  EXPECT_EQ(errors[2], "no answer to preflight_listen within 0.3 s of the last reply from any node");
  EXPECT_EQ(errors[3], "");
  EXPECT_TRUE(replies[3].is_null());
  EXPECT_GE(finished - last_answer, kLimit);  // given up only the limit after node 0's reply
  EXPECT_LT(finished - started, 5s);
  // An agent's refusal is that node's error.
  std::promise<json> refused;
  std::vector<std::future<json>> one;
  one.push_back(refused.get_future());
  refused.set_value({{"type", "error"}, {"message", "another preflight request is under way on this agent"}});
  EXPECT_EQ(ringmaster::agent::wait_for_replies(one, kLimit, "preflight_listen", replies)[0],
            "preflight_listen: another preflight request is under way on this agent");
}
