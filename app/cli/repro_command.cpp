// `ringmaster-cli repro list|run`: reproduce a real connectivity failure.
// The scenarios run through the scenario runner's library
// (ringmaster/agent/scenario_runner.h), as the console's Scenarios tab
// runs them; this command lists the catalog, runs one scenario or all,
// prints each verdict and says a skip as ctest reads one (77).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "exit_codes.h"
#include "ringmaster/agent/scenario.h"
#include "ringmaster/agent/scenario_runner.h"
#include "ringmaster/status.h"

namespace ringmaster::cli {
namespace {

namespace fs = std::filesystem;

// The catalog installed beside this binary, else the source tree's.
std::string default_catalog() {
  std::error_code ec;
  const fs::path installed = fs::read_symlink("/proc/self/exe", ec).parent_path() / RINGMASTER_SCENARIOS_FROM_BIN;
  if (!ec && fs::is_directory(installed, ec)) return fs::weakly_canonical(installed, ec).string();
  return RINGMASTER_SCENARIO_DIR;
}

struct ReproOptions {
  std::string dir = default_catalog();
  std::string name;
  bool all = false;
  bool keep = false;
  int jobs = 3;
  std::string events_file;
};

// Set by SIGINT/SIGTERM: the scenario in progress stops waiting and cleans up.
std::atomic<bool> interrupted{false};

// One scenario's verdict, and what it printed: its story, what
// Ringmaster reported, PASS or FAIL with the reasons.
struct Said {
  agent::ScenarioVerdict verdict;
  std::string text;
};

// Runs one scenario; `live`: its story is printed before it starts (a
// scenario run with none beside it), else with the rest when it ends.
Said run_one(const agent::Scenario& s, const agent::ScenarioRunOptions& options, bool live) {
  Said said;
  const std::string story = "== " + s.name + ": " + s.title + "\n   " + s.story + "\n";
  if (live) {
    std::printf("%s", story.c_str());
    std::fflush(stdout);
  } else {
    said.text = story;
  }
  const auto start = std::chrono::steady_clock::now();
  agent::ScenarioVerdict& v = said.verdict;
  try {
    v = agent::run_scenario(s, options);
  } catch (const Error& e) {
    v.passed = false;
    v.reasons.push_back(e.what());
  }
  for (const auto& line : v.report)
    said.text += "   | " + line + "\n";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!v.skipped.empty()) {
    said.text += fmt::format("   SKIPPED ({:.1f} s): {}\n", seconds, v.skipped);
  } else {
    said.text += fmt::format("   {} ({:.1f} s)\n",
                             v.passed ? "PASS: Ringmaster reported what the scenario expects" : "FAIL", seconds);
    for (const auto& r : v.reasons)
      said.text += "   - " + r + "\n";
  }
  return said;
}

// A scenario in progress, for the watchdog: where it is and since when.
struct InProgress {
  std::string name;
  std::chrono::steady_clock::time_point started;
  int limit_s = 0;  // the run's timeout_s and 120 s for the steps around it
  std::string step;
  bool overdue = false;
  std::string overdue_at;         // the step it was in then
  std::atomic<bool> stop{false};  // set on interruption or past the limit
};

// Every second: a scenario past its limit is named with the step it is
// in, and stopped where the runner can stop it (the run's wait); every
// scenario is stopped on Ctrl-C.
class Watchdog {
 public:
  explicit Watchdog(std::mutex& print_lock) : print_lock_(print_lock) {}
  InProgress& begin(const agent::Scenario& s) {
    std::lock_guard hold(lock_);
    auto& p = *running_.emplace_back(std::make_unique<InProgress>());
    p.name = s.name;
    p.started = std::chrono::steady_clock::now();
    p.limit_s = s.timeout_s + 120;
    return p;
  }
  void step(InProgress& p, const std::string& step) {
    std::lock_guard hold(lock_);
    p.step = step;
  }
  // Removes it; what the watchdog said of it, for its verdict.
  std::string end(InProgress& p) {
    std::lock_guard hold(lock_);
    std::string said = p.overdue ? fmt::format("stopped: past its limit of {} s, at: {}", p.limit_s, p.overdue_at) : "";
    std::erase_if(running_, [&](const auto& q) { return q.get() == &p; });
    return said;
  }

