#include "transport/shm/shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <random>

#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "ringmaster/status.h"

namespace ringmaster::transport::shm {
namespace {

constexpr std::uint32_t kSegmentMagic = 0x52534D31;  // "RSM1"
constexpr std::string_view kPrefix = "ringmaster-";  // in /dev/shm
constexpr std::size_t kDataOffset = 4096;

struct SegmentHeader {
  std::uint32_t magic;
  std::uint32_t creator_pid;
  std::uint64_t fifo_bytes;
};

// The line rings (LL, LL128) of one direction: lines of 16 and 128 bytes.
constexpr std::size_t kLineBytes[2] = {16, 128};
constexpr std::size_t kLineCount[2] = {4096, 2048};  // 64 KiB and 256 KiB; powers of two (index by mask)
static_assert((kLineCount[0] & (kLineCount[0] - 1)) == 0 && (kLineCount[1] & (kLineCount[1] - 1)) == 0);
constexpr std::size_t kLinesBytes = kLineBytes[0] * kLineCount[0] + kLineBytes[1] * kLineCount[1];

// The line rings start on a page after both byte rings, whatever size
// those have (RINGMASTER_SHM_FIFO_BYTES need not be a multiple of anything).
std::size_t lines_offset(std::size_t fifo_bytes) {
  return (kDataOffset + 2 * fifo_bytes + 4095) / 4096 * 4096;
}

std::size_t segment_size(std::size_t fifo_bytes) {
  return lines_offset(fifo_bytes) + 2 * kLinesBytes;
}

// recv_stream's and recv_lines' answer when their ring is empty but another
// holds data (recv_some then reads from that one).
constexpr std::int64_t kOtherRing = -EPROTO;

int format_of(Protocol p) {
  return p == Protocol::ll ? 0 : p == Protocol::ll128 ? 1 : -1;
}

std::uint64_t load_flag(const std::byte* line) {
  return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(reinterpret_cast<const std::uint64_t*>(line)))
      .load(std::memory_order_acquire);
}

}  // namespace

// One direction's counters, each on its own cache line so the writer and
// the reader never share one they both write.
struct ShmConnection::Fifo {
  alignas(64) std::atomic<std::uint64_t> head;  // bytes written, by the writer
  alignas(64) std::atomic<std::uint64_t> tail;  // bytes read, by the reader
  alignas(64) std::atomic<std::uint32_t> closed;
  // The reader sleeps until the head moves / the writer until the tail
  // does: whoever moves it next rings the other side.
  alignas(64) std::atomic<std::uint32_t> reader_waiting;
  std::atomic<std::uint32_t> writer_waiting;
  alignas(64) std::atomic<std::uint64_t> lines_read[2];  // LL, LL128: by the reader
};
static_assert(sizeof(SegmentHeader) <= 64);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

const HostIdentity& host_identity() {
  static const HostIdentity identity = [] {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    std::string boot;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
    struct stat shm_dir {
    }, netns{};
    const bool shm_ok = ::stat("/dev/shm", &shm_dir) == 0;
    const bool ns_ok = ::stat("/proc/self/ns/net", &netns) == 0;
    HostIdentity id;
    id.text = fmt::format("{} boot={} shm={} netns={}", host, boot.empty() ? "?" : boot.substr(0, 8),
                          shm_ok ? std::to_string(shm_dir.st_dev) : "none", ns_ok ? std::to_string(netns.st_ino) : "?");
    // Ranks told they are on different nodes (NCCL_HOSTID) are, as NCCL
    // takes them.
    if (const auto named = param_env(Param::HostId)) id.text += " hostid=" + *named;
    id.key = fnv1a(id.text);
    return id;
  }();
  return identity;
}

Segment::~Segment() {
  unlink();
  if (base_ != nullptr) ::munmap(base_, size_);
}

