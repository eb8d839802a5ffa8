// Preflight: whether the nodes of a job can reach each other on the ports
// a job will use, and whether each node has what a job trips on, before
// any job runs. The parts here run on one node each (listen on sample
// ports, probe other nodes' ports all at once with every attempt
// classified, gather the node's facts); the agent serves them and
// `ringmaster-cli preflight` or the console gathers every node's answers
// into a PreflightReport, which diagnose_preflight() reads into findings.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringmaster {

// What one connection attempt met.
enum class Reach : std::uint8_t {
  ok,          // the handshake completed
  refused,     // a RST: nothing listens, or a firewall answers with a reset
  dropped,     // no SYN-ACK within the window: dropped on the way
  rejected,    // an ICMP error (unreachable, administratively prohibited)
  no_route,    // this node has no route to the address
  unresolved,  // the name does not resolve here
  error,       // anything else (the detail says what)
  untested,    // not probed (the port could not be listened on)
};
// "ok", "refused", "dropped", "rejected", "no_route", "unresolved", "error", "untested".
const char* name_of(Reach reach) noexcept;
std::optional<Reach> reach_from_name(std::string_view name) noexcept;

struct ReachTarget {
  std::string host;  // a name or a numeric address
  std::uint16_t port = 0;
};

struct ReachResult {
  Reach reach = Reach::untested;
  double ms = 0;     // from the SYN to the answer (the window when dropped)
  int path_mtu = 0;  // the kernel's path MTU toward the target once connected
  std::string detail;
};

// Connects to every target at once (at most 512 sockets open together),
// each allowed `window` for an answer, and closes each connection as soon
// as its handshake completes. A refused target is tried once more 100 ms
// later (its detail says so when the second try differs). Results are in
// the targets' order.
std::vector<ReachResult> probe_reach(const std::vector<ReachTarget>& targets, std::chrono::milliseconds window);

// Listening sockets on every address of this node, accepting and closing
// every connection on a thread of their own until destroyed.
class PortListeners {
 public:
  struct Port {
    std::uint16_t port = 0;
    bool listening = false;
    std::string note;  // why not: "in use" (another process listens), or the errno
  };

  PortListeners();
  ~PortListeners();
  PortListeners(const PortListeners&) = delete;
  PortListeners& operator=(const PortListeners&) = delete;

