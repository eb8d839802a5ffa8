// Where the ranks of a large made-up run are: in blocks of `per_node`,
// rank r on agent (node) r / per_node, as the console places them.
#pragma once

#include <cstddef>
#include <vector>

inline std::vector<int> ranks_in_nodes(int world, int per_node) {
  std::vector<int> placement(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    placement[static_cast<std::size_t>(r)] = r / per_node;
  return placement;
}
