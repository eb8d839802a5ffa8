#include "store/etcd.h"

// Boost 1.74's Beast uses std::exchange without including <utility>.
#include <utility>

#include <fmt/format.h>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <charconv>
#include <sstream>

#include "base/log.h"
#include "ringmaster/status.h"

namespace ringmaster::store {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const auto v = static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << 16 |
                   static_cast<std::uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8 |
                   static_cast<unsigned char>(in[i + 2]);
    for (int shift : {18, 12, 6, 0})
      out += kBase64[(v >> shift) & 63];
  }
  if (i < in.size()) {
    std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << 16;
    if (i + 1 < in.size()) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8;
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Returns false on a character outside the alphabet.
bool unbase64(std::string_view in, std::string& out) {
  static const auto table = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    for (int i = 0; i < 64; ++i)
      t[static_cast<unsigned char>(kBase64[i])] = i;
    return t;
  }();
  out.clear();
  std::uint32_t bits = 0;
  int count = 0;
  for (const char ch : in) {
    if (ch == '=') break;
    const int v = table[static_cast<unsigned char>(ch)];
    if (v < 0) return false;
    bits = bits << 6 | static_cast<std::uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xFF);
    }
  }
  return true;
}

// proto3's JSON writes 64-bit integers as strings and leaves out zeros.
std::int64_t int_field(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const auto& text = it->get_ref<const std::string&>();
  std::int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

}  // namespace

// One HTTP/1.1 connection to etcd, kept open between requests and opened
// again after a failure.
struct EtcdStore::Http {
  net::SocketAddress address;
  std::string where;  // "etcd at 10.0.0.5:2379"
  net::Socket socket;
  std::string unread;  // bytes received and not yet parsed

  [[noreturn]] void fail(int err, const std::string& what) {
    socket.close();
    unread.clear();
    throw Error(err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::network,
                fmt::format("{}: {}: {}", where, what, net::errno_text(err)));
  }

  // False when the deadline passed first.
  bool connect(net::Clock::time_point deadline, const std::string& why) {
    if (socket.valid()) return true;
    unread.clear();
    if (const int err = net::Socket::connect(address, deadline, socket); err != 0) {
      if (err == ETIMEDOUT) return false;
      fail(err, "connecting " + why);
    }
    socket.set_nodelay();
    return true;
  }

  void send(http::verb verb, const std::string& target, const std::string& body, net::Clock::time_point deadline) {
    if (!connect(deadline, "for " + target)) fail(ETIMEDOUT, "connecting for " + target);
    http::request<http::string_body> request{verb, target, 11};
    request.set(http::field::host, address.to_string());
    if (verb == http::verb::post) request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    std::ostringstream out;
    out << request;
    const std::string bytes = out.str();
    if (const int err = socket.send_all(bytes.data(), bytes.size(), deadline); err != 0) fail(err, "sending " + target);
  }

  // Parses what has arrived; then, until `enough` says so, waits for more.
  // False when the deadline passed first.
  template <class Parser, class Enough>
  bool read(Parser& parser, const std::string& target, net::Clock::time_point deadline, Enough enough) {
    for (;;) {
      while (!unread.empty() && !parser.is_done()) {
        boost::beast::error_code ec;
        const auto used = parser.put(boost::asio::buffer(unread), ec);
        unread.erase(0, used);
        if (ec == http::error::need_more || (used == 0 && !ec)) break;
        if (ec) {
          socket.close();
          unread.clear();
          throw Error(ErrorCategory::protocol,
                      fmt::format("{} answered {} with an unreadable HTTP response ({})", where, target, ec.message()));
        }
      }
      if (enough()) return true;
      std::array<char, 16 * 1024> chunk;
      std::size_t got = 0;
      const int err = socket.recv_some(chunk.data(), chunk.size(), deadline, got);
      if (err == ETIMEDOUT) return false;
      if (err == net::kPeerClosed) {
        boost::beast::error_code ec;
        parser.put_eof(ec);
        if (!ec && enough()) return true;
      }
      if (err != 0) fail(err, "waiting for the answer to " + target);
      unread.append(chunk.data(), got);
    }
  }

