// Store throughput: SET+GET pairs per second with 1 and 64 concurrent
// clients against one TcpStoreServer on loopback. A pair is what a torch
// client does: SET (no reply), then get() = WAIT + GET (two round trips).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ringmaster/store.h"

using namespace std::chrono_literals;

namespace {

double pairs_per_second(ringmaster::TcpStoreServer& server, int clients, std::chrono::milliseconds duration) {
  std::atomic<bool> go{false}, stop{false};
  std::atomic<long long> pairs{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      ringmaster::TcpStoreClient client("127.0.0.1", server.port(), 30s);
      const std::string value(64, 'v');
      long long mine = 0;
      while (!go)
        std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string key = "bench/" + std::to_string(c) + "/" + std::to_string(mine % 1024);
        client.set(key, value);
        if (client.get(key).size() != value.size()) std::abort();
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

int main() {
  ringmaster::TcpStoreServer server(ringmaster::StoreServerOptions{.host = "127.0.0.1", .port = 0});
  std::printf("%-10s %16s\n", "clients", "SET+GET pairs/s");
  for (int clients : {1, 64}) {
    const double rate = pairs_per_second(server, clients, 3s);
    std::printf("%-10d %16.0f\n", clients, rate);
  }
  return 0;
}
