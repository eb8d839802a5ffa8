// The cost of one step over shared memory, per protocol, between two
// threads pinned to two cores: the FIFO alone (send_some/recv_some of a
// step's header and data) and a whole ChannelLink exchange (headers checked,
// counters kept). Both sides send and receive at once, as in a ring step, so
// a round is one one-way transfer plus the software on each side. A
// cache-line ping-pong between the same cores is printed beside it: the
// floor for one transfer on this machine.
//
//   shm_bench [rounds] [bytes]
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "algo/ring.h"
#include "transport/link.h"
#include "transport/shm/shm.h"

using namespace ringmaster;
using Clock = std::chrono::steady_clock;

namespace {

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % static_cast<int>(std::thread::hardware_concurrency()), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Two ends of one segment, as two ranks on one host have them.
std::pair<std::unique_ptr<transport::Connection>, std::unique_ptr<transport::Connection>> connected_pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
  auto created = transport::shm::Segment::create(0, 1, 1 << 20);
  std::string why;
  auto opened = transport::shm::Segment::open(created->name(), why);
  if (!opened) {
    std::fprintf(stderr, "%s\n", why.c_str());
    std::exit(1);
  }
  created->unlink();
  return {std::make_unique<transport::shm::ShmConnection>(std::move(created), 0, net::Socket(fds[0])),
          std::make_unique<transport::shm::ShmConnection>(std::move(opened), 1, net::Socket(fds[1]))};
}

double ping_pong_ns(long rounds) {
  alignas(128) static std::atomic<long> a{0};
  alignas(128) static std::atomic<long> b{0};
  a = 0, b = 0;
  std::thread t([&] {
    pin(1);
    for (long i = 1; i <= rounds; ++i) {
      while (a.load(std::memory_order_acquire) != i) {
      }
      b.store(i, std::memory_order_release);
    }
  });
  pin(0);
  const auto t0 = Clock::now();
  for (long i = 1; i <= rounds; ++i) {
    a.store(i, std::memory_order_release);
    while (b.load(std::memory_order_acquire) != i) {
    }
  }
  const auto t1 = Clock::now();
  t.join();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(rounds);
}

// Each side sends `bytes` and receives `bytes` per round, busy-polling.
double fifo_round_ns(Protocol protocol, long rounds, std::size_t bytes) {
  auto [c0, c1] = connected_pair();
  auto side = [&, protocol](transport::Connection& c, int cpu, double* out) {
    pin(cpu);
    c.set_send_protocol(protocol);
    c.set_recv_protocol(protocol);
    std::vector<char> in(bytes), data(bytes, 1);
    const auto t0 = Clock::now();
    for (long r = 0; r < rounds; ++r) {
      std::size_t sent = 0, got = 0;
      while (sent < bytes || got < bytes) {
        if (sent < bytes) {
          iovec v{data.data() + sent, bytes - sent};
          const auto w = c.send_some(&v, 1);
          if (w < 0) std::abort();
          sent += static_cast<std::size_t>(w);
        }
        if (got < bytes) {
          iovec v{in.data() + got, bytes - got};
          const auto n = c.recv_some(&v, 1);
          if (n < 0) std::abort();
          got += static_cast<std::size_t>(n);
        }
      }
    }
    *out = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(rounds);
  };
  double a = 0, b = 0;
  std::thread t(side, std::ref(*c1), 1, &b);
  side(*c0, 0, &a);
  t.join();
  return std::max(a, b);
}

// The same through ChannelLink::exchange, headers and counters included.
double link_round_ns(Protocol protocol, long rounds, std::size_t bytes) {
  auto [c0, c1] = connected_pair();
  auto side = [&, protocol](std::unique_ptr<transport::Connection> c, int rank, double* out) {
    pin(rank);
    transport::ChannelLink link;
    link.rank = rank;
    link.spin = std::chrono::microseconds(1'000'000);
    transport::ChannelStats stats;
    link.counters = &stats;
    // One connection both ways: next and prev are the same peer.
    auto* raw = c.get();
    link.next.connection = std::move(c);
    link.next.rank = 1 - rank;
    link.prev.rank = 1 - rank;
    struct Borrowed final : transport::Connection {
      transport::Connection* c;
      explicit Borrowed(transport::Connection* to) : c(to) {}
      transport::TransportKind kind() const noexcept override { return c->kind(); }
      std::int64_t send_some(const iovec* v, int n) noexcept override { return c->send_some(v, n); }
      std::int64_t recv_some(const iovec* v, int n) noexcept override { return c->recv_some(v, n); }
      int fd() const noexcept override { return c->fd(); }
      bool data_pollable() const noexcept override { return c->data_pollable(); }
      bool arm_wait(bool s, bool r) noexcept override { return c->arm_wait(s, r); }
      int drain_rings() noexcept override { return c->drain_rings(); }
      void set_send_protocol(Protocol p) noexcept override { c->set_send_protocol(p); }
      void set_recv_protocol(Protocol p) noexcept override { c->set_recv_protocol(p); }
      void shutdown() noexcept override { c->shutdown(); }
    };
    link.prev.connection = std::make_unique<Borrowed>(raw);
    algo::Task op;
    op.protocol = protocol;
    std::vector<std::byte> in(bytes), data(bytes, std::byte{1});
    const auto t0 = Clock::now();
    for (long r = 0; r < rounds; ++r) {
      op.seq = static_cast<std::uint64_t>(r);
      link.exchange(algo::step_header(op, 0), data.data(), bytes, in.data(), bytes);
    }
    *out = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(rounds);
  };
  double a = 0, b = 0;
  std::thread t(side, std::move(c1), 1, &b);
  side(std::move(c0), 0, &a);
  t.join();
  return std::max(a, b);
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 200000;
  const std::size_t bytes = argc > 2 ? static_cast<std::size_t>(std::atol(argv[2])) : 8;
  std::printf("# shared-memory step between two cores, %ld rounds, %zu data bytes\n", rounds, bytes);
  std::printf("# cache-line ping-pong: %.0f ns a round trip\n", ping_pong_ns(rounds));
  std::printf("# %-7s %14s %14s\n", "proto", "fifo (ns)", "exchange (ns)");
  for (Protocol p : {Protocol::simple, Protocol::ll, Protocol::ll128}) {
    const double fifo = fifo_round_ns(p, rounds, bytes + sizeof(transport::StepHeader));
    const double link = link_round_ns(p, rounds, bytes);
    std::printf("  %-7s %14.0f %14.0f\n", std::string(name_of(p)).c_str(), fifo, link);
  }
  return 0;
}
