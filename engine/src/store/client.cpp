#include "store/client.h"

#include <cerrno>
#include <thread>

#include "base/log.h"
#include "ringmaster/status.h"
#include "ringmaster/store.h"
#include "store/protocol.h"

namespace ringmaster::store {
namespace {

// CHECK, WAIT and MULTI_GET: a u64 count, then the keys.
Encoder key_list(Command command, const std::vector<std::string>& keys) {
  Encoder e(command);
  e.u64(keys.size());
  for (const auto& k : keys)
    e.str(k);
  return e;
}

}  // namespace

Client::Client(net::Socket socket, std::chrono::milliseconds timeout)
    : socket_(std::move(socket)), timeout_(timeout), peer_(socket_.peer_address().to_string()) {
  socket_.set_nodelay();
}

void Client::send(const std::string& bytes, net::Clock::time_point deadline) {
  if (const int err = socket_.send_all(bytes.data(), bytes.size(), deadline); err != 0) {
    throw Error(err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::network,
                "sending to the store at " + peer_ + " failed: " + net::errno_text(err));
  }
}

void Client::recv(void* data, std::size_t size, net::Clock::time_point deadline, const char* what) {
  if (const int err = socket_.recv_all(data, size, deadline); err != 0) {
    throw Error(err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::network,
                std::string("waiting for the store at ") + peer_ + " to answer " + what + ": " + net::errno_text(err));
  }
}

template <class T>
T Client::recv_value(net::Clock::time_point deadline, const char* what) {
  T v{};
  recv(&v, sizeof(v), deadline, what);
  return v;
}

std::string Client::recv_string(net::Clock::time_point deadline, const char* what) {
  const auto size = recv_value<std::uint64_t>(deadline, what);
  if (size > kMaxValueBytes) {
    throw Error(ErrorCategory::protocol, "the store at " + peer_ + " answered " + what + " with a value of " +
                                             std::to_string(size) + " bytes; not a TCPStore?");
  }
  std::string s(size, '\0');
  recv(s.data(), size, deadline, what);
  return s;
}

void Client::handshake(net::Clock::time_point deadline) {
  send(Encoder(Command::validate).u32(kValidationMagic).bytes(), deadline);
  const std::uint32_t nonce = static_cast<std::uint32_t>(std::random_device{}());
  if (ping(nonce, deadline) != nonce) {
    throw Error(ErrorCategory::protocol, "the store at " + peer_ + " answered PING with the wrong nonce");
  }
}

std::uint32_t Client::ping(std::uint32_t nonce, net::Clock::time_point deadline) {
  send(Encoder(Command::ping).u32(nonce).bytes(), deadline);
  return recv_value<std::uint32_t>(deadline, "PING");
}

void Client::set(const std::string& key, const std::string& value) {
  send(Encoder(Command::set).str(key).str(value).bytes(), deadline());
}

std::string Client::get(const std::string& key) {
  if (!wait({key}, timeout_)) {
    throw Error(ErrorCategory::timeout, "key '" + key + "' did not appear in the store at " + peer_ + " within " +
                                            std::to_string(timeout_.count()) + " ms");
  }
  return get_existing(key);
}

std::string Client::get_existing(const std::string& key) {
  const auto d = deadline();
  send(Encoder(Command::get).str(key).bytes(), d);
  return recv_string(d, "GET");
}

std::string Client::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  const auto d = deadline();
  send(Encoder(Command::compare_set).str(key).str(expected).str(desired).bytes(), d);
  return recv_string(d, "COMPARE_SET");
}

std::int64_t Client::add(const std::string& key, std::int64_t delta) {
  const auto d = deadline();
  send(Encoder(Command::add).str(key).i64(delta).bytes(), d);
  return recv_value<std::int64_t>(d, "ADD");
}

bool Client::check(const std::vector<std::string>& keys) {
  const auto d = deadline();
  const auto e = key_list(Command::check, keys);
  send(e.bytes(), d);
  return recv_value<std::uint8_t>(d, "CHECK") == static_cast<std::uint8_t>(CheckResponse::ready);
}

bool Client::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto e = key_list(Command::wait, keys);
  send(e.bytes(), deadline());
  std::uint8_t response = 0;
  const int err = socket_.recv_all(&response, 1, net::Clock::now() + timeout);
  if (err == 0) {
    if (response != static_cast<std::uint8_t>(WaitResponse::stop_waiting)) {
      throw Error(ErrorCategory::protocol, "the store at " + peer_ + " answered WAIT with " + std::to_string(response));
    }
    return true;
  }
  if (err != ETIMEDOUT) {
    throw Error(ErrorCategory::network, "waiting for keys in the store at " + peer_ + ": " + net::errno_text(err));
  }
  // As torch does: cancel, then read until WAIT_CANCELED (a STOP_WAITING may
  // have crossed the cancel on the wire).
  const auto d = deadline();
  send(Encoder(Command::cancel_wait).bytes(), d);
  response = recv_value<std::uint8_t>(d, "CANCEL_WAIT");
  if (response == static_cast<std::uint8_t>(WaitResponse::stop_waiting)) {
    response = recv_value<std::uint8_t>(d, "CANCEL_WAIT");
  }
  if (response != static_cast<std::uint8_t>(WaitResponse::wait_canceled)) {
    throw Error(ErrorCategory::protocol,
                "the store at " + peer_ + " answered CANCEL_WAIT with " + std::to_string(response));
  }
  return false;
}

