#include "ringmaster/types.h"

#include <array>
#include <cctype>
#include <string>

#include "ringmaster/status.h"

namespace ringmaster {
namespace {

struct TypeName {
  std::string_view name;
  DataType type;
};

// nccl-tests' names first (they are what name_of prints), then aliases.
constexpr std::array kTypeNames = {
    TypeName{"int8", DataType::int8},     TypeName{"uint8", DataType::uint8},   TypeName{"int32", DataType::int32},
    TypeName{"uint32", DataType::uint32}, TypeName{"int64", DataType::int64},   TypeName{"uint64", DataType::uint64},
    TypeName{"half", DataType::fp16},     TypeName{"bfloat16", DataType::bf16}, TypeName{"float", DataType::fp32},
    TypeName{"double", DataType::fp64},   TypeName{"char", DataType::int8},     TypeName{"int", DataType::int32},
    TypeName{"uint", DataType::uint32},   TypeName{"fp16", DataType::fp16},     TypeName{"float16", DataType::fp16},
    TypeName{"f16", DataType::fp16},      TypeName{"bf16", DataType::bf16},     TypeName{"fp32", DataType::fp32},
    TypeName{"float32", DataType::fp32},  TypeName{"f32", DataType::fp32},      TypeName{"fp64", DataType::fp64},
    TypeName{"float64", DataType::fp64},  TypeName{"f64", DataType::fp64},
};

constexpr std::array kOpNames = {
    std::pair<std::string_view, RedOp>{"sum", RedOp::sum}, std::pair<std::string_view, RedOp>{"prod", RedOp::prod},
    std::pair<std::string_view, RedOp>{"max", RedOp::max}, std::pair<std::string_view, RedOp>{"min", RedOp::min},
    std::pair<std::string_view, RedOp>{"avg", RedOp::avg},
};

const auto kTypeNameList = [] {
  std::array<std::string_view, kTypeNames.size()> names{};
  for (std::size_t i = 0; i < kTypeNames.size(); ++i)
    names[i] = kTypeNames[i].name;
  return names;
}();

const auto kOpNameList = [] {
  std::array<std::string_view, kOpNames.size()> names{};
  for (std::size_t i = 0; i < kOpNames.size(); ++i)
    names[i] = kOpNames[i].first;
  return names;
}();

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

std::string_view name_of(DataType t) noexcept {
  for (const auto& entry : kTypeNames) {
    if (entry.type == t) return entry.name;
  }
  return "unknown";
}

std::string_view name_of(RedOp op) noexcept {
  for (const auto& [name, value] : kOpNames) {
    if (value == op) return name;
  }
  return "unknown";
}

std::optional<DataType> parse_data_type(std::string_view name) noexcept {
  for (const auto& entry : kTypeNames) {
    if (iequals(entry.name, name)) return entry.type;
  }
  return std::nullopt;
}

std::optional<RedOp> parse_red_op(std::string_view name) noexcept {
  for (const auto& [candidate, value] : kOpNames) {
    if (iequals(candidate, name)) return value;
  }
  return std::nullopt;
}

std::span<const std::string_view> data_type_names() noexcept {
  return kTypeNameList;
}
std::span<const std::string_view> red_op_names() noexcept {
  return kOpNameList;
}

std::string_view name_of(ErrorCategory c) noexcept {
  switch (c) {
    case ErrorCategory::ok:
      return "ok";
    case ErrorCategory::config:
      return "config";
    case ErrorCategory::network:
      return "network";
    case ErrorCategory::protocol:
      return "protocol";
    case ErrorCategory::peer:
      return "peer";
    case ErrorCategory::timeout:
      return "timeout";
    case ErrorCategory::internal:
      return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out(name_of(category_));
  out += " error: ";
  out += message_;
  return out;
}

std::string_view name_of(Collective c) noexcept {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::all_gather:
      return "all_gather";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::broadcast:
      return "broadcast";
    case Collective::reduce:
      return "reduce";
    case Collective::barrier:
      return "barrier";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::send_recv:
      return "sendrecv";
    case Collective::gather:
      return "gather";
    case Collective::scatter:
      return "scatter";
  }
  return "unknown";
}

std::string_view name_of(Protocol p) noexcept {
  switch (p) {
    case Protocol::ll:
      return "LL";
    case Protocol::ll128:
      return "LL128";
    case Protocol::simple:
      return "Simple";
  }
  return "unknown";
}

std::string_view name_of(Algorithm a) noexcept {
  switch (a) {
    case Algorithm::ring:
      return "Ring";
    case Algorithm::tree:
      return "Tree";
    case Algorithm::pair:
      return "Pair";
  }
  return "unknown";
}

std::optional<Protocol> parse_protocol(std::string_view name) noexcept {
  for (const Protocol p : {Protocol::ll, Protocol::ll128, Protocol::simple}) {
    if (iequals(name, name_of(p))) return p;
  }
  return std::nullopt;
}

std::optional<Algorithm> parse_algorithm(std::string_view name) noexcept {
  for (const Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::pair}) {
    if (iequals(name, name_of(a))) return a;
  }
  return std::nullopt;
}

}  // namespace ringmaster
