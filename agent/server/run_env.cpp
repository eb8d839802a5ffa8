#include "run_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "ringmaster/status.h"

extern char** environ;

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

namespace {

// What a run's environment may not set, whatever its prefix, and why. A
// name matches an entry equal to it, or ending with an entry that starts
// with '_'; the first match gives the reason. Checked before the
// allowlist below.
struct Refused {
  std::string_view name;
  std::string_view why;
};
constexpr std::array<Refused, 12> kRefused = {{
    {"FI_PROVIDER_PATH", "it names where libfabric loads providers from"},
    {"NCCL_CONF_FILE", "it sets NCCL variables from a file, past this check"},
    {"RINGMASTER_CUDA_MODULE", "it names the CUDA module to load"},
    {"RINGMASTER_NCCL_LIBRARY", "it names the NCCL library to load"},
    {"RINGMASTER_CONNECT_FILTER", "the agent sets it for the faults it injected"},
    {"RINGMASTER_RUN_ID", "the agent sets it"},
    {"_PLUGIN", "it names a plugin to load"},
    {"_PLUGIN_LIB", "it names a plugin to load"},
    {"_PLUGIN_PATH", "it names where plugins are loaded from"},
    {"_LIBRARY", "it names a library to load"},
    {"_LIBRARY_PATH", "it names where libraries are loaded from"},
    {"_MODULE", "it names a module to load"},
}};

// What it may set: names with these prefixes, and these names.
constexpr std::array<std::string_view, 6> kAllowedPrefixes = {"NCCL_",         "RINGMASTER_", "FI_",
                                                              "TORCHELASTIC_", "SLURM_",      "TORCH_NCCL_"};
constexpr std::array<std::string_view, 12> kAllowedNames = {
    "MASTER_ADDR",          "MASTER_PORT",      "RANK",
    "WORLD_SIZE",           "LOCAL_RANK",       "LOCAL_WORLD_SIZE",
    "GROUP_RANK",           "GROUP_WORLD_SIZE", "ROLE_RANK",
    "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",  "TORCH_DISTRIBUTED_DEBUG"};

const Refused* refused(std::string_view name) {
  for (const auto& r : kRefused) {
    if (r.name.front() == '_' ? ends_with(name, r.name) : name == r.name) return &r;
  }
  return nullptr;
}

}  // namespace

std::string run_env_refusal(std::string_view name) {
  if (!plain_name(name)) return "it is not a plain name ([A-Za-z_][A-Za-z0-9_]*, up to 128 bytes)";
  if (const Refused* r = refused(name)) {
    if (r->why.starts_with("the agent sets")) return std::string(r->why);
    return fmt::format(
        "{}: library and plugin locations come from the agent's own configuration (its unit or "
        "command line), never from a client",
        r->why);
  }
  for (std::string_view prefix : kAllowedPrefixes) {
    if (starts_with(name, prefix)) return {};
  }
  if (std::find(kAllowedNames.begin(), kAllowedNames.end(), name) != kAllowedNames.end()) return {};
  return "a run's environment takes NCCL_*, RINGMASTER_*, FI_* and torchrun's and Slurm's variables only (never the "
         "loader's, the shell's, or anything that loads code)";
}

bool run_env_name_allowed(std::string_view name) {
  return run_env_refusal(name).empty();
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
    if (const std::string why = run_env_refusal(name); !why.empty()) {
      throw Error(ErrorCategory::config, fmt::format("run.env.{} is not allowed: {}", name, why));
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

std::optional<std::pair<unsigned long, unsigned long>> low_high(std::string_view text) {
  unsigned long lo = 0, hi = 0;
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const char* end = text.data() + text.size();
  if (std::from_chars(text.data(), text.data() + dash, lo).ptr != text.data() + dash ||
      std::from_chars(text.data() + dash + 1, end, hi).ptr != end) {
    return std::nullopt;
  }
  return std::pair{lo, hi};
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

std::map<std::string, std::string> settings_ranks_inherit() {
  std::map<std::string, std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = entry.substr(0, eq);
    if (!name.starts_with("NCCL_") && !name.starts_with("FI_") && !name.starts_with("RINGMASTER_")) continue;
    const bool secret = name.ends_with("_KEY") || name.find("TOKEN") != std::string_view::npos ||
                        name.find("SECRET") != std::string_view::npos ||
                        name.find("PASSWORD") != std::string_view::npos;
    if (!secret) out.emplace(name, entry.substr(eq + 1));
  }
  return out;
}

}  // namespace ringmaster::agent
