// Every collective's and point-to-point call's work: what each channel's
// part of a call runs, over the channel's ring or direct connections.
#include <fmt/format.h>

#include <vector>

#include "algo/direct.h"
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

// RedOp::avg as NCCL computes it (kernels/reduce.h): a floating type's
// input is scaled by 1/nranks into `out` before the sum (the input the
// schedule should read is returned: `out`, else `in` as it was); an
// integer sum is divided at the end (finish).
const std::byte* premultiplied(const algo::Task& op, const std::byte* in, std::byte* out, std::size_t count,
                               int nranks) {
  if (op.op != RedOp::avg || !kernels::avg_premultiplies(op.type) || nranks == 1) return in;
  kernels::premultiply_avg(out, in, count, op.type, nranks);
  return out;
}

void finish(const algo::Task& op, std::byte* out, std::size_t count, int nranks) {
  if (op.op == RedOp::avg && !kernels::avg_premultiplies(op.type)) kernels::finish_avg(out, count, op.type, nranks);
}

void check_root(int root, int n) {
  if (root < 0 || root >= n) {
    throw Error(ErrorCategory::config, fmt::format("root {} is not a rank of this communicator (size {})", root, n));
  }
}

}  // namespace

Request Communicator::all_reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op) {
  if (impl_->on_device(send, recv)) {
    if (auto done = impl_->peer_all_reduce(*this, send, recv, count, type, op)) return std::move(*done);
    return impl_->staged_all_reduce(*this, send, recv, count, type, op);
  }
  const std::size_t es = size_of(type);
  // The one choice of this call: its schedule here, its protocol and
  // channels in start().
  Impl::Call call{Collective::all_reduce, count * es, count, type, op};
  call.choice = impl_->choose(Collective::all_reduce, count * es);
  if (call.choice->algorithm == Algorithm::tree) {
    const algo::DoubleTree* tree = &impl_->tree_for(-1);
    return impl_->submit(call, [=, this](Channel& ch, int, int, const algo::Task& task) {
      auto ctx = impl_->context(ch);
      auto* out = static_cast<std::byte*>(recv);
      const auto* in = premultiplied(task, static_cast<const std::byte*>(send), out, count, impl_->nranks);
      algo::tree_all_reduce(ctx, *tree, task, in, out, count);
      finish(task, out, count, impl_->nranks);
    });
  }
  if (call.choice->algorithm == Algorithm::pair) {
    return impl_->submit(call, [=, this](Channel& ch, int, int, const algo::Task& task) {
      auto ctx = impl_->context(ch);
      algo::pair_all_reduce(ctx, task, static_cast<const std::byte*>(send), static_cast<std::byte*>(recv), count);
    });
  }
  return impl_->submit(call, [=, this](Channel& ch, int c, int nch, const algo::Task& task) {
    const Range range = channel_range(count, c, nch);
    auto* out = static_cast<std::byte*>(recv) + range.begin * es;
    const auto* in = static_cast<const std::byte*>(send) + range.begin * es;
    auto ctx = impl_->context(ch);
    algo::all_reduce(ctx, task, premultiplied(task, in, out, range.size(), impl_->nranks), out, range.size());
    finish(task, out, range.size(), impl_->nranks);
  });
}

Request Communicator::all_gather(const void* send, void* recv, std::size_t count, DataType type) {
  if (impl_->on_device(send, recv)) {
    if (auto done = impl_->peer_all_gather(*this, send, recv, count, type)) return std::move(*done);
    const std::size_t block = count * size_of(type);
    return impl_->staged(send, block, recv, block * static_cast<std::size_t>(impl_->nranks),
                         [=, this](const void* s, void* r) { return all_gather(s, r, count, type); });
  }
  const std::size_t es = size_of(type);
  const std::size_t stride = count * es;
  return impl_->submit({Collective::all_gather, count * es * static_cast<std::size_t>(impl_->nranks), count, type},
                       [=, this](Channel& ch, int c, int nch, const algo::Task& task) {
                         const Range range = channel_range(count, c, nch);
                         auto* base = static_cast<std::byte*>(recv) + range.begin * es;
                         auto* mine = base + static_cast<std::size_t>(impl_->rank) * stride;
                         const auto* src = static_cast<const std::byte*>(send) + range.begin * es;
                         if (mine != src) copy_bytes(mine, src, range.size() * es);
                         auto ctx = impl_->context(ch);
                         algo::all_gather(ctx, task, base, range.size(), stride);
                       });
}

