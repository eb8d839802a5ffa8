// The store under load: 1,000 clients connected at once, 100 ADDs each on
// one key, must sum to exactly 100,000; meanwhile misbehaving clients come
// and go without disturbing anyone.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "ringmaster/store.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;

TEST(StoreLoad, ThousandClientsHundredAddsEach) {
  constexpr int kClients = 1000;
  constexpr int kAdds = 100;
  constexpr int kThreads = 40;  // each thread drives 25 connections, all open at once
  TcpStoreServer server(StoreServerOptions{.host = "127.0.0.1", .port = 0, .expected_clients = kClients});

  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::atomic<int> connected{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<TcpStoreClient> clients;
        for (int c = t; c < kClients; c += kThreads)
          clients.emplace_back("127.0.0.1", server.port(), 30s);
        connected += static_cast<int>(clients.size());
        // Hold every connection open until all threads have theirs.
        while (connected.load() < kClients)
          std::this_thread::sleep_for(1ms);
        for (int i = 0; i < kAdds; ++i) {
          for (auto& client : clients)
            client.add("counter", 1);
        }
      } catch (const std::exception& e) {
        ++failures;
        ADD_FAILURE() << e.what();
        connected += kClients;  // release the others
      }
    });
  }
  // A bad client in the middle of it all.
  {
    auto address = net::SocketAddress::parse("127.0.0.1:" + std::to_string(server.port()));
    net::Socket bad;
    ASSERT_EQ(net::Socket::connect(*address, net::Clock::now() + 5s, bad), 0);
    const char garbage[] = "\x00\x01\x02\x03\x04\x05";
    bad.send_all(garbage, sizeof(garbage), net::Clock::now() + 5s);
  }
  for (auto& t : threads)
    t.join();
  ASSERT_EQ(failures.load(), 0);
  // Every client has gone, the bad one too: the server lets go of them all
  // (a leak of connections would keep this above zero).
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (server.num_connections() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.num_connections(), 0u);
  TcpStoreClient check("127.0.0.1", server.port(), 5s);
  EXPECT_EQ(check.add("counter", 0), kClients * kAdds);
  EXPECT_EQ(check.get("counter"), std::to_string(kClients * kAdds));
}

}  // namespace
}  // namespace ringmaster
