// The rendezvous store on a real etcd server (Debian's etcd-server,
// extracted by scripts/setup-deps --tests), started on loopback for each
// test: torch's store semantics, concurrent ADDs, WAIT woken by a watch,
// a dead holder's keys expiring with its lease, probe and perf at 64 ranks
// over it, and etcd killed in the middle of init.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <sstream>
#include <thread>

#include "process.h"
#include "ringmaster/status.h"
#include "store/etcd.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing_support::ChildProcess;

// An etcd server of the test's own: a data directory under /tmp, client
// and peer ports on loopback; killed and removed at the end.
class EtcdServer {
 public:
  EtcdServer() : client_port_(testing_support::free_port()), peer_port_(testing_support::free_port()) {
    const char* binary = std::getenv("RINGMASTER_ETCD");
    if (binary == nullptr || *binary == '\0') {
      throw std::runtime_error(
          "etcd not found: scripts/setup-deps --tests extracts it from Debian's etcd-server package");
    }
    dir_ = std::filesystem::temp_directory_path() /
           ("ringmaster-etcd-" + std::to_string(::getpid()) + "-" + std::to_string(client_port_));
    std::filesystem::remove_all(dir_);
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    process_ = testing_support::spawn(
        {binary, "--name", "test", "--data-dir", (dir_ / "data").string(), "--listen-client-urls", client,
         "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
         "--initial-cluster", "test=" + peer, "--log-level", "error"},
        {}, true);
    // Ready when it answers /version and grants a lease.
    const auto until = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      try {
        connect("/ready", 2s);
        return;
      } catch (const Error&) {
        if (std::chrono::steady_clock::now() > until) throw std::runtime_error("etcd did not start within 20 s");
        std::this_thread::sleep_for(100ms);
      }
    }
  }
  ~EtcdServer() {
    kill();
    std::filesystem::remove_all(dir_);
  }
  void kill() {
    if (process_.pid <= 0) return;
    ::kill(process_.pid, SIGKILL);
    process_.finish();
    process_.pid = -1;
  }
  std::uint16_t port() const { return client_port_; }
  std::string url(const std::string& prefix) const {
    return "etcd://127.0.0.1:" + std::to_string(client_port_) + prefix;
  }

  std::unique_ptr<store::EtcdStore> connect(const std::string& prefix, std::chrono::milliseconds timeout = 10s,
                                            std::chrono::seconds lease = 30s) const {
    auto address = *net::SocketAddress::parse("127.0.0.1:" + std::to_string(client_port_));
    net::Socket socket;
    if (const int err = net::Socket::connect(address, net::Clock::now() + timeout, socket); err != 0) {
      throw Error(ErrorCategory::network, "connect: " + net::errno_text(err));
    }
    auto store = std::make_unique<store::EtcdStore>(
        std::move(socket),
        store::EtcdEndpoint{.host = "127.0.0.1", .address = address, .prefix = prefix, .lease = lease}, timeout);
    store->handshake(net::Clock::now() + timeout);
    return store;
  }

 private:
  std::uint16_t client_port_, peer_port_;
  std::filesystem::path dir_;
  ChildProcess process_;
};

TEST(EtcdStore, KeepsTorchsStoreSemantics) {
  EtcdServer etcd;
  auto store = etcd.connect("/semantics");
  EXPECT_NE(store->handshake_detail().find("etcd 3."), std::string::npos) << store->handshake_detail();

  store->set("a", std::string("bytes\0and\xff", 10));
  EXPECT_EQ(store->get("a"), std::string("bytes\0and\xff", 10));
  EXPECT_EQ(store->get_existing("a").size(), 10u);
  try {
    store->get_existing("missing");
    FAIL() << "a missing key was read";
  } catch (const Error& e) {
    EXPECT_NE(e.status().message().find("etcd at 127.0.0.1:"), std::string::npos) << e.status().message();
  }

  // compare_set: created only from "", changed only from the expected value.
  EXPECT_EQ(store->compare_set("cs", "x", "y"), "x");
  EXPECT_FALSE(store->check({"cs"}));
  EXPECT_EQ(store->compare_set("cs", "", "first"), "first");
  EXPECT_EQ(store->compare_set("cs", "", "second"), "first");
  EXPECT_EQ(store->compare_set("cs", "first", "third"), "third");

  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -2), 3);
  EXPECT_EQ(store->add("n", 0), 3);
  EXPECT_EQ(store->get("n"), "3");
  EXPECT_THROW(store->add("a", 1), Error);  // not a number

  store->append("log", "one");
  store->append("log", ",two");
  EXPECT_EQ(store->get("log"), "one,two");

  EXPECT_TRUE(store->check({"a", "n", "log"}));
  EXPECT_FALSE(store->check({"a", "nothing"}));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(store->wait({"never"}, 500ms));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 450ms);
  EXPECT_LT(waited, 3s);

  // Another prefix sees none of it.
  auto other = etcd.connect("/elsewhere");
  EXPECT_FALSE(other->check({"a"}));
}

