// TcpStoreServer: Boost.Asio, one I/O thread, one coroutine per client.
//
// The thread owns all state, so nothing is locked on the request path. A
// WAIT that cannot be answered yet parks a Waiter on each missing key;
// whichever request creates the last of them sends STOP_WAITING. A client
// that breaks a rule (bad magic, unknown command, a key or value over the
// limit, too many keys) is logged and disconnected; every other client is
// unaffected. Replies count against a budget per connection and one for
// all of them, so a client that asks and never reads costs a bounded
// amount; what a client sent is escaped before it is logged, and each
// address has a budget of log lines.
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <fstream>
#include <future>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "ringmaster/status.h"
#include "ringmaster/store.h"
#include "store/protocol.h"

namespace ringmaster {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using store::Command;
using namespace std::chrono_literals;

// A client broke the protocol; the message says how.
struct ProtocolViolation {
  std::string message;
};

class Session;

struct Waiter {
  std::weak_ptr<Session> session;
  std::vector<std::string> missing;  // keys this waiter is parked on
  std::size_t remaining = 0;
  std::size_t bytes = 0;  // counted against its session's cap
  bool done = false;
};

// What a client sent, fit for one log line: bytes outside printable ASCII
// as \xNN, at most 160 of them shown.
std::string shown(std::string_view text) {
  constexpr std::size_t kShown = 160;
  std::string out;
  for (std::size_t i = 0; i < std::min(text.size(), kShown); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > kShown) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

// Log lines about clients, per address: a burst of 20, then 5 a second.
// A client that floods the log with violations costs its own lines only,
// never another address's; what was held back is counted on the next line.
class LogBudget {
 public:
  // True when a line about `address` may be written now; `held` is then
  // how many were held back since the last one.
  bool take(const std::string& address, std::size_t& held) {
    const auto now = std::chrono::steady_clock::now();
    if (buckets_.size() >= kMaxAddresses && !buckets_.contains(address)) buckets_.clear();
    auto& b = buckets_[address];
    if (b.last == std::chrono::steady_clock::time_point{}) b.tokens = kBurst;
    b.tokens = std::min(kBurst, b.tokens + std::chrono::duration<double>(now - b.last).count() * kPerSecond);
    b.last = now;
    if (b.tokens < 1) {
      ++b.held;
      return false;
    }
    b.tokens -= 1;
    held = std::exchange(b.held, 0);
    return true;
  }

 private:
  static constexpr double kBurst = 20, kPerSecond = 5;
  static constexpr std::size_t kMaxAddresses = 4096;
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point last{};
    std::size_t held = 0;
  };
  std::unordered_map<std::string, Bucket> buckets_;
};

struct State {
  StoreServerOptions options;
  std::size_t queued_reply_bytes = 0;  // over all sessions, on the I/O thread
  LogBudget log_budget;
  std::unordered_map<std::string, std::string> data;
  // QUEUE_PUSH's queues: a namespace of their own (GET, DELETE_KEY,
  // GETNUMKEYS and LIST_KEYS see the keys only), but CHECK and WAIT count
  // a key with values queued as present, as torch's server does.
  std::unordered_map<std::string, std::deque<std::string>> queues;
  std::size_t queued_values = 0;
  std::unordered_map<std::string, std::vector<std::shared_ptr<Waiter>>> waiters;
  std::atomic<std::size_t> num_keys{0};
  std::atomic<std::size_t> num_connections{0};
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, State& state) : socket_(std::move(socket)), state_(state) {
    boost::system::error_code ec;
    const auto remote = socket_.remote_endpoint(ec);
    address_ = ec ? std::string("?") : remote.address().to_string();
    peer_ = ec ? std::string("?") : address_ + ":" + std::to_string(remote.port());
    socket_.set_option(tcp::no_delay(true), ec);
  }

