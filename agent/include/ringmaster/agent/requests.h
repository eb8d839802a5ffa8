// What clients ask an agent to do, typed: the twin of events.h (what the
// agent sends back). A request is built once by whoever asks (the
// console, `ringmaster-cli remote`), read once by the agent with every
// field checked, and turned into the ranks' command line here; a field
// added to a request is a change in this header and where it is used.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringmaster/agent/fault.h"
#include "ringmaster/types.h"

namespace ringmaster::agent {

// The perf sweep of a run, as `ringmaster-cli perf` (or NCCL's runner,
// ringmaster-nccl-perf, with engine nccl) runs it on each rank:
// nccl-tests' flags, typed. Defaults are the CLI's.
struct PerfRequest {
  enum class Engine { ringmaster, nccl };
  Engine engine = Engine::ringmaster;
  Collective collective = Collective::all_reduce;
  std::uint64_t min_bytes = 32u << 20, max_bytes = 32u << 20;
  double step_factor = 1;               // above 1: each size this times the last; else step_bytes more
  std::uint64_t step_bytes = 1u << 20;  //
  int iters = 20, warmup = 5;
  int warmup_ms = 0;  // and warm up for this long
  bool check = true;
  DataType type = DataType::fp32;
  RedOp op = RedOp::sum;
  int root = 0;
  bool blocking = false;
  std::optional<Algorithm> algorithm;  // none: the tuner's pick
  std::optional<Protocol> protocol;
  int channels = 0;  // 0: the tuner's
  int agg_iters = 1, run_cycles = 1;
  int average = 1;  // how a row's time is taken over the ranks: 0 rank 0's, 1 mean, 2 min, 3 max
  // After the sweep, bisect the job's nodes (GROUP_RANK) over halves and
  // pairs (ringmaster/tools/bisect.h): always, or with bisect_below > 0
  // only when the largest size's busbw fell under it (GB/s).
  bool bisect = false;
  double bisect_below = 0;

  bool operator==(const PerfRequest&) const = default;

  // The "perf" object of a run message; a field at its default is left out.
  nlohmann::json to_json() const;
  // From a run message's "perf" (sizes as numbers or as "64M"): every
  // field checked, unknown ones refused. Throws Error(config) naming the
  // field and what is wrong with it ("run.perf.iters must be an integer,
  // got string").
  static PerfRequest parse(const nlohmann::json& perf, std::string_view where = "run.perf");

  // `ringmaster-cli perf`'s arguments after the program, with --json.
  std::vector<std::string> to_argv() const;
  // ringmaster-nccl-perf's arguments after the program (one GPU a rank,
  // the agent's events), and NCCL's own variables for what it forces.
  std::vector<std::string> to_nccl_argv() const;
  std::map<std::string, std::string> to_nccl_env() const;
  // Why NCCL's runner cannot run it ("NCCL's runner takes ..."); empty
  // when it can.
  std::string nccl_refusal() const;
};

// A run: the perf sweep on the run's ranks this agent starts. The console
// and `ringmaster-cli remote` send one to every agent, rank 0's agent
// first (it picks the store's port when master_port is 0 and says it in
// its reply; the others get that port).
struct RunRequest {
  std::string run_id;
  int world_size = 1;
  std::vector<int> ranks;  // the run's global ranks this agent starts
  std::string master_addr;
  int master_port = 0;
  PerfRequest perf;
  std::map<std::string, std::string> env;  // for the ranks, besides the agent's own (checked when the run starts)
  // The ranks' limits (RINGMASTER_STORE_TIMEOUT, _BOOTSTRAP_TIMEOUT,
  // _COLL_TIMEOUT), in seconds, at most a day; none: the ranks' own.
  std::optional<double> store_timeout_s, bootstrap_timeout_s, coll_timeout_s;

  bool operator==(const RunRequest&) const = default;

