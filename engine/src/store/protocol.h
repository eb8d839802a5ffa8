// The wire format of PyTorch's c10d TCPStore (torch 2.8+ numbering).
//
// Requests: a u8 command, then fields. Strings and values are a u64 length
// and the bytes; integers are little-endian. Every connection starts with
// VALIDATE carrying the u32 magic. See docs/protocol-store.md for each
// command with a hex example.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ringmaster::store {

enum class Command : std::uint8_t {
  validate = 0,
  set = 1,
  compare_set = 2,
  get = 3,
  add = 4,
  check = 5,
  wait = 6,
  get_num_keys = 7,
  delete_key = 8,
  append = 9,
  multi_get = 10,
  multi_set = 11,
  cancel_wait = 12,
  ping = 13,
  queue_push = 14,
  queue_pop = 15,
  queue_len = 16,
  list_keys = 17,
};
inline constexpr std::uint8_t kMaxCommand = 17;

inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;

enum class CheckResponse : std::uint8_t { ready = 0, not_ready = 1 };
enum class WaitResponse : std::uint8_t { stop_waiting = 0, wait_canceled = 1 };

// The server's limits; a request over one closes that client's connection.
inline constexpr std::size_t kMaxKeyBytes = 8 * 1024;
inline constexpr std::size_t kMaxValueBytes = 8 * 1024 * 1024;
inline constexpr std::size_t kMaxKeys = 128 * 1024;
// Values waiting in all queues together (QUEUE_PUSH), besides the keys.
inline constexpr std::size_t kMaxQueuedValues = 128 * 1024;

std::string_view name_of(Command c) noexcept;

// Appends little-endian fields to a byte string, as a torch client does.
class Encoder {
 public:
  explicit Encoder(Command c) { u8(static_cast<std::uint8_t>(c)); }
  Encoder& u8(std::uint8_t v) {
    bytes_.push_back(static_cast<char>(v));
    return *this;
  }
  Encoder& u32(std::uint32_t v) { return raw(&v, sizeof(v)); }
  Encoder& u64(std::uint64_t v) { return raw(&v, sizeof(v)); }
  Encoder& i64(std::int64_t v) { return raw(&v, sizeof(v)); }
  Encoder& str(std::string_view s) {
    u64(s.size());
    bytes_.append(s);
    return *this;
  }
  const std::string& bytes() const noexcept { return bytes_; }

 private:
  Encoder& raw(const void* p, std::size_t n) {
    static_assert(std::endian::native == std::endian::little, "the store protocol is little-endian");
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

}  // namespace ringmaster::store
