// Internal to the tree schedules: a call's two halves (one per tree) in
// pieces, each piece's step header, and a piece up or down one tree.
#pragma once

#include <array>
#include <cstddef>

#include "algo/tree.h"

namespace ringmaster::algo {

// A half's pieces: element ranges of at most `piece_elems`.
struct Half {
  std::size_t begin = 0, count = 0;
  std::size_t piece_elems = 0;
  std::size_t pieces() const { return count == 0 ? 1 : (count + piece_elems - 1) / piece_elems; }
  std::size_t piece_begin(std::size_t k) const { return begin + std::min(count, k * piece_elems); }
  std::size_t piece_size(std::size_t k) const {
    const std::size_t b = std::min(count, k * piece_elems);
    return std::min(count, b + piece_elems) - b;
  }
};

std::array<Half, 2> halves(const Task& task, std::size_t count);

enum Phase { kUp = 0, kDown = 1, kHandOff = 2 };

transport::StepHeader tree_header(const Task& task, std::size_t piece, int tree, int phase);

void send_to(Context& ctx, const transport::StepHeader& h, int peer, const std::byte* data, std::size_t bytes);
void recv_from(Context& ctx, const transport::StepHeader& h, int peer, std::byte* data, std::size_t bytes);

// Reduce piece k of tree t into acc (which holds this rank's input) from
// the children, then pass it to the parent.
void up(Context& ctx, const DoubleTree& tree, const Task& task, int t, std::size_t k, std::byte* acc,
        std::size_t elems);

// Receive piece k of tree t from the parent (unless at the root) and pass
// it to the children.
void down(Context& ctx, const DoubleTree& tree, const Task& task, int t, std::size_t k, std::byte* data,
          std::size_t bytes);

// Piece k of tree 0, then of tree 1, for every k: each(t, k, data, elems).
template <class Each>
inline void each_piece(const Task& task, std::byte* buf, std::size_t count, const Each& each) {
  const std::size_t es = size_of(task.type);
  const auto half = halves(task, count);
  const std::size_t pieces = std::max(half[0].pieces(), half[1].pieces());
  for (std::size_t k = 0; k < pieces; ++k) {
    for (int t = 0; t < 2; ++t) {
      const Half& h = half[static_cast<std::size_t>(t)];
      if (k < h.pieces()) each(t, k, buf + h.piece_begin(k) * es, h.piece_size(k));
    }
  }
}

}  // namespace ringmaster::algo