  // `self` (a parameter, so it lives in the coroutine frame) keeps the
  // session alive for as long as it is served.
  awaitable<void> run([[maybe_unused]] std::shared_ptr<Session> self) {
    ++state_.num_connections;
    // Until it validates, the connection has a deadline; after, none.
    auto deadline = std::make_shared<asio::steady_timer>(socket_.get_executor(), state_.options.validate_timeout);
    deadline->async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto session = weak.lock();
      if (ec || !session) return;
      session->warn(fmt::format("did not validate within {} ms; closing its connection",
                                session->state_.options.validate_timeout.count()));
      boost::system::error_code ignored;
      session->socket_.close(ignored);
    });
    try {
      const auto first = co_await read_u8();
      const auto magic = co_await read_u32();
      if (first != static_cast<std::uint8_t>(Command::validate) || magic != store::kValidationMagic) {
        throw ProtocolViolation{
            fmt::format("first message is not VALIDATE with magic 0x{:08X} (command {}, magic "
                        "0x{:08X}); not a TCPStore client",
                        store::kValidationMagic, first, magic)};
      }
      deadline->cancel();
      for (;;) {
        co_await serve_one();
        // Pipelined requests are answered in one write, but not beyond
        // this: past it the replies go out (and wait for the client to
        // read them) before the next request is read.
        if (queued_ >= kFlushAtBytes) co_await flush();
      }
    } catch (const ProtocolViolation& violation) {
      warn(fmt::format("{}; closing its connection", violation.message));
    } catch (const boost::system::system_error& e) {
      if (e.code() != asio::error::eof && e.code() != asio::error::operation_aborted && !over_budget_) {
        warn(fmt::format("disconnected: {}", e.code().message()));
      }
    }
    drop_queued();
    cancel_waiters();
    --state_.num_connections;
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  // Queues a reply. While this session is serving its own requests the
  // reply waits for the flush before its next read, so a pipelined burst
  // goes out in one write; a reply caused by another client (a WAIT
  // answered by someone's SET) starts a writer of its own.
  // A reply past the connection's budget, or the store's, closes the
  // connection instead of growing the queue.
  void send(std::string bytes) {
    if (over_budget_) return;
    const std::size_t n = bytes.size();
    const bool mine = queued_ + n > state_.options.max_reply_bytes;
    if (mine || state_.queued_reply_bytes + n > state_.options.max_queued_reply_bytes) {
      over_budget_ = true;
      warn(mine ? fmt::format("{} bytes of replies waiting to be read, over the cap of {} a connection "
                              "(StoreServerOptions::max_reply_bytes); a client that asks and does not read; closing "
                              "its connection",
                              queued_ + n, state_.options.max_reply_bytes)
                : fmt::format("its reply would take the store's replies waiting to be read over {} bytes "
                              "(StoreServerOptions::max_queued_reply_bytes); closing its connection",
                              state_.options.max_queued_reply_bytes));
      drop_queued();
      boost::system::error_code ec;
      socket_.close(ec);
      return;
    }
    queued_ += n;
    state_.queued_reply_bytes += n;
    outbox_.push_back(std::move(bytes));
    if (writing_ || serving_) return;
    writing_ = true;
    asio::co_spawn(socket_.get_executor(), write_loop(shared_from_this()), asio::detached);
  }

 private:
  static constexpr std::size_t kFlushAtBytes = 256 * 1024;

  // A line about this client, within its address's log budget.
  void warn(const std::string& what) {
    std::size_t held = 0;
    if (!state_.log_budget.take(address_, held)) return;
    if (held > 0) {
      RM_WARN(store, "store client {}: {} ({} earlier lines about {} held back)", peer_, what, held, address_);
    } else {
      RM_WARN(store, "store client {}: {}", peer_, what);
    }
  }

  // Replies written (or given up): off both budgets.
  void sent(std::size_t n) {
    n = std::min(n, queued_);
    queued_ -= n;
    state_.queued_reply_bytes -= std::min(n, state_.queued_reply_bytes);
  }
  void drop_queued() {
    outbox_.clear();
    sent(queued_);
  }

  // `self` keeps the session alive while a write is in flight.
  awaitable<void> write_loop([[maybe_unused]] std::shared_ptr<Session> self) {
    while (!outbox_.empty()) {
      // Send everything queued so far in one write.
      std::string batch;
      while (!outbox_.empty()) {
        batch += outbox_.front();
        outbox_.pop_front();
      }
      boost::system::error_code ec;
      co_await asio::async_write(socket_, asio::buffer(batch), asio::redirect_error(use_awaitable, ec));
      sent(batch.size());
      if (ec) {
        drop_queued();
        socket_.close(ec);
        break;
      }
    }
    writing_ = false;
  }

  // Writes what this session queued while serving, before it waits for input.
  awaitable<void> flush() {
    if (writing_ || outbox_.empty()) co_return;
    writing_ = true;
    std::string batch;
    while (!outbox_.empty()) {
      batch += outbox_.front();
      outbox_.pop_front();
    }
    boost::system::error_code ec;
    co_await asio::async_write(socket_, asio::buffer(batch), asio::redirect_error(use_awaitable, ec));
    sent(batch.size());
    writing_ = false;
    if (ec) throw boost::system::system_error(ec);
    if (!outbox_.empty()) {  // queued by another client while we wrote
      writing_ = true;
      asio::co_spawn(socket_.get_executor(), write_loop(shared_from_this()), asio::detached);
    }
  }

  // Makes at least n bytes readable in the buffer.
  awaitable<void> fill(std::size_t n) {
    if (end_ - begin_ >= n) co_return;
    if (begin_ == end_ && buffer_.size() > kLargestKeptBuffer) {
      // A large request has been read: give its buffer back rather than
      // keep it for as long as the connection lives.
      std::vector<char>(kFirstBuffer).swap(buffer_);
      begin_ = end_ = 0;
    }
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    while (end_ < n) {
      // The buffer grows with what arrives, never to what a header
      // announces: 24 bytes announcing 8 MiB cost nothing until the bytes
      // come.
      const std::size_t want = std::min(n, std::max<std::size_t>(end_ + 64 * 1024, end_ * 2));
      if (buffer_.size() < want) buffer_.resize(want);
      co_await flush();
      serving_ = false;
      const auto got =
          co_await socket_.async_read_some(asio::buffer(buffer_.data() + end_, buffer_.size() - end_), use_awaitable);
      serving_ = true;
      end_ += got;
    }
  }

  template <class T>
  awaitable<T> read_int() {
    co_await fill(sizeof(T));
    T v;
    std::memcpy(&v, buffer_.data() + begin_, sizeof(T));
    begin_ += sizeof(T);
    co_return v;
  }
  awaitable<std::uint8_t> read_u8() { return read_int<std::uint8_t>(); }
  awaitable<std::uint32_t> read_u32() { return read_int<std::uint32_t>(); }

  awaitable<std::string> read_string(std::size_t limit, const char* what) {
    const auto size = co_await read_int<std::uint64_t>();
    if (size > limit) {
      throw ProtocolViolation{fmt::format("{} of {} bytes is over the limit of {} bytes", what, size, limit)};
    }
    co_await fill(size);
    std::string s(buffer_.data() + begin_, size);
    begin_ += size;
    co_return s;
  }
  awaitable<std::string> read_key() { return read_string(store::kMaxKeyBytes, "key"); }
  awaitable<std::string> read_value() { return read_string(store::kMaxValueBytes, "value"); }

  awaitable<std::vector<std::string>> read_keys() {
    const auto count = co_await read_int<std::uint64_t>();
    if (count > store::kMaxKeys) {
      throw ProtocolViolation{fmt::format("request names {} keys, over the limit of {}", count, store::kMaxKeys)};
    }
    std::vector<std::string> keys;
    keys.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i)
      keys.push_back(co_await read_key());
    co_return keys;
  }

  awaitable<void> serve_one() {
    const auto command = co_await read_u8();
    if (command > store::kMaxCommand) throw ProtocolViolation{fmt::format("unknown command {}", command)};
    switch (static_cast<Command>(command)) {
      case Command::validate: {
        const auto magic = co_await read_u32();
        if (magic != store::kValidationMagic) throw ProtocolViolation{fmt::format("bad magic 0x{:08X}", magic)};
        break;
      }
      case Command::set: {
        auto key = co_await read_key();
        auto value = co_await read_value();
        put(std::move(key), std::move(value));
        break;
      }
      case Command::compare_set: {
        auto key = co_await read_key();
        auto expected = co_await read_value();
        auto desired = co_await read_value();
        auto it = state_.data.find(key);
        if (it == state_.data.end()) {
          if (expected.empty()) {
            reply_string(desired);
            put(std::move(key), std::move(desired));
          } else {
            reply_string(expected);
          }
        } else if (it->second == expected) {
          it->second = std::move(desired);
          reply_string(it->second);
        } else {
          reply_string(it->second);
        }
        break;
      }
      case Command::get: {
        auto key = co_await read_key();
        auto it = state_.data.find(key);
        if (it == state_.data.end()) throw ProtocolViolation{fmt::format("GET of missing key '{}'", shown(key))};
        reply_string(it->second);
        break;
      }
      case Command::add: {
        auto key = co_await read_key();
        const auto delta = co_await read_int<std::int64_t>();
        std::int64_t value = delta;
        if (auto it = state_.data.find(key); it != state_.data.end()) {
          std::int64_t current = 0;
          const auto& text = it->second;
          auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
          if (ec != std::errc() || ptr != text.data() + text.size()) {
            throw ProtocolViolation{fmt::format("ADD to key '{}' whose value is not a decimal integer", shown(key))};
          }
          value = static_cast<std::int64_t>(static_cast<std::uint64_t>(current) + static_cast<std::uint64_t>(delta));
        }
        put(std::move(key), std::to_string(value));
        send(store::Encoder(Command::add).i64(value).bytes().substr(1));
        break;
      }
      case Command::check: {
        const auto keys = co_await read_keys();
        const bool ready = std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return present(k); });
        reply_u8(static_cast<std::uint8_t>(ready ? store::CheckResponse::ready : store::CheckResponse::not_ready));
        break;
      }
      case Command::wait: {
        auto keys = co_await read_keys();
        park(std::move(keys));
        break;
      }
      case Command::get_num_keys:
        send(
            store::Encoder(Command::get_num_keys).i64(static_cast<std::int64_t>(state_.data.size())).bytes().substr(1));
        break;
      case Command::delete_key: {
        const auto key = co_await read_key();
        const auto erased = static_cast<std::int64_t>(state_.data.erase(key));
        state_.num_keys = state_.data.size();
        send(store::Encoder(Command::delete_key).i64(erased).bytes().substr(1));
        break;
      }
      case Command::append: {
        auto key = co_await read_key();
        auto value = co_await read_value();
        if (auto it = state_.data.find(key); it != state_.data.end()) {
          if (it->second.size() + value.size() > store::kMaxValueBytes) {
            throw ProtocolViolation{
                fmt::format("APPEND would grow key '{}' over {} bytes", shown(key), store::kMaxValueBytes)};
          }
          it->second += value;
        } else {
          put(std::move(key), std::move(value));
        }
        break;
      }
      case Command::multi_get: {
        const auto keys = co_await read_keys();
        std::size_t total = 0;
        for (const auto& key : keys) {
          auto it = state_.data.find(key);
          if (it == state_.data.end())
            throw ProtocolViolation{fmt::format("MULTI_GET of missing key '{}'", shown(key))};
          total += 8 + it->second.size();
          if (total > state_.options.max_reply_bytes) {
            throw ProtocolViolation{fmt::format("MULTI_GET of {} keys would reply over {} bytes", keys.size(),
                                                state_.options.max_reply_bytes)};
          }
        }
        std::string reply;
        reply.reserve(total);
        for (const auto& key : keys)
          reply += store::Encoder(Command::multi_get).str(state_.data.find(key)->second).bytes().substr(1);
        send(std::move(reply));
        break;
      }
      case Command::multi_set: {
        const auto count = co_await read_int<std::int64_t>();
        if (count < 0 || static_cast<std::uint64_t>(count) > store::kMaxKeys) {
          throw ProtocolViolation{fmt::format("MULTI_SET of {} keys", count)};
        }
        for (std::int64_t i = 0; i < count; ++i) {
          auto key = co_await read_key();
          auto value = co_await read_value();
          put(std::move(key), std::move(value));
        }
        break;
      }
      case Command::cancel_wait:
        cancel_waiters();
        reply_u8(static_cast<std::uint8_t>(store::WaitResponse::wait_canceled));
        break;
      case Command::ping: {
        const auto nonce = co_await read_u32();
        send(store::Encoder(Command::ping).u32(nonce).bytes().substr(1));
        break;
      }
      case Command::queue_push: {
        auto key = co_await read_key();
        auto value = co_await read_value();
        if (state_.queued_values >= store::kMaxQueuedValues) {
          throw ProtocolViolation{
              fmt::format("the store's queues already hold {} values, their limit; refusing a push "
                          "onto '{}'",
                          store::kMaxQueuedValues, shown(key))};
        }
        auto& queue = state_.queues[key];
        queue.push_back(std::move(value));
        ++state_.queued_values;
        if (queue.size() == 1) wake(key);
        break;
      }
      case Command::queue_pop: {
        // torch's reply: the queue's length before the pop, then the value
        // taken when there was one. A client that blocks WAITs first.
        const auto key = co_await read_key();
        auto it = state_.queues.find(key);
        const std::size_t length = it == state_.queues.end() ? 0 : it->second.size();
        store::Encoder reply(Command::queue_pop);
        reply.i64(static_cast<std::int64_t>(length));
        if (length > 0) {
          reply.str(it->second.front());
          it->second.pop_front();
          --state_.queued_values;
          if (it->second.empty()) state_.queues.erase(it);
        }
        send(reply.bytes().substr(1));
        break;
      }
      case Command::queue_len: {
        const auto key = co_await read_key();
        const auto it = state_.queues.find(key);
        const auto length = static_cast<std::int64_t>(it == state_.queues.end() ? 0 : it->second.size());
        send(store::Encoder(Command::queue_len).i64(length).bytes().substr(1));
        break;
      }
      case Command::list_keys: {
        std::size_t total = 8;
        for (const auto& entry : state_.data) {
          total += 8 + entry.first.size();
          if (total > state_.options.max_reply_bytes) {
            throw ProtocolViolation{fmt::format("LIST_KEYS of {} keys would reply over {} bytes", state_.data.size(),
                                                state_.options.max_reply_bytes)};
          }
        }
        store::Encoder reply(Command::list_keys);
        reply.i64(static_cast<std::int64_t>(state_.data.size()));
        for (const auto& entry : state_.data)
          reply.str(entry.first);
        send(reply.bytes().substr(1));
        break;
      }
    }
  }

  // A key CHECK and WAIT count as there: set, or with values queued.
  bool present(const std::string& key) const { return state_.data.contains(key) || state_.queues.contains(key); }

  void reply_u8(std::uint8_t v) { send(std::string(1, static_cast<char>(v))); }
  void reply_string(const std::string& s) { send(store::Encoder(Command::get).str(s).bytes().substr(1)); }

  void put(std::string key, std::string value) {
    auto it = state_.data.find(key);
    if (it != state_.data.end()) {
      it->second = std::move(value);
      return;
    }
    if (state_.data.size() >= store::kMaxKeys) {
      throw ProtocolViolation{
          fmt::format("the store already holds {} keys, its limit; refusing key '{}'", store::kMaxKeys, shown(key))};
    }
    state_.data.emplace(key, std::move(value));
    state_.num_keys = state_.data.size();
    wake(key);
  }

  // A new key exists: answer every waiter for which it was the last missing one.
  void wake(const std::string& key) {
    auto it = state_.waiters.find(key);
    if (it == state_.waiters.end()) return;
    auto parked = std::move(it->second);
    state_.waiters.erase(it);
    for (auto& waiter : parked) {
      if (waiter->done || --waiter->remaining > 0) continue;
      waiter->done = true;
      if (auto session = waiter->session.lock()) {
        std::erase(session->my_waiters_, waiter);
        session->waiting_key_bytes_ -= std::min(session->waiting_key_bytes_, waiter->bytes);
        session->reply_u8(static_cast<std::uint8_t>(store::WaitResponse::stop_waiting));
      }
    }
  }

  void park(std::vector<std::string> keys) {
    auto waiter = std::make_shared<Waiter>();
    waiter->session = weak_from_this();
    std::size_t bytes = 0;
    for (auto& key : keys) {
      if (present(key)) continue;
      bytes += key.size() + 64;  // the key and its share of the bookkeeping
      waiter->missing.push_back(std::move(key));
    }
    if (waiting_key_bytes_ + bytes > state_.options.max_waiting_key_bytes) {
      throw ProtocolViolation{fmt::format("WAIT would park {} bytes of keys on one connection, over the limit of {}",
                                          waiting_key_bytes_ + bytes, state_.options.max_waiting_key_bytes)};
    }
    waiter->bytes = bytes;
    waiter->remaining = waiter->missing.size();
    if (waiter->remaining == 0) {
      reply_u8(static_cast<std::uint8_t>(store::WaitResponse::stop_waiting));
      return;
    }
    for (const auto& key : waiter->missing)
      state_.waiters[key].push_back(waiter);
    waiting_key_bytes_ += waiter->bytes;
    my_waiters_.push_back(std::move(waiter));
  }

  void cancel_waiters() {
    for (auto& waiter : my_waiters_) {
      waiter->done = true;
      for (const auto& key : waiter->missing) {
        auto it = state_.waiters.find(key);
        if (it == state_.waiters.end()) continue;
        std::erase(it->second, waiter);
        if (it->second.empty()) state_.waiters.erase(it);
      }
    }
    my_waiters_.clear();
    waiting_key_bytes_ = 0;
  }

  tcp::socket socket_;
  State& state_;
  std::string address_, peer_;
  std::size_t queued_ = 0;  // replies queued or being written
  bool over_budget_ = false;
  // Reads land here. A connection starts with a few KiB (4,096 idle torch
  // clients are 4,096 of these) and grows it only for a request that needs
  // more, up to the value limit, until that request has been read.
  static constexpr std::size_t kFirstBuffer = 4 * 1024;
  static constexpr std::size_t kLargestKeptBuffer = 64 * 1024;
  std::vector<char> buffer_ = std::vector<char>(kFirstBuffer);
  std::size_t begin_ = 0, end_ = 0;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  bool serving_ = true;  // between reads; replies wait for flush()
  std::vector<std::shared_ptr<Waiter>> my_waiters_;
  std::size_t waiting_key_bytes_ = 0;
};

