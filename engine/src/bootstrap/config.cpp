#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/log.h"
#include "base/params.h"
#include "ringmaster/config.h"
#include "ringmaster/status.h"

namespace ringmaster {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

long long parse_int(const std::string& name, const std::string& text, long long lo, long long hi) {
  long long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw Error(ErrorCategory::config, name + "=" + text + " is not an integer");
  }
  if (v < lo || v > hi) {
    throw Error(ErrorCategory::config,
                name + "=" + text + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

int int_env(const char* name, int fallback, long long lo, long long hi) {
  const char* v = env(name);
  return v == nullptr ? fallback : static_cast<int>(parse_int(name, v, lo, hi));
}

std::chrono::milliseconds seconds_param(Param p) {
  const std::string text = param_string(p);
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(seconds > 0)) {
    throw Error(ErrorCategory::config,
                std::string(param_info(p).env) + "=" + text + " is not a positive number of seconds");
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

constexpr long long kMaxRanks = 1 << 24;

// torch writes str(True); people write the rest.
bool truthy(const char* v) {
  if (v == nullptr) return false;
  const std::string t = v;
  return t == "True" || t == "true" || t == "TRUE" || t == "1" || t == "yes";
}

// srun gives each task a step id; a batch script (the "batch" step, or none)
// is not one of the step's tasks.
bool under_srun() {
  const char* id = env("SLURM_STEP_ID");
  if (id == nullptr) id = env("SLURM_STEPID");
  if (id == nullptr) return false;
  long long v = 0;
  const std::string t = id;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return ec == std::errc() && ptr == t.data() + t.size() && v >= 0 && v < 0xFFFFFFF0LL;
}

// Rank and size from the launcher that started this process; the first
// that is present wins (see config.h).
void from_launcher(Config& c) {
  if (env("RANK") != nullptr || env("WORLD_SIZE") != nullptr) {
    c.rank = int_env("RANK", 0, 0, kMaxRanks);
    c.world_size = int_env("WORLD_SIZE", 1, 1, kMaxRanks);
    c.local_rank = int_env("LOCAL_RANK", 0, 0, kMaxRanks);
    c.local_world_size = int_env("LOCAL_WORLD_SIZE", 1, 1, kMaxRanks);
    c.group_rank = int_env("GROUP_RANK", 0, 0, kMaxRanks);
    c.launcher = "RANK/WORLD_SIZE";
    return;
  }
  if (env("OMPI_COMM_WORLD_SIZE") != nullptr) {
    c.rank = int_env("OMPI_COMM_WORLD_RANK", 0, 0, kMaxRanks);
    c.world_size = int_env("OMPI_COMM_WORLD_SIZE", 1, 1, kMaxRanks);
    c.local_rank = int_env("OMPI_COMM_WORLD_LOCAL_RANK", 0, 0, kMaxRanks);
    c.local_world_size = int_env("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1, kMaxRanks);
    c.launcher = "Open MPI";
    return;
  }
  if (env("PMI_SIZE") != nullptr && env("PMI_RANK") != nullptr) {
    c.rank = int_env("PMI_RANK", 0, 0, kMaxRanks);
    c.world_size = int_env("PMI_SIZE", 1, 1, kMaxRanks);
    // MPICH's Hydra names the local ones MPI_LOCALRANKID/MPI_LOCALNRANKS.
    c.local_rank = int_env("MPI_LOCALRANKID", int_env("PMI_LOCAL_RANK", 0, 0, kMaxRanks), 0, kMaxRanks);
    c.local_world_size = int_env("MPI_LOCALNRANKS", int_env("PMI_LOCAL_SIZE", 1, 1, kMaxRanks), 1, kMaxRanks);
    c.launcher = "PMI";
    return;
  }
  const char* slurm_size = env("SLURM_STEP_NUM_TASKS") != nullptr ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  const int tasks = int_env(slurm_size, 1, 1, kMaxRanks);
  if (env("SLURM_PROCID") != nullptr && under_srun()) {
    c.rank = int_env("SLURM_PROCID", 0, 0, kMaxRanks);
    c.world_size = tasks;
    c.local_rank = int_env("SLURM_LOCALID", 0, 0, kMaxRanks);
    c.group_rank = int_env("SLURM_NODEID", 0, 0, kMaxRanks);
    c.local_world_size = 1;
    for (const char* v : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
      if (const char* per_node = env(v)) {
        c.local_world_size = std::max(1, slurm_tasks_on_node(per_node, c.group_rank));
        break;
      }
    }
    c.launcher = "Slurm";
    return;
  }
  if (tasks > 1) {
    throw Error(ErrorCategory::config,
                std::string(slurm_size) + "=" + std::to_string(tasks) +
                    " but this process is not one of srun's tasks (no SLURM_STEP_ID): start the ranks with srun, "
                    "or set WORLD_SIZE=1 to run one rank here");
  }
}

// RINGMASTER_STORE=etcd://host[:port][/prefix][?lease=S].
void parse_store_url(Config& c, const std::string& url) {
  const std::string variable = "RINGMASTER_STORE=" + url;
  const std::string scheme = "etcd://";
  if (url.rfind(scheme, 0) != 0) {
    throw Error(ErrorCategory::config,
                variable + " is not a store this engine speaks: etcd://host[:port][/prefix][?lease=seconds]");
  }
  std::string rest = url.substr(scheme.size());
  if (const auto q = rest.find('?'); q != std::string::npos) {
    const std::string query = rest.substr(q + 1);
    rest.resize(q);
    if (query.rfind("lease=", 0) != 0) throw Error(ErrorCategory::config, variable + ": the only option is lease=S");
    c.etcd_lease = std::chrono::seconds(parse_int("RINGMASTER_STORE's lease", query.substr(6), 2, 86400));
  }
  std::string authority = rest;
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    authority = rest.substr(0, slash);
    std::string prefix = rest.substr(slash);
    while (prefix.size() > 1 && prefix.back() == '/')
      prefix.pop_back();
    if (prefix != "/") c.etcd_prefix = prefix;
  }
  std::string host = authority, port;
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    const auto close = authority.find(']');
    if (close == std::string::npos) throw Error(ErrorCategory::config, variable + ": an IPv6 host lacks its ']'");
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw Error(ErrorCategory::config, variable + ": ':' must follow ']'");
      port = authority.substr(close + 2);
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) throw Error(ErrorCategory::config, variable + " names no host");
  c.etcd_host = host;
  if (!port.empty()) c.etcd_port = static_cast<std::uint16_t>(parse_int("RINGMASTER_STORE's port", port, 1, 65535));
}

}  // namespace

std::string first_slurm_host(const std::string& variable, const std::string& nodelist) {
  std::string host;
  std::size_t i = 0;
  auto bad = [&](const char* why) {
    return Error(ErrorCategory::config,
                 variable + " (" + std::to_string(nodelist.size()) + " characters) is not a Slurm node list: " + why);
  };
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] == '[') {
      const auto close = nodelist.find(']', i);
      if (close == std::string::npos) throw bad("'[' without ']'");
      const std::string range = nodelist.substr(i + 1, close - i - 1);
      const auto end = range.find_first_of(",-");
      const std::string first = range.substr(0, end);
      if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos)
        throw bad("a range that does not start with a number");
      host += first;
      i = close + 1;
    } else {
      host += nodelist[i++];
    }
  }
  if (host.empty()) throw bad("no host");
  return host;
}

