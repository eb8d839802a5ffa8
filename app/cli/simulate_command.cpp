// `ringmaster-cli simulate`: the nccl-tests table the tuner's model
// predicts for a declared cluster: an instance profile (--instance
// p5.48xlarge) or a topology file (--file) times --nodes. Nothing runs;
// the table says so. docs/tuner.md compares it with published runs.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/perf.h"
#include "ringmaster/tools/simulate.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/tuner.h"

namespace ringmaster::cli {
namespace {

struct SimulateOptions {
  std::string collective = "all_reduce";
  std::string instance;
  std::string file;
  int nodes = 1;
  int ranks_per_node = -1;
  int channels = 0;
  double efa_share = 0;  // 0: the profile's
  std::string min_bytes = "8";
  std::string max_bytes = "8G";
  double step_factor = 2;
  std::string type = "float";
  std::string op = "sum";
  bool json = false;
  bool list = false;
};

void print_profiles() {
  std::printf("# %-17s %-15s %4s %-25s %s\n", "instance", "gpu", "gpus", "gpu link", "efa");
  for (const auto& p : tune::instance_profiles()) {
    const std::string link = p.nvlink_gbs > 0
                                 ? fmt::format("NVLink {:.0f} GB/s{}", p.nvlink_gbs, p.switch_reduces ? ", SHARP" : "")
                                 : fmt::format("PCIe {:.1f} GB/s", p.pci_gbs);
    std::printf("  %-17s %-15s %4d %-25s %d x %.0f Gbit/s\n", std::string(p.name).c_str(), std::string(p.gpu).c_str(),
                p.gpus, link.c_str(), p.nics, p.nic_gbits);
  }
}

int run_simulate(const SimulateOptions& o) {
  if (o.list) {
    print_profiles();
    return 0;
  }
  const auto started = std::chrono::steady_clock::now();
  const Collective collective = tune::simulated_collective(o.collective);
  const auto type = parse_data_type(o.type);
  if (!type) throw Error(ErrorCategory::config, fmt::format("--datatype {}: not a data type nccl-tests names", o.type));
  const auto op = parse_red_op(o.op);
  if (!op) throw Error(ErrorCategory::config, fmt::format("--op {}: expected sum, prod, max, min or avg", o.op));
  if (o.nodes < 1) throw Error(ErrorCategory::config, "--nodes must be at least 1");

  tune::Shape shape;
  std::string cluster;
  if (!o.instance.empty()) {
    tune::InstanceProfile profile = tune::instance_profile(o.instance);
    // The share of EFA's line a stack reaches moves with NCCL and plugin
    // versions more than with the hardware (docs/tuner.md): a user who
    // measured their own sets it.
    if (o.efa_share != 0) {
      if (!(o.efa_share > 0 && o.efa_share <= 1))
        throw Error(ErrorCategory::config,
                    fmt::format("--efa-share {}: expected a share above 0, at most 1", o.efa_share));
      profile.efa_share = o.efa_share;
    }
    shape = tune::instance_shape(profile, o.nodes, o.ranks_per_node, o.channels);
    cluster = fmt::format("{} x {}", o.nodes, profile.name);
  } else if (!o.file.empty()) {
    if (o.efa_share != 0) throw Error(ErrorCategory::config, "--efa-share takes an --instance profile, not --file");
    const auto node = topo::Topology::load_file(o.file);
    shape = tune::declared_shape(node, o.nodes, o.ranks_per_node, o.channels > 0 ? o.channels : 16);
    cluster = fmt::format("{} x {}", o.nodes, o.file);
  } else {
    throw Error(ErrorCategory::config, "simulate needs --instance TYPE (see --list) or --file TOPOLOGY.xml");
  }
  const tune::Tuner tuner = tune::Tuner::from_env(shape);
  const auto rows =
      tune::simulate(tuner, collective, *type, parse_size(o.min_bytes), parse_size(o.max_bytes), o.step_factor);
  const double took_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();

  const bool has_op = collective == Collective::all_reduce || collective == Collective::reduce ||
                      collective == Collective::reduce_scatter;
  const bool rooted = collective == Collective::broadcast || collective == Collective::reduce;
  double busbw_sum = 0;
  for (const auto& r : rows)
    busbw_sum += r.busbw_gbs;
  const double avg_busbw = rows.empty() ? 0 : busbw_sum / static_cast<double>(rows.size());

  if (o.json) {
    // JSON lines as `perf --json` writes them: what was simulated, then
    // one "result" per size with the tuner's pick (the measured timing
    // being the prediction), then the average.
    std::printf("%s\n", nlohmann::json{{"type", "simulation"},
                                       {"collective", std::string(name_of(collective))},
                                       {"cluster", cluster},
                                       {"nranks", shape.nranks},
                                       {"nnodes", shape.nnodes},
                                       {"model", tuner.describe()},
                                       {"simulated_ms", took_ms}}
                            .dump()
                            .c_str());
    for (const auto& r : rows) {
      agent::events::Result result;
      result.collective = std::string(name_of(collective));
      result.dtype = std::string(name_of(*type));
      result.redop = has_op ? std::string(name_of(*op)) : "none";
      result.bytes = r.bytes;
      result.count = r.count;
      result.root = rooted ? 0 : -1;
      result.out_of_place = {r.time_us, r.algbw_gbs, r.busbw_gbs, 0};
      result.tuner =
          agent::events::Result::Pick{std::string(tune::algorithm_name(r.pick)), std::string(name_of(r.pick.protocol)),
                                      r.pick.channels, r.pick.predicted_us};
      std::printf("%s\n", agent::events::to_json(result).dump().c_str());
    }
    std::printf("%s\n", nlohmann::json{{"type", "summary"}, {"average_bus_bandwidth", avg_busbw}}.dump().c_str());
    return 0;
  }
  std::printf("# Simulated %s on %s: %d ranks on %d node%s (the tuner's model; nothing ran)\n",
              std::string(name_of(collective)).c_str(), cluster.c_str(), shape.nranks, shape.nnodes,
              shape.nnodes == 1 ? "" : "s");
  std::printf("# Tuner: %s\n#\n", tuner.describe().c_str());
  std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s  %-8s %-7s %8s\n", "size", "count", "type", "redop", "root", "time",
              "algbw", "busbw", "algo", "proto", "channels");
  std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)");
  for (const auto& r : rows) {
    std::printf("  %10zu %12zu %8s %6s %6s %9.2f %7.2f %7.2f  %-8s %-7s %8d\n", r.bytes, r.count,
                std::string(name_of(*type)).c_str(), has_op ? std::string(name_of(*op)).c_str() : "none",
                rooted ? "0" : "-1", r.time_us, r.algbw_gbs, r.busbw_gbs,
                std::string(tune::algorithm_name(r.pick)).c_str(), std::string(name_of(r.pick.protocol)).c_str(),
                r.pick.channels);
  }
  std::printf("# Avg bus bandwidth    : %g\n", avg_busbw);
  std::printf("# Simulated in %.1f ms\n", took_ms);
  return 0;
}

}  // namespace