int read_somaxconn() {
  std::ifstream in("/proc/sys/net/core/somaxconn");
  int v = 0;
  in >> v;
  return v;
}

}  // namespace

struct TcpStoreServer::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  State state;
  std::thread thread;
  std::uint16_t port = 0;
  bool warned_full = false;

  awaitable<void> accept_loop() {
    std::chrono::milliseconds pause{0};
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
        // Out of file descriptors and the like: say so once, and pause
        // accepting (10 ms, doubling to 1 s) while it lasts; the clients
        // already connected are served meanwhile.
        if (pause.count() == 0) RM_WARN(store, "store accept failed: {}; pausing accepts while it lasts", ec.message());
        pause = std::min<std::chrono::milliseconds>(std::max<std::chrono::milliseconds>(pause * 2, 10ms), 1000ms);
        asio::steady_timer wait(io, pause);
        co_await wait.async_wait(asio::redirect_error(use_awaitable, ec));
        continue;
      }
      if (pause.count() != 0) RM_INFO(store, "store accepts again");
      pause = std::chrono::milliseconds{0};
      if (state.num_connections >= state.options.max_connections) {
        boost::system::error_code ignored;
        socket.close(ignored);
        if (!warned_full) {
          RM_WARN(store, "store has {} connections, its cap; closing new ones (StoreServerOptions::max_connections)",
                  state.options.max_connections);
        }
        warned_full = true;
        continue;
      }
      warned_full = false;
      auto session = std::make_shared<Session>(std::move(socket), state);
      asio::co_spawn(io, session->run(session), asio::detached);
    }
  }
};

