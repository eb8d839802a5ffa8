// The TOPOLOGY stage: which hosts the ranks are on, the node's hardware
// when asked for, and the order of each channel's ring.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap_impl.h"
#include "comm/communicator_impl.h"
#include "ringmaster/topology.h"

namespace ringmaster {

// TOPOLOGY: which hosts the ranks are on, the node's hardware when a
// topology file is given (NCCL_TOPO_FILE) or a dump is asked for
// (RINGMASTER_TOPO_DUMP_FILE, written by rank 0), and the channel rings.
void Communicator::Impl::describe_topology() {
  bootstrap->run_stage(Stage::topology, [&] {
    const auto& peers = bootstrap->peers();
    std::vector<std::string> hosts;
    for (const auto& p : peers) {
      if (std::find(hosts.begin(), hosts.end(), p.host) == hosts.end()) hosts.push_back(p.host);
    }
    std::string detail = fmt::format("{} rank{} on {} host{}", nranks, nranks == 1 ? "" : "s", hosts.size(),
                                     hosts.size() == 1 ? "" : "s");
    const auto file = param_env(Param::TopoFile);
    const auto dump = param_env(Param::TopoDumpFile);
    if (file || (dump && rank == 0)) {
      std::optional<topo::Topology> t;
      try {
        t = file ? topo::Topology::load_file(*file, topo::LoadOptions{"/sys"}) : topo::Topology::discover();
      } catch (const Error& e) {
        auto f = bootstrap->failure(Stage::topology, e.status().message());
        f.category = e.category();
        f.hint =
            "NCCL_TOPO_FILE must name an NCCL topology XML or hwloc XML file readable on every rank; "
            "`ringmaster-cli topo show --file FILE` shows what is wrong with it.";
        throw StageError(f);
      }
      detail += "; " + t->summary();
      RM_INFO(graph, "Topology {}", t->summary());
      if (dump && rank == 0) {
        std::FILE* out = std::fopen(dump->c_str(), "w");
        const std::string xml = t->to_nccl_xml();
        const bool written = out && std::fwrite(xml.data(), 1, xml.size(), out) == xml.size();
        if (out) std::fclose(out);
        if (!written) {
          throw Error(ErrorCategory::config,
                      fmt::format("RINGMASTER_TOPO_DUMP_FILE={}: cannot write: {}", *dump, std::strerror(errno)));
        }
        detail += "; written to " + *dump;
      }
    }
    // CPU ranks: every channel's ring is the rank order.
    std::string ring;
    for (int r = 0; r < nranks; ++r)
      ring += fmt::format("{}{}", r ? " " : "", r);
    for (const auto& c : channels)
      RM_INFO(graph, "Channel {:02d} : {}", c->index, ring);
    return detail;
  });
}

}  // namespace ringmaster
