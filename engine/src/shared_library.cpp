// libringmaster.so is the static engine linked whole into one shared
// object (engine/CMakeLists.txt); this file is the source CMake asks every
// library to have, and carries the run-time version.
#include "ringmaster/version.h"

namespace ringmaster {

int linked_version_code() noexcept {
  return RINGMASTER_VERSION_CODE;
}

}  // namespace ringmaster
