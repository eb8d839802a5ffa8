// Store throughput: SET+GET pairs per second with 1 and 64 concurrent
// clients against one TcpStoreServer on loopback, three ways:
//   raw:   one thread per client; SET (no reply) + GET, one round trip;
//   torch: one thread per client; SET + get(), which torch's client does as
//          WAIT + GET, two round trips;
//   hosts: 64 connections driven by 2 threads, each sending SET + GET on
//          all of its connections before reading the replies. This is the
//          load 64 client hosts put on the store's host; the thread-per-
//          client columns also charge this 2-core machine for switching
//          between 64 client threads.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "ringmaster/store.h"
#include "store/client.h"
#include "store/protocol.h"

using namespace std::chrono_literals;

namespace {

// Runs `body(thread, go, stop)` on `threads` threads; each returns the
// pairs it completed between `go` and `stop`. Returns pairs per second.
double measure(int threads_count, std::chrono::milliseconds duration,
               const std::function<long long(int, const std::atomic<bool>&, const std::atomic<bool>&)>& body) {
  std::atomic<bool> go{false}, stop{false};
  std::atomic<long long> pairs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_count; ++t)
    threads.emplace_back([&, t] { pairs += body(t, go, stop); });
  std::this_thread::sleep_for(200ms);
  const auto start = std::chrono::steady_clock::now();
  go = true;
  std::this_thread::sleep_for(duration);
  stop = true;
  for (auto& t : threads)
    t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(pairs) / seconds;
}

double pairs_per_second(std::uint16_t port, int clients, bool torch_get, std::chrono::milliseconds duration) {
  return measure(clients, duration, [&](int c, const std::atomic<bool>& go, const std::atomic<bool>& stop) {
    namespace rm = ringmaster;
    auto address = rm::net::SocketAddress::parse("127.0.0.1:" + std::to_string(port));
    rm::net::Socket socket;
    if (rm::net::Socket::connect(*address, rm::net::Clock::now() + 30s, socket) != 0) std::abort();
    rm::store::Client client(std::move(socket), 30s);
    client.handshake(rm::net::Clock::now() + 30s);
    const std::string value(64, 'v');
    long long mine = 0;
    while (!go)
      std::this_thread::yield();
    while (!stop.load(std::memory_order_relaxed)) {
      const std::string key = "bench/" + std::to_string(c) + "/" + std::to_string(mine % 1024);
      client.set(key, value);
      const auto got = torch_get ? client.get(key) : client.get_existing(key);
      if (got.size() != value.size()) std::abort();
      ++mine;
    }
    return mine;
  });
}

double pairs_per_second_from_hosts(std::uint16_t port, int connections, int threads_count,
                                   std::chrono::milliseconds duration) {
  namespace rm = ringmaster;
  using rm::store::Command;
  using rm::store::Encoder;
  return measure(threads_count, duration, [&](int t, const std::atomic<bool>& go, const std::atomic<bool>& stop) {
    auto address = rm::net::SocketAddress::parse("127.0.0.1:" + std::to_string(port));
    std::vector<rm::net::Socket> sockets;
    for (int c = t; c < connections; c += threads_count) {
      rm::net::Socket socket;
      if (rm::net::Socket::connect(*address, rm::net::Clock::now() + 30s, socket) != 0) std::abort();
      socket.set_nodelay();
      const std::string validate = Encoder(Command::validate).u32(rm::store::kValidationMagic).bytes();
      socket.send_all(validate.data(), validate.size(), rm::net::Clock::now() + 30s);
      sockets.push_back(std::move(socket));
    }
    const std::string value(64, 'v');
    std::string reply(8 + value.size(), '\0');
    long long mine = 0;
    while (!go)
      std::this_thread::yield();
    while (!stop.load(std::memory_order_relaxed)) {
      const auto deadline = rm::net::Clock::now() + 30s;
      for (std::size_t i = 0; i < sockets.size(); ++i) {
        const std::string key = "hosts/" + std::to_string(t) + "/" + std::to_string(i);
        const auto set = Encoder(Command::set).str(key).str(value).bytes();
        const auto get = Encoder(Command::get).str(key).bytes();
        if (sockets[i].send_all(set.data(), set.size(), deadline) != 0) std::abort();
        if (sockets[i].send_all(get.data(), get.size(), deadline) != 0) std::abort();
      }
      for (auto& socket : sockets) {
        if (socket.recv_all(reply.data(), reply.size(), deadline) != 0) std::abort();
      }
      mine += static_cast<long long>(sockets.size());
    }
    return mine;
  });
}

}  // namespace

// store_bench            an in-process server
// store_bench PORT       a server already listening on 127.0.0.1:PORT
//                        (e.g. `ringmaster-cli store serve --port PORT`)
int main(int argc, char** argv) {
  std::unique_ptr<ringmaster::TcpStoreServer> server;
  std::uint16_t port = 0;
  if (argc > 1) {
    port = static_cast<std::uint16_t>(std::atoi(argv[1]));
    std::printf("store at 127.0.0.1:%u (another process)\n", port);
  } else {
    server =
        std::make_unique<ringmaster::TcpStoreServer>(ringmaster::StoreServerOptions{.host = "127.0.0.1", .port = 0});
    port = server->port();
    std::printf("store in this process\n");
  }
  std::printf("%-8s %14s %16s %16s   (SET+GET pairs/s)\n", "clients", "raw", "torch", "hosts");
  for (int clients : {1, 64}) {
    const double raw = pairs_per_second(port, clients, false, 3s);
    const double torch = pairs_per_second(port, clients, true, 3s);
    const double hosts = pairs_per_second_from_hosts(port, clients, clients == 1 ? 1 : 2, 3s);
    std::printf("%-8d %14.0f %16.0f %16.0f\n", clients, raw, torch, hosts);
  }
  // 1,024 clients as 1,024 hosts would load the store: a thread per client
  // would measure this machine's scheduler, not the store.
  const double hosts = pairs_per_second_from_hosts(port, 1024, 2, 3s);
  std::printf("%-8d %14s %16s %16.0f\n", 1024, "-", "-", hosts);
  return 0;
}
