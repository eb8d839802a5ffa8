// Running a short command to completion (nft, tc, ip): the agent's fault
// injection and the repro scenarios' network set-up.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ringmaster::agent {

// Runs argv (PATH lookup), feeding `input` on stdin; returns the exit code
// (127 when it cannot start, 128+N when killed by signal N) and stdout and
// stderr together.
std::pair<int, std::string> run_command(const std::vector<std::string>& argv, const std::string& input = {});

}  // namespace ringmaster::agent
