// `ringmaster-cli gpus`: this node's GPUs as NVML reports them (driver and
// CUDA versions, ECC, NVLink, PCIe link against its maximum, persistence,
// MIG) and whether this build's CUDA is usable here. A node without a
// driver says so and exits 0: having no GPU is not a fault.
#include <cstdio>
#include <string>

#include "commands.h"
#include "ringmaster/tools/gpus.h"

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
    const std::string text = o->json ? to_json(inventory) + "\n" : to_text(inventory);
    std::fputs(text.c_str(), stdout);
    return exit_code::ok;
  };
}

}  // namespace ringmaster::cli
