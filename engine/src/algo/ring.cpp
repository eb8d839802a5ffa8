#include "algo/ring.h"
#include "base/bytes.h"

#include <algorithm>
#include <cstring>

#include "kernels/reduce.h"

namespace ringmaster::algo {
namespace {

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

// Element range [begin, end) of chunk i when count elements are split in n.
struct Chunk {
  std::size_t begin, end;
  std::size_t size() const { return end - begin; }
};
Chunk chunk(std::size_t count, int n, int i) {
  return {count * static_cast<std::size_t>(i) / static_cast<std::size_t>(n),
          count * static_cast<std::size_t>(i + 1) / static_cast<std::size_t>(n)};
}

transport::StepHeader header(const RingOp& op, std::uint64_t step) {
  return step_header(op, step);
}

// One reduce step: send `send` to next, receive the matching chunk from
// prev and reduce it with `src` into `dst`, slot by slot as it arrives (dst
// may be src). Over shared memory the peer's bytes are reduced where they
// lie in the FIFO; other links copy them into scratch first.
void reduce_step(RingContext& ctx, const RingOp& op, std::uint64_t step, const std::byte* send, std::size_t send_bytes,
                 const std::byte* src, std::byte* dst, std::size_t bytes) {
  std::byte* tmp = scratch_of(ctx, bytes, dst);
  const std::size_t es = size_of(op.type);
  ctx.link.exchange_reading(header(op, step), send, send_bytes, tmp, bytes, op.slot_bytes, es, dst,
                            [&](std::size_t offset, const std::byte* data, std::size_t length) {
                              kernels::reduce(dst + offset, src + offset, data, length / es, op.type, op.op);
                            });
}

}  // namespace

std::byte* scratch_of(RingContext& ctx, std::size_t bytes, const std::byte* toward) {
  if (ctx.scratch.size() < bytes + kApartSlack) ctx.scratch.resize(bytes + kApartSlack);
  return ctx.scratch.data() + offset_apart(ctx.scratch.data(), toward);
}

transport::StepHeader step_header(const RingOp& op, std::uint64_t step) {
  transport::StepHeader h;
  h.collective = static_cast<std::uint8_t>(op.collective);
  h.protocol = static_cast<std::uint8_t>(op.protocol);
  h.seq = op.seq;
  h.step = static_cast<std::uint16_t>(step & 0xFFFF);
  return h;
}

void all_reduce(RingContext& ctx, const RingOp& op, const std::byte* send, std::byte* recv, std::size_t count) {
  const int n = ctx.nranks, r = ctx.rank;
  const std::size_t es = size_of(op.type);
  if (n == 1) {
    if (send != recv) copy_bytes(recv, send, count * es);
    return;
  }
  // Reduce-scatter: at step s send chunk r-s, receive chunk r-s-1 and
  // reduce it with our input into recv. Each chunk is reduced exactly once
  // here, always from `send`, so out of place needs no copy first; chunk r
  // goes out straight from `send` and comes back in the all-gather. After
  // n-1 steps recv holds the full sum of chunk r+1.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = chunk(count, n, mod(r - s, n));
    const Chunk in = chunk(count, n, mod(r - s - 1, n));
    const std::byte* from = (s == 0 ? send : recv) + out.begin * es;
    reduce_step(ctx, op, s, from, out.size() * es, send + in.begin * es, recv + in.begin * es, in.size() * es);
  }
  // All-gather: at step s send chunk r+1-s (complete), receive chunk r-s.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = chunk(count, n, mod(r + 1 - s, n));
    const Chunk in = chunk(count, n, mod(r - s, n));
    ctx.link.exchange(header(op, n - 1 + s), recv + out.begin * es, out.size() * es, recv + in.begin * es,
                      in.size() * es);
  }
}

void all_gather(RingContext& ctx, const RingOp& op, std::byte* out, std::size_t count, std::size_t stride) {
  const int n = ctx.nranks, r = ctx.rank;
  const std::size_t bytes = count * size_of(op.type);
  // Step s: forward block r-s (ours first), receive block r-s-1.
  for (int s = 0; s < n - 1; ++s) {
    const auto send_block = static_cast<std::size_t>(mod(r - s, n));
    const auto recv_block = static_cast<std::size_t>(mod(r - s - 1, n));
    ctx.link.exchange(header(op, s), out + send_block * stride, bytes, out + recv_block * stride, bytes);
  }
}

void reduce_scatter(RingContext& ctx, const RingOp& op, std::byte* work, std::size_t count, std::size_t stride) {
  const int n = ctx.nranks, r = ctx.rank;
  const std::size_t bytes = count * size_of(op.type);
  // Step s: send block r-s-1 (partial sums), receive block r-s-2 and add
  // ours in. After n-1 steps block r holds the full sum.
  for (int s = 0; s < n - 1; ++s) {
    const auto send_block = static_cast<std::size_t>(mod(r - s - 1, n));
    const auto recv_block = static_cast<std::size_t>(mod(r - s - 2, n));
    std::byte* acc = work + recv_block * stride;
    reduce_step(ctx, op, s, work + send_block * stride, bytes, acc, acc, bytes);
  }
}

void broadcast(RingContext& ctx, const RingOp& op, std::byte* buf, std::size_t count) {
  const int n = ctx.nranks;
  const int position = mod(ctx.rank - op.root, n);  // 0 = root, n-1 = end of the chain
  const std::size_t bytes = count * size_of(op.type);
  const std::size_t piece = op.slot_bytes == 0 ? std::max<std::size_t>(bytes, 1) : op.slot_bytes;
  // The chain root -> root+1 -> ... is pipelined by pieces: a rank forwards
  // piece k while its predecessor already sends piece k+1.
  std::uint64_t step = 0;
  for (std::size_t offset = 0; offset < bytes || step == 0; offset += piece, ++step) {
    const std::size_t length = std::min(piece, bytes - offset);
    std::byte* p = buf + offset;
    if (position > 0) ctx.link.recv_only(header(op, step), p, length);
    if (position < n - 1) ctx.link.send_only(header(op, step), p, length);
    if (bytes == 0) break;
  }
}

void reduce(RingContext& ctx, const RingOp& op, std::byte* buf, std::size_t count) {
  const int n = ctx.nranks;
  const int position = mod(ctx.rank - op.root - 1, n);  // chain root+1 -> ... -> root (n-1)
  const std::size_t es = size_of(op.type);
  const std::size_t bytes = count * es;
  const std::size_t piece = op.slot_bytes == 0 ? std::max<std::size_t>(bytes, 1) : op.slot_bytes;
  std::uint64_t step = 0;
  for (std::size_t offset = 0; offset < bytes || step == 0; offset += piece, ++step) {
    const std::size_t length = std::min(piece, bytes - offset);
    std::byte* p = buf + offset;
    if (position > 0) {
      std::byte* tmp = scratch_of(ctx, length, p);
      ctx.link.recv_only(header(op, step), tmp, length);
      kernels::reduce(p, p, tmp, length / es, op.type, op.op);
    }
    if (position < n - 1) ctx.link.send_only(header(op, step), p, length);
    if (bytes == 0) break;
  }
}

}  // namespace ringmaster::algo
