// render_certify_html(): the certification report as one self-contained
// HTML page (no script, no file or network reference): the verdict, the
// steps, every node and the links found wanting, the link check's matrix
// and each sweep's bus bandwidth by size against its envelope, drawn as
// inline SVG.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ringmaster/agent/certify.h"

namespace ringmaster::agent {
namespace {

using nlohmann::json;

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A member that is an array, or an empty one: a reference into `j`, so
// what is taken from it outlives the call.
const json& array_of(const json& j, const char* key) {
  static const json kNone = json::array();
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : kNone;
}

std::string text_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "1 MiB", "8 MiB", "1 GiB", else bytes.
std::string size_text(double bytes) {
  const auto b = static_cast<std::uint64_t>(bytes);
  if (b >= (1ULL << 30) && b % (1ULL << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (1ULL << 20) && b % (1ULL << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

std::string verdict_cell(const std::string& verdict) {
  return fmt::format("<td class=\"v {}\">{}</td>",
                     verdict == "ISOLATE"   ? "isolate"
                     : verdict == "MONITOR" ? "monitor"
                                            : "pass",
                     escape(verdict));
}

std::string reasons_list(const json& reasons) {
  if (!reasons.is_array() || reasons.empty()) return "";
  std::string out = "<ul>";
  for (const auto& r : reasons)
    out += fmt::format("<li><b>{}</b> ({}): {}</li>", escape(text_of(r, "verdict")), escape(text_of(r, "step")),
                       escape(text_of(r, "text")));
  return out + "</ul>";
}

std::string steps_section(const json& report) {
  std::string out = "<h2>Steps</h2><table><tr><th>#</th><th>Step</th><th>Result</th><th>What it found</th></tr>";
  int i = 0;
  for (const auto& s : array_of(report, "steps")) {
    std::string findings;
    for (const auto& f : s.value("findings", json::array()))
      findings += "<li>" + escape(f.is_string() ? f.get<std::string>() : f.dump()) + "</li>";
    out += fmt::format("<tr><td>{}</td><td>{}<br><small>{}</small></td><td class=\"s {}\">{}</td><td>{}{}</td></tr>",
                       ++i, escape(text_of(s, "name")), escape(text_of(s, "title")), escape(text_of(s, "state")),
                       escape(text_of(s, "state")), escape(text_of(s, "summary")),
                       findings.empty() ? "" : "<ul>" + findings + "</ul>");
  }
  return out + "</table>";
}

std::string nodes_section(const json& report) {
  std::string out =
      "<h2>Nodes</h2><table><tr><th>Node</th><th>Address</th><th>Host</th><th>Verdict</th><th>Why</th></tr>";
  for (const auto& n : report.value("nodes", json::array()))
    out += fmt::format("<tr><td>node {}</td><td>{}</td><td>{}</td>{}<td>{}</td></tr>", n.value("node", 0),
                       escape(text_of(n, "address")), escape(text_of(n, "hostname")),
                       verdict_cell(text_of(n, "verdict")), reasons_list(n.value("reasons", json::array())));
  out += "</table><h2>Links found wanting</h2>";
  const json links = report.value("links", json::array());
  if (links.empty()) return out + "<p>None: every link measured passed.</p>";
  out += "<table><tr><th>Link</th><th>Verdict</th><th>Why</th></tr>";
  for (const auto& l : links)
    out += fmt::format("<tr><td>node {} &rarr; node {}</td>{}<td>{}</td></tr>", l.value("from", 0), l.value("to", 0),
                       verdict_cell(text_of(l, "verdict")), reasons_list(l.value("reasons", json::array())));
  return out + "</table>";
}

// The link check's matrix in MB/s, each cell shaded by its share of the
// median link.
std::string matrix_section(const json& linkcheck) {
  const json nodes = linkcheck.value("nodes", json::array());
  const json links = linkcheck.value("links", json::array());
  if (nodes.empty() || links.empty()) return "";
  std::vector<double> rates;
  for (const auto& l : links) {
    if (l.value("gbs", 0.0) > 0) rates.push_back(l.value("gbs", 0.0));
  }
  std::sort(rates.begin(), rates.end());
  const double median = rates.empty() ? 0 : rates[rates.size() / 2];
  std::string out =
      "<h2>Link check</h2><p>MB/s measured at the receiver (rows send, columns receive).</p><table "
      "class=\"m\"><tr><th></th>";
  for (std::size_t j = 0; j < nodes.size(); ++j)
    out += fmt::format("<th>node {}</th>", j);
  out += "</tr>";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    out += fmt::format("<tr><th>node {}<br><small>{}</small></th>", i,
                       escape(nodes[i].is_string() ? nodes[i].get<std::string>() : ""));
    for (std::size_t j = 0; j < nodes.size(); ++j) {
      if (i == j) {
        out += "<td>-</td>";
        continue;
      }
      const auto l = std::find_if(links.begin(), links.end(), [&](const json& x) {
        return x.value("from", -1) == static_cast<int>(i) && x.value("to", -1) == static_cast<int>(j);
      });
      const double gbs = l == links.end() ? 0 : l->value("gbs", 0.0);
      const bool ahead = l != links.end() && l->value("ahead", false);
      const char* shade = ahead || (median > 0 && gbs >= median / 2) ? "pass"
                          : gbs >= median / 5                        ? "monitor"
                                                                     : "isolate";
      out += fmt::format("<td class=\"v {}\">{}</td>", shade,
                         ahead     ? std::string("ahead")
                         : gbs > 0 ? fmt::format("{:.0f}", gbs * 1000)
                                   : "failed");
    }
    out += "</tr>";
  }
  return out + "</table>";
}

// One sweep's busbw by size (log scale of sizes), with the envelope's
// prediction and least at its largest size where there is one.
std::string sweep_plot(const json& sweep, const json* envelope) {
  const json rows = sweep.value("rows", json::array());
  if (rows.empty()) return "";
  constexpr double kW = 520, kH = 220, kLeft = 60, kBottom = 30, kTop = 20, kRight = 20;
  double most = 0;
  double lo = 1e300, hi = 0;
  for (const auto& r : rows) {
    most = std::max(most, r.value("busbw", 0.0));
    const double b = std::log2(std::max(1.0, r.value("bytes", 1.0)));
    lo = std::min(lo, b);
    hi = std::max(hi, b);
  }
  if (envelope != nullptr) most = std::max(most, envelope->value("predicted_busbw", 0.0));
  most = most > 0 ? most * 1.1 : 1;
  const auto x = [&](double bytes) {
    const double b = std::log2(std::max(1.0, bytes));
    return kLeft + (hi > lo ? (b - lo) / (hi - lo) : 0.5) * (kW - kLeft - kRight);
  };
  const auto y = [&](double gbs) { return kH - kBottom - gbs / most * (kH - kBottom - kTop); };
  std::string points;
  std::string dots;
  for (const auto& r : rows) {
    points += fmt::format("{:.1f},{:.1f} ", x(r.value("bytes", 1.0)), y(r.value("busbw", 0.0)));
    dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#1f6feb\"/>", x(r.value("bytes", 1.0)),
                        y(r.value("busbw", 0.0)));
  }
  std::string out = fmt::format(
      "<figure><figcaption>{} busbw (GB/s) by size</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{}\" height=\"{}\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>"
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>"
      "<text x=\"4\" y=\"{}\" font-size=\"11\">{:.3g}</text><text x=\"4\" y=\"{}\" font-size=\"11\">0</text>"
      "<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text><text x=\"{}\" y=\"{}\" font-size=\"11\" "
      "text-anchor=\"end\">{}</text><polyline fill=\"none\" stroke=\"#1f6feb\" stroke-width=\"2\" points=\"{}\"/>{}",
      escape(text_of(sweep, "collective")), kW, kH, kLeft, kTop, kLeft, kH - kBottom, kLeft, kH - kBottom, kW - kRight,
      kH - kBottom, kTop + 4, most, kH - kBottom, kLeft, kH - 8, size_text(rows.front().value("bytes", 0.0)),
      kW - kRight, kH - 8, size_text(rows.back().value("bytes", 0.0)), points, dots);
  if (envelope != nullptr) {
    const double at = x(envelope->value("bytes", 1.0));
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"{:.1f}\" fill=\"#2da44e\" fill-opacity=\"0.3\"/>"
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#2da44e\"/><text x=\"{:.1f}\" y=\"{:.1f}\" "
        "font-size=\"11\" text-anchor=\"end\">expected {:.3g}</text>",
        at - 5, y(envelope->value("predicted_busbw", 0.0)),
        std::max(1.0, y(envelope->value("least_busbw", 0.0)) - y(envelope->value("predicted_busbw", 0.0))), at,
        y(envelope->value("predicted_busbw", 0.0)), at - 8, y(envelope->value("predicted_busbw", 0.0)) - 6,
        envelope->value("predicted_busbw", 0.0));
  }
  return out + "</svg></figure>";
}

std::string sweeps_section(const json& report) {
  const json* sweeps = nullptr;
  const json* envelope = nullptr;
  for (const auto& s : array_of(report, "steps")) {
    if (text_of(s, "name") == "sweeps" && s.contains("detail") && s["detail"].is_array()) sweeps = &s["detail"];
    if (text_of(s, "name") == "envelope" && s.contains("detail") && s["detail"].is_array()) envelope = &s["detail"];
  }
  if (sweeps == nullptr || sweeps->empty()) return "";
  std::string out =
      "<h2>Collective sweeps</h2><p>Measured busbw (blue) and, with a declared instance type, the "
      "envelope's prediction at the largest size (green; the band down to the least it allows).</p>";
  for (const auto& sweep : *sweeps) {
    const json* e = nullptr;
    if (envelope != nullptr) {
      for (const auto& x : *envelope) {
        if (text_of(x, "collective") == text_of(sweep, "collective")) e = &x;
      }
    }
    out += sweep_plot(sweep, e);
    if (!text_of(sweep, "error").empty()) out += "<p class=\"err\">" + escape(text_of(sweep, "error")) + "</p>";
  }
  return out;
}

}  // namespace

std::string render_certify_html(const nlohmann::json& report) {
  const json* linkcheck = nullptr;
  for (const auto& s : array_of(report, "steps")) {
    if (text_of(s, "name") == "linkcheck" && s.contains("detail") && s["detail"].is_object()) linkcheck = &s["detail"];
  }
  const std::string verdict = text_of(report, "verdict");
  std::string out = fmt::format(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Ringmaster certification: {}</title>"
      "<style>body{{font-family:sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse;margin:0.5em 0}}"
      "td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}}"
      ".pass{{background:#dafbe1}}.monitor{{background:#fff8c5}}.isolate{{background:#ffebe9}}"
      ".s.passed{{background:#dafbe1}}.s.found{{background:#fff8c5}}.s.failed{{background:#ffebe9}}"
      ".m td{{text-align:right}}.verdict{{font-size:1.4em;padding:0.4em 0.8em;display:inline-block}}"
      "ul{{margin:0;padding-left:1.2em}}.err{{color:#b00}}figure{{margin:1em 0}}</style></head><body>"
      "<h1>Ringmaster certification</h1><p class=\"verdict {}\">{}: {} node(s) in {:.1f} s{}</p>",
      escape(verdict),
      verdict == "ISOLATE"   ? "isolate"
      : verdict == "MONITOR" ? "monitor"
                             : "pass",
      escape(verdict), report.value("nodes", json::array()).size(), report.value("seconds", 0.0),
      report.value("short_of_envelope", false) ? "; a sweep fell short of what these nodes should reach" : "");
  out += steps_section(report);
  out += nodes_section(report);
  if (linkcheck != nullptr) out += matrix_section(*linkcheck);
  out += sweeps_section(report);
  out += fmt::format("<p><small>Report schema {}.</small></p></body></html>\n", escape(text_of(report, "schema")));
  return out;
}

}  // namespace ringmaster::agent
