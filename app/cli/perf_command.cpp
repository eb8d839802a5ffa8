// `ringmaster-cli perf`: nccl-tests for Ringmaster. One rank per process,
// driven by torchrun's environment, or --np N local ranks started here.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

#include "commands.h"
#include "perf_options.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/comm.h"
#include "ringmaster/tools/bisect.h"
#include "ringmaster/tools/perf.h"
#include "ringmaster/version.h"

namespace ringmaster::cli {
namespace {

// A result row as JSON, with what the tuner ran ("tuner": its pick and
// prediction) and, with --candidates, whose row it is.
nlohmann::json row_json(const PerfSpec& spec, const PerfRow& row) {
  auto r = agent::events::result(spec, row);
  if (row.pick) {
    r.tuner =
        agent::events::Result::Pick{std::string(name_of(row.pick->algorithm)), std::string(name_of(row.pick->protocol)),
                                    row.pick->channels, row.pick->predicted_us};
  }
  r.candidate = row.candidate;
  return agent::events::to_json(r);
}

// Every sweep the flags ask for: -d all and -o all run every type and
// operation in turn (operations only where the collective reduces); -N
// repeats the whole of it (0: until stopped).
void for_each_sweep(const PerfOptions& opts, const PerfSpec& spec, const std::function<void(const PerfSpec&)>& run) {
  std::vector<DataType> types = {spec.type};
  if (opts.type == "all") types.assign(std::begin(kAllDataTypes), std::end(kAllDataTypes));
  const bool reduces = spec.collective == Collective::all_reduce || spec.collective == Collective::reduce ||
                       spec.collective == Collective::reduce_scatter;
  std::vector<RedOp> ops = {spec.op};
  if (opts.op == "all" && reduces) ops.assign(std::begin(kAllRedOps), std::end(kAllRedOps));
  for (long cycle = 0; opts.run_cycles == 0 || cycle < opts.run_cycles; ++cycle) {
    for (const DataType type : types) {
      for (const RedOp op : ops) {
        PerfSpec one = spec;
        one.type = type;
        one.op = op;
        run(one);
      }
    }
  }
}

// The channels' rings as the engine ordered them, with the GPU and NIC
// each position goes through when the topology search placed them.
agent::events::Rings rings_of(const Communicator& comm, const std::vector<RankDevices>& devices) {
  agent::events::Rings rings;
  const auto orders = comm.rings();
  bool placed = false;
  for (const auto& d : devices)
    placed = placed || d.gpu >= 0;
  for (std::size_t c = 0; c < orders.size(); ++c) {
    agent::events::Rings::Ring ring{static_cast<int>(c), orders[c], {}, {}};
    for (int r : orders[c]) {
      const auto& at = devices[static_cast<std::size_t>(r)].channels;
      ring.nics.push_back(c < at.size() ? at[c].nic : -1);
      ring.devices.push_back(c < at.size() ? at[c].device : std::string());
    }
    if (std::all_of(ring.devices.begin(), ring.devices.end(), [](const auto& d) { return d.empty(); })) {
      ring.nics.clear();  // the ring never leaves its host
      ring.devices.clear();
    }
    rings.rings.push_back(std::move(ring));
  }
  if (placed) {
    for (const auto& d : devices)
      rings.gpus.push_back(d.gpu);
  }
  return rings;
}

// This rank's channels and peers now: bytes, busy time and steps per
// channel (with the device each leaves and enters by), bytes per peer,
// calls started and ended.
agent::events::Sample sample_of(const Communicator& comm, const RankDevices& mine) {
  agent::events::Sample sample;
  for (int c = 0; c < comm.max_channels(); ++c) {
    const auto k = comm.counters(c);
    const ChannelDevices d = static_cast<std::size_t>(c) < mine.channels.size()
                                 ? mine.channels[static_cast<std::size_t>(c)]
                                 : ChannelDevices{};
    sample.channels.push_back({c, k.bytes_sent, k.bytes_received, k.busy_ns, k.steps,
                               d.leaves ? d.device : std::string(), d.enters ? d.device : std::string()});
  }
  for (const auto& l : comm.peer_links())
    sample.peers.push_back({l.peer, l.total_bytes});
  const CallCounts calls = comm.call_counts();
  sample.calls_started = calls.started;
  sample.calls_ended = calls.ended;
  sample.t_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  return sample;
}

// The largest size's busbw of a sweep (out of place): what --bisect-below
// is held against.
struct LargestRow {
  std::size_t bytes = 0;
  double busbw = 0;
  void see(const PerfRow& row) {
    if (row.bytes < bytes) return;
    bytes = row.bytes;
    busbw = row.out_of_place.busbw;
  }
};

agent::events::Bisect bisect_event(const BisectRound& round) {
  agent::events::Bisect e;
  e.round = round.round;
  for (const auto& g : round.groups)
    e.groups.push_back({g.nodes, g.busbw, g.slow, g.error});
  return e;
}

// --bisect, --bisect-below: after the sweep, every rank together, the
// job's nodes (GROUP_RANK) bisected inside this job when it fell short;
// each round as it ends and then the verdict go to `report` (on every
// rank alike).
void bisect_if_asked(Communicator& comm, const Config& config, const PerfSpec& spec, const PerfOptions& opts,
                     const LargestRow& largest, const std::function<void(const agent::events::Bisect&)>& report) {
  if (!opts.bisect && opts.bisect_below <= 0) return;
  if (opts.bisect_below > 0 && largest.busbw >= opts.bisect_below) return;
  BisectSpec b;
  b.bytes = spec.max_bytes;
  b.iters = spec.iters;
  b.warmup = spec.warmup;
  b.whole_busbw = largest.busbw;
  const BisectReport r =
      bisect_nodes(comm, config, config.group_rank, b, [&](const BisectRound& round) { report(bisect_event(round)); });
  agent::events::Bisect end;
  end.round = static_cast<int>(r.rounds.size());
  end.verdict = name_of(r.verdict.kind);
  end.node = r.verdict.node;
  end.from = r.verdict.from;
  end.to = r.verdict.to;
  end.side_a = r.verdict.side_a;
  end.side_b = r.verdict.side_b;
  end.text = r.verdict.text;
  report(end);
}

// The bisection in nccl-tests' comment lines.
void print_bisect(const agent::events::Bisect& b);

// --bisect in the table's run: rank 0 prints it; false when it failed.
bool bisect_and_print(Communicator& comm, const Config& config, const PerfSpec& spec, const PerfOptions& opts,
                      const std::vector<PerfRow>& rows) {
  LargestRow largest;
  for (const auto& r : rows)
    largest.see(r);
  try {
    bisect_if_asked(comm, config, spec, opts, largest, [&](const agent::events::Bisect& b) {
      if (config.rank == 0) print_bisect(b);
    });
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: bisect: %s\n", config.rank, e.what());
    return false;
  }
  return true;
}

void print_bisect(const agent::events::Bisect& b) {
  std::printf("# %s\n", agent::events::describe(b).c_str());
  std::fflush(stdout);
}

// --json: one JSON object per line on stdout, from every rank, for the
// agent to relay: stage events as they happen (or the failure), channel
// samples every 100 ms, the protocol and channels picked per size, result
// rows with this rank's times, and a closing "done".
int run_rank_events(const Config& config, const PerfSpec& spec, const CommOptions& base, const PerfOptions& opts) {
  std::mutex out_mutex;
  auto emit = [&](nlohmann::json j) {
    j["rank"] = config.rank;
    const std::string line = j.dump() + "\n";
    std::lock_guard lock(out_mutex);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  };
  CommOptions options = base;
  options.on_stage = [&](const StageEvent& e) { emit(agent::to_json(e)); };
  std::mutex seen_mutex;
  std::set<std::pair<int, std::size_t>> seen;
  options.on_collective = [&](const CollectiveRecord& r) {
    {
      std::lock_guard lock(seen_mutex);
      if (!seen.emplace(static_cast<int>(r.collective), r.bytes).second) return;
    }
    emit(agent::to_json(r));
  };
  // A collective that stopped moving: the rank that saw it first sends
  // every rank's recent calls and who lags.
  options.on_stall = [&](const StallReport& report) { emit(agent::to_json(report)); };
  // Every rank decides alike; rank 0 reports the tuner's tables.
  options.on_decision = [&](const tune::Decision& d) {
    if (config.rank == 0) emit(agent::to_json(d));
  };
  std::unique_ptr<Communicator> comm;
  try {
    comm = Communicator::create(config, options);
  } catch (const StageError& e) {
    emit(agent::to_json(e.failure()));
    std::fprintf(stderr, "%s\n", e.failure().to_string().c_str());
    return exit_code::init_failed;
  }
  // The channels' rings as the engine ordered them, with the GPU and NIC
  // each position goes through when the topology search placed them.
  const std::vector<RankDevices> devices = comm->devices();
  if (config.rank == 0) {
    emit(agent::events::to_json(rings_of(*comm, devices)));
    agent::events::Trees trees;
    for (int t = 0; t < 2; ++t)
      trees.trees.push_back({t, comm->tree_parents(t)});
    emit(agent::events::to_json(trees));
  }
  // What carries each of this rank's connections (every rank: only it
  // knows its own).
  emit(agent::connections_json(comm->connections()));
  std::atomic<bool> running{true};
  std::thread sampler([&] {
    const auto start = std::chrono::steady_clock::now();
    auto next = start;
    while (running) {
      next += std::chrono::milliseconds(100);
      std::this_thread::sleep_until(next);
      const agent::events::Sample sample = sample_of(*comm, devices[static_cast<std::size_t>(config.rank)]);
      emit(agent::events::to_json(sample));
    }
  });
  int code = 0;
  long wrong = 0;
  std::size_t rows = 0;
  LargestRow largest;
  try {
    for_each_sweep(opts, spec, [&](const PerfSpec& one) {
      run_perf(*comm, one, [&](const PerfRow& row) {
        emit(row_json(one, row));
        wrong += row.out_of_place.wrong + row.in_place.wrong;
        ++rows;
        largest.see(row);
      });
    });
    bisect_if_asked(*comm, config, spec, opts, largest, [&](const agent::events::Bisect& b) {
      if (config.rank == 0) emit(agent::events::to_json(b));
    });
  } catch (const Error& e) {
    emit(agent::events::to_json(
        agent::events::CollectiveError{std::string(name_of(e.category())), e.status().message()}));
    std::fprintf(stderr, "rank %d: %s\n", config.rank, e.what());
    code = exit_code::collective_failed;
  }
  running = false;
  sampler.join();
  emit(agent::links_json(comm->peer_links(), comm->connections()));
  if (code == 0 && wrong != 0) code = exit_code::failed;
  emit(agent::events::to_json(agent::events::RankDone{wrong, static_cast<long long>(rows), code}));
  return code;
}

// "2026-12-02 03:12:45" in local time, as nccl-tests' -S prints.
std::string timestamp(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::localtime_r(&tt, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// -J: the run in nccl-tests' JSON shape (file version 3): the command line,
// the configuration, the ranks' placement, one result per row and the
// summary.
nlohmann::json nccl_tests_json(const PerfSpec& spec, const PerfOptions& opts,
                               std::chrono::system_clock::time_point started, const nlohmann::json& devices,
                               const nlohmann::json& row_objects, const std::vector<PerfRow>& rows) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& row : row_objects) {
    auto part = [](const nlohmann::json& p) -> nlohmann::json {
      if (p.is_null()) return nullptr;
      return {{"time", p["time_us"]}, {"alg_bw", p["algbw"]}, {"bus_bw", p["busbw"]}, {"nwrong", p["wrong"]}};
    };
    results.push_back({{"size", row["bytes"]},
                       {"count", row["count"]},
                       {"type", row["dtype"]},
                       {"redop", row["redop"]},
                       {"root", row["root"]},
                       {"aggregated_iterations", spec.agg_iters},
                       {"out_of_place", part(row.value("out_of_place", nlohmann::json()))},
                       {"in_place", part(row.value("in_place", nlohmann::json()))}});
  }
  const auto summary = summarize(rows);
  return {{"version", 3},
          {"ringmaster_version", RINGMASTER_VERSION_STRING},
          {"start_time", timestamp(started)},
          {"end_time", timestamp(std::chrono::system_clock::now())},
          {"config",
           {{"nthreads", opts.nthreads},
            {"ngpus", opts.ngpus},
            {"minimum_bytes", spec.min_bytes},
            {"maximum_bytes", spec.max_bytes},
            {"step_bytes", spec.step_bytes},
            {"step_factor", spec.step_factor},
            {"iterations", spec.iters},
            {"warmup_iters", spec.warmup},
            {"aggregated_iterations", spec.agg_iters},
            {"validation", spec.check ? 1 : 0},
            {"graph", 0},
            {"blocking_collectives", spec.blocking ? 1 : 0},
            {"parallel_init", opts.parallel_init}}},
          {"devices", devices},
          {"results", results},
          {"out_of_bounds", {{"values", summary.wrong}, {"okay", summary.wrong == 0}}},
          {"average_bus_bandwidth", {{"bandwidth", summary.avg_busbw}}}};
}

// Runs one rank; returns its exit code.
int run_rank(const Config& config, const PerfSpec& spec, const CommOptions& base, const PerfOptions& opts) {
  if (opts.events) return run_rank_events(config, spec, base, opts);
  CommOptions options = base;
  std::vector<StageEvent> events;
  options.on_stage = [&](const StageEvent& e) {
    if (e.in_progress) {
      print_live_line(e);
    } else {
      events.push_back(e);
    }
  };
  if (opts.timeout_s > 0)  // -T
    options.timeout = std::chrono::milliseconds(static_cast<long long>(opts.timeout_s * 1000));
  std::unique_ptr<Communicator> comm;
  try {
    comm = Communicator::create(config, options);
  } catch (const StageError& e) {
    std::fprintf(stderr, "%s\n", e.failure().to_string().c_str());
    return exit_code::init_failed;
  }
  const bool leader = config.rank == 0;
  if (leader && !opts.quiet_stages) {
    std::printf("# rank 0 init stages\n");
    for (const auto& e : events) {
      std::printf("#   %-17s %-6s %9.3f ms  %s\n", std::string(name_of(e.stage)).c_str(), e.ok ? "ok" : "FAILED",
                  e.duration.count() / 1e6, e.detail.c_str());
    }
    std::printf("#\n");
  }
  // Who runs where, as nccl-tests' "# Using devices" block: every rank's
  // pid and host (gathered), each on the CPUs.
  struct Placement {
    std::int32_t pid;
    char host[60];
  };
  Placement mine{static_cast<std::int32_t>(::getpid()), {}};
  ::gethostname(mine.host, sizeof(mine.host) - 1);
  std::vector<Placement> placements(static_cast<std::size_t>(comm->size()));
  comm->unfiltered([&] { comm->all_gather(&mine, placements.data(), sizeof(Placement), DataType::uint8).wait(); });
  if (leader) {
    // The first line, the devices, then the columns, as nccl-tests prints.
    const std::string header = perf_header(spec, comm->size());
    const auto columns = header.find("#\n");
    std::fputs(header.substr(0, columns).c_str(), stdout);
    std::printf("#\n# Using devices\n");
    for (std::size_t r = 0; r < placements.size(); ++r) {
      std::printf("#  Rank %2zu Group  0 Pid %6d on %10s device cpu [host] %s\n", r, placements[r].pid,
                  placements[r].host, "CPU (no GPU path in this build)");
    }
    std::fputs(header.substr(columns).c_str(), stdout);
    std::printf("# Tuner: %s\n", comm->tuner().describe().c_str());
  }
  std::fflush(stdout);
  nlohmann::json json_rows = nlohmann::json::array();
  std::vector<PerfRow> rows;
  const auto started = std::chrono::system_clock::now();
  try {
    for_each_sweep(opts, spec, [&](const PerfSpec& one) {
      auto these = run_perf(*comm, one, [&](const PerfRow& row) {
        if (!leader) return;
        std::string line = perf_row_line(one, row);
        if (!row.candidate.empty()) {
          // --candidates: who ran the row, and for the tuner's own rows its pick.
          line.pop_back();
          line += "  " + row.candidate;
          if (row.candidate == "auto" && row.pick)
            line += fmt::format(" ({}/{})", name_of(row.pick->algorithm), name_of(row.pick->protocol));
          line += "\n";
        }
        if (opts.report_timestamps != 0) {
          // -S: the wall-clock time the row finished.
          line.pop_back();
          line += fmt::format("  {}\n", timestamp(std::chrono::system_clock::now()));
        }
        std::fputs(line.c_str(), stdout);
        std::fflush(stdout);
        json_rows.push_back(row_json(one, row));
      });
      rows.insert(rows.end(), these.begin(), these.end());
    });
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", config.rank, e.what());
    return exit_code::collective_failed;
  }
  long wrong = 0;
  for (const auto& r : rows)
    wrong += r.out_of_place.wrong + r.in_place.wrong;
  if (leader) std::fputs(perf_footer(rows).c_str(), stdout);
  if (!bisect_and_print(*comm, config, spec, opts, rows)) return exit_code::collective_failed;
  if (leader) {
    if (!opts.json_file.empty()) {
      std::ofstream(opts.json_file) << json_rows.dump(2) << "\n";
    }
    if (!opts.output_file.empty()) {
      nlohmann::json devices = nlohmann::json::array();
      for (std::size_t r = 0; r < placements.size(); ++r) {
        devices.push_back({{"rank", r},
                           {"group", 0},
                           {"pid", placements[r].pid},
                           {"hostname", placements[r].host},
                           {"device", -1},
                           {"device_hex", ""},
                           {"device_info", "CPU"}});
      }
      std::ofstream out(opts.output_file);
      out << nccl_tests_json(spec, opts, started, devices, json_rows, rows).dump(2) << "\n";
      if (!out) std::fprintf(stderr, "# -J %s: cannot write\n", opts.output_file.c_str());
    }
  }
  return wrong == 0 ? exit_code::ok : exit_code::failed;
}

std::uint16_t free_port() {
  // Below the ephemeral range is not guaranteed free either; let the
  // kernel pick, then hand the number to rank 0 (it rebinds at once).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

Runner add_perf_command(CLI::App& app) {
  auto* perf = app.add_subcommand("perf", "Measure a collective like nccl-tests (one rank per process or --np N)");
  auto opts = std::make_shared<PerfOptions>();
  add_perf_options(perf, *opts);
  perf->add_option("--json-file", opts->json_file, "Also write rank 0's rows as JSON to this file");
  perf->add_option("--np", opts->np, "Start N local ranks (processes) on loopback");
  perf->add_option("--bind", opts->bind,
                   "With --np: core binds rank r to the r-th CPU this process may use (as mpirun does), none leaves "
                   "placement to the kernel; auto (default) binds when there is a CPU for every rank")
      ->check(CLI::IsMember({"auto", "core", "none"}))
      ->capture_default_str();
  perf->add_option("--candidates", opts->candidates,
                   "Time every candidate at each size, taking turns (a lead-in and a timed call each, waited for; a "
                   "row's time is the median timed call): Ring/LL,Tree/Simple,... and auto (the tuner's pick), or all "
                   "(every algorithm and protocol the links run, and auto)");
  perf->add_flag("--no-stages", opts->quiet_stages, "Do not print rank 0's init stage table");
  perf->add_flag("--json", opts->events,
                 "Every rank writes JSON lines (stages, 10 Hz channel samples, decisions, rows) on stdout instead of "
                 "tables");
  perf->add_flag("--events", opts->events)->group("");  // the old spelling of --json

  return [=]() -> int {
    PerfSpec spec = make_perf_spec(*opts);
    const CommOptions base = make_comm_options(*opts);
    if (!opts->candidates.empty()) {
      if (!opts->algo.empty() || !opts->proto.empty())
        throw Error(ErrorCategory::config, "--candidates names the algorithms and protocols: drop --algo / --proto");
      spec.candidates = parse_candidates(opts->candidates);
    }

    Config config = Config::from_env();
    if (opts->np <= 0) return run_rank(config, spec, base, *opts);

    // --np N: fork N ranks on loopback; rank 0 prints.
    config.world_size = opts->np;
    config.master_addr = "127.0.0.1";
    if (std::getenv("MASTER_PORT") == nullptr) config.master_port = free_port();
    // The CPUs this process may use, in order: rank r gets the r-th.
    std::vector<int> cpus;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
      }
    }
    const bool bind = opts->bind == "core" || (opts->bind == "auto" && static_cast<int>(cpus.size()) >= opts->np);
    if (bind && cpus.empty()) throw Error(ErrorCategory::config, "--bind core: cannot read this process's CPUs");
    if (bind && !opts->events) {
      std::string where;
      for (int r = 0; r < opts->np; ++r)
        where += (r == 0 ? "" : ",") + std::to_string(cpus[static_cast<std::size_t>(r) % cpus.size()]);
      std::printf("# ranks 0..%d bound to CPUs %s (--bind none leaves them free)\n", opts->np - 1, where.c_str());
    }
    std::fflush(stdout);
    std::vector<pid_t> children;
    for (int r = 0; r < opts->np; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
        if (bind) {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(cpus[static_cast<std::size_t>(r) % cpus.size()], &one);
          (void)sched_setaffinity(0, sizeof(one), &one);
        }
        Config mine = config;
        mine.rank = r;
        mine.local_rank = r;
        mine.local_world_size = opts->np;
        const int code = run_rank(mine, spec, base, *opts);
        std::fflush(stdout);
        _exit(code);
      }
      children.push_back(pid);
    }
    int worst = 0;
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      worst = std::max(worst, code);
    }
    return worst;
  };
}