std::unique_ptr<Segment> Segment::create(int rank, int peer, std::size_t fifo_bytes) {
  remove_stale_segments();
  static std::atomic<unsigned> counter{0};
  static thread_local std::mt19937 random{std::random_device{}()};
  std::unique_ptr<Segment> s(new Segment);
  s->name_ = fmt::format("/{}{}-{}to{}-{}-{:08x}", kPrefix, ::getpid(), rank, peer, counter++, random());
  s->size_ = segment_size(fifo_bytes);
  const int fd = ::shm_open(s->name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    throw Error(ErrorCategory::network,
                fmt::format("cannot create shared memory segment /dev/shm{}: {}", s->name_, std::strerror(errno)));
  }
  s->named_ = true;
  // Reserve the pages now: a full /dev/shm fails here with ENOSPC instead
  // of a SIGBUS at the first write.
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(s->size_));
  if (err != 0) {
    ::close(fd);
    throw Error(ErrorCategory::network,
                fmt::format("cannot reserve {} KiB in /dev/shm: {}", s->size_ / 1024, std::strerror(err)));
  }
  // MAP_POPULATE: every page mapped now, not at its first use in a
  // collective (a page fault costs microseconds on a VM, and a 1 MiB ring
  // has hundreds of pages).
  s->base_ = ::mmap(nullptr, s->size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (s->base_ == MAP_FAILED) {
    s->base_ = nullptr;
    throw Error(ErrorCategory::network, fmt::format("cannot map /dev/shm{}: {}", s->name_, std::strerror(errno)));
  }
  auto* header = static_cast<SegmentHeader*>(s->base_);
  header->creator_pid = static_cast<std::uint32_t>(::getpid());
  header->fifo_bytes = fifo_bytes;
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kSegmentMagic;
  return s;
}

std::unique_ptr<Segment> Segment::open(const std::string& name, std::string& why) {
  std::unique_ptr<Segment> s(new Segment);
  s->name_ = name;
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    why = fmt::format("cannot open /dev/shm{}: {}", name, std::strerror(errno));
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < kDataOffset) {
    ::close(fd);
    why = fmt::format("/dev/shm{} is not a segment of ours", name);
    return nullptr;
  }
  s->size_ = static_cast<std::size_t>(st.st_size);
  s->base_ = ::mmap(nullptr, s->size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (s->base_ == MAP_FAILED) {
    s->base_ = nullptr;
    why = fmt::format("cannot map /dev/shm{}: {}", name, std::strerror(errno));
    return nullptr;
  }
  const auto* header = static_cast<const SegmentHeader*>(s->base_);
  if (header->magic != kSegmentMagic || segment_size(header->fifo_bytes) != s->size_) {
    why = fmt::format("/dev/shm{} is not a segment of ours", name);
    return nullptr;
  }
  // Both sides have it mapped now: the name has done its job.
  s->named_ = true;
  s->unlink();
  return s;
}

void Segment::unlink() noexcept {
  if (named_) ::shm_unlink(name_.c_str());
  named_ = false;
}

std::size_t Segment::fifo_bytes() const {
  return static_cast<const SegmentHeader*>(base_)->fifo_bytes;
}

namespace {

// Calls f(file name, creator pid) for each segment of ours in /dev/shm.
template <class F>
void for_each_segment(F&& f) {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with(kPrefix)) continue;
    const long pid = std::strtol(name.data() + kPrefix.size(), nullptr, 10);
    f(std::string(name), static_cast<pid_t>(pid));
  }
  ::closedir(dir);
}

}  // namespace

int remove_stale_segments() {
  int removed = 0;
  for_each_segment([&](const std::string& name, pid_t pid) {
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH && ::shm_unlink(("/" + name).c_str()) == 0) {
      RM_INFO(init, "removed /dev/shm/{}: its process {} is gone", name, pid);
      ++removed;
    }
  });
  return removed;
}

ShmConnection::ShmConnection(std::unique_ptr<Segment> segment, int side, net::Socket liveness)
    : segment_(std::move(segment)), liveness_(std::move(liveness)) {
  static_assert(64 + 2 * sizeof(Fifo) <= kDataOffset);
  auto* base = static_cast<std::byte*>(segment_->base());
  auto* fifos = reinterpret_cast<Fifo*>(base + 64);
  capacity_ = segment_->fifo_bytes();
  out_ = &fifos[side];
  in_ = &fifos[1 - side];
  out_data_ = base + kDataOffset + static_cast<std::size_t>(side) * capacity_;
  in_data_ = base + kDataOffset + static_cast<std::size_t>(1 - side) * capacity_;
  std::byte* lines = base + lines_offset(capacity_);
  for (int d = 0; d < 2; ++d) {  // direction: written by side d
    for (int f = 0; f < 2; ++f) {
      LineRing& r = d == side ? out_lines_[f] : in_lines_[f];
      r.lines = lines;
      r.count = kLineCount[f];
      lines += kLineBytes[f] * kLineCount[f];
    }
  }
}

