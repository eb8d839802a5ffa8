// Network device counters from sysfs (nic_counters.h).
#include "nic_counters.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>

namespace ringmaster::agent {

namespace fs = std::filesystem;

namespace {

std::optional<std::uint64_t> number_in(const fs::path& file) {
  std::ifstream in(file);
  std::uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

// A directory's entries by name, none when it cannot be read.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

events::NicSample read_nic_counters(const std::string& sys) {
  events::NicSample sample;
  sample.t_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const fs::path net = fs::path(sys) / "class/net";
  for (const auto& name : names_in(net)) {
    if (static_cast<int>(sample.nics.size()) >= kMostNics) break;
    const auto rx = number_in(net / name / "statistics/rx_bytes");
    const auto tx = number_in(net / name / "statistics/tx_bytes");
    if (!rx || !tx) continue;
    events::NicSample::Nic nic;
    nic.name = name;
    nic.rx_bytes = *rx;
    nic.tx_bytes = *tx;
    // The negotiated speed; a link that is down or has none reads -1 or fails.
    if (std::ifstream in(net / name / "speed"); in) {
      long long mbps = 0;
      if (in >> mbps && mbps > 0) nic.speed_mbps = static_cast<std::uint64_t>(mbps);
    }
    sample.nics.push_back(std::move(nic));
  }
  const fs::path rdma = fs::path(sys) / "class/infiniband";
  for (const auto& device : names_in(rdma)) {
    for (const auto& port : names_in(rdma / device / "ports")) {
      if (static_cast<int>(sample.nics.size()) >= kMostNics) return sample;
      const fs::path p = rdma / device / "ports" / port;
      events::NicSample::Nic nic;
      nic.name = device + ":" + port;
      nic.rdma = true;
      if (auto rx = number_in(p / "hw_counters/rx_bytes"), tx = number_in(p / "hw_counters/tx_bytes"); rx && tx) {
        nic.rx_bytes = *rx;
        nic.tx_bytes = *tx;
      } else if (auto rw = number_in(p / "counters/port_rcv_data"), tw = number_in(p / "counters/port_xmit_data");
                 rw && tw) {
        nic.rx_bytes = *rw * 4;  // InfiniBand counts 4-byte words
        nic.tx_bytes = *tw * 4;
      } else {
        continue;
      }
      // "100 Gb/sec (4X EDR)"
      if (std::ifstream in(p / "rate"); in) {
        double gbits = 0;
        if (in >> gbits && gbits > 0) nic.speed_mbps = static_cast<std::uint64_t>(gbits * 1000);
      }
      sample.nics.push_back(std::move(nic));
    }
  }
  return sample;
}

}  // namespace ringmaster::agent
