// Calibrations remembered between communicators: a small JSON file of
// measured link figures keyed by the communicator's shape (transport,
// hosts, ranks, channels, buffer size), each with the time it was
// measured. Rank 0 reads it and hands a fresh entry to every rank, so a
// job that starts many communicators of one shape measures once an hour.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace ringmaster::tune {

// The collective sizes the bandwidth is measured at; gbs is the one at
// kReferencePoint (4 MiB).
inline constexpr int kCalibrationPoints = 6;
inline constexpr double kCalibrationSizes[kCalibrationPoints] = {64 << 10, 256 << 10, 1 << 20,
                                                                 2 << 20,  4 << 20,   16 << 20};
inline constexpr int kReferencePoint = 4;
static_assert(kCalibrationSizes[kReferencePoint] == 4 << 20, "the reference point is the 4 MiB size");

struct Calibration {
  double hop_us[3] = {};        // per protocol: LL, LL128, Simple
  double share[3] = {1, 1, 1};  // per protocol: its bandwidth over Simple's
  double tree_hop_us[3] = {};   // per protocol: a tree level
  double gbs = 0;               // one channel
  double gbs_all = 0;           // all channels at once
  double tree_share = 1;        // tree bandwidth over the ring's
  // At kCalibrationSizes: the ring's bandwidth over gbs, and the tree's
  // share (tree_share is the one at gbs's size).
  double bandwidth_factor[kCalibrationPoints] = {1, 1, 1, 1, 1, 1};
  double tree_share_by_size[kCalibrationPoints] = {1, 1, 1, 1, 1, 1};
  std::int64_t measured_at = 0;  // Unix seconds
  double took_ms = 0;
};

// RINGMASTER_TUNE_CACHE, else $XDG_CACHE_HOME/ringmaster/tuning.json, else
// $HOME/.cache/ringmaster/tuning.json; empty when RINGMASTER_TUNE_CACHE=off
// or there is no home.
std::string calibration_cache_path();

// The entry for `key` when it is younger than max_age; nothing when the
// file is missing, unreadable or stale (never throws).
std::optional<Calibration> load_calibration(const std::string& path, const std::string& key,
                                            std::chrono::seconds max_age);
// Adds or replaces the entry (write to a temporary file, then rename).
// Best effort: returns false when the file cannot be written.
bool store_calibration(const std::string& path, const std::string& key, const Calibration& c);

}  // namespace ringmaster::tune
