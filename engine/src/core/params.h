// The one registry of Ringmaster's tunables (NCCL's NCCL_PARAM idea).
//
// Every parameter is declared once in RINGMASTER_PARAMS below with its
// environment name, default and a line of help, so `ringmaster-cli env` can
// list them all with their current values. Values are read from the
// environment on each call; callers that need a value fixed for the life of
// the process cache it themselves. Thread-safe as long as nobody calls
// setenv concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ringmaster {

// X(Id, "ENV_NAME", "default", "help")
#define RINGMASTER_PARAMS(X)                                                                               \
  X(CpuKernel, "RINGMASTER_CPU_KERNEL", "",                                                                \
    "Force the CPU reduction kernel level: avx512, avx2, sse2 or scalar (default: best the CPU supports)") \
  X(StreamingStoreBytes, "RINGMASTER_STREAMING_STORE_BYTES", "8388608",                                    \
    "Reductions whose output is at least this many bytes bypass the cache with non-temporal stores")

enum class Param {
#define RINGMASTER_PARAM_ENUM(id, env, def, help) id,
  RINGMASTER_PARAMS(RINGMASTER_PARAM_ENUM)
#undef RINGMASTER_PARAM_ENUM
};

struct ParamInfo {
  Param id;
  std::string_view env;
  std::string_view default_value;
  std::string_view help;
};

std::span<const ParamInfo> all_params() noexcept;
const ParamInfo& param_info(Param p) noexcept;

// The environment's value, or nothing when the variable is unset or empty.
std::optional<std::string> param_env(Param p);
// The environment's value, or the default.
std::string param_string(Param p);
// Parses the value as a decimal integer; throws Error(config) naming the
// variable and its value when it is not one.
std::int64_t param_int(Param p);

}  // namespace ringmaster