namespace {}  // namespace

// nccl-tests' names, with or without _perf, and the spellings people use.
std::string collective_named(const std::string& given) {
  if (const auto c = agent::perf_collective_named(given)) return agent::perf_collective_name(*c);
  std::string n = given;
  if (n.size() > 5 && n.compare(n.size() - 5, 5, "_perf") == 0) n.resize(n.size() - 5);
  if (n == "hypercube")
    throw Error(ErrorCategory::config, "collective " + given + ": not built yet (nccl-tests' " + n + "_perf)");
  throw Error(ErrorCategory::config,
              "collective " + given +
                  ": expected all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, gather, scatter or "
                  "sendrecv (or "
                  "nccl-tests' binary names, e.g. all_reduce_perf)");
}

void add_perf_options(CLI::App* perf, PerfOptions& o) {
  perf->add_option("collective", o.collective,
                   "all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall (all_to_all), gather, scatter, "
                   "sendrecv; "
                   "nccl-tests' binary names too (all_reduce_perf, ...)")
      ->required();
  perf->add_option("-b,--minbytes", o.min_bytes, "Smallest size (K, M, G suffixes)")->capture_default_str();
  perf->add_option("-e,--maxbytes", o.max_bytes, "Largest size")->capture_default_str();
  perf->add_option("-f,--stepfactor", o.step_factor, "Multiply the size by this each step")->capture_default_str();
  perf->add_option("-i,--stepbytes", o.step_bytes, "Add this to the size each step (when -f is 1)")
      ->capture_default_str();
  perf->add_option("-n,--iters", o.iters, "Timed iterations")->capture_default_str();
  perf->add_option("-w,--warmup_iters", o.warmup, "Warm-up iterations")->capture_default_str();
  perf->add_option("--warmup-ms", o.warmup_ms,
                   "Also warm the first size up for this long (ms, every rank alike); 0: -w alone")
      ->capture_default_str();
  perf->add_option("-c,--check", o.check, "Check every element (#wrong)")->capture_default_str();
  perf->add_option("-o,--op", o.op, "sum, prod, max, min, avg")->capture_default_str();
  perf->add_option("-d,--datatype", o.type, "float, half, bfloat16, double, int8, ...")->capture_default_str();
  perf->add_option("-r,--root", o.root, "Root of broadcast and reduce")->capture_default_str();
  perf->add_option("-z,--blocking", o.blocking, "Wait for each collective before the next")->capture_default_str();
  perf->add_option("-t,--nthreads", o.nthreads, "nccl-tests' threads per process: 1 (one rank per process here)")
      ->capture_default_str();
  perf->add_option("-g,--ngpus", o.ngpus, "nccl-tests' GPUs per thread: 1 (one rank per process here)")
      ->capture_default_str();
  perf->add_option("-m,--agg_iters", o.agg_iters, "Calls per timed iteration; a row's time is per call")
      ->capture_default_str();
  perf->add_option("-N,--run_cycles", o.run_cycles, "Run and print the sweep this many times (0: until stopped)")
      ->capture_default_str();
  perf->add_option("-p,--parallel_init", o.parallel_init, "nccl-tests' threaded init: 0 or 1 (one rank per process)")
      ->capture_default_str();
  perf->add_option("-a,--average", o.average, "A row's time over the ranks: 0 rank 0's, 1 average, 2 min, 3 max")
      ->capture_default_str();
  perf->add_option("-T,--timeout", o.timeout_s, "Seconds a collective may stall before the run fails (0: default)")
      ->capture_default_str();
  perf->add_option("-C,--report_cputime", o.report_cputime,
                   "0 or 1: times are the host's clock either way (no GPU events here)")
      ->capture_default_str();
  perf->add_option("-S,--report_timestamps", o.report_timestamps, "1: end each row with its wall-clock time")
      ->capture_default_str();
  perf->add_option("-J,--output_file", o.output_file, "Also write the run as nccl-tests' JSON to this file");
  // GPU-only flags, and those not built yet: their defaults are accepted.
  perf->add_option("-y,--stream_null", o.stream_null, "GPU only (0)");
  perf->add_option("-G,--cudagraph", o.cudagraph, "GPU only (0)");
  perf->add_option("-R,--local_register", o.local_register, "GPU only (0)");
  perf->add_option("-x,--cta_policy", o.cta_policy, "GPU only (0)");
  perf->add_option("-D,--device_implementation", o.device_implementation, "GPU only (0)");
  perf->add_option("-V,--device_cta_count", o.device_cta_count, "GPU only (0)");
  perf->add_option("-M,--memory", o.memory, "GPU only (0)");
  perf->add_option("-u,--unalign", o.unalign, "Not built yet (0)");
  perf->add_option("-I,--per_iter_timing", o.per_iter_timing, "Not built yet (0)");
  perf->add_option("-K,--per_iter_skip", o.per_iter_skip, "Not built yet (0)");
  perf->add_option("--algo", o.algo, "Algorithm: Ring or Tree (default: the tuner picks; NCCL_ALGO)");
  perf->add_option("--proto", o.proto, "Protocol: LL, LL128 or Simple (default: the tuner picks; NCCL_PROTO)");
  perf->add_option("--channels", o.channels, "Use exactly this many channels");
  perf->add_flag("--bisect", o.bisect,
                 "all_reduce: after the sweep, bisect the job's nodes (GROUP_RANK) over halves and pairs inside this "
                 "job and name the node or link that holds it back");
  perf->add_option("--bisect-below", o.bisect_below,
                   "Bisect only when the largest size's busbw falls under this (GB/s); implies --bisect");
}