  // The "run" message, but its id and protocol version (the client adds
  // those).
  nlohmann::json to_json() const;
  // From a "run" message: every field checked, the perf request too.
  // Throws Error(config) naming the field ("run.ranks holds 7, not a rank
  // in [0, 4)").
  static RunRequest parse(const nlohmann::json& run);
};

// A watch: a job this agent did not start (a torchrun job, an mpirun
// job), its processes on this node named by PID, TORCHELASTIC_RUN_ID or
// MASTER_PORT, read from outside by a watcher the agent starts
// (`ringmaster-cli watch`, as the job's own user, contained as a run is).
// Its events (job_rank, job_wavefront, job_nccl) come as a run's do, under
// watch_id; nothing is ever sent to the job's processes but the HTTP
// request that asks torch's debug server for a Flight Recorder dump.
struct WatchRequest {
  std::string watch_id;          // a plain name, as a run id
  std::vector<int> pids;         // these processes
  std::string job_run_id;        // or every process with this TORCHELASTIC_RUN_ID
  int master_port = 0;           // or every process with this MASTER_PORT
  double duration_s = 3600;      // how long, at most a day; watch_stop ends it sooner
  double interval_s = 0.5;       // between looks, 0.05-60
  bool flight_recorder = false;  // read the ranks' Flight Recorders through torch's debug server
  bool nccl_log = false;         // read each rank's NCCL_DEBUG_FILE
  bool nccl_ras = false;         // ask NCCL's RAS port (each rank's NCCL_RAS_ADDR) for the job's status

  bool operator==(const WatchRequest&) const = default;

  // The "watch" object of a `watch` message.
  nlohmann::json to_json() const;
  // From a `watch` message's "watch": every field checked, unknown ones
  // refused, at least one of pids, job_run_id, master_port. Throws
  // Error(config) naming the field ("watch.interval_s must be ...").
  static WatchRequest parse(const nlohmann::json& watch);
  // `ringmaster-cli watch`'s arguments after the program: --json, the
  // selector, --for, --interval and the readers asked for.
  std::vector<std::string> to_argv() const;
};

// A fault to inject is FaultSpec (fault.h), read and written there: the
// `fault` message carries one as its "fault" field.
using FaultRequest = FaultSpec;

// ---- What an agent answers an `inventory` request with ----

// One object of a node's topology (the engine's Topology::to_json()):
// kind is its name there ("gpu", "nic", "net", "pci_switch", ...).
struct TopologyNode {
  int id = 0;
  std::string kind, name, origin;  // origin: "detected" or "declared"
  int parent = -1, index = -1;
  std::vector<int> children;  // ids of nodes of the same topology
  bool implicit = false;      // added by the engine (a host bridge a file implies)
  std::string model;          // a GPU's model, when the engine names it
  std::map<std::string, std::string> attributes;

  // The attribute's value, empty when the node has none.
  const std::string& attribute(const std::string& key) const;
  bool operator==(const TopologyNode&) const = default;
};

struct TopologyLink {
  int a = 0, b = 0;  // node ids
  std::string type;  // "nvlink", "pci", ...
  double bandwidth_gbps = 0;
  int count = 0;
  bool operator==(const TopologyLink&) const = default;
};

// The path between two devices of the matrix: its class as nvidia-smi
// topo -m says it ("NV12", "PXB", "SYS"), its bandwidth and hops.
struct TopologyPath {
  std::string label;
  double bandwidth_gbps = 0;
  int hops = 0;
  bool operator==(const TopologyPath&) const = default;
};

// A node's topology as the agent sends it: nodes, links and the device
// matrix, typed. parse checks every field and every id (a child, parent
// or link end must be a node of it).
struct TopologyInfo {
  std::string source, origin, summary;
  std::vector<std::string> warnings;
  std::vector<TopologyNode> nodes;  // nodes[i].id == i
  std::vector<TopologyLink> links;
  struct Device {
    int id = 0;
    std::string name;
    bool operator==(const Device&) const = default;
  };
  std::vector<Device> devices;                   // the matrix' rows and columns (GPUs, then NICs)
  std::vector<std::vector<TopologyPath>> paths;  // devices × devices

