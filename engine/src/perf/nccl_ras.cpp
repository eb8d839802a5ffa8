// NCCL's RAS port, asked and read (ringmaster/tools/nccl_ras.h).
#include "ringmaster/tools/nccl_ras.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <set>
#include <sstream>

#include "net/socket.h"

namespace ringmaster {
namespace {

using nlohmann::json;

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), text.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return std::string(s);
}

RasRank rank_of(const json& r, bool missing) {
  RasRank out;
  out.missing = missing;
  out.rank = r.value("rank", -1);
  out.host = r.value("host", "");
  out.pid = r.value("pid", 0LL);
  out.cuda_dev = r.value("cuda_dev", -1);
  if (const auto status = r.find("status"); status != r.end() && status->is_object()) {
    out.init_state = status->value("init_state", 0);
    out.async_error = status->value("async_error", 0);
    out.unresponsive = status->value("unresponsive", false);
    out.dead = status->value("considered_dead", false);
  }
  if (const auto counts = r.find("collective_counts"); counts != r.end() && counts->is_object()) {
    for (const auto& [name, n] : counts->items()) {
      if (n.is_number_integer()) out.collective_counts[name] = n.get<long long>();
    }
  }
  return out;
}

// "rank 1 (pid 1524345 on 172.16.64.245, GPU 1)"
std::string who(const RasRank& r) {
  return fmt::format("rank {} (pid {} on {}{})", r.rank, r.pid, r.host.empty() ? "?" : r.host,
                     r.cuda_dev >= 0 ? fmt::format(", GPU {}", r.cuda_dev) : std::string());
}

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

// Per collective, the ranks behind the furthest of the communicator.
void read_counts(const RasCommunicator& c, std::vector<std::string>& out) {
  std::set<std::string> names;
  for (const auto& r : c.ranks)
    for (const auto& [name, _] : r.collective_counts)
      names.insert(name);
  for (const auto& name : names) {
    long long furthest = -1;
    for (const auto& r : c.ranks) {
      if (const auto it = r.collective_counts.find(name); it != r.collective_counts.end())
        furthest = std::max(furthest, it->second);
    }
    std::map<long long, std::vector<int>> behind;  // count -> ranks
    for (const auto& r : c.ranks) {
      const auto it = r.collective_counts.find(name);
      if (it != r.collective_counts.end() && it->second < furthest) behind[it->second].push_back(r.rank);
    }
    for (const auto& [count, ranks] : behind) {
      out.push_back(fmt::format("communicator {}: {} {} launched {} {}, the furthest {}", c.hash, ranks_text(ranks),
                                ranks.size() == 1 ? "has" : "have", count, name, furthest));
    }
  }
}

// The blocks of a text report's section ("Errors", "Warnings"): a line
// that is not indented starts one, indented lines belong to it.
std::vector<std::string> section_blocks(const std::vector<std::string>& lines, std::size_t from) {
  std::vector<std::string> blocks;
  for (std::size_t i = from; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty()) continue;
    // The next section: a title underlined with '='.
    if (i + 1 < lines.size() && !lines[i + 1].empty() && lines[i + 1].find_first_not_of('=') == std::string::npos)
      break;
    if (!std::isspace(static_cast<unsigned char>(line[0]))) {
      blocks.push_back(trimmed(line));
    } else if (!blocks.empty()) {
      blocks.back() += (blocks.back().find(':') == std::string::npos ? ": " : "; ") + trimmed(line);
    }
  }
  return blocks;
}

}  // namespace

RasStatus parse_ras_json(std::string_view text) {
  RasStatus s;
  s.format = "json";
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    s.error = "NCCL's RAS answered something that is not a JSON object";
    return s;
  }
  try {
    s.nccl_version = doc.value("nccl_version", "");
    if (const auto ras = doc.find("ras"); ras != doc.end() && ras->is_object()) {
      s.collection_time_s = ras->value("collection_time_sec", 0.0);
      s.timeouts = ras->value("timeouts_count", 0);
    }
    for (const auto& c : doc.value("communicators", json::array())) {
      RasCommunicator comm;
      comm.hash = c.value("hash", "");
      comm.size = c.value("size", 0);
      for (const auto& r : c.value("ranks", json::array()))
        comm.ranks.push_back(rank_of(r, false));
      for (const auto& r : c.value("missing_ranks", json::array()))
        comm.ranks.push_back(rank_of(r, true));
      s.communicators.push_back(std::move(comm));
    }
  } catch (const json::exception& e) {
    s.error = fmt::format("NCCL's RAS JSON has a field of the wrong type (JSON error {})", e.id);
  }
  return s;
}

RasStatus parse_ras_text(std::string_view text) {
  RasStatus s;
  s.format = "text";
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const std::string title = trimmed(lines[i]);
    const bool underlined = !lines[i + 1].empty() && lines[i + 1].find_first_not_of('=') == std::string::npos;
    if (!underlined) continue;
    if (title == "Errors") s.errors = section_blocks(lines, i + 2);
    if (title == "Warnings") s.warnings = section_blocks(lines, i + 2);
  }
  if (std::none_of(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("Job summary"); }) &&
      s.errors.empty() && s.warnings.empty()) {
    s.error = "NCCL's RAS answered no job summary";
  }
  return s;
}

