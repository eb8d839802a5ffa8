// What NCCL decided, read back from its NCCL_DEBUG=INFO lines: the rings
// and trees it built, its channel counts, the transport of each
// connection and the algorithm and protocol it picked per call. The same
// facts Ringmaster's engine reports of itself (its INFO lines, the Rings
// view, tuning decisions), so a sweep run through NCCL on the same nodes
// can be shown beside Ringmaster's.
//
// The lines are NCCL's own (src/graph/rings.cc, src/init.cc,
// src/graph/connect.cc, src/transport/*.cc, src/enqueue.cc), as written
// to stderr or NCCL_DEBUG_FILE: "host:pid:tid [dev] NCCL INFO <message>".
// Lines that are not NCCL INFO lines, or whose message is none of these,
// are skipped; nothing here throws on odd input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster {

struct NcclRing {
  int channel = 0;
  int channels = 0;        // "Channel 00/02": of how many
  std::vector<int> ranks;  // the ring's order, as rank 0 prints it
};

// One rank's place in a channel's tree ("Trees [0] 1/-1/-1->0->-1").
struct NcclTree {
  int rank = -1;  // the rank that printed it (its [dev] prefix's rank when known, else -1)
  int channel = 0;
  std::vector<int> children;  // -1s left out
  int parent = -1;            // -1 at the root
};

struct NcclConnection {
  int channel = 0;
  int from = 0, to = 0;   // ranks
  std::string transport;  // "P2P/CUMEM", "P2P/IPC", "SHM", "NET/Socket/0", "NET/AWS Libfabric/0/GDRDMA", ...
  std::string kind;       // "P2P", "SHM", "NET" (the part before the first '/')
};

// A call's choice (NCCL_DEBUG_SUBSYS=TUNING).
struct NcclPick {
  std::string collective;  // "AllReduce"
  std::uint64_t bytes = 0;
  std::string algorithm;  // "Ring", "Tree", "NVLS", ...
  std::string protocol;   // "LL", "LL128", "Simple"
  int channel_lo = 0, channel_hi = 0;
};

struct NcclDecisions {
  std::string version;  // "2.27.3+cuda12.9"
  int coll_channels = 0, p2p_channels = 0, nvls_channels = 0, collnet_channels = 0;
  std::vector<NcclRing> rings;
  std::vector<NcclTree> trees;
  std::vector<NcclConnection> connections;
  std::vector<NcclPick> picks;
  // NCCL WARN lines' messages ("NET/Socket : connect to 10.0.0.6<43421>
  // failed : Connection refused"), in order, the last 32 kept.
  std::vector<std::string> warnings;
  int lines_read = 0;  // NCCL INFO lines seen, whether used or not
};

// Adds what one line says to `into`; false when it said nothing used.
bool read_nccl_line(std::string_view line, NcclDecisions& into);
// Every line of `text`.
NcclDecisions read_nccl_log(std::string_view text);

// One line for a person: version, channels, rings and trees, the
// transports in use, the last pick and the last warning.
std::string summarize(const NcclDecisions& decisions);

// As JSON: {version, coll_channels, ..., rings: [{channel, channels,
// ranks}], trees: [...], connections: [...], picks: [...]}.
std::string to_json(const NcclDecisions& decisions);

}  // namespace ringmaster
