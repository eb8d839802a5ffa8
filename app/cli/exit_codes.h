// ringmaster-cli's exit codes, one meaning each across subcommands
// (docs/cli.md lists them).
#pragma once

namespace ringmaster::cli::exit_code {

inline constexpr int ok = 0;
// What was asked ran and found a fault: wrong values in a benchmark, a
// rank failing a probe's check, a topology that does not hold.
inline constexpr int failed = 1;
// A bad flag, flag value or environment variable: nothing ran.
inline constexpr int usage = 2;
// A rank could not join: a rendezvous stage failed (the stage is printed).
inline constexpr int init_failed = 3;
// A collective returned an error after init (a peer died or timed out).
inline constexpr int collective_failed = 4;
// Through agents: a run did not finish in time or an agent was lost.
inline constexpr int remote_failed = 5;
// The scenario cannot run on this machine (root or a kernel feature is
// missing), as Automake's and CTest's skip code.
inline constexpr int skipped = 77;

}  // namespace ringmaster::cli::exit_code