std::vector<std::string> read_ras(const RasStatus& status) {
  std::vector<std::string> out;
  if (!status.error.empty()) return {status.error};
  for (const auto& c : status.communicators) {
    for (const auto& r : c.ranks) {
      if (r.dead) {
        out.push_back(
            fmt::format("communicator {}: {} is considered dead (unreachable over RAS for 60 s)", c.hash, who(r)));
      } else if (r.missing) {
        out.push_back(fmt::format("communicator {}: {} is missing{}", c.hash, who(r),
                                  r.unresponsive ? ": unresponsive (RAS could not reach it)" : ""));
      } else if (r.init_state == 7) {
        out.push_back(fmt::format("communicator {}: {} is still initialising", c.hash, who(r)));
      } else if (r.init_state != 0) {
        out.push_back(fmt::format("communicator {}: {} failed its init (ncclResult {})", c.hash, who(r), r.init_state));
      }
      if (!r.missing && r.async_error != 0)
        out.push_back(fmt::format("communicator {}: {} has an asynchronous error (ncclResult {})", c.hash, who(r),
                                  r.async_error));
    }
    read_counts(c, out);
  }
  for (const auto& e : status.errors)
    out.push_back("RAS error: " + e);
  for (const auto& w : status.warnings)
    out.push_back("RAS warning: " + w);
  if (status.timeouts > 0)
    out.push_back(fmt::format("RAS met {} communication timeout{} gathering the data", status.timeouts,
                              status.timeouts == 1 ? "" : "s"));
  return out;
}

std::pair<std::string, int> ras_address(std::string_view addr) {
  std::string_view host = addr, port_text;
  if (addr.starts_with('[')) {
    const auto close = addr.find(']');
    host = addr.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1);
    if (close != std::string_view::npos && close + 1 < addr.size() && addr[close + 1] == ':')
      port_text = addr.substr(close + 2);
  } else if (const auto colon = addr.rfind(':'); colon != std::string_view::npos && addr.find(':') == colon) {
    host = addr.substr(0, colon);
    port_text = addr.substr(colon + 1);
  }
  int port = 28028;
  if (!port_text.empty() &&
      (std::from_chars(port_text.data(), port_text.data() + port_text.size(), port).ec != std::errc() || port <= 0 ||
       port > 65535))
    port = 28028;
  return {host.empty() ? std::string("localhost") : std::string(host), port};
}

RasStatus query_ras(const std::string& host, int port, std::chrono::milliseconds timeout) {
  RasStatus failed;
  const std::string where = fmt::format("NCCL's RAS port {}:{}", host, port);
  auto fail = [&](const std::string& why) {
    failed.error = why;
    return failed;
  };
  const auto resolved = net::resolve(host, static_cast<std::uint16_t>(port));
  if (!resolved.ok()) return fail(fmt::format("cannot resolve {} for {}", host, where));
  const auto deadline = net::Clock::now() + timeout;
  net::Socket socket;
  int err = ETIMEDOUT;
  for (const auto& address : resolved.addresses) {
    if ((err = net::Socket::connect(address, deadline, socket)) == 0) break;
  }
  if (err != 0) {
    return fail(
        fmt::format("cannot connect to {}: {} (RAS runs in NCCL 2.24 and later unless NCCL_RAS_ENABLE=0; "
                    "NCCL_RAS_ADDR moves it)",
                    where, net::errno_text(err)));
  }
  std::string received;
  // One line of the server's, at most 4 KiB.
  auto line = [&](std::string& out) -> bool {
    std::array<char, 4096> chunk;
    for (;;) {
      if (const auto nl = received.find('\n'); nl != std::string::npos) {
        out = received.substr(0, nl);
        received.erase(0, nl + 1);
        return true;
      }
      if (received.size() > 4096) return false;
      std::size_t got = 0;
      if (socket.recv_some(chunk.data(), chunk.size(), deadline, got) != 0) return false;
      received.append(chunk.data(), got);
    }
  };
  auto say = [&](const std::string& command) { return socket.send_all(command.data(), command.size(), deadline) == 0; };
  std::string answer;
  if (!say("CLIENT PROTOCOL 2\n") || !line(answer)) return fail(fmt::format("{} did not answer", where));
  if (!starts_with_nocase(answer, "SERVER PROTOCOL "))
    return fail(fmt::format("{} is not NCCL's RAS: it answered '{}'", where, trimmed(answer).substr(0, 80)));
  const auto seconds = std::max<long long>(1, std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
  if (!say(fmt::format("TIMEOUT {}\n", seconds)) || !line(answer)) return fail(fmt::format("{} went away", where));
  // JSON from NCCL 2.28.7 on; an older NCCL answers "ERROR: Unknown
  // command" and keeps the connection.
  if (!say("SET FORMAT json\n") || !line(answer)) return fail(fmt::format("{} went away", where));
  const bool json_format = starts_with_nocase(answer, "OK");
  if (!say("VERBOSE STATUS\n")) return fail(fmt::format("{} went away", where));
  std::array<char, 65536> chunk;
  for (;;) {
    std::size_t got = 0;
    const int rc = socket.recv_some(chunk.data(), chunk.size(), deadline, got);
    if (rc == net::kPeerClosed) break;
    if (rc != 0) return fail(fmt::format("reading {}: {}", where, net::errno_text(rc)));
    received.append(chunk.data(), got);
    if (received.size() > (64u << 20)) return fail(fmt::format("{} sent over 64 MiB", where));
  }
  return json_format ? parse_ras_json(received) : parse_ras_text(received);
}

}  // namespace ringmaster