 private:
  void watch(std::stop_token stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::lock_guard hold(lock_);
      for (auto& p : running_) {
        if (interrupted) p->stop = true;
        const auto ran = std::chrono::steady_clock::now() - p->started;
        if (p->overdue || ran < std::chrono::seconds(p->limit_s)) continue;
        p->overdue = true;
        p->overdue_at = p->step;
        p->stop = true;
        std::lock_guard print(print_lock_);
        std::printf("STALLED: %s has run %lld s, past its limit of %d s, at: %s\n", p->name.c_str(),
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(ran).count()), p->limit_s,
                    p->step.c_str());
        std::fflush(stdout);
      }
    }
  }
  std::mutex& print_lock_;
  std::mutex lock_;
  std::vector<std::unique_ptr<InProgress>> running_;
  std::jthread thread_{[this](std::stop_token stop) { watch(stop); }};  // last: starts once the rest is made
};

// Runs the scenarios and prints each verdict as it ends: those that time
// nothing `jobs` at a time (each cluster is namespaces of its own), then
// those that run alone (Scenario::runs_alone), one after another. Each
// runs under its own limit (its run's timeout_s and 120 s for the steps
// around it): past it, the scenario and its step are named (the
// watchdog). Returns (failed, skipped).
std::pair<int, int> run_all(const std::vector<const agent::Scenario*>& chosen, agent::ScenarioRunOptions options,
                            std::ostream* events, int jobs) {
  std::mutex lock;
  Watchdog watchdog(lock);
  int failed = 0, skipped = 0;
  const auto say = [&](const Said& said, const std::ostringstream& its_events) {
    std::lock_guard hold(lock);
    std::printf("%s", said.text.c_str());
    std::fflush(stdout);
    if (events != nullptr) *events << its_events.str();
    skipped += said.verdict.skipped.empty() ? 0 : 1;
    failed += said.verdict.skipped.empty() && !said.verdict.passed ? 1 : 0;
  };
  const auto run = [&](const agent::Scenario& s, bool live) {
    std::ostringstream its_events;
    InProgress& progress = watchdog.begin(s);
    agent::ScenarioRunOptions mine = options;
    mine.events = events != nullptr ? &its_events : nullptr;
    mine.stop = &progress.stop;
    mine.on_step = [&](const std::string& step) { watchdog.step(progress, step); };
    Said said = run_one(s, mine, live);
    if (const std::string stalled = watchdog.end(progress); !stalled.empty()) {
      said.verdict.passed = false;
      said.text += "   - " + stalled + "\n";
    }
    say(said, its_events);
  };
  std::vector<const agent::Scenario*> side_by_side, alone;
  for (const auto* s : chosen)
    (jobs > 1 && chosen.size() > 1 && !s->runs_alone() ? side_by_side : alone).push_back(s);
  std::atomic<std::size_t> next{0};
  std::vector<std::jthread> workers;
  for (int w = 0; w < jobs && w < static_cast<int>(side_by_side.size()); ++w) {
    workers.emplace_back([&] {
      for (std::size_t i; !interrupted && (i = next++) < side_by_side.size();)
        run(*side_by_side[i], false);
    });
  }
  workers.clear();  // joined
  for (const auto* s : alone) {
    if (interrupted) break;
    run(*s, true);
  }
  return {failed, skipped};
}

}  // namespace