// Each client's keys live under its own lease, revoked when it ends: the
// adders stay connected until the sum has been read, as ranks stay through
// the barrier.
TEST(EtcdStore, ConcurrentAddsSumExactly) {
  EtcdServer etcd;
  constexpr int kClients = 8, kAdds = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0}, done{0};
  std::atomic<bool> read{false};
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&] {
      try {
        auto store = etcd.connect("/adds");
        for (int i = 0; i < kAdds; ++i)
          store->add("count", 1);
        ++done;
        while (!read.load())
          std::this_thread::sleep_for(10ms);
      } catch (const std::exception& e) {
        ++failures;
        ++done;
        ADD_FAILURE() << e.what();
      }
    });
  }
  while (done.load() < kClients)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(etcd.connect("/adds")->add("count", 0), kClients * kAdds);
  read = true;
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(EtcdStore, WaitIsWokenByAnotherClientsSet) {
  EtcdServer etcd;
  auto waiter = etcd.connect("/wake");
  auto setter = etcd.connect("/wake");
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    setter->set("first", "1");
    std::this_thread::sleep_for(300ms);
    setter->set("second", "2");
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(waiter->wait({"first", "second"}, 10s));
  const auto waited = std::chrono::steady_clock::now() - start;
  later.join();
  EXPECT_GE(waited, 550ms);
  EXPECT_LT(waited, 3s) << "the watch did not wake the wait";
  EXPECT_EQ(waiter->get("second"), "2");
}

std::vector<json> json_lines(const std::string& output);

// A rank alone in a world of 2 waits at the barrier with its keys under a
// 2 s lease: its keepalives hold them past the TTL; killed, they expire.
TEST(EtcdStore, KeysOfADeadRankExpireWithItsLeaseAndACleanEndRevokesAtOnce) {
  EtcdServer etcd;
  auto rank = testing_support::spawn(
      {RINGMASTER_CLI, "probe", "--json"},
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"RINGMASTER_STORE", etcd.url("/lease?lease=2")}}, false);
  auto reader = etcd.connect("/lease");
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!reader->check({"ringmaster/default/rank/0"}) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(reader->check({"ringmaster/default/rank/0"})) << "rank 0 never claimed its rank";
  std::this_thread::sleep_for(3s);
  EXPECT_TRUE(reader->check({"ringmaster/default/rank/0"})) << "the key expired while its rank was alive";
  ::kill(rank.pid, SIGKILL);
  rank.finish();
  const auto killed = std::chrono::steady_clock::now();
  while (reader->check({"ringmaster/default/rank/0"}) && std::chrono::steady_clock::now() - killed < 10s)
    std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(reader->check({"ringmaster/default/rank/0"})) << "a dead rank's key outlived its lease";
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 5s);

  {
    auto clean = etcd.connect("/lease", 10s, 60s);
    clean->set("clean", "yes");
    EXPECT_TRUE(reader->check({"clean"}));
  }
  EXPECT_FALSE(reader->check({"clean"})) << "a store that ended cleanly left its keys for the lease's 60 s";
}

std::vector<json> json_lines(const std::string& output) {
  std::vector<json> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() != '{') continue;
    auto j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) lines.push_back(j);
  }
  return lines;
}

TEST(EtcdRendezvous, ProbeAndPerfAt64RanksOverEtcd) {
  EtcdServer etcd;
  auto probe = testing_support::spawn({RINGMASTER_CLI, "probe", "--np", "64"},
                                      {{"RINGMASTER_STORE", etcd.url("/probe64")}}, true);
  probe.finish();
  EXPECT_EQ(probe.exit_code(), 0) << probe.output;

  auto perf = testing_support::spawn({RINGMASTER_CLI, "perf", "all_reduce", "--np", "64", "-b", "8", "-e", "64K", "-f",
                                      "8", "-n", "2", "-w", "1", "-c", "1", "--bind", "none"},
                                     {{"RINGMASTER_STORE", etcd.url("/perf64")}}, true);
  perf.finish();
  EXPECT_EQ(perf.exit_code(), 0) << perf.output;  // a wrong element (-c 1) fails the run
  EXPECT_NE(perf.output.find("Avg bus bandwidth"), std::string::npos) << perf.output;
}

TEST(EtcdRendezvous, EtcdKilledMidInitIsAStoreFailureNamingEtcd) {
  EtcdServer etcd;
  // Rank 0 of 2 alone: it waits at STORE_BARRIER for a rank that never comes.
  auto rank = testing_support::spawn({RINGMASTER_CLI, "probe", "--json"},
                                     {{"RANK", "0"},
                                      {"WORLD_SIZE", "2"},
                                      {"RINGMASTER_STORE", etcd.url("/killed")},
                                      {"RINGMASTER_STORE_TIMEOUT", "60"}},
                                     false);
  auto watcher = etcd.connect("/killed");
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!watcher->check({"ringmaster/default/joined"}) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(watcher->check({"ringmaster/default/joined"})) << "rank 0 never reached the barrier";
  watcher.reset();
  etcd.kill();
  const auto killed = std::chrono::steady_clock::now();
  rank.finish();
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 10s) << "the rank did not notice etcd had gone";
  EXPECT_NE(rank.exit_code(), 0);
  json failure;
  for (const auto& line : json_lines(rank.output)) {
    if (line.value("type", "") == "failure") failure = line;
  }
  ASSERT_FALSE(failure.is_null()) << rank.output;
  EXPECT_EQ(failure.value("stage", ""), "STORE_BARRIER") << failure.dump();
  EXPECT_NE(failure.dump().find("etcd"), std::string::npos) << failure.dump();
}

}  // namespace
}  // namespace ringmaster