PerfSpec make_perf_spec(const PerfOptions& o) {
  PerfSpec spec;
  spec.collective = *agent::perf_collective_named(collective_named(o.collective));
  const char* one_rank = ": one rank per process here; start more processes (--np N, mpirun, srun, torchrun)";
  if (o.nthreads != 1) throw Error(ErrorCategory::config, "-t " + std::to_string(o.nthreads) + one_rank);
  if (o.ngpus != 1) throw Error(ErrorCategory::config, "-g " + std::to_string(o.ngpus) + one_rank);
  if (o.parallel_init != 0 && o.parallel_init != 1)
    throw Error(ErrorCategory::config, "-p " + std::to_string(o.parallel_init) + ": 0 or 1");
  if (o.agg_iters < 1) throw Error(ErrorCategory::config, "-m " + std::to_string(o.agg_iters) + ": at least 1");
  if ((o.bisect || o.bisect_below > 0) && spec.collective != Collective::all_reduce)
    throw Error(ErrorCategory::config, "--bisect: all_reduce only (its groups' all_reduce busbw is what it compares)");
  if (o.bisect_below < 0) throw Error(ErrorCategory::config, "--bisect-below: a busbw in GB/s above 0");
  if (o.run_cycles < 0) throw Error(ErrorCategory::config, "-N " + std::to_string(o.run_cycles) + ": 0 or more");
  if (o.average < 0 || o.average > 3)
    throw Error(ErrorCategory::config, "-a " + std::to_string(o.average) + ": 0 (rank 0), 1 (avg), 2 (min) or 3 (max)");
  if (o.report_cputime != 0 && o.report_cputime != 1)
    throw Error(ErrorCategory::config, "-C " + std::to_string(o.report_cputime) + ": 0 or 1");
  if (o.timeout_s < 0) throw Error(ErrorCategory::config, "-T: seconds, 0 or more");
  const std::pair<const char*, int> gpu_only[] = {
      {"-y", o.stream_null},           {"-G", o.cudagraph},        {"-R", o.local_register}, {"-x", o.cta_policy},
      {"-D", o.device_implementation}, {"-V", o.device_cta_count}, {"-M", o.memory}};
  for (const auto& [flag, value] : gpu_only) {
    if (value != 0)
      throw Error(ErrorCategory::config, std::string(flag) + " " + std::to_string(value) +
                                             ": GPU only, and this build runs collectives on CPUs");
  }
  const std::pair<const char*, int> later[] = {{"-u", o.unalign}, {"-I", o.per_iter_timing}, {"-K", o.per_iter_skip}};
  for (const auto& [flag, value] : later) {
    if (value != 0)
      throw Error(ErrorCategory::config, std::string(flag) + " " + std::to_string(value) + ": not built yet");
  }
  spec.agg_iters = o.agg_iters;
  spec.average = o.average;
  spec.min_bytes = parse_size(o.min_bytes);
  spec.max_bytes = parse_size(o.max_bytes);
  spec.step_bytes = parse_size(o.step_bytes);
  spec.step_factor = o.step_factor;
  spec.iters = o.iters;
  spec.warmup = o.warmup;
  spec.warmup_ms = o.warmup_ms;
  spec.check = o.check != 0;
  spec.root = o.root;
  spec.blocking = o.blocking != 0;
  // "all": every operation / type in turn (run_rank).
  const auto op = o.op == "all" ? std::optional<RedOp>(RedOp::sum) : parse_red_op(o.op);
  if (!op) throw Error(ErrorCategory::config, "-o " + o.op + ": expected sum, prod, max, min, avg or all");
  spec.op = *op;
  const auto type = o.type == "all" ? std::optional<DataType>(DataType::fp32) : parse_data_type(o.type);
  if (!type) throw Error(ErrorCategory::config, "-d " + o.type + ": unknown data type (or all)");
  spec.type = *type;
  if (spec.min_bytes > spec.max_bytes) throw Error(ErrorCategory::config, "-b is larger than -e");
  return spec;
}

