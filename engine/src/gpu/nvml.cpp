// NVML through dlopen: the few entry points the inventory reads, declared
// here with NVML's own C types (nvml.h is not needed to build). Each entry
// point is optional: a driver too old for one leaves its field empty.
#include <dlfcn.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "gpu/gpu.h"
#include "ringmaster/tools/gpus.h"

namespace ringmaster {

namespace {

// NVML's C interface, as nvml.h declares it.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEnableState_t = int;  // 0 disabled, 1 enabled
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr unsigned kNvLinkMaxLinks = 18;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// The entry points, resolved once; null where this driver lacks one.
struct Nvml {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*cuda_driver_version)(int*) = nullptr;
  nvmlReturn_t (*nvml_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*compute)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*ecc_mode)(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*ecc_errors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*pcie_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_gen_max)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_width_max)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*persistence)(nvmlDevice_t, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*mig)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*nvlink_remote)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;

  std::string error(nvmlReturn_t r) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    return text != nullptr ? fmt::format("{} (NVML error {})", text, r) : fmt::format("NVML error {}", r);
  }
};

template <class Fn>
void resolve(void* handle, Fn& fn, const char* symbol) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, symbol));
}

void resolve_all(Nvml& n) {
  resolve(n.handle, n.init, "nvmlInit_v2");
  resolve(n.handle, n.shutdown, "nvmlShutdown");
  resolve(n.handle, n.error_string, "nvmlErrorString");
  resolve(n.handle, n.driver_version, "nvmlSystemGetDriverVersion");
  resolve(n.handle, n.cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2");
  resolve(n.handle, n.nvml_version, "nvmlSystemGetNVMLVersion");
  resolve(n.handle, n.count, "nvmlDeviceGetCount_v2");
  resolve(n.handle, n.by_index, "nvmlDeviceGetHandleByIndex_v2");
  resolve(n.handle, n.name, "nvmlDeviceGetName");
  resolve(n.handle, n.uuid, "nvmlDeviceGetUUID");
  resolve(n.handle, n.pci, "nvmlDeviceGetPciInfo_v3");
  resolve(n.handle, n.compute, "nvmlDeviceGetCudaComputeCapability");
  resolve(n.handle, n.memory, "nvmlDeviceGetMemoryInfo");
  resolve(n.handle, n.ecc_mode, "nvmlDeviceGetEccMode");
  resolve(n.handle, n.ecc_errors, "nvmlDeviceGetTotalEccErrors");
  resolve(n.handle, n.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
  resolve(n.handle, n.pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration");
  resolve(n.handle, n.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
  resolve(n.handle, n.pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth");
  resolve(n.handle, n.persistence, "nvmlDeviceGetPersistenceMode");
  resolve(n.handle, n.mig, "nvmlDeviceGetMigMode");
  resolve(n.handle, n.nvlink_state, "nvmlDeviceGetNvLinkState");
  resolve(n.handle, n.nvlink_remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
}

// Reads one GPU; an unsupported field stays empty, another failure is a warning.
GpuInfo read_gpu(const Nvml& n, int index, nvmlDevice_t d, std::vector<std::string>& warnings) {
  GpuInfo g;
  g.index = index;
  auto ok = [&](nvmlReturn_t r, const char* what) {
    if (r == kSuccess) return true;
    if (r != kNotSupported) warnings.push_back(fmt::format("gpu {}: {}: {}", index, what, n.error(r)));
    return false;
  };
  char text[128] = {};
  if (n.name != nullptr && ok(n.name(d, text, sizeof text), "nvmlDeviceGetName")) g.name = text;
  if (n.uuid != nullptr && ok(n.uuid(d, text, sizeof text), "nvmlDeviceGetUUID")) g.uuid = text;
  nvmlPciInfo_t pci{};
  if (n.pci != nullptr && ok(n.pci(d, &pci), "nvmlDeviceGetPciInfo_v3")) g.bus_id = pci.busId;
  if (n.compute != nullptr) ok(n.compute(d, &g.compute_major, &g.compute_minor), "nvmlDeviceGetCudaComputeCapability");
  nvmlMemory_t memory{};
  if (n.memory != nullptr && ok(n.memory(d, &memory), "nvmlDeviceGetMemoryInfo")) {
    g.memory_total = memory.total;
    g.memory_used = memory.used;
  }
  nvmlEnableState_t current = 0, pending = 0;
  if (n.ecc_mode != nullptr && ok(n.ecc_mode(d, &current, &pending), "nvmlDeviceGetEccMode")) {
    g.ecc_enabled = current != 0;
    g.ecc_pending = pending != 0;
    unsigned long long count = 0;
    // Error types: 0 corrected, 1 uncorrected; counter 0: volatile.
    if (n.ecc_errors != nullptr && ok(n.ecc_errors(d, 0, 0, &count), "nvmlDeviceGetTotalEccErrors"))
      g.ecc_corrected = count;
    if (n.ecc_errors != nullptr && ok(n.ecc_errors(d, 1, 0, &count), "nvmlDeviceGetTotalEccErrors"))
      g.ecc_uncorrected = count;
  }
  auto read_uint = [&](auto fn, const char* what, std::optional<int>& out) {
    unsigned v = 0;
    if (fn != nullptr && ok(fn(d, &v), what)) out = static_cast<int>(v);
  };
  read_uint(n.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration", g.pcie_gen);
  read_uint(n.pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration", g.pcie_gen_max);
  read_uint(n.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth", g.pcie_width);
  read_uint(n.pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth", g.pcie_width_max);
  nvmlEnableState_t persistence = 0;
  if (n.persistence != nullptr && ok(n.persistence(d, &persistence), "nvmlDeviceGetPersistenceMode"))
    g.persistence = persistence != 0;
  unsigned mig_current = 0, mig_pending = 0;
  if (n.mig != nullptr && ok(n.mig(d, &mig_current, &mig_pending), "nvmlDeviceGetMigMode"))
    g.mig_enabled = mig_current != 0;
  if (n.nvlink_state != nullptr) {
    for (unsigned link = 0; link < kNvLinkMaxLinks; ++link) {
      nvmlEnableState_t active = 0;
      // A link the GPU does not have answers "not supported" or "invalid argument".
      if (n.nvlink_state(d, link, &active) != kSuccess) continue;
      NvLinkInfo l;
      l.link = static_cast<int>(link);
      l.active = active != 0;
      nvmlPciInfo_t remote{};
      if (l.active && n.nvlink_remote != nullptr && n.nvlink_remote(d, link, &remote) == kSuccess)
        l.remote_bus_id = remote.busId;
      g.nvlinks.push_back(l);
    }
  }
  return g;
}

}  // namespace

std::vector<std::string> GpuInfo::pcie_degraded() const {
  std::vector<std::string> out;
  if (pcie_width && pcie_width_max && *pcie_width < *pcie_width_max)
    out.push_back(fmt::format("PCIe width x{} of x{}", *pcie_width, *pcie_width_max));
  if (pcie_gen && pcie_gen_max && *pcie_gen < *pcie_gen_max)
    out.push_back(
        fmt::format("PCIe gen {} of {} (an idle GPU may step its link down to save power)", *pcie_gen, *pcie_gen_max));
  return out;
}

GpuInventory read_gpu_inventory(const std::string& library) {
  GpuInventory inv;
  inv.library = library;
  const auto& cuda = gpu::availability();
  inv.cuda_built = cuda.built;
  inv.cuda_usable = cuda.usable;
  inv.cuda_why = cuda.why;
  Nvml n;
  n.handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (n.handle == nullptr) {
    const char* err = ::dlerror();
    inv.why = fmt::format("NVML not found: {} ({}); no NVIDIA driver on this node", library,
                          err != nullptr ? err : "dlopen failed");
    return inv;
  }
  resolve_all(n);
  if (n.init == nullptr || n.count == nullptr || n.by_index == nullptr) {
    inv.why = fmt::format("{} lacks nvmlInit_v2, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2", library);
    ::dlclose(n.handle);
    return inv;
  }
  if (const nvmlReturn_t r = n.init(); r != kSuccess) {
    inv.why = fmt::format("nvmlInit failed: {}", n.error(r));
    ::dlclose(n.handle);
    return inv;
  }
  inv.loaded = true;
  char text[96] = {};
  if (n.driver_version != nullptr && n.driver_version(text, sizeof text) == kSuccess) inv.driver_version = text;
  if (n.cuda_driver_version != nullptr) n.cuda_driver_version(&inv.cuda_driver_version);
  if (n.nvml_version != nullptr && n.nvml_version(text, sizeof text) == kSuccess) inv.nvml_version = text;
  unsigned count = 0;
  if (const nvmlReturn_t r = n.count(&count); r != kSuccess) {
    inv.warnings.push_back("nvmlDeviceGetCount: " + n.error(r));
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    if (const nvmlReturn_t r = n.by_index(i, &d); r != kSuccess) {
      inv.warnings.push_back(fmt::format("gpu {}: nvmlDeviceGetHandleByIndex: {}", i, n.error(r)));
      continue;
    }
    inv.gpus.push_back(read_gpu(n, static_cast<int>(i), d, inv.warnings));
  }
  if (n.shutdown != nullptr) n.shutdown();
  ::dlclose(n.handle);
  return inv;
}

std::string to_json(const GpuInventory& inv) {
  using nlohmann::json;
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json out = {{"loaded", inv.loaded},
              {"why", inv.why},
              {"library", inv.library},
              {"driver_version", inv.driver_version},
              {"cuda_driver_version", inv.cuda_driver_version},
              {"nvml_version", inv.nvml_version},
              {"cuda", {{"built", inv.cuda_built}, {"usable", inv.cuda_usable}, {"why", inv.cuda_why}}},
              {"warnings", inv.warnings},
              {"gpus", json::array()}};
  for (const auto& g : inv.gpus) {
    json links = json::array();
    for (const auto& l : g.nvlinks)
      links.push_back({{"link", l.link}, {"active", l.active}, {"remote_bus_id", l.remote_bus_id}});
    out["gpus"].push_back({{"index", g.index},
                           {"name", g.name},
                           {"uuid", g.uuid},
                           {"bus_id", g.bus_id},
                           {"compute_capability", fmt::format("{}.{}", g.compute_major, g.compute_minor)},
                           {"memory_total", g.memory_total},
                           {"memory_used", g.memory_used},
                           {"ecc_enabled", opt(g.ecc_enabled)},
                           {"ecc_pending", opt(g.ecc_pending)},
                           {"ecc_corrected", opt(g.ecc_corrected)},
                           {"ecc_uncorrected", opt(g.ecc_uncorrected)},
                           {"pcie_gen", opt(g.pcie_gen)},
                           {"pcie_gen_max", opt(g.pcie_gen_max)},
                           {"pcie_width", opt(g.pcie_width)},
                           {"pcie_width_max", opt(g.pcie_width_max)},
                           {"pcie_degraded", g.pcie_degraded()},
                           {"persistence", opt(g.persistence)},
                           {"mig_enabled", opt(g.mig_enabled)},
                           {"nvlinks", links}});
  }
  return out.dump(2);
}

std::string to_text(const GpuInventory& inv) {
  std::ostringstream out;
  out << "CUDA in this build: "
      << (inv.cuda_usable ? "usable" : (inv.cuda_built ? "built, not usable: " : "") + inv.cuda_why) << "\n";
  if (!inv.loaded) {
    out << "No GPU inventory: " << inv.why << "\n";
    return out.str();
  }
  out << fmt::format("NVIDIA driver {}, CUDA {}.{}, {} GPU(s)\n", inv.driver_version, inv.cuda_driver_version / 1000,
                     inv.cuda_driver_version % 1000 / 10, inv.gpus.size());
  auto on_off = [](const std::optional<bool>& v) { return v ? (*v ? "on" : "off") : "n/a"; };
  auto num = [](const std::optional<int>& v) { return v ? std::to_string(*v) : std::string("?"); };
  for (const auto& g : inv.gpus) {
    int active = 0;
    for (const auto& l : g.nvlinks)
      active += l.active ? 1 : 0;
    out << fmt::format("GPU {} {} {} sm_{}{} {:.0f} GiB  ECC {}", g.index, g.name, g.bus_id, g.compute_major,
                       g.compute_minor, static_cast<double>(g.memory_total) / (1 << 30), on_off(g.ecc_enabled));
    if (g.ecc_uncorrected)
      out << fmt::format(" ({} uncorrected, {} corrected)", *g.ecc_uncorrected, g.ecc_corrected.value_or(0));
    out << fmt::format("  PCIe gen {}/{} x{}/x{}  NVLink {}/{} active  persistence {}  MIG {}\n", num(g.pcie_gen),
                       num(g.pcie_gen_max), num(g.pcie_width), num(g.pcie_width_max), active, g.nvlinks.size(),
                       on_off(g.persistence), on_off(g.mig_enabled));
    out << "  " << g.uuid << "\n";
    for (const auto& d : g.pcie_degraded())
      out << "  note: " << d << "\n";
  }
  for (const auto& w : inv.warnings)
    out << "warning: " << w << "\n";
  return out.str();
}

}  // namespace ringmaster
