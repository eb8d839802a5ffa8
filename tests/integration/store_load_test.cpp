// The store under load: 1,000 clients connected at once, 100 ADDs each on
// one key, must sum to exactly 100,000; meanwhile misbehaving clients come
// and go without disturbing anyone. And 4,096 clients at once, each doing
// what a torch rank does at init, against a store in a process of its own
// whose memory is read per connection.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "process.h"
#include "ringmaster/store.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using testing_support::kAddressSanitizer;
using testing_support::rss_kib;

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

// A store server in a child process: its memory is its own to read. The
// child serves until the parent closes the pipe.
class StoreProcess {
 public:
  explicit StoreProcess(const StoreServerOptions& options) {
    int to_parent[2], to_child[2];
    if (pipe(to_parent) != 0 || pipe(to_child) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      close(to_parent[0]);
      close(to_child[1]);
      std::uint16_t port = 0;
      try {
        TcpStoreServer server(options);
        port = server.port();
        (void)!write(to_parent[1], &port, sizeof(port));
        char byte;
        while (read(to_child[0], &byte, 1) > 0) {
        }
        server.stop();
      } catch (...) {
        (void)!write(to_parent[1], &port, sizeof(port));
      }
      _exit(0);
    }
    close(to_parent[1]);
    close(to_child[0]);
    control_ = to_child[1];
    if (read(to_parent[0], &port_, sizeof(port_)) != sizeof(port_)) port_ = 0;
    close(to_parent[0]);
  }
  ~StoreProcess() {
    close(control_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int control_ = -1;
  std::uint16_t port_ = 0;
};

// 4,096 clients connected at once, each doing a torch rank's init: publish
// its address (SET), count itself in (ADD; the last one in SETs the key
// everyone waits on), WAIT for that key, then read it and a neighbour's
// address (torch's get(): WAIT + GET). Every one must complete with the
// right values, and the store must hold each connection in bounded memory.
TEST(StoreLoad, FourThousandClientsDoTorchStyleInit) {
  constexpr int kClients = 4096;
  constexpr int kThreads = 64;  // each drives 64 connections, all open at once
  StoreProcess store(StoreServerOptions{.host = "127.0.0.1", .port = 0, .expected_clients = kClients});
  ASSERT_NE(store.port(), 0) << "the store process did not start";
  const long idle_kib = rss_kib(store.pid());

  std::atomic<int> failures{0}, connected{0}, finished{0};
  std::atomic<bool> measured{false};
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<std::pair<int, TcpStoreClient>> clients;
        for (int rank = t; rank < kClients; rank += kThreads)
          clients.emplace_back(rank, TcpStoreClient("127.0.0.1", store.port(), 60s));
        connected += static_cast<int>(clients.size());
        while (connected.load() < kClients)
          std::this_thread::sleep_for(1ms);
        for (auto& [rank, client] : clients)
          client.set("addr/" + std::to_string(rank), "10.0.0." + std::to_string(rank));
        for (auto& [rank, client] : clients) {
          if (client.add("joined", 1) == kClients) client.set("all_joined", "1");
        }
        for (auto& [rank, client] : clients) {
          client.wait({"all_joined"}, 60s);
          if (client.get("all_joined") != "1") throw std::runtime_error("all_joined has the wrong value");
          const int next = (rank + 1) % kClients;
          if (client.get("addr/" + std::to_string(next)) != "10.0.0." + std::to_string(next))
            throw std::runtime_error("rank " + std::to_string(rank) + " read a wrong address");
        }
        // Every connection stays open until the store's memory is read.
        ++finished;
        while (!measured.load())
          std::this_thread::sleep_for(1ms);
      } catch (const std::exception& e) {
        ++failures;
        ADD_FAILURE() << e.what();
        connected += kClients;
        ++finished;
      }
    });
  }
  while (finished.load() < kThreads)
    std::this_thread::sleep_for(1ms);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long busy_kib = rss_kib(store.pid());
  measured = true;
  for (auto& t : threads)
    t.join();
  ASSERT_EQ(failures.load(), 0);

  const double per_connection_kib = static_cast<double>(busy_kib - idle_kib) / kClients;
  std::printf("4096 clients: init in %.2f s; store RSS %ld -> %ld KiB, %.1f KiB a connection\n", seconds, idle_kib,
              busy_kib, per_connection_kib);
  // Each connection holds a coroutine, a socket and a 4 KiB read buffer.
  // The bound leaves room for the allocator; a connection that kept a
  // 64 KiB buffer (as each once did: 280 MB for these clients) fails it.
  if (!kAddressSanitizer) {
    EXPECT_LT(per_connection_kib, 16.0);
  }

  TcpStoreClient check("127.0.0.1", store.port(), 10s);
  EXPECT_EQ(check.add("joined", 0), kClients);
  EXPECT_EQ(check.num_keys(), kClients + 2);
}

}  // namespace
}  // namespace ringmaster
