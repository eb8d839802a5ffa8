// `ringmaster-cli tune`: the tuner's table of candidates per size, the
// chosen one, and the sizes where the choice changes. For declared
// clusters (--file TOPO --nodes N) or a socket cluster of --ranks ranks
// with given link figures (a communicator measures its own at init).
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "commands.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/perf.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/tuner.h"

namespace ringmaster::cli {
namespace {

struct TuneOptions {
  std::string collective = "all_reduce";
  std::string min_bytes = "8";
  std::string max_bytes = "1G";
  std::string bytes;  // the old --bytes MIN:MAX, when given
  double step_factor = 4;
  std::string file;
  int nodes = 1;
  int ranks_per_node = -1;
  int channels = 0;
  int ranks = 8;
  double hop_us = 60;
  double gbs = 1.0;
  bool all = false;
};

const std::map<std::string, Collective> kTunable = {{"all_reduce", Collective::all_reduce},
                                                    {"all_gather", Collective::all_gather},
                                                    {"reduce_scatter", Collective::reduce_scatter},
                                                    {"broadcast", Collective::broadcast},
                                                    {"reduce", Collective::reduce}};

int run_tune(const TuneOptions& o) {
  std::size_t lo = parse_size(o.min_bytes);
  std::size_t hi = parse_size(o.max_bytes);
  if (!o.bytes.empty()) {
    const auto colon = o.bytes.find(':');
    lo = parse_size(o.bytes.substr(0, colon));
    hi = colon == std::string::npos ? lo : parse_size(o.bytes.substr(colon + 1));
  }
  if (lo == 0 || hi < lo) {
    throw Error(ErrorCategory::config, fmt::format("sizes {} to {}: expected 0 < --minbytes <= --maxbytes", lo, hi));
  }
  if (o.step_factor <= 1) throw Error(ErrorCategory::config, "--stepfactor must be above 1");

  tune::Shape shape;
  if (!o.file.empty()) {
    const auto node = topo::Topology::load_file(o.file);
    shape = tune::declared_shape(node, o.nodes, o.ranks_per_node, o.channels > 0 ? o.channels : 16);
  } else {
    if (o.ranks < 1) throw Error(ErrorCategory::config, "--ranks must be at least 1");
    shape = tune::socket_shape(o.ranks, o.hop_us, o.gbs, o.channels > 0 ? o.channels : 1);
    shape.source = fmt::format("sockets, {} us per hop and {} GB/s per channel as given", o.hop_us, o.gbs);
  }
  const tune::Tuner tuner = tune::Tuner::from_env(shape);
  const Collective collective = kTunable.at(o.collective);
  std::printf("# Tuner: %s\n", tuner.describe().c_str());

  std::vector<tune::Decision> decisions;
  for (double b = static_cast<double>(lo); b <= static_cast<double>(hi) * 1.0000001; b *= o.step_factor)
    decisions.push_back(tuner.decide(collective, static_cast<std::size_t>(b)));

  // Per size the candidates that could run; why the others cannot, once.
  std::set<std::string> reasons;
  for (const auto& d : decisions) {
    std::printf("#\n");
    tune::Decision shown = d;
    shown.candidates.clear();
    shown.chosen = -1;
    for (std::size_t i = 0; i < d.candidates.size(); ++i) {
      const auto& c = d.candidates[i];
      if (!c.excluded.empty()) {
        reasons.insert(fmt::format("{}/{}: {}", tune::algorithm_name(c), name_of(c.protocol), c.excluded));
        if (!o.all) continue;
      }
      if (static_cast<int>(i) == d.chosen) shown.chosen = static_cast<int>(shown.candidates.size());
      shown.candidates.push_back(c);
    }
    std::fputs(tune::render(shown).c_str(), stdout);
  }
  if (!reasons.empty()) {
    std::printf("#\n# Excluded:\n");
    for (const auto& r : reasons)
      std::printf("#   %s\n", r.c_str());
  }
  std::printf("#\n# %12s  %-8s %-7s %8s %14s\n", "size", "algo", "proto", "channels", "predicted(us)");
  for (const auto& d : decisions) {
    const auto& p = d.pick();
    std::printf("  %12zu  %-8s %-7s %8d %14.1f\n", d.bytes, std::string(tune::algorithm_name(p)).c_str(),
                std::string(name_of(p.protocol)).c_str(), p.channels, p.predicted_us);
  }
  const auto lines = tune::crossovers(decisions);
  std::printf("# Crossovers:%s\n", lines.empty() ? " none in this range" : "");
  for (const auto& l : lines)
    std::printf("#   %s\n", l.c_str());
  return 0;
}

}  // namespace

Runner add_tune_command(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  auto* sub = app.add_subcommand("tune",
                                 "The tuner's candidates, choice and crossovers per size (NCCL_ALGO and "
                                 "NCCL_PROTO apply)");
  sub->add_option("--collective", o->collective, "all_reduce, all_gather, reduce_scatter, broadcast or reduce")
      ->capture_default_str()
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"}));
  // The spellings of `perf` (nccl-tests'); the old ones stay as hidden aliases.
  sub->add_option("-b,--minbytes", o->min_bytes, "Smallest size (K, M, G suffixes)")->capture_default_str();
  sub->add_option("-e,--maxbytes", o->max_bytes, "Largest size")->capture_default_str();
  sub->add_option("-f,--stepfactor", o->step_factor, "Multiply the size by this each step")->capture_default_str();
  sub->add_option("--bytes", o->bytes)->group("");
  sub->add_option("--step-factor", o->step_factor)->group("");
  sub->add_option("--file", o->file, "Declared node (NCCL or hwloc topology XML); the cluster is --nodes of them");
  sub->add_option("--nodes", o->nodes, "Nodes of the declared cluster")->capture_default_str();
  sub->add_option("--ranks-per-node", o->ranks_per_node, "Ranks per declared node (default: one per GPU)");
  sub->add_option("--channels", o->channels, "Most channels (default: 16 declared, 1 sockets)");
  sub->add_option("--ranks", o->ranks, "Without --file: ranks of a socket cluster")->capture_default_str();
  sub->add_option("--hop-us", o->hop_us, "Without --file: hop latency in microseconds")->capture_default_str();
  sub->add_option("--gbs", o->gbs, "Without --file: GB/s per channel")->capture_default_str();
  sub->add_flag("--all", o->all, "Show excluded candidates in every table too");
  return [o] { return run_tune(*o); };
}

}  // namespace ringmaster::cli
