// ringmaster-cli: the engine and the agents from a terminal, one subcommand
// each (store, probe, env, perf, topo, remote, preflight, linkcheck, repro,
// tune, simulate, gpus, watch), registered below.
#include <cstdio>
#include <exception>
#include <map>
#include <string_view>

#include "commands.h"
#include "completion_cli11.h"
#include "ringmaster/status.h"
#include "ringmaster/version.h"

int main(int argc, char** argv) {
  CLI::App app{"ringmaster-cli: rendezvous probes, TCPStore tools and collective benchmarks"};
  app.name("ringmaster-cli");
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
  add(ringmaster::cli::add_preflight_command);
  add(ringmaster::cli::add_linkcheck_command);
  add(ringmaster::cli::add_certify_command);
  add(ringmaster::cli::add_repro_command);
  add(ringmaster::cli::add_tune_command);
  add(ringmaster::cli::add_simulate_command);
  add(ringmaster::cli::add_gpus_command);
  add(ringmaster::cli::add_watch_command);
  // For the build: the bash completion script and every subcommand's help
  // in one text (help2man makes the man page of it). Not in --help.
  if (argc == 2 && std::string_view(argv[1]) == "--bash-completion") {
    std::fputs(ringmaster::app::bash_completion_script(app, "ringmaster-cli").c_str(), stdout);
    return 0;
  }
  if (argc == 2 && std::string_view(argv[1]) == "--help-all") {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  }
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