  bool empty() const { return nodes.empty(); }
  const TopologyNode& node(int id) const { return nodes.at(static_cast<std::size_t>(id)); }
  bool has(int id) const { return id >= 0 && id < static_cast<int>(nodes.size()); }
  bool operator==(const TopologyInfo&) const = default;

  nlohmann::json to_json() const;
  // Throws Error(protocol) naming the field ("topology: nodes[3]: 'parent'
  // is a string, not an integer").
  static TopologyInfo parse(const nlohmann::json& topology, std::string_view where = "topology");
};

// An address of one of the agent's interfaces.
struct InterfaceAddress {
  std::string name, family, address;  // family: "inet" or "inet6"
  bool up = false, loopback = false;
  int speed_mbps = 0;  // 0: none known (loopback, a tunnel, down)
  bool operator==(const InterfaceAddress&) const = default;
};

// A run the agent has ranks of.
struct ActiveRun {
  std::string run_id;
  struct Rank {
    int rank = 0, pid = 0;
    bool exited = false;
    bool operator==(const Rank&) const = default;
  };
  std::vector<Rank> ranks;
  bool cancelled = false;
  bool watch = false;  // a watch's watcher (its rank -1), not a run's ranks
  bool operator==(const ActiveRun&) const = default;
};

// A fault in force on the agent. A kind this build does not know (a newer
// agent's) keeps its JSON and says why it could not be read.
struct ActiveFault {
  int fault_id = 0;
  std::optional<FaultSpec> fault;
  nlohmann::json unread;  // the fault's JSON when `fault` is empty
  std::string why_unread;
  std::string mechanism;
  std::vector<std::string> runs;
  bool operator==(const ActiveFault&) const = default;
};

nlohmann::json to_json(const ActiveRun& r);
nlohmann::json to_json(const ActiveFault& f);

struct Inventory {
  std::string hostname, agent_version;
  int protocol = 0;
  TopologyInfo topology;
  std::string topology_summary;
  nlohmann::json gpus;  // `ringmaster-cli gpus --json`'s document (NVML's view)
  std::vector<InterfaceAddress> interfaces;
  std::int64_t clock_us = 0;
  double uptime_s = 0;
  std::vector<ActiveRun> runs;
  std::int64_t runs_started = 0, runs_failed = 0;
  std::vector<ActiveFault> faults;
  bool fault_injection = false;
  int pid = 0;
  std::vector<std::string> transports;  // usable here ("socket", "shm", "ofi")
  struct Unusable {
    std::string name, why;
    bool operator==(const Unusable&) const = default;
  };
  std::vector<Unusable> transports_unusable;
  // What every node of a job must share (node_gate.h): the software its
  // ranks load (component, version: "nccl", "libfabric", "nvidia_driver",
  // ...; "not found (why)" when absent), and the NCCL_*, FI_* and
  // RINGMASTER_* settings of the agent's own environment, which its ranks
  // inherit (names that hold a secret are left out).
  std::vector<std::pair<std::string, std::string>> stack;
  std::map<std::string, std::string> rank_env;

  bool operator==(const Inventory&) const = default;

  nlohmann::json to_json() const;
  // From an `inventory` reply: fields it does not know are left alone (a
  // newer agent may send more); a known field of the wrong type throws
  // Error(protocol) naming it ("inventory: interfaces[2]: 'speed_mbps' is
  // a string, not an integer").
  static Inventory parse(const nlohmann::json& reply);
};

// The collective a perf name means: `ringmaster-cli perf`'s names,
// nccl-tests' binary names (all_reduce_perf) and the usual spellings
// (allreduce, alltoall); none for anything else.
std::optional<Collective> perf_collective_named(std::string_view name);
// The name `ringmaster-cli perf` takes for it ("sendrecv" for send_recv).
std::string perf_collective_name(Collective c);
// A size as a perf request's size fields, the console's run form and
// `ringmaster-cli perf` take it: bytes, or with K, M or G (powers of 1024),
// e.g. "64K". Throws Error(config) naming what is wrong.
std::uint64_t parse_request_size(std::string_view text);

}  // namespace ringmaster::agent
