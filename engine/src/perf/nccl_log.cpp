// NCCL's INFO lines read back into NcclDecisions (tools/nccl_log.h). Each
// form below is the format NCCL prints it with; a line that does not fit
// its form exactly is skipped rather than half read.
#include "ringmaster/tools/nccl_log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>

namespace ringmaster {
namespace {

// A cursor over one message: each take_* consumes what it read, or
// returns nothing and leaves the cursor where it was.
struct Cursor {
  std::string_view rest;

  bool take(std::string_view word) {
    if (!rest.starts_with(word)) return false;
    rest.remove_prefix(word.size());
    return true;
  }
  void skip_spaces() {
    while (!rest.empty() && rest.front() == ' ')
      rest.remove_prefix(1);
  }
  template <class T>
  std::optional<T> take_number() {
    T value{};
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc() || end == rest.data()) return std::nullopt;
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
    return value;
  }
  std::optional<int> take_int() { return take_number<int>(); }
  // Up to (not including) the next space, or the end.
  std::string_view take_word() {
    const auto end = rest.find(' ');
    const auto word = rest.substr(0, end);
    rest.remove_prefix(word.size());
    return word;
  }
};

// "Channel 00/02 : 0 1 2 3" (rank 0 prints each ring once).
bool read_ring(Cursor c, NcclDecisions& into) {
  NcclRing ring;
  if (!c.take("Channel ")) return false;
  const auto channel = c.take_int();
  if (!channel || !c.take("/")) return false;
  const auto channels = c.take_int();
  if (!channels || !c.take(" :")) return false;
  // A connection line goes on with "rank[dev] ->": not a ring.
  while (!c.rest.empty()) {
    c.skip_spaces();
    if (c.rest.empty()) break;
    const auto rank = c.take_int();
    if (!rank || (!c.rest.empty() && c.rest.front() != ' ')) return false;
    ring.ranks.push_back(*rank);
  }
  if (ring.ranks.empty()) return false;
  ring.channel = *channel;
  ring.channels = *channels;
  into.rings.push_back(std::move(ring));
  return true;
}

// "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
// "Channel 01/0 : 2[2] -> 3[3] [send] via NET/Socket/0",
// "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct".
bool read_connection(Cursor c, NcclDecisions& into) {
  NcclConnection conn;
  if (!c.take("Channel ")) return false;
  const auto channel = c.take_int();
  if (!channel) return false;
  if (c.take("/") && !c.take_int()) return false;
  if (!c.take(" : ")) return false;
  auto endpoint = [&c]() -> std::optional<int> {
    const auto rank = c.take_int();
    if (!rank || !c.take("[") || !c.take_int() || !c.take("]")) return std::nullopt;
    return rank;
  };
  const auto from = endpoint();
  if (!from || !c.take(" -> ")) return false;
  const auto to = endpoint();
  if (!to) return false;
  c.skip_spaces();
  // NET lines say which side: a connection counts once, from its sender.
  if (c.take("[receive] ")) return false;
  c.take("[send] ");
  if (!c.take("via ")) return false;
  // The rest of the line: a network's name may have spaces ("NET/AWS
  // Libfabric/0/GDRDMA").
  std::string_view transport = c.rest;
  while (!transport.empty() && transport.back() == ' ')
    transport.remove_suffix(1);
  if (transport.empty()) return false;
  conn.channel = *channel;
  conn.from = *from;
  conn.to = *to;
  conn.transport = std::string(transport);
  conn.kind = std::string(transport.substr(0, transport.find('/')));
  into.connections.push_back(std::move(conn));
  return true;
}

// "Trees [0] 1/-1/-1->0->-1 [1] 2/-1/-1->0->-1".
bool read_trees(Cursor c, NcclDecisions& into) {
  if (!c.take("Trees")) return false;
  std::vector<NcclTree> trees;
  while (!c.rest.empty()) {
    NcclTree tree;
    if (!c.take(" [")) return false;
    const auto channel = c.take_int();
    if (!channel || !c.take("] ")) return false;
    for (int i = 0; i < 3; ++i) {
      const auto child = c.take_int();
      if (!child || !c.take(i < 2 ? "/" : "->")) return false;
      if (*child >= 0) tree.children.push_back(*child);
    }
    const auto rank = c.take_int();
    if (!rank || !c.take("->")) return false;
    const auto parent = c.take_int();
    if (!parent) return false;
    tree.rank = *rank;
    tree.channel = *channel;
    tree.parent = *parent;
    trees.push_back(std::move(tree));
  }
  if (trees.empty()) return false;
  into.trees.insert(into.trees.end(), trees.begin(), trees.end());
  return true;
}

// "2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels,
// 2 p2p channels per peer".
bool read_channel_counts(Cursor c, NcclDecisions& into) {
  const auto coll = c.take_int();
  if (!coll || !c.take(" coll channels, ")) return false;
  const auto collnet = c.take_int();
  if (!collnet || !c.take(" collnet channels, ")) return false;
  const auto nvls = c.take_int();
  if (!nvls || !c.take(" nvls channels, ")) return false;
  const auto p2p = c.take_int();
  if (!p2p || !c.take(" p2p channels")) return false;
  into.coll_channels = *coll;
  into.collnet_channels = *collnet;
  into.nvls_channels = *nvls;
  into.p2p_channels = *p2p;
  return true;
}

// "AllReduce: 8 Bytes -> Algo Tree proto LL channel{Lo..Hi}={0..1}".
bool read_pick(Cursor c, NcclDecisions& into) {
  NcclPick pick;
  const auto colon = c.rest.find(": ");
  if (colon == std::string_view::npos || colon == 0) return false;
  pick.collective = std::string(c.rest.substr(0, colon));
  if (pick.collective.find(' ') != std::string::npos) return false;
  c.rest.remove_prefix(colon + 2);
  const auto bytes = c.take_number<std::uint64_t>();
  if (!bytes || !c.take(" Bytes -> Algo ")) return false;
  pick.algorithm = std::string(c.take_word());
  if (!c.take(" proto ")) return false;
  pick.protocol = std::string(c.take_word());
  if (!c.take(" channel{Lo..Hi}={")) return false;
  const auto lo = c.take_int();
  if (!lo || !c.take("..")) return false;
  const auto hi = c.take_int();
  if (!hi || !c.take("}")) return false;
  pick.bytes = *bytes;
  pick.channel_lo = *lo;
  pick.channel_hi = *hi;
  into.picks.push_back(std::move(pick));
  return true;
}

}  // namespace

