// PyTorch Flight Recorder records read through torch's debug server
// (ringmaster/tools/flight_recorder.h).
#include "ringmaster/tools/flight_recorder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <sstream>

#include "net/socket.h"
#include "ringmaster/status.h"
#include "ringmaster/store.h"

namespace ringmaster {
namespace {

using nlohmann::json;

std::int64_t as_number(const json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (!v.is_string()) return -1;
  const auto& text = v.get_ref<const std::string&>();
  std::int64_t n = -1;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc() && ptr == text.data() + text.size() ? n : -1;
}

// "0 (default_pg)" from an entry's ["0", "default_pg"], or the id alone.
std::string group_name(const std::string& id, const std::string& name) {
  return name.empty() ? id : fmt::format("{} ({})", id, name);
}

// POST `path` to http://host:port with no body; the reply's body, or
// `error` says why there is none.
std::string http_post(const std::string& url, const std::string& path, std::chrono::milliseconds timeout,
                      std::string& error) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) {
    error = fmt::format("'{}' is not an http:// address", url);
    return {};
  }
  const std::string host_port = url.substr(kScheme.size());
  const auto colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      std::from_chars(host_port.data() + colon + 1, host_port.data() + host_port.size(), port).ec != std::errc() ||
      port <= 0 || port > 65535) {
    error = fmt::format("'{}' names no port", url);
    return {};
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const auto resolved = net::resolve(host, static_cast<std::uint16_t>(port));
  if (!resolved.ok()) {
    error = fmt::format("cannot resolve {}", host);
    return {};
  }
  const auto deadline = net::Clock::now() + timeout;
  net::Socket socket;
  int err = ETIMEDOUT;
  for (const auto& address : resolved.addresses) {
    if ((err = net::Socket::connect(address, deadline, socket)) == 0) break;
  }
  if (err != 0) {
    error = fmt::format("cannot connect to {}: {}", url, net::errno_text(err));
    return {};
  }
  namespace http = boost::beast::http;
  http::request<http::string_body> request{http::verb::post, path, 11};
  request.set(http::field::host, host_port);
  request.prepare_payload();
  std::ostringstream out;
  out << request;
  const std::string bytes = out.str();
  if (socket.send_all(bytes.data(), bytes.size(), deadline) != 0) {
    error = fmt::format("cannot send to {}", url);
    return {};
  }
  // Beast reads the reply (Content-Length or chunked), as the etcd store
  // does; a recorder of many thousand calls is tens of MB.
  http::response_parser<http::string_body> parser;
  parser.body_limit(256u << 20);
  std::string unread;  // received, not yet taken by the parser
  std::array<char, 64 * 1024> chunk;
  boost::beast::error_code ec;
  while (!parser.is_done()) {
    while (!unread.empty() && !parser.is_done()) {
      const auto used = parser.put(boost::asio::buffer(unread), ec);
      unread.erase(0, used);
      if (ec == http::error::need_more || (used == 0 && !ec)) {
        ec = {};
        break;
      }
      if (ec) break;
    }
    if (ec || parser.is_done()) break;
    std::size_t got = 0;
    const int rc = socket.recv_some(chunk.data(), chunk.size(), deadline, got);
    if (rc == net::kPeerClosed) {
      parser.put_eof(ec);
      if (!ec && !parser.is_done()) ec = http::error::partial_message;
      break;
    }
    if (rc != 0) {
      error = fmt::format("reading from {}: {}", url, net::errno_text(rc));
      return {};
    }
    unread.append(chunk.data(), got);
  }
  if (ec) {
    error = fmt::format("{} sent no readable HTTP reply ({})", url, ec.message());
    return {};
  }
  const auto& response = parser.get();
  if (response.result() != http::status::ok) {
    error = fmt::format("{}{} answered HTTP {}", url, path, response.result_int());
    return {};
  }
  return response.body();
}

}  // namespace

namespace {

void read_record(const json& doc, FlightRecord& record) {
  // The process groups' names, from the entries ("process_group": [id, name]).
  std::map<std::string, std::string> names;
  if (const auto it = doc.find("entries"); it != doc.end() && it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_object()) continue;
      FlightRecorderCall call;
      call.seq = as_number(e.value("collective_seq_id", json()));
      std::string id, name;
      if (const auto pg = e.find("process_group");
          pg != e.end() && pg->is_array() && pg->size() == 2 && (*pg)[0].is_string() && (*pg)[1].is_string()) {
        id = (*pg)[0].get<std::string>();
        name = (*pg)[1].get<std::string>();
        names[id] = name;
      }
      call.process_group = group_name(id, name);
      call.name = e.value("profiling_name", std::string());
      call.state = e.value("state", std::string());
      record.calls.push_back(std::move(call));
    }
  }
  if (const auto it = doc.find("pg_status"); it != doc.end() && it->is_object()) {
    for (const auto& [id, status] : it->items()) {
      if (!status.is_object()) continue;
      FlightRecorderGroup g;
      g.process_group = group_name(id, names.contains(id) ? names[id] : std::string());
      g.last_enqueued = as_number(status.value("last_enqueued_collective", json()));
      g.last_started = as_number(status.value("last_started_collective", json()));
      g.last_completed = as_number(status.value("last_completed_collective", json()));
      record.groups.push_back(std::move(g));
    }
  }
}

}  // namespace

