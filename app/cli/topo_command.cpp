// `ringmaster-cli topo show|matrix|export|rings`: the topology of this
// machine (hwloc discovery) or of a file (NCCL or hwloc XML).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include "commands.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"

namespace ringmaster::cli {
namespace {

struct TopoOptions {
  std::string file;
  std::string sysfs;
  std::string nccl_out;
  std::string json_out;
  bool json_stdout = false;
  int nodes = 1;
  int channels = 2;
  int ranks_per_node = -1;
  bool quiet = false;
  bool board_nvlinks = false;
};

topo::Topology load(const TopoOptions& o) {
  if (o.file.empty()) return topo::Topology::discover();
  topo::LoadOptions load;
  load.sysfs_root = o.sysfs;
  load.add_board_nvlinks = o.board_nvlinks;
  auto t = topo::Topology::load_file(o.file, load);
  for (const auto& line : t.warnings())
    std::fprintf(stderr, "ringmaster-cli: warning: %s\n", line.c_str());
  return t;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Error(ErrorCategory::config, path + ": cannot write");
}

void add_source_options(CLI::App* sub, const std::shared_ptr<TopoOptions>& o) {
  sub->add_option("--file", o->file, "NCCL topology XML or hwloc XML (default: discover this machine with hwloc)");
  sub->add_option("--sysfs", o->sysfs,
                  "Fill PCI devices the NCCL file lists by bus id alone from this sysfs root (/sys on the node "
                  "the file describes)");
  sub->add_flag("--board-nvlinks", o->board_nvlinks,
                "GPUs of an NVSwitch board (A100/H100/H200 SXM: AWS p4d, p4de, p5) in a file that declares no "
                "NVLink: add the links the board has (NV12 or NV18 between any two)");
}

}  // namespace

Runner add_topo_command(CLI::App& app) {
  auto* topo_cmd = app.add_subcommand("topo", "Show, export and plan over a node's hardware topology");
  topo_cmd->require_subcommand(1);
  auto o = std::make_shared<TopoOptions>();

  auto* show = topo_cmd->add_subcommand("show", "lstopo-like tree of packages, PCI switches, GPUs and NICs");
  add_source_options(show, o);
  auto* matrix = topo_cmd->add_subcommand("matrix", "nvidia-smi topo -m matrix of GPUs and NICs, with the legend");
  add_source_options(matrix, o);
  auto* exp = topo_cmd->add_subcommand("export", "Write NCCL topology XML and/or JSON");
  add_source_options(exp, o);
  exp->add_option("--nccl-file", o->nccl_out, "Write NCCL topology XML to this file");
  exp->add_option("--json-file", o->json_out, "Write the JSON the console draws to this file");
  exp->add_flag("--json", o->json_stdout, "Print that JSON on stdout instead of the summary");
  exp->add_option("--nccl", o->nccl_out)->group("");  // the old spelling of --nccl-file
  auto* rings = topo_cmd->add_subcommand("rings", "Rings and double binary trees for N identical nodes");
  add_source_options(rings, o);
  rings->add_option("--nodes", o->nodes, "Identical nodes (default 1)")->check(CLI::Range(1, 65536));
  rings->add_option("--channels", o->channels, "Channels to build (default 2)")->check(CLI::Range(1, 64));
  rings->add_option("--ranks-per-node", o->ranks_per_node, "Ranks per node (default: one per GPU)");
  rings->add_flag("--quiet", o->quiet, "Only the timing line");

  return [=]() -> int {
    if (show->parsed()) {
      std::fputs(load(*o).render_tree().c_str(), stdout);
    } else if (matrix->parsed()) {
      std::fputs(load(*o).render_matrix().c_str(), stdout);
    } else if (exp->parsed()) {
      if (o->nccl_out.empty() && o->json_out.empty() && !o->json_stdout) {
        throw Error(ErrorCategory::config, "topo export: give --nccl-file FILE, --json-file FILE or --json");
      }
      const auto t = load(*o);
      if (!o->nccl_out.empty()) write_file(o->nccl_out, t.to_nccl_xml());
      if (!o->json_out.empty()) write_file(o->json_out, t.to_json());
      if (o->json_stdout) {
        std::printf("%s\n", t.to_json().c_str());
      } else {
        std::printf("%s\n", t.summary().c_str());
      }
    } else if (rings->parsed()) {
      const auto start = std::chrono::steady_clock::now();
      const auto t = load(*o);
      const auto loaded = std::chrono::steady_clock::now();
      std::vector<topo::NodeRanks> nodes(static_cast<std::size_t>(o->nodes), topo::NodeRanks{&t, o->ranks_per_node});
      const auto plan = topo::search_channels(nodes, o->channels);
      const auto done = std::chrono::steady_clock::now();
      if (!o->quiet) {
        std::printf("# %s\n# %d nodes, %d ranks, %d channels\n", t.summary().c_str(), o->nodes, plan.nranks,
                    o->channels);
        for (const auto& line : plan.lines)
          std::printf("%s\n", line.c_str());
      }
      using ms = std::chrono::duration<double, std::milli>;
      std::printf("# load %.2f ms, search %.2f ms\n", ms(loaded - start).count(), ms(done - loaded).count());
    }
    return 0;
  };
}

}  // namespace ringmaster::cli
