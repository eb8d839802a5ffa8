// Every collective's and point-to-point call's work: what each channel's
// part of a call runs, over the channel's ring or direct connections.
#include <fmt/format.h>

#include <vector>

#include "algo/pair.h"
#include "algo/ring.h"
#include "algo/tree.h"
#include "base/bytes.h"
#include "comm/communicator_impl.h"
#include "kernels/reduce.h"

namespace ringmaster {

namespace {

struct Range {
  std::size_t begin, end;
  std::size_t size() const { return end - begin; }
};
Range channel_range(std::size_t count, int c, int nch) {
  return {count * static_cast<std::size_t>(c) / static_cast<std::size_t>(nch),
          count * static_cast<std::size_t>(c + 1) / static_cast<std::size_t>(nch)};
}

void check_root(int root, int n) {
  if (root < 0 || root >= n) {
    throw Error(ErrorCategory::config, fmt::format("root {} is not a rank of this communicator (size {})", root, n));
  }
}

}  // namespace

Request Communicator::all_reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op) {
  const std::size_t es = size_of(type);
  const auto choice = impl_->choose(Collective::all_reduce, count * es);
  if (choice.algorithm == Algorithm::tree) {
    const algo::DoubleTree* tree = &impl_->tree_for(-1);
    return impl_->submit(Collective::all_reduce, count * es, type, op, 0,
                         [=, this](Channel& ch, int, int, const algo::RingOp& rop) {
                           auto ctx = impl_->context(ch);
                           auto* out = static_cast<std::byte*>(recv);
                           algo::tree_all_reduce(ctx, *tree, rop, static_cast<const std::byte*>(send), out, count);
                           if (op == RedOp::avg) kernels::finish_avg(out, count, type, impl_->nranks);
                         });
  }
  if (impl_->nranks == 2 && count * es <= impl_->pair_bytes) {
    return impl_->submit(
        Collective::all_reduce, count * es, type, op, 0,
        [=, this](Channel& ch, int, int, const algo::RingOp& rop) {
          auto ctx = impl_->context(ch);
          algo::pair_all_reduce(ctx, rop, static_cast<const std::byte*>(send), static_cast<std::byte*>(recv), count);
        },
        /*forced_channels=*/1);
  }
  return impl_->submit(Collective::all_reduce, count * es, type, op, 0,
                       [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
                         const Range range = channel_range(count, c, nch);
                         auto* out = static_cast<std::byte*>(recv) + range.begin * es;
                         const auto* in = static_cast<const std::byte*>(send) + range.begin * es;
                         auto ctx = impl_->context(ch);
                         algo::all_reduce(ctx, rop, in, out, range.size());
                         if (op == RedOp::avg) kernels::finish_avg(out, range.size(), type, impl_->nranks);
                       });
}

Request Communicator::all_gather(const void* send, void* recv, std::size_t count, DataType type) {
  const std::size_t es = size_of(type);
  const std::size_t stride = count * es;
  return impl_->submit(Collective::all_gather, count * es * static_cast<std::size_t>(impl_->nranks), type, RedOp::sum,
                       0, [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
                         const Range range = channel_range(count, c, nch);
                         auto* base = static_cast<std::byte*>(recv) + range.begin * es;
                         auto* mine = base + static_cast<std::size_t>(impl_->rank) * stride;
                         const auto* src = static_cast<const std::byte*>(send) + range.begin * es;
                         if (mine != src) copy_bytes(mine, src, range.size() * es);
                         auto ctx = impl_->context(ch);
                         algo::all_gather(ctx, rop, base, range.size(), stride);
                       });
}

Request Communicator::reduce_scatter(const void* send, void* recv, std::size_t count, DataType type, RedOp op) {
  const std::size_t es = size_of(type);
  const int n = impl_->nranks;
  return impl_->submit(
      Collective::reduce_scatter, count * es * static_cast<std::size_t>(n), type, op, 0,
      [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
        const Range range = channel_range(count, c, nch);
        const std::size_t len = range.size() * es;
        // A packed copy of this channel's share of every block: the ring
        // reduces into it, then our block is copied out.
        std::vector<std::byte> work(len * static_cast<std::size_t>(n));
        for (int b = 0; b < n; ++b) {
          copy_bytes(work.data() + static_cast<std::size_t>(b) * len,
                     static_cast<const std::byte*>(send) + (static_cast<std::size_t>(b) * count + range.begin) * es,
                     len);
        }
        auto ctx = impl_->context(ch);
        algo::reduce_scatter(ctx, rop, work.data(), range.size(), len);
        auto* out = static_cast<std::byte*>(recv) + range.begin * es;
        copy_bytes(out, work.data() + static_cast<std::size_t>(impl_->rank) * len, len);
        if (op == RedOp::avg) kernels::finish_avg(out, range.size(), type, n);
      });
}

Request Communicator::broadcast(const void* send, void* recv, std::size_t count, DataType type, int root) {
  check_root(root, impl_->nranks);
  const std::size_t es = size_of(type);
  const algo::DoubleTree* tree = &impl_->tree_for(root);
  return impl_->submit(Collective::broadcast, count * es, type, RedOp::sum, root,
                       [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
                         const Range range = channel_range(count, c, nch);
                         auto* out = static_cast<std::byte*>(recv) + range.begin * es;
                         if (impl_->rank == root && send != recv) {
                           copy_bytes(out, static_cast<const std::byte*>(send) + range.begin * es, range.size() * es);
                         }
                         auto ctx = impl_->context(ch);
                         if (rop.algorithm == Algorithm::tree) {
                           algo::tree_broadcast(ctx, *tree, rop, out, range.size());
                         } else {
                           algo::broadcast(ctx, rop, out, range.size());
                         }
                       });
}

