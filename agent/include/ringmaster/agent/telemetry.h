// The JSON lines a rank streams (ringmaster-cli perf --events) and the
// agent relays, made from the engine's records: each is the JSON of one
// typed event of ringmaster/agent/events.h, where readers parse them
// back. Also the slow-link finding over the ranks' "links" events.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "ringmaster/agent/events.h"
#include "ringmaster/comm.h"
#include "ringmaster/tools/bootstrap.h"
#include "ringmaster/tools/perf.h"
#include "ringmaster/tools/tuner.h"

namespace ringmaster::agent {

// "stage", or "stage_progress" for a stage still retrying.
nlohmann::json to_json(const StageEvent& e);
// "failure"
nlohmann::json to_json(const StageFailure& f);
// "result": one nccl-tests row, as `perf --json` writes it.
nlohmann::json to_json(const PerfSpec& spec, const PerfRow& row);
// "decision": the first call of a size.
nlohmann::json to_json(const CollectiveRecord& record);
// "tuner": the tuner's candidates for one collective and size.
nlohmann::json to_json(const tune::Decision& decision);
// "links": what this rank received from each peer in large transfers,
// sent once at the end of a run.
nlohmann::json links_json(const std::vector<PeerLinkCounters>& links,
                          const std::vector<ConnectionInfo>& connections = {});
// "stall": the hang wavefront, sent by the rank that saw it.
nlohmann::json to_json(const StallReport& report);
// "connections": each connection of this rank.
nlohmann::json connections_json(const std::vector<ConnectionInfo>& connections);

// A link much slower than the others: its receiver saw it move data at
// `gbs` while the median link of the run moved `median_gbs`.
struct SlowLink {
  int from = -1;
  int to = -1;
  double gbs = 0;
  double median_gbs = 0;  // 0: every other link outran its reader
  std::string transport;  // "SOCKET", "SHM", "OFI"; empty when the event did not say
  // Lossy: the sender's TCP resent this many of the segments it sent on the
  // link (0 of 0 when the link was not flagged for it).
  std::uint64_t segments = 0, resent = 0;
  double median_resent_share = 0;  // of the other links' segments
  bool lossy() const { return resent > 0; }
  // "rank 1 -> rank 2 at 5.1 MB/s, 1/96 of the median SOCKET link (490 MB/s)",
  // and for a lossy link "rank 3 -> rank 4 resent 9.8% of its TCP segments
  // (...), against 0.01% on the median link: packets are lost on the way ..."
  std::string describe() const;
};
inline constexpr double kSlowLinkMinSeconds = 0.1;
// A link is lossy when its sender resent at least this share of its TCP
// segments, and 5 times the median link's share, over at least
// kLossyMinSegments segments.
inline constexpr double kLossyResentShare = 0.01;
inline constexpr std::uint64_t kLossyMinSegments = 1000;
// The rule itself, for a link whose sender resent `share` of at least
// kLossyMinSegments segments where the median link resent
// `median_share`: the run summary's and the link check's alike.
inline bool lossy_share(double share, double median_share) {
  return share >= kLossyResentShare && share >= 5 * median_share;
}
// From every rank's "links" event (rank, event): the links below a fifth
// of the median rate of the links of their transport (shared memory is
// not compared with sockets; at least three links of a transport, one
// measured; a link that was always ahead of its reader counts as faster
// than any measured one), paced that slowly for at least
// kSlowLinkMinSeconds, and the lossy links (their senders' "sent"
// counts), slowest first.
std::vector<SlowLink> find_slow_links(const std::vector<std::pair<int, events::Links>>& links_events);

}  // namespace ringmaster::agent
