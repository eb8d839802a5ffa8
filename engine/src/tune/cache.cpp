#include "tune/cache.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "base/params.h"

namespace ringmaster::tune {

using nlohmann::json;

std::string calibration_cache_path() {
  if (const auto set = param_env(Param::TuneCache)) return *set == "off" ? std::string() : *set;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/ringmaster/tuning.json";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/ringmaster/tuning.json";
  return {};
}

std::optional<Calibration> load_calibration(const std::string& path, const std::string& key,
                                            std::chrono::seconds max_age) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains(key) || !doc[key].is_object()) return std::nullopt;
  const json& e = doc[key];
  Calibration c;
  // One hop latency per protocol (an older single figure is measured anew).
  const json hops = e.value("hop_us", json());
  if (!hops.is_array() || hops.size() != 3) return std::nullopt;
  const json shares = e.value("share", json());
  if (!shares.is_array() || shares.size() != 3) return std::nullopt;
  // Tree levels measured apart (older entries have none: measured anew).
  const json tree_hops = e.value("tree_hop_us", json());
  if (!tree_hops.is_array() || tree_hops.size() != 3) return std::nullopt;
  for (std::size_t i = 0; i < 3; ++i) {
    c.hop_us[i] = hops[i].is_number() ? hops[i].get<double>() : 0.0;
    c.share[i] = shares[i].is_number() ? shares[i].get<double>() : 0.0;
    c.tree_hop_us[i] = tree_hops[i].is_number() ? tree_hops[i].get<double>() : -1.0;
    if (c.share[i] <= 0 || c.tree_hop_us[i] < 0) return std::nullopt;
  }
  // Bandwidth by size (older entries have one figure, or fewer sizes:
  // measured anew).
  const json factors = e.value("bandwidth_factor", json());
  const json tree_shares = e.value("tree_share_by_size", json());
  constexpr auto points = static_cast<std::size_t>(kCalibrationPoints);
  if (!factors.is_array() || factors.size() != points || !tree_shares.is_array() || tree_shares.size() != points)
    return std::nullopt;
  for (std::size_t i = 0; i < points; ++i) {
    c.bandwidth_factor[i] = factors[i].is_number() ? factors[i].get<double>() : 0.0;
    c.tree_share_by_size[i] = tree_shares[i].is_number() ? tree_shares[i].get<double>() : 0.0;
    if (c.bandwidth_factor[i] <= 0 || c.tree_share_by_size[i] <= 0) return std::nullopt;
  }
  c.gbs = e.value("gbs", 0.0);
  c.gbs_all = e.value("gbs_all", 0.0);
  c.tree_share = e.value("tree_share", 0.0);
  c.measured_at = e.value("measured_at", std::int64_t{0});
  c.took_ms = e.value("took_ms", 0.0);
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (c.hop_us[0] <= 0 || c.hop_us[1] <= 0 || c.hop_us[2] <= 0 || c.gbs <= 0 || c.gbs_all <= 0 || c.tree_share <= 0)
    return std::nullopt;
  if (c.measured_at > now || now - c.measured_at > max_age.count()) return std::nullopt;
  return c;
}

bool store_calibration(const std::string& path, const std::string& key, const Calibration& c) {
  if (path.empty()) return false;
  std::error_code ec;
  const std::filesystem::path file(path);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  json doc = json::object();
  if (std::ifstream in(path); in) {
    doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object()) doc = json::object();
  }
  doc[key] = {
      {"hop_us", {c.hop_us[0], c.hop_us[1], c.hop_us[2]}},
      {"share", {c.share[0], c.share[1], c.share[2]}},
      {"tree_hop_us", {c.tree_hop_us[0], c.tree_hop_us[1], c.tree_hop_us[2]}},
      {"gbs", c.gbs},
      {"gbs_all", c.gbs_all},
      {"tree_share", c.tree_share},
      {"bandwidth_factor", std::vector<double>(std::begin(c.bandwidth_factor), std::end(c.bandwidth_factor))},
      {"tree_share_by_size", std::vector<double>(std::begin(c.tree_share_by_size), std::end(c.tree_share_by_size))},
      {"measured_at", c.measured_at},
      {"took_ms", c.took_ms}};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << doc.dump(2) << "\n";
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return !ec;
}

}  // namespace ringmaster::tune
