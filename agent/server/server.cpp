// AgentServer: one Asio thread; a coroutine per client session; a
// heartbeat timer; RunManager for the ranks.
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <set>

#include "faults.h"
#include "http_endpoints.h"
#include "listener.h"
#include "metrics.h"
#include "nic_counters.h"
#include "preflight_service.h"
#include "ringmaster/agent/log.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/server.h"
#include "ringmaster/comm.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/gpus.h"
#include "ringmaster/tools/preflight.h"
#include "ringmaster/tools/topology.h"
#include "run_env.h"
#include "runs.h"
#include "self_signed.h"
#include "spawn.h"

extern char** environ;

namespace ringmaster::agent {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// What this host's ranks can use, from the engine's own checks, in the
// order the engine prefers them: "shm", "ofi", "socket".
std::string lower(std::string text) {
  for (char& c : text)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The transports usable here and why each other one is not, from one
// look at the host.
void read_transports(Inventory& inv) {
  for (const auto& t : transport_availability()) {
    if (t.usable) {
      inv.transports.push_back(lower(t.name));
    } else {
      inv.transports_unusable.push_back({lower(t.name), t.why});
    }
  }
}

// The software the ranks load here, read at the first inventory: a
// library or driver upgraded under a running agent is the agent's restart.
const std::vector<std::pair<std::string, std::string>>& software_stack() {
  static const auto stack = read_software_stack();
  return stack;
}

std::vector<InterfaceAddress> interfaces() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6)) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ifa_addr->sa_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr);
    ::inet_ntop(a->ifa_addr->sa_family, raw, text, sizeof(text));
    // The link's negotiated speed in Mb/s, 0 when the device has none
    // (loopback, a tunnel, a link that is down).
    int speed_mbps = 0;
    if (std::ifstream in(std::string("/sys/class/net/") + a->ifa_name + "/speed"); in) {
      if (!(in >> speed_mbps) || speed_mbps < 0) speed_mbps = 0;
    }
    out.push_back({a->ifa_name, a->ifa_addr->sa_family == AF_INET ? "inet" : "inet6", text,
                   (a->ifa_flags & IFF_UP) != 0, (a->ifa_flags & IFF_LOOPBACK) != 0, speed_mbps});
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace

class Session;

struct AgentServer::Impl {
  AgentOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::unique_ptr<asio::ssl::context> tls;  // when --tls-cert/--tls-key
  asio::steady_timer heartbeat{io};
  Metrics metrics;
  std::size_t queued_bytes = 0;  // unsent to all clients (AgentOptions::max_queued_bytes_total)
  std::set<std::shared_ptr<Session>> sessions;
  std::unique_ptr<FaultManager> faults;
  std::unique_ptr<RunManager> runs;
  std::unique_ptr<PreflightService> preflight;
  std::optional<TopologyInfo> topology;  // read once at start
  json gpus;                             // the NVML inventory (tools/gpus.h), read once at start
  std::string topology_summary;
  std::string hostname;
  Clock::time_point started = Clock::now();
  // Per client address after a wrong HMAC: its next wrong HMACs are
  // answered only after a delay that doubles from 100 ms with each failure
  // up to 10 s (reset by a right one), with at most kMaxHeldPerAddress
  // such connections held at once (past them a wrong HMAC closes the
  // connection without an answer). A right HMAC is always taken at once,
  // so a failing client never locks out another one on its address (a
  // NAT, a port-forward, loopback); the token's 16 bytes or more are what
  // stop guessing, the delay bounds what a failing client costs.
  struct Backoff {
    int failures = 0;
    int held = 0;  // connections waiting for their failure's answer
    Clock::time_point last;
  };
  static constexpr int kMaxHeldPerAddress = 8;
  std::map<std::string, Backoff> auth_backoff;
  std::uint64_t evicted = 0;
  std::uint64_t expired = 0;  // connections past the auth deadline, likewise  // unauthenticated connections closed for
                              // newer ones, logged once a heartbeat
  std::chrono::milliseconds accept_pause{0};
  // A wrong HMAC from `ip`: how long to hold its answer, or nullopt when
  // the address already has kMaxHeldPerAddress held (close at once).
  std::optional<std::chrono::milliseconds> auth_failed(const std::string& ip);
  void auth_answered(const std::string& ip);
  // Whether a client whose token has `roles` may take an authenticated
  // place (AgentOptions::max_connections): a reason when it may not. A
  // client that may run or inject faults takes the place of the read-only
  // connection heard from least recently when every place is taken.
  std::optional<std::string> admit(unsigned roles);