Request Communicator::reduce_scatter(const void* send, void* recv, std::size_t count, DataType type, RedOp op) {
  if (impl_->on_device(send, recv)) {
    if (auto done = impl_->peer_reduce_scatter(*this, send, recv, count, type, op)) return std::move(*done);
    const std::size_t block = count * size_of(type);
    return impl_->staged(send, block * static_cast<std::size_t>(impl_->nranks), recv, block,
                         [=, this](const void* s, void* r) { return reduce_scatter(s, r, count, type, op); });
  }
  const std::size_t es = size_of(type);
  const int n = impl_->nranks;
  return impl_->submit({Collective::reduce_scatter, count * es * static_cast<std::size_t>(n), count, type, op},
                       [=, this](Channel& ch, int c, int nch, const algo::Task& task) {
                         const Range range = channel_range(count, c, nch);
                         const std::size_t stride = count * es;
                         const auto* in = static_cast<const std::byte*>(send) + range.begin * es;
                         auto* out = static_cast<std::byte*>(recv) + range.begin * es;
                         // The ring reads every block of the input where it is. Only a
                         // floating avg scales this channel's share of the input first.
                         std::vector<std::byte> scaled;
                         if (op == RedOp::avg && kernels::avg_premultiplies(type)) {
                           scaled.resize(range.size() * es * static_cast<std::size_t>(n));
                           for (int b = 0; b < n; ++b) {
                             kernels::premultiply_avg(scaled.data() + static_cast<std::size_t>(b) * range.size() * es,
                                                      in + static_cast<std::size_t>(b) * stride, range.size(), type, n);
                           }
                           in = scaled.data();
                         }
                         auto ctx = impl_->context(ch);
                         algo::reduce_scatter(ctx, task, in, scaled.empty() ? stride : range.size() * es, out,
                                              range.size());
                         finish(task, out, range.size(), impl_->nranks);
                       });
}

Request Communicator::broadcast(const void* send, void* recv, std::size_t count, DataType type, int root) {
  if (impl_->on_device(send, recv)) {
    check_root(root, impl_->nranks);
    if (auto done = impl_->peer_broadcast(*this, send, recv, count, type, root)) return std::move(*done);
    const std::size_t block = count * size_of(type);
    return impl_->staged(send, impl_->rank == root ? block : 0, recv, block,
                         [=, this](const void* s, void* r) { return broadcast(s, r, count, type, root); });
  }
  check_root(root, impl_->nranks);
  const std::size_t es = size_of(type);
  const algo::DoubleTree* tree = &impl_->tree_for(root);
  return impl_->submit({Collective::broadcast, count * es, count, type, RedOp::sum, root},
                       [=, this](Channel& ch, int c, int nch, const algo::Task& task) {
                         const Range range = channel_range(count, c, nch);
                         auto* out = static_cast<std::byte*>(recv) + range.begin * es;
                         if (impl_->rank == root && send != recv) {
                           copy_bytes(out, static_cast<const std::byte*>(send) + range.begin * es, range.size() * es);
                         }
                         auto ctx = impl_->context(ch);
                         if (task.algorithm == Algorithm::tree) {
                           algo::tree_broadcast(ctx, *tree, task, out, range.size());
                         } else {
                           algo::broadcast(ctx, task, out, range.size());
                         }
                       });
}

Request Communicator::reduce(const void* send, void* recv, std::size_t count, DataType type, RedOp op, int root) {
  if (impl_->on_device(send, recv)) {
    check_root(root, impl_->nranks);
    if (auto done = impl_->peer_reduce(*this, send, recv, count, type, op, root)) return std::move(*done);
    const std::size_t block = count * size_of(type);
    return impl_->staged(send, block, recv, impl_->rank == root ? block : 0,
                         [=, this](const void* s, void* r) { return reduce(s, r, count, type, op, root); });
  }
  check_root(root, impl_->nranks);
  const std::size_t es = size_of(type);
  const algo::DoubleTree* tree = &impl_->tree_for(root);
  return impl_->submit({Collective::reduce, count * es, count, type, op, root},
                       [=, this](Channel& ch, int c, int nch, const algo::Task& task) {
                         const Range range = channel_range(count, c, nch);
                         const auto* src = static_cast<const std::byte*>(send) + range.begin * es;
                         // Only the root's recv buffer is significant; others reduce in a copy.
                         std::vector<std::byte> copy;
                         std::byte* buf = nullptr;
                         if (impl_->rank == root) {
                           buf = static_cast<std::byte*>(recv) + range.begin * es;
                         } else {
                           copy.resize(range.size() * es);
                           buf = copy.data();
                         }
                         if (premultiplied(task, src, buf, range.size(), impl_->nranks) != buf && buf != src) {
                           copy_bytes(buf, src, range.size() * es);
                         }
                         auto ctx = impl_->context(ch);
                         if (task.algorithm == Algorithm::tree) {
                           algo::tree_reduce(ctx, *tree, task, buf, range.size());
                         } else {
                           algo::reduce(ctx, task, buf, range.size());
                         }
                         if (impl_->rank == root) finish(task, buf, range.size(), impl_->nranks);
                       });
}

Request Communicator::barrier() {
  return impl_->submit({Collective::barrier, 0, 0, DataType::uint8},
                       [this](Channel& ch, int, int, const algo::Task& task) {
                         std::byte token{0};
                         auto ctx = impl_->context(ch);
                         // A zero-byte all-reduce still takes 2(n-1) steps around the ring:
                         // nobody leaves before everybody arrived.
                         algo::all_reduce(ctx, task, &token, &token, 0);
                       });
}