  // Listens on exactly `port`.
  Port listen_on(std::uint16_t port);
  // Listens on up to `count` free ports of [lo, hi], spread over the range.
  std::vector<Port> listen_in(std::uint16_t lo, std::uint16_t hi, int count);
  // Connections accepted so far.
  std::uint64_t accepted() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct InterfaceFacts {
  std::string name;
  std::vector<std::string> addresses;  // numeric, IPv4 and global IPv6
  bool up = false;
  bool loopback = false;
  int mtu = 0;
  int speed_mbps = 0;  // 0: not known
};

// What a node offers a job, as far as bring-up goes.
struct NodeFacts {
  std::string hostname;
  // net.ipv4.ip_local_port_range: where a kernel picks ports for bind(0).
  std::uint16_t ephemeral_lo = 0, ephemeral_hi = 0;
  std::vector<InterfaceFacts> interfaces;
  // MASTER_ADDR as this node resolves it (empty query: not asked).
  std::string master_addr;
  std::vector<std::string> master_resolves_to;
  std::string master_error;
  // NCCL_SOCKET_IFNAME and the interfaces it selects here.
  std::string socket_ifname;
  std::vector<std::string> socket_ifname_matches;
  // /dev/shm: what shared memory between ranks on the node can take.
  std::uint64_t shm_bytes = 0, shm_free_bytes = 0;
  std::string shm_error;
  // RLIMIT_MEMLOCK and RLIMIT_NOFILE (soft, hard); -1: unlimited.
  long long memlock_soft = 0, memlock_hard = 0, nofile_soft = 0, nofile_hard = 0;
  // The connection-tracking table of the node's network namespace
  // (net.netfilter.nf_conntrack_count and _max): when it is full the kernel
  // drops new connections. -1: no conntrack here (the module not loaded).
  long long conntrack_count = -1, conntrack_max = -1;
  // EFA devices (/sys/class/infiniband, driver efa).
  std::vector<std::string> efa_devices;
  // The engine's transports usable here, and why the others are not
  // ("ofi": "no provider..."); filled by the caller, which sees the engine.
  std::vector<std::string> transports;
  std::vector<std::pair<std::string, std::string>> transports_unusable;
  // The software a GPU job meets here (read_software_stack).
  std::vector<std::pair<std::string, std::string>> stack;
  // The NCCL_*, FI_* and RINGMASTER_* settings ranks started here inherit
  // (filled by the caller, which knows what its ranks inherit; an agent's
  // from its own environment); `settings_known` false when nobody said.
  std::map<std::string, std::string> settings;
  bool settings_known = false;
};

// The versions of what a GPU job runs on, as (component, version) in this
// order: nvidia_driver, cuda_driver, nccl, libfabric, aws_ofi_nccl,
// efa_driver. Each read where it lives (the kernel modules' version files,
// the libraries' own version calls through dlopen), "not found (why)"
// where it is not. Nodes of one job should match; the preflight diagnosis
// names the components that differ.
std::vector<std::pair<std::string, std::string>> read_software_stack();
// ncclGetVersion's code as "2.27.3" (both of NCCL's encodings).
std::string nccl_version_text(int code);

struct NodeFactsQuery {
  std::string master_addr;
  std::string socket_ifname;
};
NodeFacts gather_node_facts(const NodeFactsQuery& query);

// --- The report over every node -------------------------------------------

// A class of ports every node listens on: MASTER_PORT, samples of the
// ephemeral range, below and above it, RINGMASTER_PORT_RANGE.
struct PortClass {
  std::string name;   // "master", "ephemeral", "below_ephemeral", "above_ephemeral", "port_range"
  std::string label;  // "MASTER_PORT 29500", "ephemeral (ip_local_port_range)", ...
};

struct PreflightNode {
  std::string name;     // the agent's host name
  std::string address;  // the address the others probe
  NodeFacts facts;
  double clock_offset_ms = 0;  // this node's clock minus the first node's
  // Per port class, the ports listened on (or not, with why).
  std::vector<std::pair<std::string, std::vector<PortListeners::Port>>> ports;
  std::string error;  // the node did not take part: why
};

struct PreflightProbe {
  int from = 0, to = 0;
  std::string port_class;  // empty for an interface probe
  std::string interface;   // the target's interface, for an interface probe
  std::string host;        // the address probed
  std::uint16_t port = 0;
  ReachResult result;
};

struct PreflightReport {
  std::string master_addr;
  std::uint16_t master_port = 0;
  std::string socket_ifname;
  std::string port_range;  // RINGMASTER_PORT_RANGE, when asked
  std::vector<PreflightNode> nodes;
  std::vector<PortClass> classes;
  std::vector<PreflightProbe> probes;
  double seconds = 0;  // the whole preflight

  // One cell of a class's matrix: ok when every port answered, the one
  // outcome when every port met it, else the worst ("partial" when some
  // ports were ok: see cell_text).
  Reach cell(int from, int to, std::string_view port_class) const;
  // "ok", "dropped", "1/2 ok", "-" on the diagonal.
  std::string cell_text(int from, int to, std::string_view port_class) const;
};

struct PreflightFinding {
  enum class Severity : std::uint8_t { problem, warning, info };
  Severity severity = Severity::info;
  std::string text;
  // The nodes it is about, where it is about one node's own side (its
  // facts, its ports, its firewall); empty when it is about pairs or the
  // whole set.
  std::vector<int> nodes;
};
const char* name_of(PreflightFinding::Severity severity) noexcept;

// Reads the matrices and the facts into sentences that name the likely
// rule or setting: problems first.
std::vector<PreflightFinding> diagnose_preflight(const PreflightReport& report);

// The report as text: per class an N x N matrix (rows probe, columns
// answer), then the nodes' facts and the findings.
std::string render_preflight(const PreflightReport& report, const std::vector<PreflightFinding>& findings);

}  // namespace ringmaster