  Inventory inventory() const;
  void broadcast(const events::EventMessage& event);
  awaitable<void> accept_loop();
  awaitable<void> heartbeat_loop();
  std::unique_ptr<HttpEndpoints> http;  // --metrics: /metrics, /healthz, /readyz
  bool stopping = false;
  // Ready for clients: listening, the inventory taken (before the loop
  // runs), accepting (not paused out of descriptors) and not stopping.
  bool ready() const { return !stopping && acceptor.is_open() && accept_pause.count() == 0 && topology.has_value(); }
  void shutdown();
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  ~Session() { set_queued(0); }
  Session(tcp::socket socket, AgentServer::Impl& server) : socket_(std::move(socket)), server_(server) {
    boost::system::error_code ec;
    const auto remote = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : fmt::format("{}:{}", remote.address().to_string(), remote.port());
    peer_ip_ = ec ? std::string("?") : remote.address().to_string();
    socket_.set_option(tcp::no_delay(true), ec);
    if (server_.tls) tls_ = std::make_unique<asio::ssl::stream<tcp::socket&>>(socket_, *server_.tls);
    last_heard_us_ = connected_us_ = steady_us();
  }

  awaitable<void> run(std::shared_ptr<Session> self) {
    if (tls_) {
      boost::system::error_code ec;
      co_await tls_->async_handshake(asio::ssl::stream_base::server, asio::redirect_error(use_awaitable, ec));
      if (ec) {
        log::warn_from(peer_ip_, "TLS handshake with {} failed: {}", peer_, ec.message());
        drop("TLS handshake failed");
        server_.sessions.erase(self);
        co_return;
      }
    }
    nonce_ = random_nonce();
    send({{"type", "hello"},
          {"agent", "ringmaster-agent"},
          {"version", kAgentVersion},
          {"protocol", kProtocolVersion},
          {"host", server_.hostname},
          {"nonce", nonce_},
          {"auth", "hmac-sha256"}});
    // Until it authenticates a client may send `auth` only, in small frames.
    FrameDecoder decoder(authed_ ? kMaxFrameBytes : kMaxPreAuthFrameBytes);
    std::array<char, 64 * 1024> buffer;
    try {
      for (;;) {
        boost::system::error_code ec;
        const std::size_t n =
            tls_ ? co_await tls_->async_read_some(asio::buffer(buffer), asio::redirect_error(use_awaitable, ec))
                 : co_await socket_.async_read_some(asio::buffer(buffer), asio::redirect_error(use_awaitable, ec));
        if (ec) {
          if (decoder.pending() > 0 && socket_.is_open()) {
            fatal(std::nullopt, "truncated frame: the connection ended after " + decoder.truncation());
          }
          break;
        }
        last_heard_us_ = steady_us();
        decoder.feed(buffer.data(), n);
        while (auto message = decoder.next()) {
          handle(std::move(*message));
          if (authed_) decoder.set_max_frame_bytes(kMaxFrameBytes);
          if (closing_) break;
        }
        if (closing_) break;
      }
    } catch (const Error& e) {
      fatal(std::nullopt, e.status().message());
    }
    if (held_failure_) {
      asio::steady_timer hold(socket_.get_executor(), *held_failure_);
      boost::system::error_code ec;
      co_await hold.async_wait(asio::redirect_error(use_awaitable, ec));
      server_.auth_answered(peer_ip_);
      if (socket_.is_open())
        fatal(held_re_, "authentication failed: wrong HMAC-SHA256 of the nonce for this agent's token");
    }
    close_after_writes();
    server_.sessions.erase(self);
  }

  void send(json message) {
    if (overflowed_) return;
    message["id"] = next_id_++;
    message["v"] = kProtocolVersion;
    std::string frame;
    try {
      frame = encode_frame(message);
    } catch (const Error& e) {
      log::warn("a message to {} was not sent: {}", peer_, e.status().message());
      return;
    } catch (const std::exception& e) {
      log::warn("a message to {} was not sent: {}", peer_, e.what());
      return;
    }
    // A client that does not read what it is sent holds at most this much
    // of the agent's memory, and all of them together at most the total;
    // past either the connection is closed.
    const bool own = queued_bytes_ + frame.size() > server_.options.max_client_queue_bytes;
    if (own || server_.queued_bytes + frame.size() > server_.options.max_queued_bytes_total) {
      overflowed_ = true;
      if (own) {
        log::warn_from(peer_ip_, "closing {}: it reads too slowly ({} bytes waiting to be sent, the cap is {})", peer_,
                       queued_bytes_, server_.options.max_client_queue_bytes);
      } else {
        log::warn_from(peer_ip_,
                       "closing {}: its message would take what waits to be sent to all clients over {} bytes "
                       "(--max-queued-total); it has {} waiting",
                       peer_, server_.options.max_queued_bytes_total, queued_bytes_);
      }
      // The frame being written stays until its write ends (with an error,
      // once the socket is closed).
      if (writing_ && !writes_.empty()) {
        writes_.erase(writes_.begin() + 1, writes_.end());
      } else {
        writes_.clear();
      }
      set_queued(writes_.empty() ? 0 : writes_.front().size());
      close_quietly();
      return;
    }
    set_queued(queued_bytes_ + frame.size());
    writes_.push_back(std::move(frame));
    if (!writing_) write_next();
  }

