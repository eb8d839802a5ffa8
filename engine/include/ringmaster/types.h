// Element types and reduction operators of Ringmaster's collectives.
//
// The names follow the ones nccl-tests prints and accepts on its command
// line (`float`, `half`, `bfloat16`, `int32`, ...), so a sweep spec written
// for nccl-tests reads the same here. All functions are pure and
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ringmaster {

enum class DataType : std::uint8_t {
  int8,
  uint8,
  int32,
  uint32,
  int64,
  uint64,
  fp16,
  bf16,
  fp32,
  fp64,
};

enum class RedOp : std::uint8_t { sum, prod, max, min, avg };

inline constexpr DataType kAllDataTypes[] = {DataType::int8,  DataType::uint8,  DataType::int32, DataType::uint32,
                                             DataType::int64, DataType::uint64, DataType::fp16,  DataType::bf16,
                                             DataType::fp32,  DataType::fp64};
inline constexpr RedOp kAllRedOps[] = {RedOp::sum, RedOp::prod, RedOp::max, RedOp::min, RedOp::avg};

// Size of one element in bytes.
constexpr std::size_t size_of(DataType t) noexcept {
  switch (t) {
    case DataType::int8:
    case DataType::uint8:
      return 1;
    case DataType::fp16:
    case DataType::bf16:
      return 2;
    case DataType::int32:
    case DataType::uint32:
    case DataType::fp32:
      return 4;
    case DataType::int64:
    case DataType::uint64:
    case DataType::fp64:
      return 8;
  }
  return 0;
}

constexpr bool is_floating(DataType t) noexcept {
  return t == DataType::fp16 || t == DataType::bf16 || t == DataType::fp32 || t == DataType::fp64;
}

// The name nccl-tests prints in its `type` column: int8 uint8 int32 uint32
// int64 uint64 half bfloat16 float double.
std::string_view name_of(DataType t) noexcept;
// nccl-tests' `redop` column: sum prod max min avg.
std::string_view name_of(RedOp op) noexcept;

// Accepts nccl-tests' names and the common aliases (`fp32`, `float32`,
// `f32`, `fp16`, `float16`, `bf16`, `char`, `int`, `uint`, ...),
// case-insensitive. Returns nothing for an unknown name.
std::optional<DataType> parse_data_type(std::string_view name) noexcept;
std::optional<RedOp> parse_red_op(std::string_view name) noexcept;

// Every accepted spelling, for error messages ("expected one of: ...").
std::span<const std::string_view> data_type_names() noexcept;
std::span<const std::string_view> red_op_names() noexcept;

// What a call does, how its data moves (protocol) and along which
// schedule (algorithm): the vocabulary of the communicator, the tuner and
// the transports.
enum class Collective : std::uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  barrier,
  all_to_all,
  send_recv,  // point-to-point: send, recv, sendrecv
  gather,     // to a root, over direct connections (as MPI_Gather; nccl-tests' gather_perf)
  scatter,    // from a root, over direct connections (keep last: tables are sized by it)
};

std::string_view name_of(Collective c) noexcept;

// NCCL's protocols. LL128 needs a transport that writes 128-byte lines in
// order (shared memory, NVLink); sockets carry LL and Simple.
enum class Protocol : std::uint8_t { ll, ll128, simple };
std::string_view name_of(Protocol p) noexcept;
// "LL", "LL128", "Simple" in any case; nullopt for anything else.
std::optional<Protocol> parse_protocol(std::string_view name) noexcept;

// Ring: reduce-scatter and all-gather (or a chain) around the channel's
// ring. Tree: NCCL's double binary tree, reduce up and broadcast down.
// Pair: two ranks' all_reduce as one exchange of whole inputs on one
// channel (a ring of two takes two steps), up to RINGMASTER_PAIR_BYTES;
// Ringmaster's own, so NCCL_ALGO=Ring does not include it.
enum class Algorithm : std::uint8_t { ring, tree, pair };
std::string_view name_of(Algorithm a) noexcept;
// "Ring", "Tree", "Pair" in any case; nullopt for anything else.
std::optional<Algorithm> parse_algorithm(std::string_view name) noexcept;

}  // namespace ringmaster