  // The whole answer to a request, as JSON; an HTTP error or etcd's own
  // {"error": ...} throws, naming the request.
  json request(http::verb verb, const std::string& target, const std::string& body, net::Clock::time_point deadline) {
    send(verb, target, body, deadline);
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    if (!read(parser, target, deadline, [&] { return parser.is_done(); })) {
      fail(ETIMEDOUT, "waiting for the answer to " + target);
    }
    const auto& response = parser.get();
    if (!response.keep_alive()) socket.close();
    json answer = json::parse(response.body(), nullptr, false);
    if (answer.is_discarded()) {
      throw Error(ErrorCategory::protocol, fmt::format("{} answered {} with HTTP {} and no JSON: '{}'", where, target,
                                                       response.result_int(), response.body().substr(0, 200)));
    }
    if (response.result() != http::status::ok || (answer.is_object() && answer.contains("error"))) {
      std::string message = answer.dump();
      if (answer.is_object() && answer.contains("message") && answer["message"].is_string()) {
        message = answer["message"].get<std::string>();
      }
      throw Error(ErrorCategory::protocol,
                  fmt::format("{} refused {} (HTTP {}): {}", where, target, response.result_int(), message));
    }
    return answer;
  }
  json post(const std::string& target, const json& body, net::Clock::time_point deadline) {
    return request(http::verb::post, target, body.dump(), deadline);
  }
};

EtcdStore::EtcdStore(net::Socket socket, EtcdEndpoint endpoint, std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)),
      timeout_(timeout),
      where_("etcd at " + endpoint_.address.to_string()),
      http_(std::make_unique<Http>()) {
  http_->address = endpoint_.address;
  http_->where = where_;
  http_->socket = std::move(socket);
  http_->socket.set_nodelay();
}

EtcdStore::~EtcdStore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
  if (lease_id_ == 0) return;
  try {
    http_->post("/v3/lease/revoke", {{"ID", std::to_string(lease_id_)}}, net::Clock::now() + 2s);
  } catch (const Error& e) {
    RM_INFO(init, "{}: the lease was not revoked ({}); its keys expire within {} s", where_, e.status().message(),
            endpoint_.lease.count());
  }
}

void EtcdStore::handshake(net::Clock::time_point deadline) {
  json version;
  try {
    version = http_->request(http::verb::get, "/version", "", deadline);
  } catch (const Error& e) {
    if (e.category() != ErrorCategory::protocol) throw;
    throw Error(ErrorCategory::protocol, e.status().message() + "; is it etcd?");
  }
  if (!version.is_object() || !version.contains("etcdserver") || !version["etcdserver"].is_string()) {
    throw Error(ErrorCategory::protocol, fmt::format("{} answered /version without etcd's version ('{}'); is it etcd?",
                                                     where_, version.dump().substr(0, 200)));
  }
  version_ = version["etcdserver"].get<std::string>();
  const json lease = http_->post("/v3/lease/grant", {{"TTL", endpoint_.lease.count()}}, deadline);
  lease_id_ = int_field(lease, "ID");
  if (lease_id_ == 0) throw Error(ErrorCategory::protocol, where_ + " granted a lease without an ID");
  keepalive_ = std::thread([this] { keep_alive(); });
}

std::string EtcdStore::handshake_detail() const {
  return fmt::format("etcd {} at {}, keys under {}, lease {} s", version_, endpoint_.address.to_string(),
                     endpoint_.prefix, endpoint_.lease.count());
}

// Every third of the lease, on a connection of its own. A failed keepalive
// is logged and tried again at the next tick; the lease lasts the whole TTL.
void EtcdStore::keep_alive() {
  Http http;
  http.address = endpoint_.address;
  http.where = where_;
  const auto period = std::max<std::chrono::milliseconds>(endpoint_.lease / 3, 500ms);
  std::unique_lock lock(mutex_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    try {
      const json answer =
          http.post("/v3/lease/keepalive", {{"ID", std::to_string(lease_id_)}}, net::Clock::now() + period);
      if (int_field(answer.value("result", json::object()), "TTL") <= 0) {
        RM_WARN(init, "{}: lease {:x} has expired; this rank's keys are gone", where_, lease_id_);
      }
    } catch (const Error& e) {
      RM_WARN(init, "{}: keeping lease {:x} alive failed: {}", where_, lease_id_, e.status().message());
    }
    lock.lock();
  }
}