Request Communicator::reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op, int root) {
  check_root(root, impl_->nranks);
  const std::size_t es = size_of(type);
  const algo::DoubleTree* tree = &impl_->tree_for(root);
  return impl_->submit(Collective::reduce, count * es, type, op, root,
                       [=, this](Channel& ch, int c, int nch, const algo::RingOp& rop) {
                         const Range range = channel_range(count, c, nch);
                         const auto* src = static_cast<const std::byte*>(send) + range.begin * es;
                         // Only the root's recv buffer is significant; others reduce in a copy.
                         std::vector<std::byte> copy;
                         std::byte* buf = nullptr;
                         if (impl_->rank == root) {
                           buf = static_cast<std::byte*>(recv) + range.begin * es;
                           if (buf != src) copy_bytes(buf, src, range.size() * es);
                         } else {
                           copy.assign(src, src + range.size() * es);
                           buf = copy.data();
                         }
                         auto ctx = impl_->context(ch);
                         if (rop.algorithm == Algorithm::tree) {
                           algo::tree_reduce(ctx, *tree, rop, buf, range.size());
                         } else {
                           algo::reduce(ctx, rop, buf, range.size());
                         }
                         if (impl_->rank == root && op == RedOp::avg) {
                           kernels::finish_avg(buf, range.size(), type, impl_->nranks);
                         }
                       });
}

Request Communicator::barrier() {
  return impl_->submit(Collective::barrier, 0, DataType::uint8, RedOp::sum, 0,
                       [this](Channel& ch, int, int, const algo::RingOp& rop) {
                         std::byte token{0};
                         auto ctx = impl_->context(ch);
                         // A zero-byte all-reduce still takes 2(n-1) steps around the ring:
                         // nobody leaves before everybody arrived.
                         algo::RingOp op = rop;
                         op.collective = Collective::barrier;
                         algo::all_reduce(ctx, op, &token, &token, 0);
                       });
}

Request Communicator::all_to_all(const void* send, void* recv, std::size_t count, DataType type) {
  const std::size_t es = size_of(type);
  const std::size_t block = count * es;
  const int n = impl_->nranks;
  return impl_->submit_single(Collective::all_to_all, block * static_cast<std::size_t>(n), type,
                              [=, this](Channel& ch, const algo::RingOp& rop) {
                                const int r = impl_->rank;
                                const auto* in = static_cast<const std::byte*>(send);
                                auto* out = static_cast<std::byte*>(recv);
                                copy_bytes(out + static_cast<std::size_t>(r) * block,
                                           in + static_cast<std::size_t>(r) * block, block);
                                // A header-only step on the ring first: a neighbour that called
                                // some other collective is caught here by name, instead of both
                                // sides waiting on different connections until the timeout.
                                if (n > 1) {
                                  const transport::StepHeader announce = algo::step_header(rop, 0);
                                  std::byte none{};
                                  ch.link.exchange(announce, &none, 0, &none, 0);
                                }
                                // Pairwise exchange: at step s send block r+s to rank r+s and
                                // receive block r-s from rank r-s, both over direct connections.
                                for (int s = 1; s < n; ++s) {
                                  const int to = (r + s) % n, from = (r - s + n) % n;
                                  const transport::StepHeader h = algo::step_header(rop, s);
                                  ch.link.exchange_mesh(h, to, in + static_cast<std::size_t>(to) * block, block, h,
                                                        from, out + static_cast<std::size_t>(from) * block, block);
                                }
                              });
}

namespace {
// A point-to-point peer: another rank of the communicator.
void check_peer(const char* call, int peer, int rank, int n) {
  if (peer < 0 || peer >= n || peer == rank) {
    throw Error(
        ErrorCategory::config,
        fmt::format("{}: peer {} is not another rank of this communicator (rank {}, size {})", call, peer, rank, n));
  }
}
}  // namespace

Request Communicator::send(const void* buf, std::size_t count, DataType type, int peer) {
  check_peer("send", peer, impl_->rank, impl_->nranks);
  return point_to_point(buf, peer, nullptr, -1, count, type);
}

Request Communicator::recv(void* buf, std::size_t count, DataType type, int peer) {
  check_peer("recv", peer, impl_->rank, impl_->nranks);
  return point_to_point(nullptr, -1, buf, peer, count, type);
}

Request Communicator::sendrecv(const void* send, int to, void* recv, int from, std::size_t count, DataType type) {
  check_peer("sendrecv", to, impl_->rank, impl_->nranks);
  check_peer("sendrecv", from, impl_->rank, impl_->nranks);
  return point_to_point(send, to, recv, from, count, type);
}

// to or from is -1 when that direction is not used.
Request Communicator::point_to_point(const void* send, int to, void* recv, int from, std::size_t count, DataType type) {
  const std::size_t bytes = count * size_of(type);
  transport::StepHeader out, in;
  out.collective = in.collective = static_cast<std::uint8_t>(Collective::send_recv);
  if (to >= 0) out.seq = impl_->p2p_sent[static_cast<std::size_t>(to)]++;
  if (from >= 0) in.seq = impl_->p2p_received[static_cast<std::size_t>(from)]++;
  return impl_->submit_single(
      Collective::send_recv, bytes, type,
      [=](Channel& ch, const algo::RingOp& rop) {
        transport::StepHeader o = out, i = in;
        o.protocol = i.protocol = static_cast<std::uint8_t>(rop.protocol);
        ch.link.exchange_mesh(o, to, send, bytes, i, from, recv, bytes);
      },
      /*numbered=*/false);
}

}  // namespace ringmaster
