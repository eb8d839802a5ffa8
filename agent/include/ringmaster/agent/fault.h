// The faults an agent injects (docs/protocol.md, "Fault injection"),
// typed: one struct per `kind`, read from JSON and checked once, here,
// whoever reads them: the agent from a `fault` request, `ringmaster-cli
// remote fault` from its options, the repro catalog from a scenario file.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ringmaster::agent {

// Which packets a drop takes: arriving (in), leaving (out) or both.
enum class Direction { in, out, both };
std::string_view to_string(Direction d);

// drop_ports: TCP to ports LOW..HIGH dropped (nftables), or with `reject`
// answered by a TCP reset, as a REJECT rule does: the sender sees
// "connection refused", as if nothing listened.
struct DropPorts {
  static constexpr std::string_view kKind = "drop_ports";
  std::uint16_t low = 1, high = 65535;
  Direction direction = Direction::both;
  std::vector<std::uint16_t> except;  // left open, as a security group's narrower allow rules
  bool skip_loopback = false;         // traffic within the host passes (a security group sees only hosts)
  bool reject = false;                // a TCP reset instead of silence
  bool operator==(const DropPorts&) const = default;
};

// drop_address: TCP/IP from (in) or to (out) one address dropped.
struct DropAddress {
  static constexpr std::string_view kKind = "drop_address";
  std::string address;  // IPv4 or IPv6, as written
  Direction direction = Direction::both;
  bool ipv6() const { return address.find(':') != std::string::npos; }
  bool operator==(const DropAddress&) const = default;
};

// delay: every packet the interface sends waits (tc netem).
struct Delay {
  static constexpr std::string_view kKind = "delay";
  std::string interface;
  double ms = 0;
  bool operator==(const Delay&) const = default;
};

// loss: a share of the packets the interface sends (out) or receives (in)
// vanishes, as a bad cable, optic or switch port loses them. Only `in` is
// a wire's loss to TCP: a packet dropped on its way out of this host is
// a local drop its sender's TCP learns of at once and does not count as
// resent, while one dropped on arrival is lost to a sender elsewhere.
struct Loss {
  static constexpr std::string_view kKind = "loss";
  std::string interface;
  double percent = 0;
  Direction direction = Direction::out;
  bool operator==(const Loss&) const = default;
};

// rate: what the interface sends crawls at `mbit` (tc htb); with `to`,
// only what it sends to that address (one slow link, not a slow host).
struct Rate {
  static constexpr std::string_view kKind = "rate";
  std::string interface;
  double mbit = 0;
  std::string to;  // IPv4 or IPv6; empty: everything the interface sends
  bool operator==(const Rate&) const = default;
};

// shm_size: /dev/shm shrunk to `bytes` for the agent's ranks (tmpfs).
struct ShmSize {
  static constexpr std::string_view kKind = "shm_size";
  std::int64_t bytes = 0;
  bool operator==(const ShmSize&) const = default;
};

// limit: a resource limit for the ranks the agent starts from now on,
// soft and hard alike, as a container's `--ulimit nofile=64:64` or a
// unit's LimitNOFILE= sets them: the descriptors a rank may open
// (nofile) or the memory it may lock (memlock, bytes).
struct Limit {
  static constexpr std::string_view kKind = "limit";
  enum class Resource { nofile, memlock };
  Resource resource = Resource::nofile;
  std::uint64_t value = 0;
  bool operator==(const Limit&) const = default;
};
std::string_view to_string(Limit::Resource r);

// memory_limit: the ranks the agent starts from now on run in a memory
// cgroup limited to `bytes` (no swap), as a Pod's limits.memory or a
// unit's MemoryMax= holds them: past it the kernel's OOM killer SIGKILLs
// one.
struct MemoryLimit {
  static constexpr std::string_view kKind = "memory_limit";
  std::int64_t bytes = 0;
  bool operator==(const MemoryLimit&) const = default;
};

using FaultSpec = std::variant<DropPorts, DropAddress, Delay, Loss, Rate, ShmSize, Limit, MemoryLimit>;

// The bounds a spec is checked against.
inline constexpr double kMostDelayMs = 60'000;
inline constexpr double kMostRateMbit = 1'000'000;
inline constexpr std::int64_t kMostShmBytes = std::int64_t{1} << 40;
// Fewer descriptors than a program needs to start (its three standard
// ones, the loader's) is refused: the fault is a tight limit, not one no
// rank could exec under.
inline constexpr std::uint64_t kFewestNofile = 8;
inline constexpr std::uint64_t kMostLimit = std::uint64_t{1} << 40;
// Less than a rank needs to start (the program, its libraries) is refused.
inline constexpr std::int64_t kFewestMemoryBytes = std::int64_t{16} << 20;

std::string_view kind_of(const FaultSpec& f);

// A fault from its JSON ({"kind": ..., fields}). Throws Error(config)
// naming the kind and the field and what was expected ("fault 'delay':
// 'ms' is a string, not a number"); a value is described by its type and
// length, never echoed. Fields it does not know are refused too: a typo
// ("port") would otherwise drop every port.
FaultSpec parse_fault(const nlohmann::json& j);

// The fault's JSON, as docs/protocol.md lists it (with `kind`).
nlohmann::json to_json(const FaultSpec& f);

// One line for a person: "drop TCP to ports 1025-65535 arriving, except
// 29500, not on loopback".
std::string describe(const FaultSpec& f);

// "P" or "LOW-HIGH" as nft and the connect filter write a port range.
std::string port_range(const DropPorts& d);

}  // namespace ringmaster::agent