CommOptions make_comm_options(const PerfOptions& o) {
  CommOptions base;
  if (!o.algo.empty()) {
    base.algorithm = parse_algorithm(o.algo);
    if (!base.algorithm) throw Error(ErrorCategory::config, "--algo " + o.algo + ": Ring or Tree");
  }
  if (!o.proto.empty()) {
    base.protocol = parse_protocol(o.proto);
    if (!base.protocol) throw Error(ErrorCategory::config, "--proto " + o.proto + ": LL, LL128 or Simple");
  }
  if (o.channels > 0) base.min_channels = base.max_channels = o.channels;
  return base;
}

agent::PerfRequest perf_request(const PerfOptions& o) {
  // make_perf_spec checks every flag, naming it, as a local run would.
  const PerfSpec spec = make_perf_spec(o);
  agent::PerfRequest r;
  r.collective = spec.collective;
  r.min_bytes = spec.min_bytes;
  r.max_bytes = spec.max_bytes;
  r.step_factor = spec.step_factor;
  r.step_bytes = spec.step_bytes;
  r.iters = spec.iters;
  r.warmup = spec.warmup;
  r.warmup_ms = o.warmup_ms;
  r.check = spec.check;
  r.type = spec.type;
  r.op = spec.op;
  r.root = spec.root;
  r.blocking = spec.blocking;
  const CommOptions forced = make_comm_options(o);
  r.algorithm = forced.algorithm;
  r.protocol = forced.protocol;
  r.channels = o.channels;
  r.agg_iters = o.agg_iters;
  r.run_cycles = o.run_cycles;
  r.average = o.average;
  r.bisect = o.bisect || o.bisect_below > 0;
  r.bisect_below = o.bisect_below;
  return r;
}

}  // namespace ringmaster::cli
