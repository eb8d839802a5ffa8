// A rank's `stage` event as an agent sends it, for tests that make runs up.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

inline nlohmann::json stage_event(const std::string& run_id, int rank, std::string_view stage, long long begin_us = 1,
                                  double duration_ms = 1.0) {
  return {{"type", "event"},
          {"run_id", run_id},
          {"rank", rank},
          {"event",
           {{"type", "stage"},
            {"stage", std::string(stage)},
            {"begin_us", begin_us},
            {"duration_ms", duration_ms},
            {"ok", true},
            {"detail", ""}}}};
}