  bool subscribed() const noexcept { return authed_ && subscribed_; }
  bool authed() const noexcept { return authed_; }
  unsigned roles() const noexcept { return roles_; }
  long long last_heard_us() const noexcept { return last_heard_us_; }
  long long connected_us() const noexcept { return connected_us_; }
  const std::string& peer() const noexcept { return peer_; }
  const std::string& peer_ip() const noexcept { return peer_ip_; }

  bool open() const noexcept { return socket_.is_open(); }
  // For a flood: no line per connection (the heartbeat logs a count).
  void close_quietly() {
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  void drop(const std::string& why) {
    log::info_from(peer_ip_, "closing {}: {}", peer_, why);
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 private:
  void reply(const json& request, json fields = json::object()) {
    fields["type"] = "reply";
    fields["re"] = request["id"];
    fields["ok"] = true;
    send(std::move(fields));
  }

  void refuse(const json& request, const std::string& message) {
    send({{"type", "error"}, {"re", request["id"]}, {"message", message}, {"fatal", false}});
  }

  // A broken rule: say what, then close this connection only.
  void fatal(const std::optional<json>& re, const std::string& message) {
    log::warn_from(peer_ip_, "client {} broke the protocol: {}", peer_, message);
    json error = {{"type", "error"}, {"message", message}, {"fatal", true}};
    error["re"] = re ? *re : json(nullptr);
    send(std::move(error));
    closing_ = true;
  }

  void handle(json m) {
    const std::optional<json> re =
        m.contains("id") && m["id"].is_number_integer() ? std::optional<json>(m["id"]) : std::nullopt;
    if (auto problem = check_client_message(m)) {
      fatal(re, *problem);
      return;
    }
    const std::string type = m["type"].get<std::string>();
    if (type == "auth") {
      const std::string& client_nonce = m["nonce"].get_ref<const std::string&>();
      const std::string binding = tls_binding(tls_ ? tls_->native_handle() : nullptr);
      // The token the proof was made with gives the client its roles:
      // the agent's own every role, a --role-tokens one its own.
      const std::string& hmac = m["hmac"].get_ref<const std::string&>();
      const std::string* token = nullptr;
      unsigned roles = 0;
      if (client_nonce.size() >= 32 && client_nonce.size() <= 128) {
        if (equal_constant_time(hmac, client_proof(server_.options.token, nonce_, client_nonce, binding))) {
          token = &server_.options.token;
          roles = kAllRoles;
        }
        for (const auto& t : server_.options.role_tokens) {
          if (token == nullptr && equal_constant_time(hmac, client_proof(t.token, nonce_, client_nonce, binding))) {
            token = &t.token;
            roles = t.roles;
          }
        }
      }
      if (token != nullptr) {
        if (auto refusal = server_.admit(roles)) {
          fatal(re, *refusal);
          return;
        }
        authed_ = true;
        roles_ = roles;
        if (auto it = server_.auth_backoff.find(peer_ip_); it != server_.auth_backoff.end()) it->second.failures = 0;
        reply(m, {{"hmac", agent_proof(*token, nonce_, client_nonce, binding)}, {"roles", role_names(roles)}});
      } else if (const auto delay = server_.auth_failed(peer_ip_)) {
        // Answered after the delay (run() waits for it), then closed.
        held_failure_ = *delay;
        held_re_ = re;
        closing_ = true;
      } else {
        log::debug("client {}: wrong HMAC while {} others from {} wait for theirs; closed", peer_,
                   AgentServer::Impl::kMaxHeldPerAddress, peer_ip_);
        close_quietly();
        closing_ = true;
      }
      return;
    }
    if (!authed_) {
      if (++refused_before_auth_ > 3) {
        fatal(re, "too many messages before authentication");
        return;
      }
      refuse(m, fmt::format("{} refused: not authenticated; answer hello with auth {{hmac: HMAC-SHA256(token, nonce)}}",
                            type));
      return;
    }
    if (const unsigned needed = roles_needed(type); (roles_ & needed) != needed) {
      refuse(m, fmt::format("{} refused: this client's token has the role(s) {}; {} needs {}", type, role_names(roles_),
                            type, needed == kAllRoles ? "every role" : role_names(needed)));
      return;
    }
    // Whatever a request holds, one bad message costs its sender a refusal,
    // never the agent.
    try {
      if (const auto handler = handlers().find(type); handler != handlers().end()) (this->*handler->second)(m);
    } catch (const Error& e) {
      refuse(m, e.status().message());
    } catch (const nlohmann::json::exception& e) {
      refuse(m, fmt::format("{} refused: a field has the wrong type or value (JSON error {})", type, e.id));
    } catch (const std::exception& e) {
      log::warn_from(peer_ip_, "{} from {} failed: {}", type, peer_, e.what());
      refuse(m, fmt::format("{} failed inside the agent: {}", type, e.what()));
    }
  }

  // One handler per request type the schema knows (protocol.cpp), but
  // auth, answered before any of these.
  using Handler = void (Session::*)(const json&);
  static const std::map<std::string_view, Handler>& handlers() {
    static const std::map<std::string_view, Handler> table = {
        {"ping", &Session::on_ping},
        {"inventory", &Session::on_inventory},
        {"subscribe", &Session::on_subscribe},
        {"unsubscribe", &Session::on_unsubscribe},
        {"run", &Session::on_run},
        {"cancel", &Session::on_cancel},
        {"watch", &Session::on_watch},
        {"watch_stop", &Session::on_watch_stop},
        {"fault", &Session::on_fault},
        {"fault_clear", &Session::on_fault_clear},
        {"preflight_listen", &Session::on_preflight_listen},
        {"preflight_probe", &Session::on_preflight_probe},
        {"preflight_release", &Session::on_preflight_release},
        {"shutdown", &Session::on_shutdown},
    };
    return table;
  }

  void on_ping(const json& m) {
    json fields = {{"time_us", wall_us()}};
    if (m.contains("ping_us")) fields["ping_us"] = m["ping_us"];
    reply(m, std::move(fields));
  }
  void on_inventory(const json& m) { reply(m, server_.inventory().to_json()); }
  void on_subscribe(const json& m) {
    subscribed_ = true;
    reply(m);
  }
  void on_unsubscribe(const json& m) {
    subscribed_ = false;
    reply(m);
  }
  void on_run(const json& m) { reply(m, server_.runs->start(m)); }
  void on_cancel(const json& m) {
    server_.runs->cancel(m["run_id"].get<std::string>());
    reply(m);
  }
  void on_watch(const json& m) { reply(m, server_.runs->start_watch(m)); }
  void on_watch_stop(const json& m) {
    const std::string id = m["watch_id"].get<std::string>();
    if (!server_.runs->is_watch(id))
      throw Error(ErrorCategory::config, fmt::format("no watch {} on this agent", shown_name(id)));
    server_.runs->cancel(id);
    reply(m);
  }
  void on_fault(const json& m) {
    const auto applied = server_.faults->add(parse_fault(m["fault"]));
    reply(m, {{"fault_id", applied.fault_id}, {"mechanism", applied.mechanism}, {"note", applied.note}});
    server_.broadcast({"", -1, applied, {}});
  }
  void on_fault_clear(const json& m) {
    const auto reverted =
        server_.faults->clear(m.contains("fault_id") ? std::optional<int>(m["fault_id"].get<int>()) : std::nullopt);
    json active = json::array();
    for (const auto& f : server_.faults->active())
      active.push_back(to_json(f));
    reply(m, {{"faults", std::move(active)}});
    for (const auto& r : reverted)
      server_.broadcast({"", -1, r, {}});
  }
  // A preflight request is answered once its work, off the I/O thread, is
  // done.
  PreflightService::Done answer_later(const json& m) {
    return [self = shared_from_this(), m](json fields, const std::string& error) {
      if (error.empty()) {
        self->reply(m, std::move(fields));
      } else {
        self->refuse(m, error);
      }
    };
  }
  void on_preflight_listen(const json& m) { server_.preflight->listen(m, answer_later(m)); }
  void on_preflight_probe(const json& m) { server_.preflight->probe(m, answer_later(m)); }
  void on_preflight_release(const json& m) {
    server_.preflight->release();
    reply(m);
  }
  void on_shutdown(const json& m) {
    reply(m);
    asio::post(server_.io, [&server = server_] { server.shutdown(); });
  }

  void write_next() {
    if (writes_.empty() || !socket_.is_open()) {
      writing_ = false;
      if (closing_ && writes_.empty()) drop("after an error");
      return;
    }
    writing_ = true;
    auto done = [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
      if (self->writes_.empty()) {
        self->writing_ = false;
        return;
      }
      self->set_queued(self->queued_bytes_ - std::min(self->queued_bytes_, self->writes_.front().size()));
      self->writes_.pop_front();
      if (ec) {
        self->writes_.clear();
        self->set_queued(0);
        self->writing_ = false;
        return;
      }
      self->write_next();
    };
    if (tls_) {
      asio::async_write(*tls_, asio::buffer(writes_.front()), std::move(done));
    } else {
      asio::async_write(socket_, asio::buffer(writes_.front()), std::move(done));
    }
  }

  void close_after_writes() {
    if (!writing_) {
      boost::system::error_code ec;
      socket_.shutdown(tcp::socket::shutdown_both, ec);
      socket_.close(ec);
    } else {
      closing_ = true;  // write_next closes once the error is out
    }
  }

  tcp::socket socket_;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls_;
  AgentServer::Impl& server_;
  std::string peer_;
  std::string peer_ip_;
  std::string nonce_;
  bool authed_ = false;
  unsigned roles_ = 0;  // what the token it authenticated with allows (protocol.h)
  bool subscribed_ = false;
  bool closing_ = false;
  // A wrong HMAC's answer, held for the address's back-off.
  std::optional<std::chrono::milliseconds> held_failure_;
  std::optional<json> held_re_;
  bool writing_ = false;
  std::deque<std::string> writes_;
  long long next_id_ = 1;
  long long last_heard_us_ = 0;
  long long connected_us_ = 0;
  int refused_before_auth_ = 0;
  std::size_t queued_bytes_ = 0;  // counted in server_.queued_bytes too: set_queued()
  void set_queued(std::size_t bytes) {
    server_.queued_bytes = server_.queued_bytes - std::min(server_.queued_bytes, queued_bytes_) + bytes;
    queued_bytes_ = bytes;
  }
  bool overflowed_ = false;
};

Inventory AgentServer::Impl::inventory() const {
  Inventory inv;
  inv.hostname = hostname;
  inv.agent_version = kAgentVersion;
  inv.protocol = kProtocolVersion;
  if (topology) inv.topology = *topology;
  inv.topology_summary = topology_summary;
  inv.gpus = gpus;
  inv.interfaces = interfaces();
  inv.clock_us = wall_us();
  inv.uptime_s = std::chrono::duration<double>(Clock::now() - started).count();
  inv.runs = runs->active();
  inv.runs_started = runs->runs_started();
  inv.runs_failed = runs->runs_failed();
  inv.faults = faults->active();
  inv.fault_injection = options.allow_fault_injection;
  inv.pid = ::getpid();
  read_transports(inv);
  inv.stack = software_stack();
  inv.stack.insert(inv.stack.begin(), {"ringmaster", std::string(kAgentVersion)});
  inv.rank_env = settings_ranks_inherit();
  return inv;
}

std::optional<std::chrono::milliseconds> AgentServer::Impl::auth_failed(const std::string& ip) {
  const auto now = Clock::now();
  if (auth_backoff.size() >= 4096 && !auth_backoff.contains(ip)) {
    // Addresses quiet for a minute and holding nothing are forgotten first.
    std::erase_if(auth_backoff,
                  [&](const auto& e) { return e.second.held == 0 && now - e.second.last > std::chrono::seconds(60); });
    if (auth_backoff.size() >= 4096) return std::nullopt;
  }
  auto& b = auth_backoff[ip];
  if (b.held >= kMaxHeldPerAddress) return std::nullopt;
  b.failures = std::min(b.failures + 1, 8);
  b.last = now;
  ++b.held;
  return std::min<std::chrono::milliseconds>(std::chrono::milliseconds(100L << (b.failures - 1)),
                                             std::chrono::seconds(10));
}

std::optional<std::string> AgentServer::Impl::admit(unsigned roles) {
  std::size_t authed = 0, read_only = 0;
  std::shared_ptr<Session> quietest_reader;
  for (const auto& s : sessions) {
    if (!s->open() || !s->authed()) continue;
    ++authed;
    if (s->roles() != kRoleRead) continue;
    ++read_only;
    if (!quietest_reader || s->last_heard_us() < quietest_reader->last_heard_us()) quietest_reader = s;
  }
  const std::size_t reader_share = options.max_connections * 3 / 4;
  if (roles == kRoleRead && read_only >= reader_share) {
    return fmt::format(
        "read-only tokens hold {} connections, their share of the agent's {} "
        "(--max-connections); close one, or connect with a token that may run",
        read_only, options.max_connections);
  }
  if (authed < options.max_connections) return std::nullopt;
  if (roles != kRoleRead && quietest_reader) {
    quietest_reader->drop("its place was given to a client that may run or inject faults (--max-connections)");
    return std::nullopt;
  }
  return fmt::format("the agent has {} authenticated connections, its cap (--max-connections)", authed);
}

void AgentServer::Impl::auth_answered(const std::string& ip) {
  if (auto it = auth_backoff.find(ip); it != auth_backoff.end() && it->second.held > 0) --it->second.held;
}

void AgentServer::Impl::broadcast(const events::EventMessage& event) {
  metrics.observe(event);
  json message = events::to_json(event);
  message["type"] = "event";
  for (const auto& s : sessions) {
    if (s->subscribed()) s->send(message);
  }
}

awaitable<void> AgentServer::Impl::accept_loop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (!acceptor.is_open()) co_return;
      // Out of descriptors and the like: say so once and pause accepting
      // (10 ms, doubling to 1 s) instead of spinning on the error.
      if (accept_pause.count() == 0) log::warn("accept failed: {}; pausing accepts while it lasts", ec.message());
      accept_pause = std::min<std::chrono::milliseconds>(
          std::max<std::chrono::milliseconds>(accept_pause * 2, std::chrono::milliseconds(10)),
          std::chrono::milliseconds(1000));
      asio::steady_timer pause(io, accept_pause);
      co_await pause.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    accept_pause = std::chrono::milliseconds(0);
    close_on_exec(socket.native_handle());
    const auto remote = socket.remote_endpoint(ec);
    const std::string ip = ec ? std::string("?") : remote.address().to_string();
    // Caps on connections still authenticating, all and per address: a
    // flood of idle or slow clients costs a bounded amount. Such a
    // connection gives way to a new one (the oldest such from this
    // address, else any), so a flood cannot lock out a client that does
    // authenticate. Authenticated ones have a cap of their own, checked
    // when a client authenticates (admit()), where its token's roles are
    // known.
    std::size_t waiting = 0, waiting_here = 0;
    std::shared_ptr<Session> oldest_here, oldest_any;
    for (const auto& s : sessions) {
      if (!s->open() || s->authed()) continue;
      ++waiting;
      if (!oldest_any || s->connected_us() < oldest_any->connected_us()) oldest_any = s;
      if (s->peer_ip() != ip) continue;
      ++waiting_here;
      if (!oldest_here || s->connected_us() < oldest_here->connected_us()) oldest_here = s;
    }
    if (waiting_here >= options.max_connections_per_address && oldest_here) {
      oldest_here->close_quietly();
      ++evicted;
      if (oldest_any == oldest_here) oldest_any.reset();
      --waiting;
    }
    if (waiting >= options.max_connections && oldest_any) {
      oldest_any->close_quietly();
      ++evicted;
    }
    auto session = std::make_shared<Session>(std::move(socket), *this);
    sessions.insert(session);
    asio::co_spawn(io, session->run(session), asio::detached);
  }
}

