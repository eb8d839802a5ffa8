// Every variable Ringmaster reads from the environment, with its default,
// help and current value, for `ringmaster-cli env` and the console: the
// engine's tunables (the parameter registry), and what launchers, logging
// and libfabric set; and the NCCL_* variables set here that nothing reads.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ringmaster {

struct ParamDescription {
  std::string name;  // environment variable
  std::string default_value;
  std::string help;
  std::optional<std::string> value;  // set in this environment
  std::string group = "tunable";     // tunable, launcher, logging, libfabric
};

// The engine's tunables.
std::vector<ParamDescription> list_params();
// Every other variable a Ringmaster binary reads: launchers' (torchrun,
// Open MPI, PMI, Slurm), logging's and libfabric's.
std::vector<ParamDescription> list_other_variables();

struct IgnoredVariable {
  std::string name, value;
  std::string why;
};
// NCCL_* variables set in this environment that Ringmaster does not read,
// each with the reason.
std::vector<IgnoredVariable> ignored_nccl_variables();

}  // namespace ringmaster
