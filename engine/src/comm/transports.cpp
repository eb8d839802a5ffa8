#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "base/params.h"
#include "ringmaster/comm.h"
#include "transport/ofi/ofi.h"

namespace ringmaster {

std::vector<TransportAvailability> transport_availability(const std::string& interface) {
  std::vector<TransportAvailability> out;

  TransportAvailability shm{"SHM", false, ""};
  struct statvfs fs {};
  if (param_int(Param::ShmDisable) != 0) {
    shm.why = "NCCL_SHM_DISABLE=1";
  } else if (::statvfs("/dev/shm", &fs) != 0) {
    shm.why = fmt::format("/dev/shm: {}", std::strerror(errno));
  } else if (::access("/dev/shm", W_OK) != 0) {
    shm.why = fmt::format("/dev/shm is not writable: {}", std::strerror(errno));
  } else if (static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize < (4ull << 20)) {
    shm.why =
        fmt::format("/dev/shm has {} KiB free", static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize / 1024);
  } else {
    shm.usable = true;
  }
  out.push_back(std::move(shm));

  const auto& ofi = transport::ofi::availability(interface);
  out.push_back({"OFI", ofi.usable, ofi.usable ? std::string() : ofi.why});

  out.push_back({"SOCKET", true, ""});
  return out;
}

}  // namespace ringmaster
