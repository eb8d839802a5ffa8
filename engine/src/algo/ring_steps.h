// Internal to the ring schedules: chunks of a count, and one step that
// reduces what arrives into a buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algo/task.h"

namespace ringmaster::algo {

// Element range [begin, end) of chunk i when count elements are split in n.
struct Chunk {
  std::size_t begin, end;
  std::size_t size() const { return end - begin; }
};
inline Chunk chunk(std::size_t count, int n, int i) {
  return {count * static_cast<std::size_t>(i) / static_cast<std::size_t>(n),
          count * static_cast<std::size_t>(i + 1) / static_cast<std::size_t>(n)};
}

// One reduce step: send `send` to next, receive the matching chunk from
// prev and reduce it with `src` into `dst`, slot by slot as it arrives (dst
// may be src). Over shared memory the peer's bytes are reduced where they
// lie in the FIFO; other links copy them into scratch first.
void reduce_step(Context& ctx, const Task& task, std::uint64_t step, const std::byte* send, std::size_t send_bytes,
                 const std::byte* src, std::byte* dst, std::size_t bytes);

}  // namespace ringmaster::algo
