// ADDRESS_EXCHANGE: every rank's host and settings gathered up a binomial
// tree to rank 0 and spread back down it (bootstrap.cpp runs it after
// BOOTSTRAP_RING, which opens the tree's connections).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/bootstrap_impl.h"

namespace ringmaster {

// Changed with what the exchange carries (text, then 12-byte records,
// then records up and the job's layout down): a rank of an earlier
// release is dropped as a stranger, not misread.
inline constexpr std::uint32_t kRingHelloMagic = 0x33474E52;  // "RNG3"
inline constexpr std::uint32_t kTreeHelloMagic = 0x33455254;  // "TRE3": to the address exchange's tree parent

// The address exchange's tree: a binomial tree rooted at rank 0, in which
// rank r > 0 hangs under r - lowbit(r) and holds ranks r .. r+lowbit(r)-1
// (fewer at the end), rank 0 all of them. Its depth is ceil(log2 n).
int tree_span(int r, int n);
int tree_parent(int r);
std::vector<int> tree_children(int r, int n);
bool is_tree_child(int child, int parent, int n);

// What ADDRESS_EXCHANGE spreads from rank 0 to every rank: hosts
// numbered by their lowest rank, the settings words' groups, and a hash of
// the ranks' hosts in rank order.
struct JobLayout {
  std::vector<std::uint32_t> host_of;  // by rank
  int host_count = 1;
  std::uint64_t placement = 0;
  std::vector<Bootstrap::SettingsGroup> settings_groups;
};

// On the wire, little-endian: a header of kLayoutHeader bytes (placement
// 8, hosts, groups and runs 4 each), each settings group (first rank,
// ranks), then each run of consecutive ranks on one host (ranks, host):
// a run a node where ranks are placed by node, as launchers place them.
inline constexpr std::size_t kLayoutHeader = 20;
std::vector<unsigned char> encode_layout(const JobLayout& layout);
// The bytes after a header, or 0 when its counts cannot be those of a job
// of n ranks (each at least 1, at most n).
std::size_t layout_body_bytes(const unsigned char* header, int n);
// The layout, or nothing when the bytes do not describe n ranks.
std::optional<JobLayout> decode_layout(std::span<const unsigned char> bytes, int n);

// The stage's work: fills s.host_of, s.host_count, s.placement and
// s.settings_groups, closes the ring's and the tree's connections, and
// returns the stage's detail. `settings` is this rank's settings word;
// `failure` makes a failure of the stage, thrown as a StageError.
std::string exchange_addresses(Bootstrap::Impl& s, const std::string& settings, net::Clock::time_point deadline,
                               const std::function<StageFailure(std::string)>& failure);

}  // namespace ringmaster
