// `ringmaster-cli gpus`: this node's GPUs as NVML reports them (driver and
// CUDA versions, ECC, NVLink, PCIe link against its maximum, persistence,
// MIG), whether this build's CUDA is usable here, and the software stack a
// GPU job meets (driver, CUDA, NCCL, libfabric, aws-ofi-nccl, EFA). A node
// without a driver says so and exits 0: having no GPU is not a fault.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

#include "commands.h"
#include "ringmaster/tools/gpus.h"
#include "ringmaster/tools/preflight.h"

namespace ringmaster::cli {

Runner add_gpus_command(CLI::App& app) {
  struct Options {
    bool json = false;
    std::string library = "libnvidia-ml.so.1";
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("gpus", "This node's GPUs through NVML (driver, ECC, NVLink, PCIe link, MIG)");
  cmd->add_flag("--json", o->json, "Print the inventory as JSON");
  cmd->add_option("--nvml", o->library, "The NVML library to open")->capture_default_str();
  return [o] {
    const GpuInventory inventory = read_gpu_inventory(o->library);
    const auto stack = read_software_stack();
    std::string text;
    if (o->json) {
      auto out = nlohmann::json::parse(to_json(inventory));
      out["stack"] = nlohmann::json::array();
      for (const auto& [component, version] : stack)
        out["stack"].push_back({{"component", component}, {"version", version}});
      text = out.dump() + "\n";
    } else {
      text = to_text(inventory) + "Stack:\n";
      for (const auto& [component, version] : stack)
        text += "  " + component + std::string(16 - std::min<std::size_t>(component.size(), 15), ' ') + version + "\n";
    }
    std::fputs(text.c_str(), stdout);
    return exit_code::ok;
  };
}

}  // namespace ringmaster::cli