ShmConnection::~ShmConnection() = default;

std::int64_t ShmConnection::send_some(const iovec* iov, int count) noexcept {
  switch (send_protocol_) {
    case Protocol::ll:
      return send_lines<kLineBytes[0]>(out_lines_[0], 0, iov, count);
    case Protocol::ll128:
      return send_lines<kLineBytes[1]>(out_lines_[1], 1, iov, count);
    case Protocol::simple:
      break;
  }
  return send_stream(iov, count);
}

std::int64_t ShmConnection::recv_some(const iovec* iov, int count) noexcept {
  for (;;) {
    std::int64_t r = 0;
    switch (recv_protocol_) {
      case Protocol::ll:
        r = recv_lines<kLineBytes[0]>(in_lines_[0], 0, iov, count);
        break;
      case Protocol::ll128:
        r = recv_lines<kLineBytes[1]>(in_lines_[1], 1, iov, count);
        break;
      case Protocol::simple:
        r = recv_stream(iov, count);
        break;
    }
    if (r != kOtherRing) return r;
    // The peer wrote this step in another protocol's ring: read it from
    // there, so that the step's header tells what the peer runs and the
    // step fails naming both (a collective mismatch), instead of waiting.
    recv_protocol_ = in_->head.load(std::memory_order_acquire) != tail_ ? Protocol::simple
                     : line_ready(0)                                    ? Protocol::ll
                                                                        : Protocol::ll128;
  }
}

template <std::size_t kLine>
std::int64_t ShmConnection::send_lines(LineRing& lines, int format, const iovec* iov, int count) noexcept {
  constexpr std::size_t kPayload = kLine - 8;
  std::size_t moved = 0;
  int i = 0;
  std::size_t at = 0;  // bytes of iov[i] already sent
  for (;;) {
    while (i < count && at == iov[i].iov_len)
      ++i, at = 0;
    if (i == count) break;
    if (lines.next - lines.seen >= lines.count) {
      lines.seen = out_->lines_read[format].load(std::memory_order_acquire);
      if (lines.next - lines.seen >= lines.count) break;
    }
    std::byte* line = lines.lines + (lines.next & (lines.count - 1)) * kLine;
    std::byte* payload = line + 8;
    std::size_t n = 0;
    while (n < kPayload && i < count) {
      const auto* src = static_cast<const std::byte*>(iov[i].iov_base) + at;
      const std::size_t take = std::min(kPayload - n, iov[i].iov_len - at);
      if (take == kPayload) {
        std::memcpy(payload, src, kPayload);  // a whole line: a fixed-size copy
      } else {
        std::memcpy(payload + n, src, take);
      }
      n += take;
      at += take;
      if (at == iov[i].iov_len) ++i, at = 0;
    }
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(line))
        .store(((lines.next + 1) << 8) | n, std::memory_order_release);
    ++lines.next;
    moved += n;
  }
  if (moved == 0) return out_->closed.load(std::memory_order_relaxed) != 0 ? net::kPeerClosed : 0;
  // As in send_stream: the lines are out, then the reader's flag is read.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (out_->reader_waiting.load(std::memory_order_seq_cst) != 0 && out_->reader_waiting.exchange(0) != 0) ring();
  return static_cast<std::int64_t>(moved);
}

template <std::size_t kLine>
std::int64_t ShmConnection::recv_lines(LineRing& lines, int format, const iovec* iov, int count) noexcept {
  constexpr std::size_t kPayload = kLine - 8;
  std::size_t moved = 0;
  int i = 0;
  std::size_t at = 0;  // bytes of iov[i] already filled
  for (;;) {
    while (i < count && at == iov[i].iov_len)
      ++i, at = 0;
    if (i == count) break;
    const std::byte* line = lines.lines + (lines.next & (lines.count - 1)) * kLine;
    const std::uint64_t flag = load_flag(line);
    const std::byte* payload = line + 8;
    if ((flag >> 8) != lines.next + 1) break;
    const std::size_t n = std::min<std::size_t>(flag & 0xff, kPayload);
    while (lines.offset < n && i < count) {
      auto* dst = static_cast<std::byte*>(iov[i].iov_base) + at;
      const std::size_t take = std::min(n - lines.offset, iov[i].iov_len - at);
      if (take == kPayload) {
        std::memcpy(dst, payload, kPayload);
      } else {
        std::memcpy(dst, payload + lines.offset, take);
      }
      lines.offset += take;
      at += take;
      moved += take;
      if (at == iov[i].iov_len) ++i, at = 0;
    }
    if (lines.offset == n) {
      ++lines.next;
      lines.offset = 0;
    }
  }
  if (moved == 0) {
    if (in_->closed.load(std::memory_order_relaxed) != 0) return net::kPeerClosed;
    // Data in another ring while ours is empty: unless our line arrived
    // meanwhile (the peer writes it before anything of a later step).
    if (other_rings_hold_data(format) && !line_ready(format)) return kOtherRing;
    return 0;
  }
  if (lines.next != lines.published) {
    lines.published = lines.next;
    in_->lines_read[format].store(lines.next, std::memory_order_seq_cst);
    if (in_->writer_waiting.load(std::memory_order_seq_cst) != 0 && in_->writer_waiting.exchange(0) != 0) ring();
  }
  return static_cast<std::int64_t>(moved);
}