EtcdStore::Kv EtcdStore::range(const std::string& full_key) {
  const json answer = http_->post("/v3/kv/range", {{"key", base64(full_key)}}, deadline());
  Kv kv;
  kv.revision = int_field(answer.value("header", json::object()), "revision");
  const auto kvs = answer.find("kvs");
  if (kvs == answer.end() || !kvs->is_array() || kvs->empty()) return kv;
  const auto& first = (*kvs)[0];
  kv.exists = true;
  kv.mod_revision = std::to_string(int_field(first, "mod_revision"));
  if (!unbase64(first.value("value", std::string()), kv.value)) {
    throw Error(ErrorCategory::protocol, where_ + " sent a value that is not base64 for key '" + full_key + "'");
  }
  return kv;
}

bool EtcdStore::put_if_unchanged(const std::string& full_key, const std::string& value, Kv& seen) {
  const std::string key = base64(full_key);
  const json compare =
      seen.exists ? json{{"key", key}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", seen.mod_revision}}
                  : json{{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}};
  const json put = {{"request_put", {{"key", key}, {"value", base64(value)}, {"lease", std::to_string(lease_id_)}}}};
  const json now = {{"request_range", {{"key", key}}}};
  const json txn = {
      {"compare", json::array({compare})}, {"success", json::array({put})}, {"failure", json::array({now})}};
  const json answer = http_->post("/v3/kv/txn", txn, deadline());
  if (answer.value("succeeded", false)) return true;
  // Someone else got there first: what the key is now.
  seen = Kv{};
  seen.revision = int_field(answer.value("header", json::object()), "revision");
  const auto& responses = answer.value("responses", json::array());
  if (responses.empty()) return false;
  const auto& ranged = responses[0].value("response_range", json::object());
  const auto kvs = ranged.find("kvs");
  if (kvs == ranged.end() || !kvs->is_array() || kvs->empty()) return false;
  seen.exists = true;
  seen.mod_revision = std::to_string(int_field((*kvs)[0], "mod_revision"));
  if (!unbase64((*kvs)[0].value("value", std::string()), seen.value)) {
    throw Error(ErrorCategory::protocol, where_ + " sent a value that is not base64 for key '" + full_key + "'");
  }
  return false;
}

void EtcdStore::set(const std::string& key, const std::string& value) {
  http_->post("/v3/kv/put",
              {{"key", base64(full(key))}, {"value", base64(value)}, {"lease", std::to_string(lease_id_)}}, deadline());
}

std::string EtcdStore::get(const std::string& key) {
  if (!wait({key}, timeout_)) {
    throw Error(ErrorCategory::timeout,
                fmt::format("key '{}' did not appear in {} within {} ms", full(key), where_, timeout_.count()));
  }
  return get_existing(key);
}

std::string EtcdStore::get_existing(const std::string& key) {
  auto kv = range(full(key));
  if (!kv.exists) throw Error(ErrorCategory::protocol, fmt::format("key '{}' is not in {}", full(key), where_));
  return kv.value;
}

std::vector<std::string> EtcdStore::get_many(const std::vector<std::string>& keys) {
  const auto until = net::Clock::now() + timeout_;
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const auto& key : keys) {
    const std::string k = full(key);
    for (;;) {
      auto kv = range(k);
      if (kv.exists) {
        values.push_back(std::move(kv.value));
        break;
      }
      if (!watch_for_put(k, kv.revision, until)) {
        throw Error(ErrorCategory::timeout,
                    fmt::format("key '{}' did not appear in {} within {} ms", k, where_, timeout_.count()));
      }
    }
  }
  return values;
}

