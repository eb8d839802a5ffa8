// The kernel's connection-tracking table of this network namespace: how
// full it is and how many new connections it dropped for want of room.
// A full table drops every new connection it cannot track, to this host
// and from it, as silently as a firewall that drops: a rank's connect
// gets no answer at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ringmaster::net {

struct ConntrackTable {
  long long count = 0;      // entries now (net.netfilter.nf_conntrack_count)
  long long max = 0;        // room (net.netfilter.nf_conntrack_max)
  std::uint64_t drops = 0;  // packets dropped since the namespace began, for want of room

  // No room for one more entry (within 1% of the limit: entries come and go).
  bool full() const noexcept { return max > 0 && count * 100 >= max * 99; }
  // "262144 of 262144 entries, 37 new connections dropped"
  std::string describe() const;
};

// This namespace's table; nothing when connection tracking is not loaded.
std::optional<ConntrackTable> conntrack_table();

// The sum over CPUs of /proc/net/stat/nf_conntrack's "drop" column, from
// that file's text (for tests); 0 when it has none.
std::uint64_t parse_conntrack_drops(const std::string& stat_text);

// When a connection of this process got no answer: this host's table,
// its drops counted since `before` was read, when it is full or dropped
// any since; nothing when it had room and dropped nothing (or is not
// loaded).
std::optional<ConntrackTable> conntrack_pressure(const std::optional<ConntrackTable>& before);

// What a table under pressure means and what to do: the sentence to put
// first in a hint.
std::string conntrack_hint(const ConntrackTable& table);

}  // namespace ringmaster::net
