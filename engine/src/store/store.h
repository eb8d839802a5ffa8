// What the bootstrap and the stall watch need of a rendezvous store,
// whichever server holds the keys: a TCPStore (store::Client) or etcd
// (store::EtcdStore). The calls keep torch's TCPStore semantics: get()
// waits for its key, compare_set() with an empty `expected` creates a
// missing key, add() creates a missing key at `delta`.
//
// Failures throw Error: network or timeout (naming the server), protocol.
// Not thread-safe: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/socket.h"

namespace ringmaster::store {

class Store {
 public:
  virtual ~Store() = default;

  // The server's first answer: a listener that accepts but is not this
  // kind of store fails here, not later.
  virtual void handshake(net::Clock::time_point deadline) = 0;
  // What the handshake learnt, for the stage's detail ("VALIDATE + PING
  // answered", "etcd 3.4.23, lease 60 s").
  virtual std::string handshake_detail() const = 0;

  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::string get(const std::string& key) = 0;
  // One round trip, for keys known to exist; a missing key is an error.
  virtual std::string get_existing(const std::string& key) = 0;
  // Every key's value, in order, waiting for keys not there yet; as few
  // round trips as the server allows (a TCPStore: one WAIT, one MULTI_GET).
  virtual std::vector<std::string> get_many(const std::vector<std::string>& keys) = 0;
  virtual std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) = 0;
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // False when the keys did not all exist within `timeout`.
  virtual bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  virtual void append(const std::string& key, const std::string& value) = 0;
};

}  // namespace ringmaster::store
