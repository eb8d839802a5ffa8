// ringmaster-cli: the engine from a terminal (store, probe, env, perf,
// topo; repro as it lands).
#include <cstdio>
#include <exception>
#include <map>

#include "commands.h"
#include "ringmaster/status.h"

int main(int argc, char** argv) {
  CLI::App app{"ringmaster-cli: rendezvous probes, TCPStore tools and collective benchmarks"};
  app.require_subcommand(1);
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
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const ringmaster::Error& e) {
    std::fprintf(stderr, "ringmaster-cli: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringmaster-cli: %s\n", e.what());
    return 1;
  }
  return 1;
}
