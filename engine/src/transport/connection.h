// One connection to a peer rank, whatever carries it: a TCP socket, a pair
// of FIFOs in shared memory between two ranks on one host, or a libfabric
// endpoint. ChannelLink
// drives every kind the same way: it frames each step with a header and
// moves bytes with non-blocking send_some/recv_some, waiting only when
// neither direction can move.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "net/path_probe.h"
#include "net/tcp_info.h"
#include "ringmaster/types.h"

namespace ringmaster::transport {

enum class TransportKind : std::uint8_t { socket, shm, ofi };

// Steps this large may carry filler between header and data
// (Connection::pad_before); their receivers read the header first.
inline constexpr std::size_t kPaddedFromBytes = 64 * 1024;

// "SOCKET", "SHM", "OFI": as NCCL names them in its connection lines.
std::string_view name_of(TransportKind kind) noexcept;

class Connection {
 public:
  virtual ~Connection() = default;
  virtual TransportKind kind() const noexcept = 0;

  // Move what can move now, without blocking: the number of bytes taken
  // from (sent) or written to (received) the iovecs in order, 0 when
  // nothing can move, or a negative errno (net::kPeerClosed when the peer
  // closed the connection).
  virtual std::int64_t send_some(const iovec* iov, int count) noexcept = 0;
  virtual std::int64_t recv_some(const iovec* iov, int count) noexcept = 0;

  // The file descriptor to poll while waiting. For a socket it carries the
  // data (POLLIN/POLLOUT). For shared memory (data_pollable() false) it is
  // the socket the two ranks met on: before sleeping the waiter says so in
  // the FIFO (arm_wait), and the peer, when it next moves data that way,
  // rings with one byte on that socket; the socket also closes when the
  // peer goes away.
  virtual int fd() const noexcept = 0;
  virtual bool data_pollable() const noexcept = 0;
  // Where data moves next in that direction, when data_pollable(): a
  // connection striped over several sockets waits on the one whose turn
  // it is.
  virtual int wait_fd(bool /*sending*/) const noexcept { return fd(); }

  // Before sleeping on fd(): asks the peer to ring when data (receiving) or
  // space (sending) arrives. True when it already has: do not sleep.
  virtual bool arm_wait(bool /*sending*/, bool /*receiving*/) noexcept { return false; }
  // After fd() became readable on a connection whose data is not pollable:
  // consumes the rings; net::kPeerClosed or a negative errno when the peer
  // went away, 0 otherwise.
  virtual int drain_rings() noexcept { return 0; }

  // The longest sleep in poll() on fd() before trying again (µs): long for
  // connections that wake their waiters, short where a wake-up can be
  // missed (libfabric providers whose descriptor does not cover every
  // socket behind the endpoint).
  virtual int max_sleep_us() const noexcept { return 100'000; }

  // TCP's own count of what this end sent, over every socket carrying the
  // data (net/tcp_info.h); nullopt where no TCP socket carries it.
  virtual std::optional<net::TcpSegments> tcp_segments() const noexcept { return std::nullopt; }

  // False while data already taken by send_some still needs this side's
  // help to leave (libfabric with manual progress): a step is over only
  // when it is flushed.
  virtual bool flushed() noexcept { return true; }

  // How the next steps' bytes are laid out, where the transport has more
  // than one way: shared memory carries Simple steps in a byte ring and LL
  // and LL128 steps in rings of flagged lines. Both ends of a step set the
  // step's protocol before moving its bytes.
  // Lending received bytes in place: peek() returns how many readable
  // bytes lie contiguous at *data (0: none, or the connection cannot lend
  // them; recv_some then copies), reloading the writer's progress when
  // fewer than `wanted` are known; consume() ends the loan of the first
  // `bytes` of them. The data stays put until consumed. `toward`, when
  // given, is where the reader will write what it computes from the first
  // byte: a connection that places the bytes itself keeps them
  // offset_apart from there.
  virtual std::size_t peek(std::size_t /*wanted*/, const std::byte** /*data*/,
                           const std::byte* /*toward*/ = nullptr) noexcept {
    return 0;
  }
  virtual void consume(std::size_t /*bytes*/) noexcept {}
  // Copies the first `bytes` not yet received into `out` without taking
  // them (recv_some still returns them): true when that many have arrived,
  // in whichever protocol's ring. For an idle connection they are the
  // next step's header. Connections that cannot look ahead return false.
  virtual bool look_ahead(void* /*out*/, std::size_t /*bytes*/) noexcept { return false; }
  // Whether peek() can lend a step of `step_bytes` now (it may still find
  // none).
  virtual bool lends(std::size_t /*step_bytes*/) const noexcept { return false; }

  // Filler bytes to send between a step's header (`header_bytes`) and its
  // `bytes` of data at `data`: 0 to 4095, and 0 below kPaddedFromBytes
  // (the receiver of a smaller step reads header and data at once).
  virtual std::size_t pad_before(const void* /*data*/, std::size_t /*bytes*/,
                                 std::size_t /*header_bytes*/) const noexcept {
    return 0;
  }

  virtual void set_send_protocol(Protocol /*protocol*/) noexcept {}
  virtual void set_recv_protocol(Protocol /*protocol*/) noexcept {}

  // Lets the transport do its own work (libfabric's connection set-up and
  // rendezvous need both sides' calls); negative errno on failure.
  virtual int progress() noexcept { return 0; }

  // Wakes a blocked peer and makes every later call fail. Any thread.
  // The kernel's view of this connection's sending side, for a
  // connection carried by TCP (the socket with data stuck, if any); none
  // for the others.
  virtual std::optional<net::TcpSendState> send_state() const noexcept { return std::nullopt; }
  virtual void shutdown() noexcept = 0;
};

}  // namespace ringmaster::transport
