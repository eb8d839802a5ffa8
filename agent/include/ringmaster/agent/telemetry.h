// The JSON lines a rank streams (ringmaster-cli perf --events) and the
// agent relays: stage events, stage failures, channel samples, tuner
// decisions, result rows. Written by the rank, read back by
// ringmaster-cli remote and the console (docs/protocol.md, "Events").
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ringmaster/comm.h"
#include "ringmaster/tools/bootstrap.h"
#include "ringmaster/tools/perf.h"
#include "ringmaster/tools/tuner.h"

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
// {"type":"links"}: what this rank received from each peer in large
// transfers (bytes, active time, GB/s; "ahead": how many arrived before
// this rank read them, which set no pace) and over which transport, sent
// once at the end of a run. "gbs" is absent when no transfer was paced.
nlohmann::json links_json(const std::vector<PeerLinkCounters>& links,
                          const std::vector<ConnectionInfo>& connections = {});
// {"type":"stall"}: a collective that stopped moving, with every rank's
// recent calls (the hang wavefront) and the diagnosis; sent by the rank
// that saw it (CommOptions::on_stall).
nlohmann::json to_json(const StallReport& report);
// {"type":"connections"}: each connection of this rank (channel, peer,
// direction, transport, and why not shared memory on one host).
nlohmann::json connections_json(const std::vector<ConnectionInfo>& connections);

// A link much slower than the others: its receiver saw it move data at
// `gbs` while the median link of the run moved `median_gbs`.
struct SlowLink {
  int from = -1;
  int to = -1;
  double gbs = 0;
  double median_gbs = 0;
  std::string transport;         // "SOCKET", "SHM", "OFI"; empty when the event did not say
  std::string describe() const;  // "rank 1 -> rank 2 at 5.1 MB/s, 1/96 of the median SOCKET link (490 MB/s)"
};
// From every rank's "links" event (rank, event): the links below a fifth
// of the median rate of the links of their transport (shared memory is
// not compared with sockets; at least three links of a transport, one
// measured; a link that was always ahead of its reader counts at the
// fastest measured rate), slowest first.
std::vector<SlowLink> find_slow_links(const std::vector<std::pair<int, nlohmann::json>>& links_events);

// Stage enum from "STORE_CONNECT"; nothing for an unknown name.
std::optional<Stage> parse_stage(std::string_view name);
// Back from the JSON above; nothing when a field is missing or mistyped.
std::optional<StageEvent> stage_event_from_json(const nlohmann::json& j);
std::optional<PerfRow> perf_row_from_json(const nlohmann::json& j);
std::optional<StallReport> stall_report_from_json(const nlohmann::json& j);

}  // namespace ringmaster::agent
