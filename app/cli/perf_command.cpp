// `ringmaster-cli perf`: nccl-tests for Ringmaster. One rank per process,
// driven by torchrun's environment, or --np N local ranks started here.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "commands.h"
#include "ringmaster/comm.h"
#include "ringmaster/perf.h"

namespace ringmaster::cli {
namespace {

struct PerfOptions {
  std::string collective;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  double step_factor = 1;
  int iters = 20, warmup = 5, check = 1, root = 0, blocking = 0;
  std::string op = "sum", type = "float";
  std::string json_file, algo, proto;
  int channels = 0;
  int np = 0;
  bool quiet_stages = false;
};

const std::map<std::string, Collective> kCollectives = {{"all_reduce", Collective::all_reduce},
                                                        {"all_gather", Collective::all_gather},
                                                        {"reduce_scatter", Collective::reduce_scatter},
                                                        {"broadcast", Collective::broadcast},
                                                        {"reduce", Collective::reduce},
                                                        {"all_to_all", Collective::all_to_all},
                                                        {"sendrecv", Collective::send_recv}};

nlohmann::json row_json(const PerfSpec& spec, const PerfRow& row) {
  auto part = [](const PerfResult& r) {
    return nlohmann::json{{"time_us", r.time_us}, {"algbw", r.algbw}, {"busbw", r.busbw}, {"wrong", r.wrong}};
  };
  return {{"type", "result"},
          {"collective", name_of(spec.collective)},
          {"bytes", row.bytes},
          {"count", row.count},
          {"dtype", name_of(spec.type)},
          {"redop", name_of(spec.op)},
          {"root", spec.root},
          {"out_of_place", part(row.out_of_place)},
          {"in_place", part(row.in_place)}};
}

// Runs one rank; returns its exit code.
int run_rank(const Config& config, const PerfSpec& spec, const CommOptions& base, const PerfOptions& opts) {
  CommOptions options = base;
  std::vector<StageEvent> events;
  options.on_stage = [&](const StageEvent& e) { events.push_back(e); };
  std::unique_ptr<Communicator> comm;
  try {
    comm = Communicator::create(config, options);
  } catch (const StageError& e) {
    std::fprintf(stderr, "%s\n", e.failure().to_string().c_str());
    return 2;
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
  if (leader) std::fputs(perf_header(spec, comm->size()).c_str(), stdout);
  std::fflush(stdout);
  nlohmann::json json_rows = nlohmann::json::array();
  std::vector<PerfRow> rows;
  try {
    rows = run_perf(*comm, spec, [&](const PerfRow& row) {
      if (!leader) return;
      std::fputs(perf_row_line(spec, row).c_str(), stdout);
      std::fflush(stdout);
      json_rows.push_back(row_json(spec, row));
    });
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", config.rank, e.what());
    return 3;
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
  return wrong == 0 ? 0 : 1;
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
  perf->add_option("collective", opts->collective,
                   "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, sendrecv")
      ->required()
      ->check(CLI::IsMember(
          {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "sendrecv"}));
  perf->add_option("-b,--minbytes", opts->min_bytes, "Smallest size (K, M, G suffixes)")->capture_default_str();
  perf->add_option("-e,--maxbytes", opts->max_bytes, "Largest size")->capture_default_str();
  perf->add_option("-f,--stepfactor", opts->step_factor, "Multiply the size by this each step")->capture_default_str();
  perf->add_option("-i,--stepbytes", opts->step_bytes, "Add this to the size each step (when -f is 1)")
      ->capture_default_str();
  perf->add_option("-n,--iters", opts->iters, "Timed iterations")->capture_default_str();
  perf->add_option("-w,--warmup_iters", opts->warmup, "Warm-up iterations")->capture_default_str();
  perf->add_option("-c,--check", opts->check, "Check every element (#wrong)")->capture_default_str();
  perf->add_option("-o,--op", opts->op, "sum, prod, max, min, avg")->capture_default_str();
  perf->add_option("-d,--datatype", opts->type, "float, half, bfloat16, double, int8, ...")->capture_default_str();
  perf->add_option("-r,--root", opts->root, "Root of broadcast and reduce")->capture_default_str();
  perf->add_option("-z,--blocking", opts->blocking, "Wait for each collective before the next")->capture_default_str();
  perf->add_option("--json", opts->json_file, "Also write rank 0's rows as JSON to this file");
  perf->add_option("--algo", opts->algo, "Algorithm (ring)");
  perf->add_option("--proto", opts->proto, "Protocol: LL or Simple (default: by size, NCCL_PROTO)");
  perf->add_option("--channels", opts->channels, "Use exactly this many channels");
  perf->add_option("--np", opts->np, "Start N local ranks (processes) on loopback");
  perf->add_flag("--no-stages", opts->quiet_stages, "Do not print rank 0's init stage table");

  return [=]() -> int {
    PerfSpec spec;
    spec.collective = kCollectives.at(opts->collective);
    spec.min_bytes = parse_size(opts->min_bytes);
    spec.max_bytes = parse_size(opts->max_bytes);
    spec.step_bytes = parse_size(opts->step_bytes);
    spec.step_factor = opts->step_factor;
    spec.iters = opts->iters;
    spec.warmup = opts->warmup;
    spec.check = opts->check != 0;
    spec.root = opts->root;
    spec.blocking = opts->blocking != 0;
    const auto op = parse_red_op(opts->op);
    if (!op) throw Error(ErrorCategory::config, "-o " + opts->op + ": expected sum, prod, max, min or avg");
    spec.op = *op;
    const auto type = parse_data_type(opts->type);
    if (!type) throw Error(ErrorCategory::config, "-d " + opts->type + ": unknown data type");
    spec.type = *type;
    if (spec.min_bytes > spec.max_bytes) throw Error(ErrorCategory::config, "-b is larger than -e");
    CommOptions base;
    if (!opts->algo.empty() && opts->algo != "ring" && opts->algo != "Ring") {
      throw Error(ErrorCategory::config, "--algo " + opts->algo + ": only ring is available so far");
    }
    if (!opts->proto.empty()) {
      if (opts->proto == "LL" || opts->proto == "ll") {
        base.protocol = Protocol::ll;
      } else if (opts->proto == "Simple" || opts->proto == "simple") {
        base.protocol = Protocol::simple;
      } else {
        throw Error(ErrorCategory::config, "--proto " + opts->proto + ": LL or Simple (LL128 needs shared memory)");
      }
    }
    if (opts->channels > 0) base.min_channels = base.max_channels = opts->channels;

    Config config = Config::from_env();
    if (opts->np <= 0) return run_rank(config, spec, base, *opts);

    // --np N: fork N ranks on loopback; rank 0 prints.
    config.world_size = opts->np;
    config.master_addr = "127.0.0.1";
    if (std::getenv("MASTER_PORT") == nullptr) config.master_port = free_port();
    std::fflush(stdout);
    std::vector<pid_t> children;
    for (int r = 0; r < opts->np; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
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

}  // namespace ringmaster::cli