bool read_nccl_line(std::string_view line, NcclDecisions& into) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
    line.remove_suffix(1);
  constexpr std::string_view kInfo = " NCCL INFO ";
  constexpr std::string_view kWarn = " NCCL WARN ";
  if (const auto warn = line.find(kWarn); warn != std::string_view::npos) {
    constexpr std::size_t kKept = 32;
    if (into.warnings.size() == kKept) into.warnings.erase(into.warnings.begin());
    into.warnings.emplace_back(line.substr(warn + kWarn.size()));
    return true;
  }
  const auto at = line.find(kInfo);
  if (at == std::string_view::npos) return false;
  ++into.lines_read;
  const Cursor message{line.substr(at + kInfo.size())};
  if (message.rest.starts_with("NCCL version ")) {
    into.version = std::string(message.rest.substr(13));
    return true;
  }
  return read_ring(message, into) || read_connection(message, into) || read_trees(message, into) ||
         read_channel_counts(message, into) || read_pick(message, into);
}

NcclDecisions read_nccl_log(std::string_view text) {
  NcclDecisions out;
  while (!text.empty()) {
    const auto end = text.find('\n');
    read_nccl_line(text.substr(0, end), out);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

std::string summarize(const NcclDecisions& d) {
  std::vector<std::string> parts;
  parts.push_back(d.version.empty() ? std::string("NCCL (no version line yet)") : "NCCL " + d.version);
  if (d.coll_channels > 0) parts.push_back(fmt::format("{} coll channels", d.coll_channels));
  if (!d.rings.empty()) parts.push_back(fmt::format("{} rings", d.rings.size()));
  if (!d.trees.empty()) parts.push_back(fmt::format("{} tree links", d.trees.size()));
  std::vector<std::string> transports;
  for (const auto& c : d.connections) {
    if (std::find(transports.begin(), transports.end(), c.transport) == transports.end())
      transports.push_back(c.transport);
  }
  if (!transports.empty()) parts.push_back(fmt::format("transports {}", fmt::join(transports, ", ")));
  if (!d.picks.empty()) {
    const auto& p = d.picks.back();
    parts.push_back(fmt::format("last pick {} {} B -> {}/{}", p.collective, p.bytes, p.algorithm, p.protocol));
  }
  std::string line = fmt::format("{}", fmt::join(parts, ", "));
  if (!d.warnings.empty()) {
    line += fmt::format("; {} warning{}, the last: {}", d.warnings.size(), d.warnings.size() == 1 ? "" : "s",
                        d.warnings.back());
  }
  return line;
}

std::string to_json(const NcclDecisions& d) {
  using nlohmann::json;
  json rings = json::array(), trees = json::array(), connections = json::array(), picks = json::array();
  for (const auto& r : d.rings)
    rings.push_back({{"channel", r.channel}, {"channels", r.channels}, {"ranks", r.ranks}});
  for (const auto& t : d.trees)
    trees.push_back({{"rank", t.rank}, {"channel", t.channel}, {"children", t.children}, {"parent", t.parent}});
  for (const auto& c : d.connections) {
    connections.push_back(
        {{"channel", c.channel}, {"from", c.from}, {"to", c.to}, {"transport", c.transport}, {"kind", c.kind}});
  }
  for (const auto& p : d.picks) {
    picks.push_back({{"collective", p.collective},
                     {"bytes", p.bytes},
                     {"algorithm", p.algorithm},
                     {"protocol", p.protocol},
                     {"channel_lo", p.channel_lo},
                     {"channel_hi", p.channel_hi}});
  }
  return json{{"version", d.version},
              {"coll_channels", d.coll_channels},
              {"collnet_channels", d.collnet_channels},
              {"nvls_channels", d.nvls_channels},
              {"p2p_channels", d.p2p_channels},
              {"rings", rings},
              {"trees", trees},
              {"connections", connections},
              {"picks", picks},
              {"warnings", d.warnings},
              {"lines_read", d.lines_read}}
      .dump();
}

}  // namespace ringmaster
