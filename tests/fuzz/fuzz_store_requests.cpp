// The store as a TCPStore client can talk to it: each input is sent on a
// fresh connection to a real TcpStoreServer in this process (after a
// VALIDATE when the input's first byte is odd, so the fuzzer reaches the
// commands), the write side is shut, and every reply is read until the
// server closes. A request that breaks a rule closes that connection
// only; a crash, a sanitizer report or a connection the server never
// closes within 9 s is a finding. The server is made anew every thousand
// inputs and its replies capped at 4 MiB, so values that APPENDs grow do
// not turn into replies of tens of MiB that take seconds under ASan.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "ringmaster/store.h"
#include "store/protocol.h"

namespace {

std::unique_ptr<ringmaster::TcpStoreServer> server;
int inputs_on_this_server = 0;

void send_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // closed by the server: a refused request
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!server || ++inputs_on_this_server > 1000) {
    server.reset();
    ringmaster::StoreServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.max_reply_bytes = 4u << 20;
    server = std::make_unique<ringmaster::TcpStoreServer>(options);
    inputs_on_this_server = 0;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // From a new loopback address every 256 inputs: the server closes first,
  // so each connection's ports stay in TIME_WAIT for a minute, and at
  // thousands of inputs a second one source address runs out of ports.
  static std::uint32_t connections = 0;
  sockaddr_in source{};
  source.sin_family = AF_INET;
  source.sin_addr.s_addr = htonl((127u << 24) | (1u << 16) | ((++connections >> 8) & 0xffffu));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0) {
    std::perror("bind a loopback source address");
    std::abort();
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server->port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's timers interrupt calls: an interrupted connect goes on in
  // the background, and its outcome is read once the socket is writable.
  int connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 ? 0 : errno;
  if (connected == EINTR) {
    pollfd p{fd, POLLOUT, 0};
    while (::poll(&p, 1, 9000) < 0 && errno == EINTR) {
    }
    socklen_t length = sizeof(connected);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &connected, &length) != 0) connected = errno;
  }
  if (connected != 0) {
    std::fprintf(stderr, "connect to the store: %s\n", std::strerror(connected));
    std::abort();
  }
  if (size > 0 && (data[0] & 1) != 0) {
    const std::string validate = ringmaster::store::Encoder(ringmaster::store::Command::validate)
                                     .u32(ringmaster::store::kValidationMagic)
                                     .bytes();
    send_all(fd, validate.data(), validate.size());
  }
  send_all(fd, reinterpret_cast<const char*>(data), size);
  ::shutdown(fd, SHUT_WR);
  char buffer[65536];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(9);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;  // libFuzzer's own timers
    if (ready <= 0) {
      std::fprintf(stderr, "the store did not close a connection whose client had finished sending\n");
      std::abort();
    }
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
  }
  ::close(fd);
  return 0;
}