Runner add_repro_command(CLI::App& app) {
  auto* repro = app.add_subcommand("repro", "Reproduce a connectivity failure in network namespaces (needs root)");
  repro->require_subcommand(1);
  auto o = std::make_shared<ReproOptions>();
  repro->add_option("--dir", o->dir,
                    "Scenario catalog (default: share/ringmaster/scenarios beside this binary when installed, else "
                    "the source tree's resources/scenarios; `repro list` says which)");
  auto* list = repro->add_subcommand("list", "List the scenarios with their stories");
  auto* run = repro->add_subcommand("run", "Run one scenario, or all of them");
  run->add_option("name", o->name, "Scenario name (see repro list)");
  run->add_flag("--all", o->all, "Every scenario in the catalog");
  run->add_flag("--keep", o->keep, "Leave the namespaces and bridge in place for inspection");
  run->add_option("-j,--jobs", o->jobs,
                  "Scenarios that time nothing run this many at a time, each cluster in namespaces of its own; "
                  "those that measure rates or wait for a moment run alone (default 3; 1: one after another)")
      ->check(CLI::Range(1, 16));
  run->add_option("--json-file", o->events_file, "Write every event of the runs as JSON lines (console replay)");
  run->add_option("--events-file", o->events_file)->group("");  // the old spelling of --json-file
  return [=]() -> int {
    const auto catalog = agent::load_catalog(o->dir);
    if (list->parsed()) {
      std::printf("# %zu scenarios in %s\n", catalog.size(), o->dir.c_str());
      for (const auto& s : catalog) {
        std::printf("%-28s %s\n    %s\n", s.name.c_str(), s.title.c_str(), s.story.c_str());
      }
      return 0;
    }
    if (!o->all && o->name.empty()) throw Error(ErrorCategory::config, "repro run: give a scenario name or --all");
    if (const std::string why = agent::scenarios_cannot_run(); !why.empty()) {
      bool named = false;
      for (const auto& s : catalog) {
        if (!o->all && s.name != o->name) continue;
        named = true;
        std::printf("SKIPPED %s: %s\n", s.name.c_str(), why.c_str());
      }
      if (!named) throw Error(ErrorCategory::config, "no scenario named " + o->name + " in " + o->dir);
      return exit_code::skipped;
    }
    agent::remove_scenario_leftovers();
    // Ctrl-C and SIGTERM end the current scenario through its cleanup.
    std::signal(SIGINT, [](int) { interrupted = true; });
    std::signal(SIGTERM, [](int) { interrupted = true; });
    std::unique_ptr<std::ofstream> events;
    if (!o->events_file.empty()) events = std::make_unique<std::ofstream>(o->events_file);
    agent::ScenarioRunOptions options;
    options.agent_path = (fs::read_symlink("/proc/self/exe").parent_path() / "ringmaster-agent").string();
    options.keep = o->keep;
    options.stop = &interrupted;
    std::vector<const agent::Scenario*> chosen;
    for (const auto& s : catalog) {
      if (o->all || s.name == o->name) chosen.push_back(&s);
    }
    if (chosen.empty()) throw Error(ErrorCategory::config, "no scenario named " + o->name + " in " + o->dir);
    const int ran = static_cast<int>(chosen.size());
    auto [failed, skipped] = run_all(chosen, options, events.get(), o->jobs);
    if (!o->keep) {
      const auto left = agent::scenario_leftovers();
      for (const auto& l : left)
        std::printf("LEFT BEHIND: %s\n", l.c_str());
      if (!left.empty()) ++failed;
    }
    const auto exit_problems = agent::take_agent_exit_problems();
    for (const auto& p : exit_problems)
      std::printf("AGENT AT EXIT: %s\n", p.c_str());
    if (!exit_problems.empty()) ++failed;
    if (interrupted) std::printf("interrupted; cleaned up\n");
    std::printf("%d of %d scenarios as expected", ran - failed - skipped, ran);
    if (skipped > 0) std::printf(", %d skipped", skipped);
    std::printf("\n");
    // A skip is not a pass: the run says so (77, as ctest reads it) unless
    // something failed outright.
    return failed > 0 ? 1 : skipped > 0 ? exit_code::skipped : 0;
  };
}

}  // namespace ringmaster::cli
