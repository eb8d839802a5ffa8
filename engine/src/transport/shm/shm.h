// Shared memory between two ranks on one host: a POSIX shared-memory
// segment holding one FIFO per direction.
//
// Each direction has three rings, one per protocol; a step goes whole
// through the ring of its protocol (set_send_protocol/set_recv_protocol).
//
// Simple: a single-producer single-consumer byte ring. The writer copies
// in and publishes its running byte count (head) with release ordering,
// the reader copies out and publishes how far it has read (tail). A step's
// header and data go through it as one stream, exactly as over a socket;
// the ring is small enough (RINGMASTER_SHM_FIFO_BYTES, 1 MiB) to stay in
// the caches the two ranks share, so the copy in and the copy out rarely
// touch memory.
//
// LL and LL128: rings of lines, each an 8-byte flag and its payload (LL:
// 16-byte lines carrying 8 bytes; LL128: 128-byte lines carrying 120). The
// writer fills a line's payload, then stores its flag, (line number << 8)
// | bytes in the line, with release ordering; the reader polls the flag of
// the next line with acquire ordering and takes the bytes. Data and its
// readiness travel in the same cache line (the flag comes first, so a step
// of up to 56 bytes fits LL128's first cache line), so a small step costs
// the reader one cache-line transfer instead of two (the head, then the
// data). The reader
// publishes how many lines it has read; the writer reads that only when
// its last look says the ring is full.
//
// A reader that finds nothing in its ring but data in another reads that
// one: the two ranks run different protocols, and the step header read
// from there says what the peer runs, so the step fails naming both.
//
// The segment is negotiated over the socket the two ranks already share:
// the connecting rank creates it and offers its name, the accepting rank
// maps it and unlinks the name at once, so from then on a killed rank
// leaves nothing in /dev/shm. That socket stays open: it becomes readable
// only when the peer goes away (which is how a waiting rank notices a dead
// peer without a timeout) or when the peer rings it: a rank about to sleep
// sets a flag in the FIFO it waits on, and the other side, after moving
// data that way, sends one byte, so a sleeping rank wakes as soon as its
// peer has moved data, as over a socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/socket.h"
#include "transport/connection.h"

namespace ringmaster::transport::shm {

// What makes two ranks able to share memory: the same host name, boot,
// /dev/shm, network namespace and NCCL_HOSTID (ranks in different network
// namespaces, or given different NCCL_HOSTID, are different hosts as far
// as a cluster is concerned, even when a test runs them on one machine).
struct HostIdentity {
  std::uint64_t key = 0;
  std::string text;  // "host boot=... shm=dev:... netns=..." for messages
};
const HostIdentity& host_identity();

// A mapped segment. Created segments carry the name until unlink().
class Segment {
 public:
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates and maps a segment for a connection from `rank` to `peer` with
  // FIFOs of fifo_bytes each; throws Error(system) naming /dev/shm's
  // problem. Removes segments left by processes of ours that died first.
  static std::unique_ptr<Segment> create(int rank, int peer, std::size_t fifo_bytes);
  // Maps a segment another rank created; on failure returns null and sets
  // `why`.
  static std::unique_ptr<Segment> open(const std::string& name, std::string& why);

  const std::string& name() const { return name_; }
  void unlink() noexcept;
  void* base() const { return base_; }
  std::size_t fifo_bytes() const;

 private:
  Segment() = default;
  std::string name_;
  void* base_ = nullptr;
  std::size_t size_ = 0;
  bool named_ = false;
};

// Removes /dev/shm segments of ours whose creating process no longer runs;
// returns how many. Called before each create.
int remove_stale_segments();

// The two ends of a segment: side 0 (the creator) writes FIFO 0 and reads
// FIFO 1, side 1 the other way round.
class ShmConnection final : public Connection {
 public:
  ShmConnection(std::unique_ptr<Segment> segment, int side, net::Socket liveness);
  ~ShmConnection() override;
  TransportKind kind() const noexcept override { return TransportKind::shm; }
  std::int64_t send_some(const iovec* iov, int count) noexcept override;
  std::int64_t recv_some(const iovec* iov, int count) noexcept override;
  int fd() const noexcept override { return liveness_.fd(); }
  bool data_pollable() const noexcept override { return false; }
  void set_send_protocol(Protocol protocol) noexcept override { send_protocol_ = protocol; }
  void set_recv_protocol(Protocol protocol) noexcept override { recv_protocol_ = protocol; }
  std::size_t peek(std::size_t wanted, const std::byte** data, const std::byte* toward = nullptr) noexcept override;
  void consume(std::size_t bytes) noexcept override;
  bool lends(std::size_t) const noexcept override { return recv_protocol_ == Protocol::simple; }
  bool arm_wait(bool sending, bool receiving) noexcept override;
  int drain_rings() noexcept override;
  void shutdown() noexcept override;

 private:
  struct Fifo;
  std::unique_ptr<Segment> segment_;
  net::Socket liveness_;
  Fifo* out_ = nullptr;
  Fifo* in_ = nullptr;
  std::byte* out_data_ = nullptr;
  std::byte* in_data_ = nullptr;
  std::size_t capacity_ = 0;
  std::uint64_t head_ = 0;       // bytes written to out_ (ours)
  std::uint64_t tail_seen_ = 0;  // the reader's progress on out_, last read
  std::uint64_t tail_ = 0;       // bytes read from in_ (ours)
  std::uint64_t head_seen_ = 0;  // the writer's progress on in_, last read

  // One direction of one line format, as this side sees it.
  struct LineRing {
    std::byte* lines = nullptr;
    std::size_t count = 0;        // lines in the ring
    std::uint64_t next = 0;       // lines written (out) or read (in) by this side
    std::uint64_t seen = 0;       // out: the reader's count, last read
    std::uint64_t published = 0;  // in: the count last told to the writer
    std::size_t offset = 0;       // in: bytes of line `next` already taken
  };
  LineRing out_lines_[2], in_lines_[2];  // [0] LL, [1] LL128
  Protocol send_protocol_ = Protocol::simple;
  Protocol recv_protocol_ = Protocol::simple;

  template <std::size_t kLine>
  std::int64_t send_lines(LineRing& lines, int format, const iovec* iov, int count) noexcept;
  template <std::size_t kLine>
  std::int64_t recv_lines(LineRing& lines, int format, const iovec* iov, int count) noexcept;
  std::int64_t send_stream(const iovec* iov, int count) noexcept;
  std::int64_t recv_stream(const iovec* iov, int count) noexcept;
  // Whether the peer has written anything this side has not read, in any
  // ring but the one of `format` (-1: the byte ring's, 0: LL's, 1: LL128's).
  bool other_rings_hold_data(int format) noexcept;
  bool look_ahead(void* out, std::size_t bytes) noexcept override;
  bool line_ready(int format) noexcept;
  void ring() noexcept;
};

}  // namespace ringmaster::transport::shm
