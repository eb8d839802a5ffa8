// component_versions(): what the engine runs on, asked of each library.
#include "ringmaster/version.h"
#include "topo/xml.h"
#include "transport/ofi/ofi.h"

namespace ringmaster {

std::vector<std::pair<std::string, std::string>> component_versions() {
  return {{"hwloc", topo::hwloc_library_version()}, {"libfabric", transport::ofi::library_version()}};
}

}  // namespace ringmaster