Request Communicator::all_to_all(const void* send, void* recv, std::size_t count, DataType type) {
  if (impl_->on_device(send, recv)) {
    const std::size_t all = count * size_of(type) * static_cast<std::size_t>(impl_->nranks);
    return impl_->staged(send, all, recv, all,
                         [=, this](const void* s, void* r) { return all_to_all(s, r, count, type); });
  }
  const std::size_t block = count * size_of(type);
  return impl_->submit_single({Collective::all_to_all, block * static_cast<std::size_t>(impl_->nranks), count, type},
                              [=, this](Channel& ch, const algo::Task& task) {
                                auto ctx = impl_->context(ch);
                                algo::all_to_all(ctx, task, static_cast<const std::byte*>(send),
                                                 static_cast<std::byte*>(recv), block);
                              });
}

Request Communicator::gather(const void* send, void* recv, std::size_t count, DataType type, int root) {
  if (impl_->on_device(send, recv)) {
    check_root(root, impl_->nranks);
    const std::size_t block = count * size_of(type);
    return impl_->staged(send, block, recv, impl_->rank == root ? block * static_cast<std::size_t>(impl_->nranks) : 0,
                         [=, this](const void* s, void* r) { return gather(s, r, count, type, root); });
  }
  check_root(root, impl_->nranks);
  const std::size_t block = count * size_of(type);
  return impl_->submit_single(
      {Collective::gather, block * static_cast<std::size_t>(impl_->nranks), count, type, RedOp::sum, root},
      [=, this](Channel& ch, const algo::Task& task) {
        auto ctx = impl_->context(ch);
        algo::gather(ctx, task, static_cast<const std::byte*>(send), static_cast<std::byte*>(recv), block, root);
      });
}

Request Communicator::scatter(const void* send, void* recv, std::size_t count, DataType type, int root) {
  if (impl_->on_device(send, recv)) {
    check_root(root, impl_->nranks);
    const std::size_t block = count * size_of(type);
    return impl_->staged(send, impl_->rank == root ? block * static_cast<std::size_t>(impl_->nranks) : 0, recv, block,
                         [=, this](const void* s, void* r) { return scatter(s, r, count, type, root); });
  }
  check_root(root, impl_->nranks);
  const std::size_t block = count * size_of(type);
  return impl_->submit_single(
      {Collective::scatter, block * static_cast<std::size_t>(impl_->nranks), count, type, RedOp::sum, root},
      [=, this](Channel& ch, const algo::Task& task) {
        auto ctx = impl_->context(ch);
        algo::scatter(ctx, task, static_cast<const std::byte*>(send), static_cast<std::byte*>(recv), block, root);
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
  if (impl_->on_device(buf, nullptr)) {
    throw Error(ErrorCategory::config,
                "send of a CUDA device buffer: device buffers go through sendrecv (staged "
                "calls block, so a lone send could wait for ever on its peer's lone send)");
  }
  check_peer("send", peer, impl_->rank, impl_->nranks);
  return point_to_point(buf, peer, nullptr, -1, count, type);
}

Request Communicator::recv(void* buf, std::size_t count, DataType type, int peer) {
  if (impl_->on_device(nullptr, buf)) {
    throw Error(ErrorCategory::config,
                "recv into a CUDA device buffer: device buffers go through sendrecv (staged "
                "calls block, so a lone recv could wait for ever on its peer's lone recv)");
  }
  check_peer("recv", peer, impl_->rank, impl_->nranks);
  return point_to_point(nullptr, -1, buf, peer, count, type);
}

Request Communicator::sendrecv(const void* send, int to, void* recv, int from, std::size_t count, DataType type) {
  if (impl_->on_device(send, recv)) {
    check_peer("sendrecv", to, impl_->rank, impl_->nranks);
    check_peer("sendrecv", from, impl_->rank, impl_->nranks);
    const std::size_t bytes = count * size_of(type);
    return impl_->staged(send, bytes, recv, bytes,
                         [=, this](const void* s, void* r) { return point_to_point(s, to, r, from, count, type); });
  }
  check_peer("sendrecv", to, impl_->rank, impl_->nranks);
  check_peer("sendrecv", from, impl_->rank, impl_->nranks);
  return point_to_point(send, to, recv, from, count, type);
}

// to or from is -1 when that direction is not used.
Request Communicator::point_to_point(const void* send, int to, void* recv, int from, std::size_t count, DataType type) {
  // Numbered per pair and direction, so other ranks need not take part.
  algo::PointToPoint p2p;
  p2p.to = to;
  p2p.from = from;
  if (to >= 0) p2p.sent_seq = impl_->p2p_sent[static_cast<std::size_t>(to)]++;
  if (from >= 0) p2p.received_seq = impl_->p2p_received[static_cast<std::size_t>(from)]++;
  return impl_->submit_single(
      {Collective::send_recv, count * size_of(type), count, type},
      [=, this](Channel& ch, const algo::Task& task) {
        auto ctx = impl_->context(ch);
        algo::point_to_point(ctx, task, p2p, send, recv);
      },
      /*numbered=*/false);
}

}  // namespace ringmaster
