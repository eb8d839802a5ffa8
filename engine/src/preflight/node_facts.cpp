// gather_node_facts: what a job on this node will meet, read from the
// kernel (/proc, /sys, getrlimit, statvfs) and the resolver.
#include <dlfcn.h>
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
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "net/conntrack.h"
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

// The library `names` name (the first that loads), and a function of it;
// its handle released when done (the library stays mapped).
struct Loaded {
  void* handle = nullptr;
  std::string name, why;
  explicit Loaded(std::initializer_list<const char*> names) {
    for (const char* n : names) {
      ::dlerror();
      // Never unloaded: a library's constructors allocate (NCCL's, libfabric's),
      // and unmapping it would strand what its globals hold.
      handle = ::dlopen(n, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
      if (handle != nullptr) {
        name = n;
        return;
      }
      if (why.empty()) {
        const char* e = ::dlerror();
        why = e != nullptr ? e : std::string(n) + " did not load";
      }
    }
  }
  ~Loaded() {
    if (handle != nullptr) ::dlclose(handle);
  }
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;
  template <class F>
  F* symbol(const char* s) const {
    return handle == nullptr ? nullptr : reinterpret_cast<F*>(::dlsym(handle, s));
  }
};

std::string not_found(const std::string& why) {
  return "not found (" + why + ")";
}

}  // namespace

std::string nccl_version_text(int code) {
  // 2.19 and later: 21903 (major * 10000 + minor * 100 + patch); before:
  // 2803 (major * 1000 + minor * 100 + patch).
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
}

std::vector<std::pair<std::string, std::string>> read_software_stack() {
  std::vector<std::pair<std::string, std::string>> out;
  {
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..."
    std::string version = read_line("/sys/module/nvidia/version");
    if (version.empty()) {
      const std::string line = read_line("/proc/driver/nvidia/version");
      const auto at = line.find("Kernel Module");
      if (at != std::string::npos) {
        std::istringstream words(line.substr(at + 13));
        words >> version;
      }
    }
    out.emplace_back("nvidia_driver", version.empty() ? not_found("no nvidia kernel module loaded") : version);
  }
  {
    Loaded cuda({"libcuda.so.1"});
    int v = 0;
    using GetVersion = int(int*);
    auto* get = cuda.symbol<GetVersion>("cuDriverGetVersion");
    out.emplace_back("cuda_driver", get != nullptr && get(&v) == 0
                                        ? fmt::format("{}.{}", v / 1000, v % 1000 / 10)
                                        : not_found(cuda.handle == nullptr ? cuda.why : "no cuDriverGetVersion"));
  }
  {
    Loaded nccl({"libnccl.so.2"});
    int v = 0;
    using GetVersion = int(int*);
    auto* get = nccl.symbol<GetVersion>("ncclGetVersion");
    out.emplace_back("nccl", get != nullptr && get(&v) == 0
                                 ? nccl_version_text(v)
                                 : not_found(nccl.handle == nullptr ? nccl.why : "no ncclGetVersion"));
  }
  {
    Loaded fabric({"libfabric.so.1"});
    using Version = std::uint32_t();
    auto* get = fabric.symbol<Version>("fi_version");
    const std::uint32_t v = get != nullptr ? get() : 0;
    out.emplace_back("libfabric", get != nullptr ? fmt::format("{}.{}", v >> 16, v & 0xffff)
                                                 : not_found(fabric.handle == nullptr ? fabric.why : "no fi_version"));
  }
  {
    // The plugin NCCL loads for EFA: NCCL_NET_PLUGIN names it, else
    // libnccl-net.so (aws-ofi-nccl installs both names).
    const char* named = std::getenv("NCCL_NET_PLUGIN");
    const std::string plugin =
        named != nullptr && *named != '\0' ? fmt::format("libnccl-net-{}.so", named) : std::string("libnccl-net.so");
    Loaded ofi_nccl({plugin.c_str(), "libnccl-net-ofi.so"});
    out.emplace_back("aws_ofi_nccl",
                     ofi_nccl.handle != nullptr ? "present (" + ofi_nccl.name + ")" : not_found(ofi_nccl.why));
  }
  {
    const std::string efa = read_line("/sys/module/efa/version");
    out.emplace_back("efa_driver", !efa.empty()                    ? efa
                                   : fs::exists("/sys/module/efa") ? std::string("loaded, no version")
                                                                   : not_found("no efa kernel module loaded"));
  }
  return out;
}

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
  if (const auto table = net::conntrack_table()) {
    f.conntrack_count = table->count;
    f.conntrack_max = table->max;
  }
  f.efa_devices = efa_devices();
  f.stack = read_software_stack();
  return f;
}

}  // namespace ringmaster
