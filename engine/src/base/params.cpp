#include "base/params.h"

#include <array>
#include <charconv>
#include <cstdlib>

#include "ringmaster/status.h"

namespace ringmaster {
namespace {

constexpr std::array kParams = {
#define RINGMASTER_PARAM_INFO(id, env, def, help) ParamInfo{Param::id, env, def, help},
    RINGMASTER_PARAMS(RINGMASTER_PARAM_INFO)
#undef RINGMASTER_PARAM_INFO
};

}  // namespace

std::span<const ParamInfo> all_params() noexcept {
  return kParams;
}

const ParamInfo& param_info(Param p) noexcept {
  return kParams[static_cast<std::size_t>(p)];
}

std::optional<std::string> param_env(Param p) {
  const char* value = std::getenv(std::string(param_info(p).env).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string param_string(Param p) {
  if (auto value = param_env(p)) return *value;
  return std::string(param_info(p).default_value);
}

std::int64_t param_int(Param p) {
  const std::string text = param_string(p);
  std::int64_t value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) {
    throw Error(ErrorCategory::config, std::string(param_info(p).env) + "=" + text + " is not an integer");
  }
  return value;
}

}  // namespace ringmaster

#include "ringmaster/tools/params.h"

namespace ringmaster {

std::vector<ParamDescription> list_params() {
  std::vector<ParamDescription> out;
  for (const auto& p : all_params()) {
    out.push_back({std::string(p.env), std::string(p.default_value), std::string(p.help), param_env(p.id)});
  }
  return out;
}

}  // namespace ringmaster
