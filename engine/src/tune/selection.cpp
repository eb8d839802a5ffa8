// NCCL_ALGO / NCCL_PROTO as the tuner reads them (tools/tuner.h, Selection).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/log.h"
#include "base/params.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/tuner.h"

namespace ringmaster::tune {
namespace {

constexpr int kCollectiveCount = static_cast<int>(Collective::scatter) + 1;  // the last of the enum
constexpr std::uint8_t kBothInSwitch = 3;                                    // NVLS and NVLSTree

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  for (;;) {
    const auto at = s.find(sep, pos);
    out.push_back(trim(s.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos)));
    if (at == std::string_view::npos) return out;
    pos = at + 1;
  }
}

// NCCL's function names, and ours.
std::optional<Collective> function_named(const std::string& name) {
  std::string n;
  for (char c : name)
    if (c != '_') n += c;
  if (n == "allreduce") return Collective::all_reduce;
  if (n == "allgather") return Collective::all_gather;
  if (n == "reducescatter") return Collective::reduce_scatter;
  if (n == "broadcast") return Collective::broadcast;
  if (n == "reduce") return Collective::reduce;
  return std::nullopt;
}

// NCCL's algorithms that need hardware this engine does not drive.
bool foreign_algorithm(const std::string& name) {
  const std::string n = lower(trim(name));
  return n == "nvls" || n == "nvlstree" || n == "collnetdirect" || n == "collnetchain" || n == "collnet" || n == "pat";
}

}  // namespace

Selection Selection::from_env(Kind kind) {
  const Param param = kind == Kind::algorithm ? Param::Algo : Param::Proto;
  const auto spec = param_env(param);
  return spec ? parse(kind, kind == Kind::algorithm ? "NCCL_ALGO" : "NCCL_PROTO", *spec) : Selection{};
}

Selection Selection::parse(Kind kind, std::string_view variable, std::string_view spec) {
  Selection s;
  s.variable_ = std::string(variable);
  s.spec_ = trim(spec);
  const int entries = kind == Kind::algorithm ? kAlgorithms : kProtocols;
  const std::uint8_t all = static_cast<std::uint8_t>((1u << entries) - 1);
  s.all_ = all;
  s.allowed_.assign(kCollectiveCount, all);
  s.origin_.assign(kCollectiveCount, "");
  if (kind == Kind::algorithm) s.in_switch_.assign(kCollectiveCount, kBothInSwitch);
  if (s.spec_.empty()) {
    s.allowed_.clear();
    s.origin_.clear();
    s.in_switch_.clear();
    return s;
  }
  auto fail = [&](const std::string& what) {
    throw Error(ErrorCategory::config, fmt::format("{}={}: {}", variable, s.spec_, what));
  };
  for (const auto& section : split(s.spec_, ';')) {
    if (section.empty()) continue;
    std::vector<Collective> targets;
    std::string list = section;
    if (const auto colon = section.find(':'); colon != std::string::npos) {
      const std::string function = lower(trim(section.substr(0, colon)));
      const auto c = function_named(function);
      if (!c) {
        fail(fmt::format("unknown function '{}' (allreduce, allgather, reducescatter, broadcast, reduce)",
                         section.substr(0, colon)));
      }
      targets.push_back(*c);
      list = trim(section.substr(colon + 1));
    } else {
      for (int c = 0; c < kCollectiveCount; ++c)
        targets.push_back(static_cast<Collective>(c));
    }
    const bool exclude = !list.empty() && list.front() == '^';
    if (exclude) list.erase(0, 1);
    std::uint8_t mask = 0, in_switch = 0;
    int named = 0;
    for (const auto& item : split(list, ',')) {
      if (item.empty()) fail(fmt::format("empty name in '{}'", section));
      if (kind == Kind::algorithm && foreign_algorithm(item)) {
        if (std::find(s.ignored_.begin(), s.ignored_.end(), trim(item)) == s.ignored_.end())
          s.ignored_.push_back(trim(item));
        const std::string n = lower(trim(item));
        if (n == "nvls") in_switch |= 1u;
        if (n == "nvlstree") in_switch |= 2u;
        continue;
      }
      ++named;
      int found = -1;
      if (kind == Kind::algorithm) {
        if (const auto a = parse_algorithm(item)) found = static_cast<int>(*a);
      } else if (const auto p = parse_protocol(item)) {
        found = static_cast<int>(*p);
      }
      if (found < 0) {
        fail(kind == Kind::algorithm ? fmt::format("unknown algorithm '{}' (Ring, Tree, Pair)", item)
                                     : fmt::format("unknown protocol '{}' (LL, LL128, Simple)", item));
      }
      mask = static_cast<std::uint8_t>(mask | (1u << found));
    }
    // NVLS and NVLSTree as NCCL reads them; a list of none of NCCL's
    // algorithms we model (CollNet*, PAT only) leaves them allowed.
    std::uint8_t switch_mask = in_switch;
    if (exclude) {
      switch_mask = static_cast<std::uint8_t>(kBothInSwitch & ~in_switch);
    } else if (named == 0 && in_switch == 0) {
      switch_mask = kBothInSwitch;
    }
    if (exclude || named == 0) mask = static_cast<std::uint8_t>(all & ~mask);
    for (const auto c : targets) {
      s.allowed_[static_cast<std::size_t>(c)] = mask;
      s.origin_[static_cast<std::size_t>(c)] = section;
      if (kind == Kind::algorithm) s.in_switch_[static_cast<std::size_t>(c)] = switch_mask;
    }
  }
  if (!s.ignored_.empty()) {
    std::string names;
    for (const auto& n : s.ignored_)
      names += (names.empty() ? "" : ", ") + n;
    RM_INFO(env,
            "{}: {} do(es) not apply to a communicator here (no NVLink SHARP, in-network reduction or GPU kernels); "
            "NVLS and NVLSTree apply to simulated clusters whose switch reduces",
            variable, names);
  }
  return s;
}

std::string Selection::allowed_key() const {
  if (std::all_of(allowed_.begin(), allowed_.end(), [&](std::uint8_t m) { return m == all_; })) return {};
  std::string key;
  for (const std::uint8_t mask : allowed_)
    key += "0123456789abcdef"[mask & 0xF];
  return key;
}

std::string Selection::text() const {
  return spec_.empty() ? std::string() : variable_ + "=" + spec_;
}

bool Selection::allows(Collective c, int index) const {
  if (allowed_.empty()) return true;
  return (allowed_[static_cast<std::size_t>(c)] >> index) & 1u;
}

std::string Selection::why_not(Collective c, int index) const {
  return allows(c, index) ? std::string() : removed_by(c);
}

std::string Selection::why_not_in_switch(Collective c, bool tree) const {
  if (in_switch_.empty() || ((in_switch_[static_cast<std::size_t>(c)] >> (tree ? 1 : 0)) & 1u)) return {};
  return removed_by(c);
}

std::string Selection::removed_by(Collective c) const {
  const auto& origin = origin_[static_cast<std::size_t>(c)];
  return origin == spec_ ? fmt::format("{}={}", variable_, spec_)
                         : fmt::format("{}={} (section '{}')", variable_, spec_, origin);
}

}  // namespace ringmaster::tune
