// nccl-tests style measurement of one collective over a size sweep, with
// every element of the result checked against a reference (#wrong).
//
// Inputs are small integers (random per rank and size, seeded so every
// rank can rebuild every other rank's input), so sums, products, max and
// min are exact in every type and the reference does not depend on the
// reduction order. Used by `ringmaster-cli perf` and by the agent's ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ringmaster/comm.h"
#include "ringmaster/tools/tuner.h"

namespace ringmaster {

// One way to run the collective, as Communicator::select() narrows the
// tuner (nullopt: the tuner picks), named as `perf --candidates` spells it.
struct PerfCandidate {
  std::string name;  // "Ring/LL", "Tree/Simple", "auto"
  std::optional<Algorithm> algorithm;
  std::optional<Protocol> protocol;
};

struct PerfSpec {
  Collective collective = Collective::all_reduce;
  std::size_t min_bytes = 32 * 1024 * 1024;  // -b
  std::size_t max_bytes = 32 * 1024 * 1024;  // -e
  double step_factor = 0;                    // -f (0: use step_bytes)
  std::size_t step_bytes = 1024 * 1024;      // -i
  int iters = 20;                            // -n
  int warmup = 5;                            // -w
  // --warmup-ms: the first size also warms up until this much time has
  // passed on every rank (a rank's first milliseconds after init can run
  // slower on a VM whatever the count); ranks agree with an all_reduce.
  int warmup_ms = 0;
  bool check = true;               // -c
  RedOp op = RedOp::sum;           // -o
  DataType type = DataType::fp32;  // -d
  int root = 0;                    // -r
  bool blocking = false;           // -z: wait after each call
  int agg_iters = 1;               // -m: calls per timed iteration (a row's time is per call)
  // -a: a row's time over the ranks: 0 rank 0's, 1 the average, 2 the
  // smallest, 3 the largest (nccl-tests' meanings).
  int average = 1;
  // --candidates: at each size the candidates take turns (per iteration
  // each runs a lead-in call and a timed one, which goes first turning),
  // each call waited for, a row's time the median of its timed calls; so
  // every candidate meets the same moments of the machine. A row per size
  // and candidate.
  // Empty: one row per size, as the communicator's options choose.
  std::vector<PerfCandidate> candidates;
};

struct PerfResult {
  double time_us = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  long wrong = 0;
};

struct PerfRow {
  std::size_t bytes = 0;
  std::size_t count = 0;
  PerfResult out_of_place, in_place;
  bool has_in_place = true;             // all_to_all and sendrecv have no in-place form
  std::string candidate;                // with PerfSpec::candidates: whose row this is
  std::optional<tune::Candidate> pick;  // what the tuner chose to run, its prediction included
};

// Parses --candidates: "Ring/LL,Tree/Simple,auto" (case-insensitive), or
// "all" for every algorithm and protocol and the tuner's own pick; throws
// Error(config) naming the entry that is wrong.
std::vector<PerfCandidate> parse_candidates(const std::string& text);

using tune::bus_factor;  // nccl-tests' bus-bandwidth factor (tools/tuner.h)

// Parses "8", "64K", "1M", "2G" (powers of 1024); throws Error(config).
std::size_t parse_size(const std::string& text);

// Runs the sweep on every rank; `on_row` sees each row as it completes
// (times are rank-local; rank 0's are the ones nccl-tests prints).
std::vector<PerfRow> run_perf(Communicator& comm, const PerfSpec& spec,
                              const std::function<void(const PerfRow&)>& on_row = {});

// The nccl-tests table: header lines, one line per row, and the footer.
std::string perf_header(const PerfSpec& spec, int nranks);
std::string perf_row_line(const PerfSpec& spec, const PerfRow& row);
// Over a run's rows: the wrong elements and the average bus bandwidth of
// every timed part (in place and out of place), as nccl-tests' footer says.
struct PerfSummary {
  long wrong = 0;
  double avg_busbw = 0;
};
PerfSummary summarize(const std::vector<PerfRow>& rows);
std::string perf_footer(const std::vector<PerfRow>& rows);

}  // namespace ringmaster
