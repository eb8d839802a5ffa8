// Topology files as a user may hand them over (NCCL_TOPO_FILE, the agent's
// --topology-file, the console's Open): the input is read as NCCL's
// topology XML and as hwloc's XML, after the caps every file passes
// (size, depth, element count). Either the graph loads or a clear error
// says why; nothing may crash or hang.
#include <hwloc.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ringmaster/status.h"
#include "ringmaster/tools/topology.h"

// One hwloc topology kept for the whole run keeps hwloc's plugins (its
// libxml2 reader) loaded, so a leak inside them is reported with their
// names, which lsan.supp can then name, rather than "<unknown module>".
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static hwloc_topology_t kept = nullptr;
  hwloc_topology_init(&kept);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ringmaster::topo::Topology;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ringmaster::topo::LoadOptions options;  // the input alone, not this machine's PCI tree
  try {
    const Topology t = Topology::from_nccl_xml(text, "fuzz.xml", options);
    (void)t.to_nccl_xml();
  } catch (const ringmaster::Error&) {
  }
  try {
    (void)Topology::from_hwloc_xml(text, "fuzz.xml");
  } catch (const ringmaster::Error&) {
  }
  return 0;
}
