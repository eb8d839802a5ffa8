// Internal: the stall watcher's pieces that tests reach without a stall:
// one rank's answer as it travels through the store, and the sentence that
// names the laggards (comm/stall_watch.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringmaster/comm.h"

namespace ringmaster::comm {

// The calls a rank sends when asked (its flight recorder holds more): up
// to half of them its last ones done, the rest from its oldest one not
// done. A caller that submits many calls before it waits (as nccl-tests
// does) has dozens queued behind the stuck one.
inline constexpr std::size_t kWavefrontCalls = 8;
std::vector<CallRecord> around_frontier(std::vector<CallRecord> calls);

// One rank's answer, appended to the round's store key: a line
// "R rank last_called n" and n lines of numbers, one call each.
std::string encode_wavefront(const RankWavefront& w);
// Every answer in a round's value, in the order they came; lines that do
// not parse are skipped, and a rank that answered twice keeps its last.
std::vector<RankWavefront> decode_wavefronts(std::string_view text);

// Who lags and why, from every rank's answer (ranks in rank order, one
// entry per rank of the communicator): the report's diagnosis.
std::string diagnose(const StallReport& report);

}  // namespace ringmaster::comm