awaitable<void> AgentServer::Impl::heartbeat_loop() {
  for (;;) {
    heartbeat.expires_after(options.heartbeat);
    boost::system::error_code ec;
    co_await heartbeat.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    if (evicted > 0) {
      log::info("closed {} unauthenticated connection(s) to make room for newer ones (connection caps)", evicted);
      evicted = 0;
    }
    if (expired > 0) {
      log::info("closed {} connection(s) not authenticated within {} ms", expired, options.auth_deadline.count());
      expired = 0;
    }
    const long long now = steady_us();
    for (const auto& s : std::set<std::shared_ptr<Session>>(sessions)) {
      if (!s->authed() && now - s->connected_us() > options.auth_deadline.count() * 1000) {
        s->close_quietly();
        ++expired;
        continue;
      }
      if (now - s->last_heard_us() > options.client_silence_limit.count() * 1000) {
        s->drop(fmt::format("silent for {} ms", options.client_silence_limit.count()));
        continue;
      }
      if (s->authed()) s->send({{"type", "heartbeat"}, {"time_us", wall_us()}});
    }
    // The rails' traffic, for subscribers (read only when there is one).
    const bool watched = std::any_of(sessions.begin(), sessions.end(), [](const auto& s) { return s->subscribed(); });
    if (watched) broadcast({"", -1, read_nic_counters(), {}});
  }
}