std::string EtcdStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  const std::string k = full(key);
  auto seen = range(k);
  for (;;) {
    // torch's semantics: a missing key is created only when `expected` is
    // empty; a present one changes only when it holds `expected`.
    if (!seen.exists && !expected.empty()) return expected;
    if (seen.exists && seen.value != expected) return seen.value;
    if (put_if_unchanged(k, desired, seen)) return desired;
  }
}

std::int64_t EtcdStore::add(const std::string& key, std::int64_t delta) {
  const std::string k = full(key);
  auto seen = range(k);
  for (;;) {
    std::int64_t current = 0;
    if (seen.exists) {
      const auto& text = seen.value;
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
      if (ec != std::errc() || ptr != text.data() + text.size()) {
        throw Error(ErrorCategory::protocol,
                    fmt::format("ADD to key '{}' in {} whose value is not a decimal integer", k, where_));
      }
    }
    const auto value =
        static_cast<std::int64_t>(static_cast<std::uint64_t>(current) + static_cast<std::uint64_t>(delta));
    if (seen.exists && delta == 0) return value;
    if (put_if_unchanged(k, std::to_string(value), seen)) return value;
  }
}

void EtcdStore::append(const std::string& key, const std::string& value) {
  const std::string k = full(key);
  auto seen = range(k);
  while (!put_if_unchanged(k, seen.exists ? seen.value + value : value, seen)) {
  }
}

bool EtcdStore::check(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (!range(full(key)).exists) return false;
  }
  return true;
}

bool EtcdStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto until = net::Clock::now() + timeout;
  for (const auto& key : keys) {
    const std::string k = full(key);
    for (;;) {
      const auto kv = range(k);
      if (kv.exists) break;
      if (!watch_for_put(k, kv.revision, until)) return false;
    }
  }
  return true;
}

bool EtcdStore::watch_for_put(const std::string& full_key, std::int64_t revision, net::Clock::time_point until) {
  // A stream of JSON messages, one a line, until a PUT of the key: on a
  // connection of its own, closed afterwards (a watch's answer never ends).
  Http watch;
  watch.address = endpoint_.address;
  watch.where = where_;
  if (!watch.connect(until, "to watch '" + full_key + "'")) return false;
  const json request = {
      {"create_request", {{"key", base64(full_key)}, {"start_revision", std::to_string(revision + 1)}}}};
  watch.send(http::verb::post, "/v3/watch", request.dump(), until);
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  std::string stream;
  bool put_seen = false;
  std::string trouble;
  // The parser keeps a reference to the callback: it must outlive it.
  auto on_body = [&](std::uint64_t, boost::string_view body, boost::beast::error_code&) -> std::size_t {
    stream.append(body.data(), body.size());
    for (auto end = stream.find('\n'); end != std::string::npos; end = stream.find('\n')) {
      const json message = json::parse(stream.substr(0, end), nullptr, false);
      stream.erase(0, end + 1);
      if (!message.is_object()) continue;
      if (message.contains("error")) {
        trouble = message["error"].dump();
        continue;
      }
      const auto& result = message.value("result", json::object());
      if (result.value("canceled", false)) trouble = result.value("cancel_reason", std::string("watch canceled"));
      for (const auto& event : result.value("events", json::array())) {
        if (event.value("type", std::string("PUT")) == "PUT") put_seen = true;
      }
    }
    return body.size();
  };
  parser.on_chunk_body(on_body);
  const bool answered = watch.read(parser, "/v3/watch", until, [&] {
    if (parser.is_header_done() && parser.get().result() != http::status::ok) {
      throw Error(ErrorCategory::protocol,
                  fmt::format("{} refused to watch '{}' (HTTP {})", where_, full_key, parser.get().result_int()));
    }
    if (!trouble.empty()) {
      throw Error(ErrorCategory::protocol, fmt::format("{} ended the watch on '{}': {}", where_, full_key, trouble));
    }
    if (!put_seen && parser.is_done()) {
      throw Error(ErrorCategory::network, fmt::format("{} ended the watch on '{}' without an event", where_, full_key));
    }
    return put_seen;
  });
  return answered;
}

}  // namespace ringmaster::store
