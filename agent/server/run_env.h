// What a client may put in a run's environment. The agent may run as root
// and its ranks inherit what the client asks for, so names come from an
// allowlist (the engine's, libfabric's, torchrun's and Slurm's), never the
// loader's or the shell's, and a variable that names a file names one in
// the run's own directory.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ringmaster::agent {

// Why a client may not set `name` in a run's environment; empty when it
// may. Allowed: NCCL_*, RINGMASTER_*, FI_*, torchrun's and Slurm's names,
// CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS; never a name that loads code (a
// plugin, a library, a module, a provider directory, NCCL's config file)
// nor what the agent sets itself (the run id, the faults' connect filter).
std::string run_env_refusal(std::string_view name);
bool run_env_name_allowed(std::string_view name);

// The NCCL_*, FI_* and RINGMASTER_* variables of the agent's own
// environment, which the ranks it starts inherit: what a job's nodes must
// agree on (ringmaster/tools/node_compare.h). A name that says it holds a
// secret (TOKEN, SECRET, PASSWORD, a _KEY suffix) is left out.
std::map<std::string, std::string> settings_ranks_inherit();

// Variables whose value is a file the rank reads or writes.
bool run_env_names_file(std::string_view name);

// The run's `env` object, checked: every name allowed, every value a
// string without NUL; a file name relative, without "..", and made
// absolute under `run_dir`. Throws Error(config) naming the variable, never
// echoing its value.
std::map<std::string, std::string> checked_run_env(const nlohmann::json& env, const std::string& run_dir);

// "LOW-HIGH" of two decimal numbers, as --rank-uids and a preflight's
// port_range give them; nullopt when the text is not that shape (the
// callers check the bounds and say which option was wrong).
std::optional<std::pair<unsigned long, unsigned long>> low_high(std::string_view text);

// A run id is a directory name: 1-64 of [A-Za-z0-9._-], not "." or "..".
// Throws Error(config) otherwise (saying its length, not echoing it).
void check_run_id(std::string_view id);

}  // namespace ringmaster::agent
