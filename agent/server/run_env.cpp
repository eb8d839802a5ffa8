#include "run_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "ringmaster/status.h"

namespace ringmaster::agent {

namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A name as the shell would take it: [A-Za-z_][A-Za-z0-9_]*.
bool plain_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

bool run_env_name_allowed(std::string_view name) {
  if (!plain_name(name)) return false;
  // Loading code: libfabric's provider directory, NCCL's plugins.
  if (name == "FI_PROVIDER_PATH" || ends_with(name, "_PLUGIN") || ends_with(name, "_PLUGIN_LIB")) return false;
  for (std::string_view prefix : {"NCCL_", "RINGMASTER_", "FI_", "TORCHELASTIC_", "SLURM_", "TORCH_NCCL_"}) {
    if (starts_with(name, prefix)) return true;
  }
  static constexpr std::array<std::string_view, 12> kNames = {
      "MASTER_ADDR",          "MASTER_PORT",      "RANK",
      "WORLD_SIZE",           "LOCAL_RANK",       "LOCAL_WORLD_SIZE",
      "GROUP_RANK",           "GROUP_WORLD_SIZE", "ROLE_RANK",
      "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",  "TORCH_DISTRIBUTED_DEBUG"};
  return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

bool run_env_names_file(std::string_view name) {
  return ends_with(name, "_FILE") || ends_with(name, "_PATH") || ends_with(name, "_DIR") ||
         name == "RINGMASTER_TUNE_CACHE";
}

std::map<std::string, std::string> checked_run_env(const nlohmann::json& env, const std::string& run_dir) {
  std::map<std::string, std::string> out;
  if (env.is_null()) return out;
  if (!env.is_object()) throw Error(ErrorCategory::config, "run.env must be an object");
  if (env.size() > 256) {
    throw Error(ErrorCategory::config, fmt::format("run.env has {} variables; at most 256", env.size()));
  }
  for (const auto& [name, value] : env.items()) {
    if (!plain_name(name)) {
      throw Error(ErrorCategory::config,
                  fmt::format("run.env: a variable name of {} bytes is not a plain name ([A-Za-z_][A-Za-z0-9_]*, up "
                              "to 128 bytes)",
                              name.size()));
    }
    if (!run_env_name_allowed(name)) {
      throw Error(ErrorCategory::config,
                  fmt::format("run.env.{} is not allowed: a run's environment takes NCCL_*, RINGMASTER_*, FI_* and "
                              "torchrun's and Slurm's variables only (never the loader's, the shell's, or anything "
                              "that loads code)",
                              name));
    }
    if (!value.is_string()) {
      throw Error(ErrorCategory::config, fmt::format("run.env.{} must be a string, got {}", name, value.type_name()));
    }
    const auto& text = value.get_ref<const std::string&>();
    if (text.size() > 4096 || text.find('\0') != std::string::npos) {
      throw Error(ErrorCategory::config,
                  fmt::format("run.env.{}: a value of {} bytes (at most 4096, no NUL)", name, text.size()));
    }
    if (run_env_names_file(name)) {
      bool escapes = text.empty() || text.front() == '/';
      for (std::size_t begin = 0; !escapes && begin <= text.size();) {
        const auto end = std::min(text.find('/', begin), text.size());
        escapes = text.compare(begin, end - begin, "..") == 0;
        begin = end + 1;
      }
      if (escapes) {
        throw Error(ErrorCategory::config,
                    fmt::format("run.env.{} names a file: give a relative path inside the run's directory (no "
                                "leading '/', no '..'); the agent puts it under {}",
                                name, run_dir));
      }
      out[name] = run_dir + "/" + text;
    } else {
      out[name] = text;
    }
  }
  return out;
}

void check_run_id(std::string_view id) {
  const bool ok =
      !id.empty() && id.size() <= 64 && id != "." && id != ".." && std::all_of(id.begin(), id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      });
  if (!ok) {
    throw Error(
        ErrorCategory::config,
        fmt::format("run.run_id of {} bytes is not 1-64 of [A-Za-z0-9._-] (it names the run's directory)", id.size()));
  }
}

}  // namespace ringmaster::agent
