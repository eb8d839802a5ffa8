#include "net/conntrack.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace ringmaster::net {

namespace {

std::optional<long long> read_number(const char* path) {
  std::ifstream in(path);
  long long v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

}  // namespace

std::string ConntrackTable::describe() const {
  std::string text = fmt::format("{} of {} entries", count, max);
  if (drops > 0) text += fmt::format(", {} new connection(s) dropped", drops);
  return text;
}

std::uint64_t parse_conntrack_drops(const std::string& stat_text) {
  std::istringstream lines(stat_text);
  std::string header;
  if (!std::getline(lines, header)) return 0;
  std::istringstream names(header);
  std::string name;
  int column = -1;
  for (int i = 0; names >> name; ++i) {
    if (name == "drop") column = i;
  }
  if (column < 0) return 0;
  std::uint64_t sum = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string field;
    for (int i = 0; fields >> field; ++i) {
      if (i != column) continue;
      try {
        sum += std::stoull(field, nullptr, 16);  // one row a CPU, in hex
      } catch (const std::exception&) {
      }
      break;
    }
  }
  return sum;
}

std::optional<ConntrackTable> conntrack_table() {
  const auto count = read_number("/proc/sys/net/netfilter/nf_conntrack_count");
  const auto max = read_number("/proc/sys/net/netfilter/nf_conntrack_max");
  if (!count || !max) return std::nullopt;
  ConntrackTable t{.count = *count, .max = *max};
  std::ifstream stat("/proc/net/stat/nf_conntrack");
  std::ostringstream text;
  text << stat.rdbuf();
  t.drops = parse_conntrack_drops(text.str());
  return t;
}

std::optional<ConntrackTable> conntrack_pressure(const std::optional<ConntrackTable>& before) {
  auto now = conntrack_table();
  if (!now) return std::nullopt;
  if (before && now->drops >= before->drops) now->drops -= before->drops;
  if (!now->full() && (now->drops == 0 || !before)) return std::nullopt;
  return now;
}

std::string conntrack_hint(const ConntrackTable& table) {
  return fmt::format(
      "This host's connection-tracking table is full ({}): the kernel drops every new connection it has no room to "
      "track, to this host and from it, with no answer ('nf_conntrack: table full, dropping packet' in dmesg). Raise "
      "net.netfilter.nf_conntrack_max (sysctl -w net.netfilter.nf_conntrack_max={}), or find what holds the entries "
      "(conntrack -S; conntrack -L).",
      table.describe(), table.max * 4);
}

}  // namespace ringmaster::net
