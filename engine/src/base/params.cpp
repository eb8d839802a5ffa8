#include "base/params.h"

#include <array>
#include <charconv>
#include <cstdlib>

#include "ringmaster/status.h"

namespace ringmaster {
namespace {

constexpr std::array kParams = {
#define RINGMASTER_PARAM_INFO(id, env, def, help) ParamInfo{Param::id, env, def, help},
    RINGMASTER_PARAMS(RINGMASTER_PARAM_INFO)
#undef RINGMASTER_PARAM_INFO
};

}  // namespace

std::span<const ParamInfo> all_params() noexcept {
  return kParams;
}

const ParamInfo& param_info(Param p) noexcept {
  return kParams[static_cast<std::size_t>(p)];
}

std::optional<std::string> param_env(Param p) {
  const char* value = std::getenv(std::string(param_info(p).env).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string param_string(Param p) {
  if (auto value = param_env(p)) return *value;
  return std::string(param_info(p).default_value);
}

std::int64_t param_int(Param p) {
  const std::string text = param_string(p);
  std::int64_t value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) {
    throw Error(ErrorCategory::config, std::string(param_info(p).env) + "=" + text + " is not an integer");
  }
  return value;
}

}  // namespace ringmaster

#include "ringmaster/tools/params.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace ringmaster {

std::vector<ParamDescription> list_params() {
  std::vector<ParamDescription> out;
  for (const auto& p : all_params()) {
    out.push_back({std::string(p.env), std::string(p.default_value), std::string(p.help), param_env(p.id)});
  }
  return out;
}

namespace {

struct Other {
  const char* group;
  const char* name;
  const char* default_value;
  const char* help;
};

constexpr Other kOthers[] = {
    {"launcher", "RANK", "0", "This rank (torchrun, Kubernetes, by hand); with WORLD_SIZE it wins over any launcher's"},
    {"launcher", "WORLD_SIZE", "1", "Ranks in the job"},
    {"launcher", "LOCAL_RANK", "0", "This rank among the ranks of its node"},
    {"launcher", "LOCAL_WORLD_SIZE", "1", "Ranks on this node"},
    {"launcher", "GROUP_RANK", "0", "torchrun: this node's index"},
    {"launcher", "MASTER_ADDR", "127.0.0.1", "Host of the store (Slurm: the first host of the node list)"},
    {"launcher", "MASTER_PORT", "29500", "Port of the store"},
    {"launcher", "TORCHELASTIC_USE_AGENT_STORE", "", "True: torchrun's agent holds the store; rank 0 connects"},
    {"launcher", "TORCHELASTIC_RUN_ID", "", "torchrun's run id: prefixes store keys (unless RINGMASTER_RUN_ID)"},
    {"launcher", "TORCHELASTIC_RESTART_COUNT", "", "torchrun's attempt: store keys carry /attempt_N"},
    {"launcher", "OMPI_COMM_WORLD_RANK", "", "Open MPI's rank (without RANK/WORLD_SIZE)"},
    {"launcher", "OMPI_COMM_WORLD_SIZE", "", "Open MPI's size"},
    {"launcher", "OMPI_COMM_WORLD_LOCAL_RANK", "", "Open MPI's rank on this node"},
    {"launcher", "OMPI_COMM_WORLD_LOCAL_SIZE", "", "Open MPI's ranks on this node"},
    {"launcher", "PMI_RANK", "", "PMI's rank (MPICH, Intel MPI, srun --mpi=pmi2)"},
    {"launcher", "PMI_SIZE", "", "PMI's size"},
    {"launcher", "MPI_LOCALRANKID", "", "Hydra's rank on this node (else PMI_LOCAL_RANK)"},
    {"launcher", "MPI_LOCALNRANKS", "", "Hydra's ranks on this node (else PMI_LOCAL_SIZE)"},
    {"launcher", "SLURM_PROCID", "", "srun's task rank"},
    {"launcher", "SLURM_STEP_NUM_TASKS", "", "srun's task count (else SLURM_NTASKS)"},
    {"launcher", "SLURM_NTASKS", "", "The allocation's task count; > 1 outside srun is refused"},
    {"launcher", "SLURM_STEP_ID", "", "Set for srun's tasks; a batch script has none"},
    {"launcher", "SLURM_LOCALID", "", "srun's task rank on this node"},
    {"launcher", "SLURM_NODEID", "", "This node's index in the step"},
    {"launcher", "SLURM_STEP_TASKS_PER_NODE", "", "Tasks per node, as 2(x3),1 (else SLURM_TASKS_PER_NODE)"},
    {"launcher", "SLURM_STEP_NODELIST", "",
     "The step's hosts; the first is MASTER_ADDR when unset (else SLURM_JOB_NODELIST)"},
    {"logging", "NCCL_DEBUG", "WARN", "VERSION, WARN, INFO, TRACE or NONE"},
    {"logging", "NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,ENV", "Subsystems logged at INFO; ^ excludes; ALL"},
    {"logging", "NCCL_DEBUG_FILE", "", "Log file instead of stderr (%h host, %p pid)"},
    {"libfabric", "FI_PROVIDER", "", "libfabric providers allowed (efa, verbs, tcp;ofi_rxm, ...)"},
    {"libfabric", "FI_OFI_RXM_USE_SRX", "1 (set by the engine)", "rxm's shared receive context"},
    {"libfabric", "FI_OFI_RXM_MSG_TX_SIZE", "set by the engine", "rxm's transmit queue depth"},
    {"libfabric", "FI_OFI_RXM_MSG_RX_SIZE", "set by the engine", "rxm's receive queue depth"},
};

// Why NCCL variables Ringmaster does not read have no effect, by prefix.
struct Reason {
  const char* prefix;
  const char* why;
};
constexpr Reason kReasons[] = {
    {"NCCL_IB_", "NCCL's InfiniBand verbs transport: RDMA goes through libfabric here (NCCL_NET=OFI, FI_PROVIDER)"},
    {"NCCL_NET_GDR", "GPUDirect RDMA: needs the GPU path"},
    {"NCCL_P2P_", "GPU peer-to-peer: needs the GPU path"},
    {"NCCL_NVLS_", "NVLink SHARP: not driven here"},
    {"NCCL_NVB_", "NVLink: needs the GPU path"},
    {"NCCL_CUMEM_", "CUDA memory: needs the GPU path"},
    {"NCCL_COLLNET_", "in-network reduction (CollNet, SHARP): not driven here"},
    {"NCCL_SHARP_", "in-network reduction (SHARP): not driven here"},
    {"NCCL_GRAPH_", "NCCL's graph search tuning: Ringmaster's topology search has no such knobs"},
    {"NCCL_LAUNCH_MODE", "GPU kernel launches: needs the GPU path"},
    {"NCCL_CROSS_NIC", "NIC choice per ring: not read yet"},
};

bool read_here(const std::string& name) {
  for (const auto& p : all_params()) {
    if (p.env == name) return true;
  }
  for (const auto& o : kOthers) {
    if (name == o.name) return true;
  }
  return false;
}

}  // namespace

std::vector<ParamDescription> list_other_variables() {
  std::vector<ParamDescription> out;
  for (const auto& o : kOthers) {
    std::optional<std::string> value;
    if (const char* v = std::getenv(o.name)) value = v;
    out.push_back({o.name, o.default_value, o.help, value, o.group});
  }
  return out;
}

std::vector<IgnoredVariable> ignored_nccl_variables() {
  std::vector<IgnoredVariable> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string::npos || entry.rfind("NCCL_", 0) != 0) continue;
    const std::string name = entry.substr(0, eq);
    if (read_here(name)) continue;
    std::string why = "not read by Ringmaster";
    for (const auto& r : kReasons) {
      if (name.rfind(r.prefix, 0) == 0) {
        why = r.why;
        break;
      }
    }
    out.push_back({name, entry.substr(eq + 1), why});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace ringmaster
