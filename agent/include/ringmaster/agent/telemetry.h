// The JSON lines a rank streams (ringmaster-cli perf --events) and the
// agent relays: stage events, stage failures, channel samples, tuner
// decisions, result rows. Written by the rank, read back by
// ringmaster-cli remote and the console (docs/protocol.md, "Events").
#pragma once

#include <nlohmann/json.hpp>

#include <optional>

#include "ringmaster/bootstrap.h"
#include "ringmaster/comm.h"
#include "ringmaster/perf.h"
#include "ringmaster/tuner.h"

namespace ringmaster::agent {

nlohmann::json to_json(const StageEvent& e);
nlohmann::json to_json(const StageFailure& f);
// {"type":"result", collective, bytes, count, dtype, redop, root,
//  out_of_place:{time_us, algbw, busbw, wrong}, in_place:{...}}
nlohmann::json to_json(const PerfSpec& spec, const PerfRow& row);
// {"type":"decision", collective, bytes, algorithm, protocol, nchannels}
nlohmann::json to_json(const CollectiveRecord& record);
// {"type":"tuner"}: the tuner's candidates for one collective and size,
// the chosen one's index.
nlohmann::json to_json(const tune::Decision& decision);

// Stage enum from "STORE_CONNECT"; nothing for an unknown name.
std::optional<Stage> parse_stage(std::string_view name);
// Back from the JSON above; nothing when a field is missing or mistyped.
std::optional<StageEvent> stage_event_from_json(const nlohmann::json& j);
std::optional<PerfRow> perf_row_from_json(const nlohmann::json& j);

}  // namespace ringmaster::agent
