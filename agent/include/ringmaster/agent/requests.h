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
#include <vector>

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

// The collective a perf name means: `ringmaster-cli perf`'s names,
// nccl-tests' binary names (all_reduce_perf) and the usual spellings
// (allreduce, alltoall); none for anything else.
std::optional<Collective> perf_collective_named(std::string_view name);
// The name `ringmaster-cli perf` takes for it ("sendrecv" for send_recv).
std::string perf_collective_name(Collective c);

}  // namespace ringmaster::agent
