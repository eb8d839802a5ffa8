// Store throughput: SET+GET pairs per second with 1 and 64 concurrent
// clients against one TcpStoreServer on loopback, two ways:
//   raw:   SET (no reply) + GET, one round trip per pair;
//   torch: SET + get(), which torch's client does as WAIT + GET, two round
//          trips per pair.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "ringmaster/store.h"
#include "store/client.h"

using namespace std::chrono_literals;

namespace {

double pairs_per_second(std::uint16_t port, int clients, bool torch_get, std::chrono::milliseconds duration) {
  std::atomic<bool> go{false}, stop{false};
  std::atomic<long long> pairs{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
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
      pairs += mine;
    });
  }
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  go = true;
  std::this_thread::sleep_for(duration);
  stop = true;
  for (auto& t : threads)
    t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(pairs) / seconds;
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
  std::printf("%-10s %22s %30s\n", "clients", "raw SET+GET pairs/s", "torch SET+get (WAIT+GET) /s");
  for (int clients : {1, 64}) {
    const double raw = pairs_per_second(port, clients, false, 3s);
    const double torch = pairs_per_second(port, clients, true, 3s);
    std::printf("%-10d %22.0f %30.0f\n", clients, raw, torch);
  }
  return 0;
}