void AgentServer::Impl::shutdown() {
  boost::system::error_code ec;
  stopping = true;
  acceptor.close(ec);
  if (http) http->close();
  heartbeat.cancel();
  runs->kill_all();
  for (const auto& s : std::set<std::shared_ptr<Session>>(sessions))
    s->drop("agent shutting down");
  io.stop();
}

// The state directory, made private to the agent's user (runs' files and,
// later, its token); passable (not listable) by the ranks' user when ranks
// run as another, who must also reach the CLI they run.
static void prepare_state_dir(const AgentOptions& options) {
  // Private to the agent's user: runs' files and, later, its token.
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir + "/runs", ec);
  struct stat st = {};
  if (ec || ::stat(options.state_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error(ErrorCategory::config, fmt::format("state directory {}: cannot create it{}", options.state_dir,
                                                   ec ? ": " + ec.message() : std::string()));
  }
  if (st.st_uid != ::geteuid()) {
    throw Error(ErrorCategory::config, fmt::format("state directory {} belongs to uid {}, not this agent's {}",
                                                   options.state_dir, st.st_uid, ::geteuid()));
  }
  // Ranks that run as another user reach their run's directory through
  // it: then others may pass through (not list) it and runs/.
  const RankUser rank_user = resolve_rank_user(options.rank_user, ::geteuid());
  ::chmod(options.state_dir.c_str(), rank_user.switch_to ? 0711 : 0700);
  ::chmod((options.state_dir + "/runs").c_str(), rank_user.switch_to ? 0711 : 0700);
  if (rank_user.switch_to) {
    if (const auto blocked = blocked_on_the_way(rank_user, options.state_dir + "/runs"); !blocked.empty()) {
      throw Error(ErrorCategory::config,
                  fmt::format("ranks run as user '{}', who cannot reach {}/runs: {} is in the way; let others "
                              "pass through it (chmod o+x), or choose another --state-dir or --rank-user",
                              rank_user.name, options.state_dir, blocked));
    }
    const std::string cli_dir = std::filesystem::path(options.cli_path).parent_path().string();
    if (!options.cli_path.empty()) {
      if (const auto blocked = blocked_on_the_way(rank_user, cli_dir.empty() ? "." : cli_dir); !blocked.empty()) {
        throw Error(ErrorCategory::config,
                    fmt::format("ranks run as user '{}', who cannot reach {}: {} is in the way; install it where "
                                "others may run it, or choose another --rank-user",
                                rank_user.name, options.cli_path, blocked));
      }
    }
  }
}