int slurm_tasks_on_node(const std::string& tasks_per_node, int node) {
  // Groups "N" or "N(xM)", separated by commas.
  std::size_t i = 0;
  int seen = 0;
  while (i < tasks_per_node.size()) {
    const auto comma = tasks_per_node.find(',', i);
    const std::string group = tasks_per_node.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
    int tasks = 0, repeat = 1;
    if (std::sscanf(group.c_str(), "%d(x%d)", &tasks, &repeat) < 1 || tasks < 0 || repeat < 1) return 0;
    if (node < seen + repeat) return tasks;
    seen += repeat;
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return 0;
}

std::string Config::describe() const {
  const std::string who = "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (local " +
                          std::to_string(local_rank) + " of " + std::to_string(local_world_size) + ", node " +
                          std::to_string(group_rank) + ") from " + launcher;
  if (!etcd_host.empty()) {
    return who + "; store etcd://" + etcd_host + ":" + std::to_string(etcd_port) + etcd_prefix + " (lease " +
           std::to_string(etcd_lease.count()) + " s); run id " + run_id;
  }
  return who + "; store " + master_addr + ":" + std::to_string(master_port) + " (address from " + master_addr_from +
         ", " +
         (store_hosting == StoreHosting::connect ? "connect"
          : store_hosting == StoreHosting::host  ? "host"
                                                 : "auto") +
         "); run id " + run_id;
}

Config Config::from_env() {
  Config c;
  from_launcher(c);
  if (const char* v = env("MASTER_ADDR")) {
    c.master_addr = v;
    c.master_addr_from = "MASTER_ADDR";
  } else if (c.launcher == "Slurm") {
    for (const char* list : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      if (const char* v = env(list)) {
        c.master_addr = first_slurm_host(list, v);
        c.master_addr_from = std::string(list) + " (its first host)";
        break;
      }
    }
  }
  c.master_port = static_cast<std::uint16_t>(int_env("MASTER_PORT", 29500, 1, 65535));
  c.store_timeout = seconds_param(Param::StoreTimeout);
  c.bootstrap_timeout = seconds_param(Param::BootstrapTimeout);
  c.socket_ifname = param_string(Param::SocketIfname);
  c.socket_family = param_string(Param::SocketFamily);
  // torchrun: its agent serves the store on MASTER_PORT and restarts
  // workers against it, so keys carry its run id and the attempt, as
  // torch's own process groups prefix theirs (/worker/attempt_N).
  const bool agent_store = truthy(std::getenv("TORCHELASTIC_USE_AGENT_STORE"));
  if (param_env(Param::RunId)) {
    c.run_id = param_string(Param::RunId);
  } else if (const char* v = env("TORCHELASTIC_RUN_ID")) {
    c.run_id = v;
  }
  if (env("TORCHELASTIC_RESTART_COUNT") != nullptr)
    c.run_id += "/attempt_" + std::to_string(int_env("TORCHELASTIC_RESTART_COUNT", 0, 0, 1 << 30));
  const std::string hosting = param_string(Param::HostStore);
  if (hosting == "auto" && agent_store) {
    c.store_hosting = StoreHosting::connect;
  } else if (hosting == "auto") {
    c.store_hosting = StoreHosting::automatic;
  } else if (hosting == "1") {
    c.store_hosting = StoreHosting::host;
  } else if (hosting == "0") {
    c.store_hosting = StoreHosting::connect;
  } else {
    throw Error(ErrorCategory::config, "RINGMASTER_HOST_STORE=" + hosting + " must be auto, 1 or 0");
  }
  if (auto url = param_env(Param::Store)) parse_store_url(c, *url);
  if (auto range = param_env(Param::PortRange)) {
    const auto dash = range->find('-');
    if (dash == std::string::npos) {
      throw Error(ErrorCategory::config, "RINGMASTER_PORT_RANGE=" + *range + " must be lo-hi");
    }
    c.port_range_lo = static_cast<std::uint16_t>(parse_int("RINGMASTER_PORT_RANGE", range->substr(0, dash), 1, 65535));
    c.port_range_hi = static_cast<std::uint16_t>(parse_int("RINGMASTER_PORT_RANGE", range->substr(dash + 1), 1, 65535));
  }
  c.validate();
  if (c.launcher != "RANK/WORLD_SIZE" && c.launcher != "none") {
    RM_INFO(init, "{} started this process: {}", c.launcher, c.describe());
  } else if (agent_store) {
    RM_INFO(init, "torchrun's agent holds the store (TORCHELASTIC_USE_AGENT_STORE): {}", c.describe());
  }
  return c;
}

void Config::validate() const {
  if (world_size < 1) throw Error(ErrorCategory::config, "WORLD_SIZE=" + std::to_string(world_size) + " must be >= 1");
  if (rank < 0 || rank >= world_size) {
    throw Error(ErrorCategory::config,
                "RANK=" + std::to_string(rank) + " must be in [0, WORLD_SIZE=" + std::to_string(world_size) + ")");
  }
  if (local_world_size < 1 || local_rank < 0 || local_rank >= local_world_size) {
    throw Error(ErrorCategory::config, "LOCAL_RANK=" + std::to_string(local_rank) +
                                           " must be in [0, LOCAL_WORLD_SIZE=" + std::to_string(local_world_size) +
                                           ")");
  }
  if (master_addr.empty()) throw Error(ErrorCategory::config, "MASTER_ADDR is empty");
  if (master_port == 0) throw Error(ErrorCategory::config, "MASTER_PORT must be in [1, 65535]");
  if (port_range_lo > port_range_hi) {
    throw Error(ErrorCategory::config, "RINGMASTER_PORT_RANGE=" + std::to_string(port_range_lo) + "-" +
                                           std::to_string(port_range_hi) + " is empty (lo > hi)");
  }
  if (!socket_family.empty() && socket_family != "AF_INET" && socket_family != "AF_INET6") {
    throw Error(ErrorCategory::config, "NCCL_SOCKET_FAMILY=" + socket_family + " must be AF_INET or AF_INET6");
  }
}

}  // namespace ringmaster
