#include <charconv>
#include <cstdlib>
#include <string>

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

}  // namespace

Config Config::from_env() {
  Config c;
  c.rank = int_env("RANK", 0, 0, 1 << 24);
  c.world_size = int_env("WORLD_SIZE", 1, 1, 1 << 24);
  c.local_rank = int_env("LOCAL_RANK", 0, 0, 1 << 24);
  c.local_world_size = int_env("LOCAL_WORLD_SIZE", 1, 1, 1 << 24);
  if (const char* v = env("MASTER_ADDR")) c.master_addr = v;
  c.master_port = static_cast<std::uint16_t>(int_env("MASTER_PORT", 29500, 1, 65535));
  c.store_timeout = seconds_param(Param::StoreTimeout);
  c.bootstrap_timeout = seconds_param(Param::BootstrapTimeout);
  c.socket_ifname = param_string(Param::SocketIfname);
  c.socket_family = param_string(Param::SocketFamily);
  c.run_id = param_string(Param::RunId);
  const std::string hosting = param_string(Param::HostStore);
  if (hosting == "auto") {
    c.store_hosting = StoreHosting::automatic;
  } else if (hosting == "1") {
    c.store_hosting = StoreHosting::host;
  } else if (hosting == "0") {
    c.store_hosting = StoreHosting::connect;
  } else {
    throw Error(ErrorCategory::config, "RINGMASTER_HOST_STORE=" + hosting + " must be auto, 1 or 0");
  }
  if (auto range = param_env(Param::PortRange)) {
    const auto dash = range->find('-');
    if (dash == std::string::npos) {
      throw Error(ErrorCategory::config, "RINGMASTER_PORT_RANGE=" + *range + " must be lo-hi");
    }
    c.port_range_lo = static_cast<std::uint16_t>(parse_int("RINGMASTER_PORT_RANGE", range->substr(0, dash), 1, 65535));
    c.port_range_hi = static_cast<std::uint16_t>(parse_int("RINGMASTER_PORT_RANGE", range->substr(dash + 1), 1, 65535));
  }
  c.validate();
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
