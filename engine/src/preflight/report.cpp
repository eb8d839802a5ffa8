// A preflight report's cells (the outcome of every probe between two
// nodes on one port class) and its text form: the nodes, a matrix per
// class and the findings.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "preflight/words.h"
#include "ringmaster/tools/preflight.h"

namespace ringmaster {
namespace {

using preflight_words::bytes_text;
using preflight_words::limit_text;

// Worst first: the outcome a mixed cell shows.
constexpr Reach kWorstFirst[] = {Reach::dropped,    Reach::rejected, Reach::refused, Reach::no_route,
                                 Reach::unresolved, Reach::error,    Reach::untested};
}  // namespace

Reach PreflightReport::cell(int from, int to, std::string_view port_class) const {
  bool any = false, all_ok = true;
  std::set<Reach> seen;
  for (const auto& p : probes) {
    if (p.from != from || p.to != to || p.port_class != port_class) continue;
    any = true;
    seen.insert(p.result.reach);
    all_ok = all_ok && p.result.reach == Reach::ok;
  }
  if (!any) return Reach::untested;
  if (all_ok) return Reach::ok;
  for (const Reach r : kWorstFirst) {
    if (seen.count(r) != 0) return r;
  }
  return Reach::error;
}

std::string PreflightReport::cell_text(int from, int to, std::string_view port_class) const {
  if (from == to) return "-";
  int count = 0, ok = 0;
  for (const auto& p : probes) {
    if (p.from != from || p.to != to || p.port_class != port_class) continue;
    ++count;
    ok += p.result.reach == Reach::ok ? 1 : 0;
  }
  if (count > 0 && ok > 0 && ok < count) return fmt::format("{}/{} ok", ok, count);
  return name_of(cell(from, to, port_class));
}

const char* name_of(PreflightFinding::Severity severity) noexcept {
  switch (severity) {
    case PreflightFinding::Severity::problem:
      return "problem";
    case PreflightFinding::Severity::warning:
      return "warning";
    case PreflightFinding::Severity::info:
      return "info";
  }
  return "?";
}
std::string render_preflight(const PreflightReport& report, const std::vector<PreflightFinding>& findings) {
  std::string out;
  const int n = static_cast<int>(report.nodes.size());
  out += fmt::format("preflight over {} node(s) in {:.1f} s; MASTER_ADDR {} MASTER_PORT {}\n", n, report.seconds,
                     report.master_addr.empty() ? "-" : report.master_addr, report.master_port);
  for (int i = 0; i < n; ++i) {
    const PreflightNode& node = report.nodes[static_cast<std::size_t>(i)];
    out += fmt::format("  node {:<3} {:<20} {}", i, node.name, node.address);
    if (!node.error.empty()) {
      out += "  (no part: " + node.error + ")\n";
      continue;
    }
    const NodeFacts& f = node.facts;
    out += fmt::format(
        "  ephemeral {}-{}  /dev/shm {}  nofile {}  memlock {}  conntrack {}  clock {:+.1f} ms  transports {}\n",
        f.ephemeral_lo, f.ephemeral_hi, bytes_text(f.shm_bytes), limit_text(f.nofile_soft), limit_text(f.memlock_soft),
        f.conntrack_max > 0 ? fmt::format("{}/{}", f.conntrack_count, f.conntrack_max) : std::string("-"),
        node.clock_offset_ms, fmt::join(f.transports, ","));
    if (!f.stack.empty()) {
      std::vector<std::string> parts;
      for (const auto& [component, version] : f.stack)
        parts.push_back(component + " " + (version.starts_with("not found") ? std::string("-") : version));
      out += fmt::format("            stack: {}\n", fmt::join(parts, ", "));
    }
  }
  // Words for a few nodes, one letter each beyond 8.
  const bool letters = n > 8;
  auto letter = [](const std::string& text) -> std::string {
    if (text == "-") return "-";
    if (text == "ok") return ".";
    if (text.find("ok") != std::string::npos) return "p";
    static const std::map<std::string, std::string> codes = {{"refused", "R"},  {"dropped", "D"},    {"rejected", "J"},
                                                             {"no_route", "N"}, {"unresolved", "U"}, {"error", "E"},
                                                             {"untested", "?"}};
    const auto it = codes.find(text);
    return it == codes.end() ? "E" : it->second;
  };
  const int width = letters ? 2 : 11;
  for (const auto& c : report.classes) {
    std::vector<std::uint16_t> ports;
    for (const auto& node : report.nodes) {
      for (const auto& [cls, list] : node.ports) {
        if (cls != c.name) continue;
        for (const auto& p : list) {
          if ((p.listening || p.note == "in use") && std::find(ports.begin(), ports.end(), p.port) == ports.end())
            ports.push_back(p.port);
        }
      }
    }
    std::sort(ports.begin(), ports.end());
    out += fmt::format("\n{}, ports {}; rows probe, columns answer\n", c.label,
                       ports.size() > 8 ? fmt::format("{} ... {}", ports.front(), ports.back())
                                        : fmt::format("{}", fmt::join(ports, ", ")));
    out += fmt::format("{:>8}", "");
    for (int j = 0; j < n; ++j)
      out += fmt::format("{:>{}}", letters ? std::to_string(j % 10) : "node " + std::to_string(j), width);
    out += "\n";
    for (int i = 0; i < n; ++i) {
      out += fmt::format("{:>8}", "node " + std::to_string(i));
      for (int j = 0; j < n; ++j) {
        const std::string text = report.cell_text(i, j, c.name);
        out += fmt::format("{:>{}}", letters ? letter(text) : text, width);
      }
      out += "\n";
    }
  }
  if (letters) out += "\n. ok  D dropped  R refused  J rejected  N no route  U unresolved  E error  p partly ok\n";
  out += "\n";
  if (findings.empty()) out += "no problem found\n";
  for (const auto& f : findings)
    out += fmt::format("{}: {}\n", name_of(f.severity), f.text);
  return out;
}
}  // namespace ringmaster