bool ShmConnection::line_ready(int format) noexcept {
  const LineRing& r = in_lines_[format];
  const std::size_t line = kLineBytes[format];
  return (load_flag(r.lines + (r.next & (r.count - 1)) * line) >> 8) == r.next + 1;
}

bool ShmConnection::look_ahead(void* out, std::size_t bytes) noexcept {
  auto* to = static_cast<std::byte*>(out);
  // The byte ring: what the writer published past our tail.
  const std::uint64_t head = in_->head.load(std::memory_order_acquire);
  if (head != tail_) {
    if (head - tail_ < bytes) return false;
    for (std::size_t i = 0; i < bytes; ++i)
      to[i] = in_data_[static_cast<std::size_t>((tail_ + i) % capacity_)];
    return true;
  }
  // A line ring: the payloads of the lines written past ours (none of
  // them started: an idle connection reads whole steps).
  for (int f = 0; f < 2; ++f) {
    const LineRing& r = in_lines_[static_cast<std::size_t>(f)];
    if (r.offset != 0 || !line_ready(f)) continue;
    const std::size_t line = kLineBytes[f];
    std::size_t got = 0;
    for (std::uint64_t k = r.next; got < bytes && k < r.next + r.count; ++k) {
      const std::byte* at = r.lines + (k & (r.count - 1)) * line;
      const std::uint64_t flag = load_flag(at);
      if ((flag >> 8) != k + 1) return false;
      const std::size_t n = std::min<std::size_t>({flag & 0xff, line - 8, bytes - got});
      std::memcpy(to + got, at + 8, n);
      got += n;
    }
    return got == bytes;
  }
  return false;
}

bool ShmConnection::other_rings_hold_data(int format) noexcept {
  if (format != -1 && in_->head.load(std::memory_order_acquire) != tail_) return true;
  for (int f = 0; f < 2; ++f) {
    if (f != format && line_ready(f)) return true;
  }
  return false;
}

std::int64_t ShmConnection::send_stream(const iovec* iov, int count) noexcept {
  std::size_t wanted = 0;
  for (int i = 0; i < count; ++i)
    wanted += iov[i].iov_len;
  std::size_t space = capacity_ - static_cast<std::size_t>(head_ - tail_seen_);
  if (space < wanted) {
    tail_seen_ = out_->tail.load(std::memory_order_acquire);
    space = capacity_ - static_cast<std::size_t>(head_ - tail_seen_);
  }
  if (space == 0) return out_->closed.load(std::memory_order_relaxed) != 0 ? net::kPeerClosed : 0;
  std::size_t moved = 0;
  for (int i = 0; i < count && space > 0; ++i) {
    const auto* p = static_cast<const std::byte*>(iov[i].iov_base);
    std::size_t left = iov[i].iov_len;
    while (left > 0 && space > 0) {
      const std::size_t at = static_cast<std::size_t>(head_ % capacity_);
      const std::size_t n = std::min({left, space, capacity_ - at});
      std::memcpy(out_data_ + at, p, n);
      p += n;
      left -= n;
      space -= n;
      head_ += n;
      moved += n;
    }
  }
  out_->head.store(head_, std::memory_order_seq_cst);
  // Paired with arm_wait: the reader sets its flag, then reads the head; we
  // store the head, then read the flag. One of us sees the other.
  if (out_->reader_waiting.load(std::memory_order_seq_cst) != 0 && out_->reader_waiting.exchange(0) != 0) ring();
  return static_cast<std::int64_t>(moved);
}

