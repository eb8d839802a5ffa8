// Every tunable the engine reads from the environment, with its default,
// help and current value, for `ringmaster-cli env` and the console.
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
};

std::vector<ParamDescription> list_params();

}  // namespace ringmaster
