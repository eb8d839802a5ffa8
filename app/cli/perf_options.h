// The perf flags (nccl-tests') shared by `perf` and `remote ... perf`.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "ringmaster/agent/requests.h"
#include "ringmaster/comm.h"
#include "ringmaster/tools/perf.h"

namespace ringmaster::cli {

struct PerfOptions {
  std::string collective;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  double step_factor = 1;
  int iters = 20, warmup = 5, check = 1, root = 0, blocking = 0;
  // nccl-tests' other flags: -t, -g, -m, -N, -p, -a, -T, -C, -S, -J, and
  // the GPU-only ones (-y, -G, -R, -x, -D, -V, -M) and those not built yet
  // (-u, -I, -K), refused with a reason when set away from their default.
  int nthreads = 1, ngpus = 1, agg_iters = 1, run_cycles = 1, parallel_init = 0, average = 1;
  double timeout_s = 0;
  int report_cputime = 0, report_timestamps = 0;
  std::string output_file;  // -J: nccl-tests' JSON
  int stream_null = 0, cudagraph = 0, local_register = 0, cta_policy = 0, device_implementation = 0,
      device_cta_count = 0, memory = 0, unalign = 0, per_iter_timing = 0, per_iter_skip = 0;
  int warmup_ms = 0;
  std::string op = "sum", type = "float";
  std::string json_file, algo, proto;
  std::string candidates;  // perf --candidates (local runs only)
  int channels = 0;
  int np = 0;
  std::string bind = "auto";  // --np ranks: core, none, or auto (core when each rank gets one)
  bool bisect = false;        // --bisect
  double bisect_below = 0;    // --bisect-below GBS
  bool quiet_stages = false;
  bool events = false;
};

// Registers the collective and nccl-tests' flags on `perf`.
void add_perf_options(CLI::App* perf, PerfOptions& options);
// Throws Error(config) naming the flag that is wrong.
PerfSpec make_perf_spec(const PerfOptions& options);
CommOptions make_comm_options(const PerfOptions& options);
// The perf request of an agent's run message; throws Error(config) naming
// the flag that is wrong, as make_perf_spec.
agent::PerfRequest perf_request(const PerfOptions& options);

}  // namespace ringmaster::cli
