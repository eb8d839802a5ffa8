// `ringmaster-cli perf`: nccl-tests for Ringmaster. One rank per process,
// driven by torchrun's environment, or --np N local ranks started here.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "commands.h"
#include "perf_options.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/comm.h"
#include "ringmaster/tools/perf.h"

namespace ringmaster::cli {
namespace {

// A result row as JSON, with what the tuner ran ("tuner": its pick and
// prediction) and, with --candidates, whose row it is.
nlohmann::json row_json(const PerfSpec& spec, const PerfRow& row) {
  auto j = agent::to_json(spec, row);
  if (row.pick) {
    j["tuner"] = {{"algorithm", name_of(row.pick->algorithm)},
                  {"protocol", name_of(row.pick->protocol)},
                  {"channels", row.pick->channels},
                  {"predicted_us", row.pick->predicted_us}};
  }
  if (!row.candidate.empty()) j["candidate"] = row.candidate;
  return j;
}

// --events: one JSON object per line on stdout, from every rank, for the
// agent to relay: stage events as they happen (or the failure), channel
// samples every 100 ms, the protocol and channels picked per size, result
// rows with this rank's times, and a closing "done".
int run_rank_events(const Config& config, const PerfSpec& spec, const CommOptions& base) {
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
  // The channels' rings: every channel runs its ring in rank order.
  if (config.rank == 0) {
    nlohmann::json rings = nlohmann::json::array();
    nlohmann::json order = nlohmann::json::array();
    for (int r = 0; r < comm->size(); ++r)
      order.push_back(r);
    for (int c = 0; c < comm->max_channels(); ++c)
      rings.push_back({{"channel", c}, {"ranks", order}});
    emit({{"type", "rings"}, {"rings", std::move(rings)}});
    nlohmann::json trees = nlohmann::json::array();
    for (int t = 0; t < 2; ++t)
      trees.push_back({{"tree", t}, {"parents", comm->tree_parents(t)}});
    emit({{"type", "trees"}, {"trees", std::move(trees)}});
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
      nlohmann::json channels = nlohmann::json::array();
      for (int c = 0; c < comm->max_channels(); ++c) {
        const auto k = comm->counters(c);
        channels.push_back({{"channel", c},
                            {"bytes_sent", k.bytes_sent},
                            {"bytes_received", k.bytes_received},
                            {"busy_ns", k.busy_ns},
                            {"steps", k.steps}});
      }
      nlohmann::json peers = nlohmann::json::array();
      for (const auto& l : comm->peer_links())
        peers.push_back({{"peer", l.peer}, {"bytes_received", l.total_bytes}});
      emit({{"type", "sample"},
            {"peers", std::move(peers)},
            {"t_us",
             std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count()},
            {"channels", std::move(channels)}});
    }
  });
  int code = 0;
  long wrong = 0;
  std::size_t rows = 0;
  try {
    run_perf(*comm, spec, [&](const PerfRow& row) {
      emit(row_json(spec, row));
      wrong += row.out_of_place.wrong + row.in_place.wrong;
      ++rows;
    });
  } catch (const Error& e) {
    emit({{"type", "error"}, {"category", name_of(e.category())}, {"message", e.status().message()}});
    std::fprintf(stderr, "rank %d: %s\n", config.rank, e.what());
    code = exit_code::collective_failed;
  }
  running = false;
  sampler.join();
  emit(agent::links_json(comm->peer_links(), comm->connections()));
  if (code == 0 && wrong != 0) code = exit_code::failed;
  emit({{"type", "done"}, {"wrong", wrong}, {"rows", rows}, {"exit_code", code}});
  return code;
}

