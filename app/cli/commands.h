// Subcommands of ringmaster-cli. Each registers its options on the parent
// app and returns the function that runs it (its exit code).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "exit_codes.h"
#include "ringmaster/stage.h"

namespace ringmaster::cli {

using Runner = std::function<int()>;

Runner add_store_command(CLI::App& app);
Runner add_probe_command(CLI::App& app);
Runner add_env_command(CLI::App& app);
Runner add_perf_command(CLI::App& app);
Runner add_topo_command(CLI::App& app);
Runner add_remote_command(CLI::App& app);
Runner add_preflight_command(CLI::App& app);
Runner add_linkcheck_command(CLI::App& app);
Runner add_certify_command(CLI::App& app);
Runner add_repro_command(CLI::App& app);
Runner add_tune_command(CLI::App& app);
Runner add_simulate_command(CLI::App& app);
Runner add_gpus_command(CLI::App& app);
Runner add_watch_command(CLI::App& app);

// A stage's live report (StageEvent::in_progress) on stderr, "rank N:
// retrying ...", once the stage has waited a second: a rank that starts
// before rank 0's store is refused for a few milliseconds, a normal race
// that is not worth a line. The JSON events keep every report.
void print_live_line(const StageEvent& e);

}  // namespace ringmaster::cli
