// The rendezvous store on etcd (v3), the distributed store clusters
// already run: RINGMASTER_STORE=etcd://host:port/prefix.
//
// It talks to etcd's JSON gateway (POST /v3/kv/range, /v3/kv/put,
// /v3/kv/txn, /v3/watch, /v3/lease/*) over HTTP/1.1, with Boost.Beast's
// parser, on the engine's own sockets and deadlines. Every key lives under
// the prefix and is put under this client's lease, kept alive from a thread
// of its own: the keys of a job whose processes died expire with the lease;
// a client that ends cleanly revokes it. WAIT watches the keys from the
// revision it read them missing at, on a connection of its own, instead of
// polling. ADD, COMPARE_SET and APPEND are compare-and-swap transactions.
//
// Every error names etcd and its address.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "store/store.h"

namespace ringmaster::store {

struct EtcdEndpoint {
  std::string host;  // as the user wrote it, for messages
  net::SocketAddress address;
  std::string prefix = "/ringmaster";  // starts with '/', no '/' at the end
  std::chrono::seconds lease{60};
};

class EtcdStore final : public Store {
 public:
  // `socket` is connected to `endpoint.address`; more connections are
  // opened there for watches and for the lease's keepalives.
  EtcdStore(net::Socket socket, EtcdEndpoint endpoint, std::chrono::milliseconds timeout);
  // Stops the keepalives and revokes the lease: this client's keys go.
  ~EtcdStore() override;
  EtcdStore(const EtcdStore&) = delete;
  EtcdStore& operator=(const EtcdStore&) = delete;

  // GET /version (it must be etcd), then grants the lease and starts
  // keeping it alive.
  void handshake(net::Clock::time_point deadline) override;
  std::string handshake_detail() const override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::string get_existing(const std::string& key) override;
  // A range read a key, and a watch for a key not there yet.
  std::vector<std::string> get_many(const std::vector<std::string>& keys) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  void append(const std::string& key, const std::string& value) override;

  // "etcd at 10.0.0.5:2379".
  const std::string& where() const noexcept { return where_; }
  std::int64_t lease_id() const noexcept { return lease_id_; }

  struct Http;  // one HTTP/1.1 connection

 private:
  struct Kv {
    bool exists = false;
    std::string value;
    std::string mod_revision;
    std::int64_t revision = 0;  // the store's revision when it was read
  };
  Kv range(const std::string& full_key);
  // Puts `value` if the key is still as `seen` says; else `seen` becomes
  // what it is now. Returns whether it was put.
  bool put_if_unchanged(const std::string& full_key, const std::string& value, Kv& seen);
  // Blocks until a PUT of the key after `revision`; false at the deadline.
  bool watch_for_put(const std::string& full_key, std::int64_t revision, net::Clock::time_point deadline);
  void keep_alive();
  std::string full(const std::string& key) const { return endpoint_.prefix + "/" + key; }
  net::Clock::time_point deadline() const { return net::Clock::now() + timeout_; }

  EtcdEndpoint endpoint_;
  std::chrono::milliseconds timeout_;
  std::string where_;
  std::unique_ptr<Http> http_;
  std::string version_;
  std::int64_t lease_id_ = 0;

  std::thread keepalive_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
};

}  // namespace ringmaster::store