TcpStoreServer::TcpStoreServer(const StoreServerOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->state.options = options;
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  if (options.host.empty()) {
    endpoint = tcp::endpoint(tcp::v6(), options.port);
  } else {
    const auto address = asio::ip::make_address(options.host, ec);
    if (ec) throw Error(ErrorCategory::config, "store listen address '" + options.host + "' is not a numeric address");
    endpoint = tcp::endpoint(address, options.port);
  }
  auto open_and_bind = [&](const tcp::endpoint& ep) {
    impl_->acceptor.close(ec);
    impl_->acceptor.open(ep.protocol(), ec);
    if (ec) return;
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (ep.protocol() == tcp::v6()) impl_->acceptor.set_option(asio::ip::v6_only(false), ec);
    impl_->acceptor.bind(ep, ec);
  };
  open_and_bind(endpoint);
  if (ec == asio::error::address_family_not_supported && options.host.empty()) {
    open_and_bind(tcp::endpoint(tcp::v4(), options.port));  // a host without IPv6
  }
  const int somaxconn = read_somaxconn();
  const int backlog = std::max({options.expected_clients, 2048, somaxconn});
  if (!ec) impl_->acceptor.listen(backlog, ec);
  if (ec) {
    throw Error(ErrorCategory::network,
                fmt::format("store cannot listen on {}:{}: {}", options.host.empty() ? "*" : options.host, options.port,
                            ec.message()));
  }
  if (somaxconn > 0 && options.expected_clients > somaxconn) {
    RM_WARN(store,
            "net.core.somaxconn is {} but {} clients are expected; connects beyond it may be dropped and retried "
            "(raise it with sysctl -w net.core.somaxconn={})",
            somaxconn, options.expected_clients, options.expected_clients);
  }
  impl_->port = impl_->acceptor.local_endpoint().port();
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([impl = impl_.get()] {
    for (;;) {
      try {
        impl->io.run();
        return;
      } catch (const std::exception& e) {
        RM_WARN(store, "store I/O thread caught: {}", e.what());
      }
    }
  });
  RM_INFO(store, "store listening on {}:{}", options.host.empty() ? "*" : options.host, impl_->port);
}

TcpStoreServer::~TcpStoreServer() {
  stop();
}

std::uint16_t TcpStoreServer::port() const noexcept {
  return impl_->port;
}
std::size_t TcpStoreServer::num_keys() const {
  return impl_->state.num_keys;
}
std::size_t TcpStoreServer::num_connections() const {
  return impl_->state.num_connections;
}

void TcpStoreServer::stop() {
  if (!impl_->thread.joinable()) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    boost::system::error_code ec;
    impl->acceptor.close(ec);
    impl->io.stop();
  });
  impl_->thread.join();
}

}  // namespace ringmaster