// The agent's TLS server: TLS 1.3 only, its certificate and key, and with
// --tls-client-ca the clients' certificates checked.
static std::unique_ptr<asio::ssl::context> tls_server_context(const AgentOptions& options) {
  boost::system::error_code ec;
  auto tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  // TLS 1.3 only: forward secrecy and AEAD ciphers always, and the
  // clients' proofs are bound to the session through an exporter, which
  // TLS 1.2 without Extended Master Secret would let a man in the middle
  // share (every client of ours speaks 1.3).
  if (SSL_CTX_set_min_proto_version(tls->native_handle(), TLS1_3_VERSION) != 1) {
    throw Error(ErrorCategory::internal, "OpenSSL refused the agent's TLS settings");
  }
  tls->use_certificate_chain_file(options.tls_cert, ec);
  if (ec) throw Error(ErrorCategory::config, fmt::format("--tls-cert {}: {}", options.tls_cert, ec.message()));
  tls->use_private_key_file(options.tls_key, asio::ssl::context::pem, ec);
  if (ec) throw Error(ErrorCategory::config, fmt::format("--tls-key {}: {}", options.tls_key, ec.message()));
  if (!options.tls_client_ca.empty()) {
    tls->load_verify_file(options.tls_client_ca, ec);
    if (ec) {
      throw Error(ErrorCategory::config, fmt::format("--tls-client-ca {}: {}", options.tls_client_ca, ec.message()));
    }
    tls->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  return tls;
}

AgentServer::AgentServer(AgentOptions options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  s.options = std::move(options);
  if (s.options.state_dir.empty()) s.options.state_dir = default_state_dir();
  prepare_state_dir(s.options);
  // Every client authenticates, on loopback too: without --token-file the
  // agent's own token, which local tools of its user read from there.
  if (s.options.token.empty()) s.options.token = load_or_create_token(s.options.state_dir);
  if (s.options.token.size() < kMinTokenBytes) {
    throw Error(ErrorCategory::config,
                fmt::format("the token has {} bytes; at least {}", s.options.token.size(), kMinTokenBytes));
  }
  if (s.options.tls_self_signed) {
    if (!s.options.tls_cert.empty() || !s.options.tls_key.empty()) {
      throw Error(ErrorCategory::config,
                  "--tls-self-signed makes the agent's certificate: give it or --tls-cert and "
                  "--tls-key, not both");
    }
    const SelfSignedCertificate own = self_signed_certificate(s.options.state_dir + "/tls");
    s.options.tls_cert = own.cert_file;
    s.options.tls_key = own.key_file;
    log::info("{} the agent's own certificate {} (SHA-256 {}): clients check it with --tls-ca {}",
              own.made ? "made" : "serving TLS with", own.cert_file, own.sha256, own.cert_file);
  }
  open_listener(s.acceptor, s.options.listen, "--listen");
  boost::system::error_code ec;
  // What we ship must not carry the control protocol in the clear beyond
  // this host by default: under plain TCP anyone on the path reads the
  // runs and can relay a client's proof into a session of their own.
  if (s.options.tls_cert.empty() && !s.options.allow_plaintext &&
      !s.acceptor.local_endpoint(ec).address().is_loopback()) {
    throw Error(ErrorCategory::config,
                fmt::format("--listen {}: plain TCP beyond loopback carries every request in the clear and binds "
                            "the token's proof to no session; serve TLS with --tls-cert and --tls-key, or with "
                            "--tls-self-signed (a certificate this agent makes in {}/tls), or, on a private "
                            "network only, accept plain TCP with --allow-plaintext",
                            s.options.listen, s.options.state_dir));
  }

  if (!s.options.tls_client_ca.empty() && s.options.tls_cert.empty()) {
    throw Error(ErrorCategory::config, "--tls-client-ca needs TLS: --tls-cert and --tls-key");
  }
  if (!s.options.tls_cert.empty() || !s.options.tls_key.empty()) {
    if (s.options.tls_cert.empty() || s.options.tls_key.empty()) {
      throw Error(ErrorCategory::config, "TLS needs both --tls-cert and --tls-key");
    }
    s.tls = tls_server_context(s.options);
  }
  if (!s.options.metrics_listen.empty()) {
    HttpEndpoints::Sources sources;
    sources.metrics = [&s] {
      return s.metrics.render(std::chrono::duration<double>(Clock::now() - s.started).count(), s.runs->runs_started(),
                              s.runs->runs_failed());
    };
    sources.ready = [&s] { return s.ready(); };
    s.http = std::make_unique<HttpEndpoints>(s.io, s.options.metrics_listen, std::move(sources));
  }
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  s.hostname = name;
  std::vector<std::uint16_t> exempt = {s.acceptor.local_endpoint().port()};
  if (s.http) exempt.push_back(s.http->port());
  s.faults = std::make_unique<FaultManager>(s.options.allow_fault_injection, exempt, s.options.state_dir);
  s.preflight = std::make_unique<PreflightService>(s.io, s.options.preflight_ports, s.faults.get());
  // Discovery after the fault manager has removed stale drop rules.
  auto topo =
      s.options.topology_file.empty() ? topo::Topology::discover() : topo::Topology::load_file(s.options.topology_file);
  // The GPUs as NVML sees them (nothing where there is no driver); on a
  // discovered tree their NVLinks join it, matched by PCI bus id.
  const GpuInventory gpus = read_gpu_inventory();
  for (const auto& line : topo.warnings())
    log::warn("topology: {}", line);
  if (s.options.topology_file.empty()) {
    for (const auto& line : add_nvml_to_topology(topo, gpus))
      log::warn("NVML: {}", line);
  }
  s.gpus = json::parse(to_json(gpus));
  s.topology = TopologyInfo::parse(json::parse(topo.to_json()));
  s.topology_summary = topo.summary();
  s.runs = std::make_unique<RunManager>(
      s.io, s.options, [&s](events::EventMessage event) { s.broadcast(event); }, s.faults.get());
}

AgentServer::~AgentServer() = default;

std::uint16_t AgentServer::port() const noexcept {
  return impl_->acceptor.local_endpoint().port();
}

std::uint16_t AgentServer::metrics_port() const noexcept {
  return impl_->http ? impl_->http->port() : 0;
}

void AgentServer::run(bool handle_signals) {
  auto& s = *impl_;
  asio::signal_set signals(s.io);
  if (handle_signals) {
    // Each of them ends the agent the same way: runs killed, faults
    // reverted (an nft table, a qdisc or a tmpfs must not outlive it).
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT})
      signals.add(sig);
    signals.async_wait([&s](boost::system::error_code ec, int) {
      if (!ec) s.shutdown();
    });
  }
  asio::co_spawn(s.io, s.accept_loop(), asio::detached);
  asio::co_spawn(s.io, s.heartbeat_loop(), asio::detached);
  if (s.http) s.http->start();
  s.io.run();
  s.runs->kill_all();
}

void AgentServer::stop() {
  asio::post(impl_->io, [impl = impl_.get()] { impl->shutdown(); });
}

std::vector<std::string> clear_faults_left_behind(const std::string& state_dir) {
  return FaultManager::remove_left_behind(state_dir.empty() ? default_state_dir() : state_dir);
}

}  // namespace ringmaster::agent