std::int64_t ShmConnection::recv_stream(const iovec* iov, int count) noexcept {
  std::size_t wanted = 0;
  for (int i = 0; i < count; ++i)
    wanted += iov[i].iov_len;
  std::size_t avail = static_cast<std::size_t>(head_seen_ - tail_);
  if (avail < wanted) {
    head_seen_ = in_->head.load(std::memory_order_acquire);
    avail = static_cast<std::size_t>(head_seen_ - tail_);
  }
  if (avail == 0) {
    if (in_->closed.load(std::memory_order_relaxed) != 0) return net::kPeerClosed;
    if (other_rings_hold_data(-1) && in_->head.load(std::memory_order_acquire) == tail_) return kOtherRing;
    return 0;
  }
  std::size_t moved = 0;
  for (int i = 0; i < count && avail > 0; ++i) {
    auto* p = static_cast<std::byte*>(iov[i].iov_base);
    std::size_t left = iov[i].iov_len;
    while (left > 0 && avail > 0) {
      const std::size_t at = static_cast<std::size_t>(tail_ % capacity_);
      const std::size_t n = std::min({left, avail, capacity_ - at});
      std::memcpy(p, in_data_ + at, n);
      p += n;
      left -= n;
      avail -= n;
      tail_ += n;
      moved += n;
    }
  }
  in_->tail.store(tail_, std::memory_order_seq_cst);
  if (in_->writer_waiting.load(std::memory_order_seq_cst) != 0 && in_->writer_waiting.exchange(0) != 0) ring();
  return static_cast<std::int64_t>(moved);
}

// The byte ring lends what the writer has published, up to its wrap; the
// line formats never do (their payload is cut into lines).
std::size_t ShmConnection::peek(std::size_t wanted, const std::byte** data, const std::byte* /*toward*/) noexcept {
  if (recv_protocol_ != Protocol::simple) return 0;
  std::size_t avail = static_cast<std::size_t>(head_seen_ - tail_);
  if (avail < wanted) {
    head_seen_ = in_->head.load(std::memory_order_acquire);
    avail = static_cast<std::size_t>(head_seen_ - tail_);
  }
  if (avail == 0) return 0;
  const std::size_t at = static_cast<std::size_t>(tail_ % capacity_);
  *data = in_data_ + at;
  return std::min(avail, capacity_ - at);
}

void ShmConnection::consume(std::size_t bytes) noexcept {
  tail_ += bytes;
  in_->tail.store(tail_, std::memory_order_seq_cst);
  if (in_->writer_waiting.load(std::memory_order_seq_cst) != 0 && in_->writer_waiting.exchange(0) != 0) ring();
}

void ShmConnection::ring() noexcept {
  const char bell = 1;
  // Never blocks: when the socket buffer is full the peer has rings
  // enough to read.
  (void)!::send(liveness_.fd(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

bool ShmConnection::arm_wait(bool sending, bool receiving) noexcept {
  bool ready = false;
  if (receiving) {
    in_->reader_waiting.store(1, std::memory_order_seq_cst);
    // Anything in any ring: recv_some takes it, or says it came in the
    // wrong one.
    ready |= in_->head.load(std::memory_order_seq_cst) != tail_ || line_ready(0) || line_ready(1);
  }
  if (sending) {
    out_->writer_waiting.store(1, std::memory_order_seq_cst);
    const int f = format_of(send_protocol_);
    if (f < 0) {
      ready |= out_->tail.load(std::memory_order_seq_cst) + capacity_ != head_;
    } else {
      ready |= out_->lines_read[f].load(std::memory_order_seq_cst) + out_lines_[f].count != out_lines_[f].next;
    }
  }
  return ready || in_->closed.load(std::memory_order_relaxed) != 0;
}

int ShmConnection::drain_rings() noexcept {
  char bells[64];
  for (;;) {
    const ssize_t r = ::recv(liveness_.fd(), bells, sizeof(bells), MSG_DONTWAIT);
    if (r == 0) return net::kPeerClosed;
    if (r < 0) return errno == EAGAIN || errno == EINTR ? 0 : -errno;
  }
}

void ShmConnection::shutdown() noexcept {
  out_->closed.store(1, std::memory_order_relaxed);
  in_->closed.store(1, std::memory_order_relaxed);
  if (liveness_.valid()) ::shutdown(liveness_.fd(), SHUT_RDWR);
}

}  // namespace ringmaster::transport::shm