FlightRecord parse_flight_record(int rank, const std::string& text) {
  FlightRecord record;
  record.rank = rank;
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    record.error = "the Flight Recorder's reply is not JSON";
    return record;
  }
  try {
    read_record(doc, record);
  } catch (const json::exception& e) {  // a field of another type than torch writes
    record = FlightRecord{};
    record.rank = rank;
    record.error = fmt::format("the Flight Recorder's reply is not torch's format: {}", e.what());
    return record;
  }
  if (record.groups.empty()) record.error = "the Flight Recorder's reply has no pg_status";
  return record;
}

std::vector<std::string> read_wavefront(const std::vector<FlightRecord>& ranks) {
  std::vector<std::string> out;
  // process group -> rank -> its status
  std::map<std::string, std::map<int, FlightRecorderGroup>> groups;
  std::map<std::string, std::map<std::int64_t, std::string>> call_names;  // group -> seq -> name
  std::map<std::string, std::vector<int>> unread;  // why -> the ranks without a record for that reason
  for (const auto& r : ranks) {
    if (!r.error.empty()) {
      unread[r.error].push_back(r.rank);
      continue;
    }
    for (const auto& g : r.groups)
      groups[g.process_group][r.rank] = g;
    for (const auto& c : r.calls)
      call_names[c.process_group].emplace(c.seq, c.name);
  }
  for (const auto& [why, without] : unread) {
    out.push_back(fmt::format("{} {}: no Flight Recorder record ({})", without.size() == 1 ? "rank" : "ranks",
                              fmt::join(without, ", "), why));
  }
  auto call = [&](const std::string& group, std::int64_t seq) {
    const auto& names = call_names[group];
    const auto it = names.find(seq);
    return it == names.end() || it->second.empty() ? fmt::format("collective #{}", seq)
                                                   : fmt::format("{} #{}", it->second, seq);
  };
  for (const auto& [group, by_rank] : groups) {
    std::int64_t front = -1;
    for (const auto& [rank, g] : by_rank)
      front = std::max(front, g.last_enqueued);
    if (front < 0) continue;
    std::vector<int> entered, behind, in_it;
    for (const auto& [rank, g] : by_rank) {
      (g.last_enqueued == front ? entered : behind).push_back(rank);
      if (g.last_enqueued == front && g.last_completed < front) in_it.push_back(rank);
    }
    for (int rank : behind) {
      const auto& g = by_rank.at(rank);
      out.push_back(fmt::format("process group {}: rank {} has not called {} ({} {} {}); its last call was {}, {}",
                                group, rank, call(group, front), entered.size() == 1 ? "rank" : "ranks",
                                fmt::join(entered, ", "), entered.size() == 1 ? "has" : "have",
                                g.last_enqueued < 0 ? std::string("none") : call(group, g.last_enqueued),
                                g.last_completed == g.last_enqueued ? "completed" : "not completed"));
    }
    if (behind.empty() && !in_it.empty()) {
      out.push_back(fmt::format("process group {}: every rank called {}; ranks {} have not completed it", group,
                                call(group, front), fmt::join(in_it, ", ")));
    } else if (behind.empty()) {
      out.push_back(
          fmt::format("process group {}: every rank completed {}; no rank is behind", group, call(group, front)));
    }
  }
  return out;
}

std::vector<FlightRecord> fetch_flight_records(const std::string& master_addr, int master_port, int world_size,
                                               std::chrono::milliseconds timeout) {
  std::vector<FlightRecord> out;
  std::vector<std::string> addresses(static_cast<std::size_t>(std::max(world_size, 0)));
  std::string store_error;
  try {
    TcpStoreClient store(master_addr, static_cast<std::uint16_t>(master_port), timeout);
    for (int r = 0; r < world_size; ++r) {
      // torch's TCPStore client puts "/" before every key it sends, and
      // the debug server's PrefixStore "debug_server/" before its own.
      const std::string key = fmt::format("/debug_server/rank{}", r);
      if (store.check({key})) addresses[static_cast<std::size_t>(r)] = store.get(key);
    }
  } catch (const Error& e) {
    store_error = fmt::format("the job's store at {}:{}: {}", master_addr, master_port, e.what());
  }
  for (int r = 0; r < world_size; ++r) {
    FlightRecord record;
    record.rank = r;
    const auto& url = addresses[static_cast<std::size_t>(r)];
    if (!store_error.empty()) {
      record.error = store_error;
    } else if (url.empty()) {
      record.error =
          "it published no debug server (the job did not call "
          "torch.distributed.debug.start_debug_server, or has not yet)";
    } else {
      std::string error;
      const std::string body = http_post(url, "/handler/fr_trace_json", timeout, error);
      record = error.empty() ? parse_flight_record(r, body) : record;
      if (!error.empty()) record.error = error;
    }
    record.source = url;
    out.push_back(std::move(record));
  }
  return out;
}

}  // namespace ringmaster