Runner add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  auto* sub = app.add_subcommand(
      "simulate",
      "The nccl-tests table the tuner predicts for a declared cluster: --instance TYPE or --file TOPO, x --nodes");
  sub->add_option("collective", o->collective,
                  "all_reduce, all_gather, reduce_scatter, broadcast or reduce (nccl-tests' binary names too)")
      ->capture_default_str();
  sub->add_option("--instance", o->instance, "Instance profile, e.g. p5.48xlarge or p4d (--list shows them)");
  sub->add_option("--file", o->file, "Declared node (NCCL or hwloc topology XML) instead of a profile");
  sub->add_option("--nodes", o->nodes, "Nodes of the cluster")->capture_default_str();
  sub->add_option("--ranks-per-node", o->ranks_per_node, "Ranks per node (default: one per GPU)");
  sub->add_option("--channels", o->channels, "Most channels (default: 16, or one per EFA beyond)");
  sub->add_option("--efa-share", o->efa_share,
                  "Share of each EFA interface's line the stack reaches (default: the profile's, fitted to "
                  "published runs)");
  sub->add_option("-b,--minbytes", o->min_bytes, "Smallest size (K, M, G suffixes)")->capture_default_str();
  sub->add_option("-e,--maxbytes", o->max_bytes, "Largest size")->capture_default_str();
  sub->add_option("-f,--stepfactor", o->step_factor, "Multiply the size by this each step")->capture_default_str();
  sub->add_option("-d,--datatype", o->type, "float, half, bfloat16, double, int8, ...")->capture_default_str();
  sub->add_option("-o,--op", o->op, "sum, prod, max, min, avg")->capture_default_str();
  sub->add_flag("--json", o->json, "JSON lines, a \"result\" per size as perf --json writes them");
  sub->add_flag("--list", o->list, "List the instance profiles and exit");
  return [o] { return run_simulate(*o); };
}

}  // namespace ringmaster::cli