std::int64_t Client::num_keys() {
  const auto d = deadline();
  send(Encoder(Command::get_num_keys).bytes(), d);
  return recv_value<std::int64_t>(d, "GETNUMKEYS");
}

bool Client::delete_key(const std::string& key) {
  const auto d = deadline();
  send(Encoder(Command::delete_key).str(key).bytes(), d);
  return recv_value<std::int64_t>(d, "DELETE_KEY") == 1;
}

void Client::append(const std::string& key, const std::string& value) {
  send(Encoder(Command::append).str(key).str(value).bytes(), deadline());
}

std::vector<std::string> Client::multi_get(const std::vector<std::string>& keys) {
  if (!wait(keys, timeout_)) {
    throw Error(ErrorCategory::timeout, "keys did not all appear in the store at " + peer_ + " within " +
                                            std::to_string(timeout_.count()) + " ms");
  }
  const auto d = deadline();
  const auto e = key_list(Command::multi_get, keys);
  send(e.bytes(), d);
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    values.push_back(recv_string(d, "MULTI_GET"));
  return values;
}

void Client::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size()) throw Error(ErrorCategory::internal, "multi_set: keys and values differ in count");
  Encoder e(Command::multi_set);
  e.i64(static_cast<std::int64_t>(keys.size()));
  for (std::size_t i = 0; i < keys.size(); ++i)
    e.str(keys[i]).str(values[i]);
  send(e.bytes(), deadline());
}

}  // namespace ringmaster::store

namespace ringmaster {

struct TcpStoreClient::Impl {
  store::Client client;
};

TcpStoreClient::TcpStoreClient(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = net::Clock::now() + timeout;
  auto resolved = net::resolve(host, port);
  if (!resolved.ok()) {
    throw Error(ErrorCategory::network, "cannot resolve store host '" + host + "': " + resolved.error);
  }
  net::Socket socket;
  net::ConnectAttempts report;
  if (const int err = net::connect_with_backoff(resolved.addresses, deadline, socket, report); err != 0) {
    throw Error(err == ETIMEDOUT ? ErrorCategory::timeout : ErrorCategory::network,
                "connect to store " + report.last_address.to_string() + " failed after " +
                    std::to_string(report.attempts) + " attempts: " + net::errno_text(err));
  }
  impl_ = std::make_unique<Impl>(Impl{store::Client(std::move(socket), timeout)});
  impl_->client.handshake(deadline);
}

TcpStoreClient::~TcpStoreClient() = default;
TcpStoreClient::TcpStoreClient(TcpStoreClient&&) noexcept = default;
TcpStoreClient& TcpStoreClient::operator=(TcpStoreClient&&) noexcept = default;

void TcpStoreClient::set(const std::string& key, const std::string& value) {
  impl_->client.set(key, value);
}
std::string TcpStoreClient::get(const std::string& key) {
  return impl_->client.get(key);
}
std::string TcpStoreClient::compare_set(const std::string& key, const std::string& expected,
                                        const std::string& desired) {
  return impl_->client.compare_set(key, expected, desired);
}
std::int64_t TcpStoreClient::add(const std::string& key, std::int64_t delta) {
  return impl_->client.add(key, delta);
}
bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  return impl_->client.check(keys);
}
void TcpStoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (!impl_->client.wait(keys, timeout)) {
    throw Error(ErrorCategory::timeout, "wait for " + std::to_string(keys.size()) + " key(s) timed out after " +
                                            std::to_string(timeout.count()) + " ms");
  }
}
std::int64_t TcpStoreClient::num_keys() {
  return impl_->client.num_keys();
}
bool TcpStoreClient::delete_key(const std::string& key) {
  return impl_->client.delete_key(key);
}
void TcpStoreClient::append(const std::string& key, const std::string& value) {
  impl_->client.append(key, value);
}
std::vector<std::string> TcpStoreClient::multi_get(const std::vector<std::string>& keys) {
  return impl_->client.multi_get(keys);
}
void TcpStoreClient::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  impl_->client.multi_set(keys, values);
}
std::chrono::microseconds TcpStoreClient::ping() {
  const auto start = net::Clock::now();
  impl_->client.ping(0x5249474Eu, start + impl_->client.timeout());
  return std::chrono::duration_cast<std::chrono::microseconds>(net::Clock::now() - start);
}

}  // namespace ringmaster
