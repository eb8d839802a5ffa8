// ADDRESS_EXCHANGE: every rank's host and settings gathered up a binomial
// tree to rank 0 and spread back down it (bootstrap.cpp runs it after
// BOOTSTRAP_RING, which opens the tree's connections).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap_impl.h"

namespace ringmaster {

// Changed with the exchange's records (text, then 12-byte records): a
// rank of an earlier release is dropped as a stranger, not misread.
inline constexpr std::uint32_t kRingHelloMagic = 0x32474E52;  // "RNG2"
inline constexpr std::uint32_t kTreeHelloMagic = 0x32455254;  // "TRE2": to the address exchange's tree parent

// The address exchange's tree: a binomial tree rooted at rank 0, in which
// rank r > 0 hangs under r - lowbit(r) and holds ranks r .. r+lowbit(r)-1
// (fewer at the end), rank 0 all of them. Its depth is ceil(log2 n).
int tree_span(int r, int n);
int tree_parent(int r);
std::vector<int> tree_children(int r, int n);
bool is_tree_child(int child, int parent, int n);

// The stage's work: fills s.host_of, s.host_count, s.placement and
// s.settings_groups, closes the ring's and the tree's connections, and
// returns the stage's detail. `settings` is this rank's settings word;
// `failure` makes a failure of the stage, thrown as a StageError.
std::string exchange_addresses(Bootstrap::Impl& s, const std::string& settings, net::Clock::time_point deadline,
                               const std::function<StageFailure(std::string)>& failure);

}  // namespace ringmaster