// Runs one rank; returns its exit code.
int run_rank(const Config& config, const PerfSpec& spec, const CommOptions& base, const PerfOptions& opts) {
  if (opts.events) return run_rank_events(config, spec, base);
  CommOptions options = base;
  std::vector<StageEvent> events;
  options.on_stage = [&](const StageEvent& e) { events.push_back(e); };
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
  if (leader) {
    std::fputs(perf_header(spec, comm->size()).c_str(), stdout);
    std::printf("# Tuner: %s\n", comm->tuner().describe().c_str());
  }
  std::fflush(stdout);
  nlohmann::json json_rows = nlohmann::json::array();
  std::vector<PerfRow> rows;
  try {
    rows = run_perf(*comm, spec, [&](const PerfRow& row) {
      if (!leader) return;
      std::string line = perf_row_line(spec, row);
      if (!row.candidate.empty()) {
        // --candidates: who ran the row, and for the tuner's own rows its pick.
        line.pop_back();
        line += "  " + row.candidate;
        if (row.candidate == "auto" && row.pick)
          line += fmt::format(" ({}/{})", name_of(row.pick->algorithm), name_of(row.pick->protocol));
        line += "\n";
      }
      std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
      json_rows.push_back(row_json(spec, row));
    });
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", config.rank, e.what());
    return exit_code::collective_failed;
  }
  long wrong = 0;
  for (const auto& r : rows)
    wrong += r.out_of_place.wrong + r.in_place.wrong;
  if (leader) {
    std::fputs(perf_footer(rows).c_str(), stdout);
    if (!opts.json_file.empty()) {
      std::ofstream(opts.json_file) << json_rows.dump(2) << "\n";
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
  perf->add_option("--json", opts->json_file, "Also write rank 0's rows as JSON to this file");
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
  perf->add_flag("--events", opts->events,
                 "Every rank writes JSON lines (stages, 10 Hz channel samples, decisions, rows) instead of tables");

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

namespace {
const std::map<std::string, Collective> kCollectives = {{"all_reduce", Collective::all_reduce},
                                                        {"all_gather", Collective::all_gather},
                                                        {"reduce_scatter", Collective::reduce_scatter},
                                                        {"broadcast", Collective::broadcast},
                                                        {"reduce", Collective::reduce},
                                                        {"all_to_all", Collective::all_to_all},
                                                        {"sendrecv", Collective::send_recv}};
}  // namespace

void add_perf_options(CLI::App* perf, PerfOptions& o) {
  perf->add_option("collective", o.collective,
                   "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, sendrecv")
      ->required()
      ->check(CLI::IsMember(
          {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "sendrecv"}));
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
  perf->add_option("--algo", o.algo, "Algorithm: Ring or Tree (default: the tuner picks; NCCL_ALGO)");
  perf->add_option("--proto", o.proto, "Protocol: LL, LL128 or Simple (default: the tuner picks; NCCL_PROTO)");
  perf->add_option("--channels", o.channels, "Use exactly this many channels");
}

PerfSpec make_perf_spec(const PerfOptions& o) {
  PerfSpec spec;
  spec.collective = kCollectives.at(o.collective);
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
  const auto op = parse_red_op(o.op);
  if (!op) throw Error(ErrorCategory::config, "-o " + o.op + ": expected sum, prod, max, min or avg");
  spec.op = *op;
  const auto type = parse_data_type(o.type);
  if (!type) throw Error(ErrorCategory::config, "-d " + o.type + ": unknown data type");
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

nlohmann::json perf_spec_json(const PerfOptions& o) {
  return {{"collective", o.collective},
          {"min_bytes", o.min_bytes},
          {"max_bytes", o.max_bytes},
          {"step_factor", o.step_factor},
          {"step_bytes", o.step_bytes},
          {"iters", o.iters},
          {"warmup", o.warmup},
          {"warmup_ms", o.warmup_ms},
          {"check", o.check},
          {"dtype", o.type},
          {"op", o.op},
          {"root", o.root},
          {"blocking", o.blocking},
          {"algo", o.algo},
          {"proto", o.proto},
          {"channels", o.channels}};
}

}  // namespace ringmaster::cli
