// gather_node_facts: what a job on this node will meet, read from the
// kernel (/proc, /sys, getrlimit, statvfs) and the resolver.
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "net/interfaces.h"
#include "net/socket.h"
#include "ringmaster/tools/preflight.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

int read_int(const fs::path& path) {
  try {
    return std::stoi(read_line(path));
  } catch (const std::exception&) {
    return 0;
  }
}

long long limit_value(rlim_t v) {
  return v == RLIM_INFINITY ? -1 : static_cast<long long>(v);
}

std::vector<InterfaceFacts> interface_facts() {
  std::vector<InterfaceFacts> out;
  for (const auto& i : net::list_interfaces()) {
    InterfaceFacts f;
    f.name = i.name;
    f.up = i.up;
    f.loopback = i.loopback;
    for (const auto& a : i.addresses)
      f.addresses.push_back(a.address.host());
    const fs::path sys = fs::path("/sys/class/net") / i.name;
    f.mtu = read_int(sys / "mtu");
    // Negative ("-1") where the driver does not say, as for veths and lo.
    f.speed_mbps = std::max(0, read_int(sys / "speed"));
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<std::string> efa_devices() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/class/infiniband", ec)) {
    const fs::path driver = fs::read_symlink(entry.path() / "device" / "driver", ec);
    if (!ec && driver.filename() == "efa") out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

NodeFacts gather_node_facts(const NodeFactsQuery& query) {
  NodeFacts f;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  f.hostname = host;
  {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int lo = 0, hi = 0;
    if (in >> lo >> hi) {
      f.ephemeral_lo = static_cast<std::uint16_t>(lo);
      f.ephemeral_hi = static_cast<std::uint16_t>(hi);
    }
  }
  f.interfaces = interface_facts();
  f.master_addr = query.master_addr;
  if (!query.master_addr.empty()) {
    const auto resolved = net::resolve(query.master_addr, 0);
    if (resolved.ok()) {
      for (const auto& a : resolved.addresses) {
        if (std::find(f.master_resolves_to.begin(), f.master_resolves_to.end(), a.host()) ==
            f.master_resolves_to.end()) {
          f.master_resolves_to.push_back(a.host());
        }
      }
    } else {
      f.master_error = resolved.error.empty() ? "no address" : resolved.error;
    }
  }
  f.socket_ifname = query.socket_ifname;
  if (!query.socket_ifname.empty()) {
    for (const auto& i : f.interfaces) {
      if (net::ifname_matches(query.socket_ifname, i.name)) f.socket_ifname_matches.push_back(i.name);
    }
  }
  struct statvfs shm {};
  if (::statvfs("/dev/shm", &shm) == 0) {
    f.shm_bytes = static_cast<std::uint64_t>(shm.f_blocks) * shm.f_frsize;
    f.shm_free_bytes = static_cast<std::uint64_t>(shm.f_bavail) * shm.f_frsize;
  } else {
    f.shm_error = fmt::format("/dev/shm: {}", std::strerror(errno));
  }
  rlimit limit{};
  if (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
    f.memlock_soft = limit_value(limit.rlim_cur);
    f.memlock_hard = limit_value(limit.rlim_max);
  }
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    f.nofile_soft = limit_value(limit.rlim_cur);
    f.nofile_hard = limit_value(limit.rlim_max);
  }
  f.efa_devices = efa_devices();
  return f;
}

}  // namespace ringmaster
