// ringmaster-cli: the engine from a terminal (store, probe, env, perf,
// topo; repro as it lands).
#include <cstdio>
#include <exception>
#include <map>

#include "commands.h"
#include "ringmaster/status.h"
#include "ringmaster/version.h"

int main(int argc, char** argv) {
  CLI::App app{"ringmaster-cli: rendezvous probes, TCPStore tools and collective benchmarks"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ringmaster-cli " RINGMASTER_VERSION_STRING);
  std::map<CLI::App*, ringmaster::cli::Runner> runners;
  auto add = [&](ringmaster::cli::Runner (*make)(CLI::App&)) {
    const auto before = app.get_subcommands({}).size();
    auto runner = make(app);
    runners[app.get_subcommands({}).at(before)] = std::move(runner);
  };
  add(ringmaster::cli::add_store_command);
  add(ringmaster::cli::add_probe_command);
  add(ringmaster::cli::add_env_command);
  add(ringmaster::cli::add_perf_command);
  add(ringmaster::cli::add_topo_command);
  add(ringmaster::cli::add_remote_command);
  add(ringmaster::cli::add_repro_command);
  add(ringmaster::cli::add_tune_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that succeed; the rest are usage
    // errors, whatever CLI11 numbers them.
    const int code = app.exit(e);
    return code == 0 ? ringmaster::cli::exit_code::ok : ringmaster::cli::exit_code::usage;
  }
  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const ringmaster::Error& e) {
    std::fprintf(stderr, "ringmaster-cli: %s\n", e.what());
    // A bad value in a flag or the environment is a usage error.
    return e.category() == ringmaster::ErrorCategory::config ? ringmaster::cli::exit_code::usage
                                                             : ringmaster::cli::exit_code::failed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringmaster-cli: %s\n", e.what());
    return 1;
  }
  return 1;
}
