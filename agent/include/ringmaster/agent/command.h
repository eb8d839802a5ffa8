// Running a short command to completion (nft, tc, ip): the agent's fault
// injection and the repro scenarios' network set-up.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ringmaster::agent {

// Runs argv (PATH lookup), feeding `input` on stdin, with this process's
// environment and `env` on top of it (a value kept off the command line,
// where `ps` shows it); returns the exit code (127 when it cannot start,
// 128+N when killed by signal N) and stdout and stderr together.
std::pair<int, std::string> run_command(const std::vector<std::string>& argv, const std::string& input = {},
                                        const std::map<std::string, std::string>& env = {});

}  // namespace ringmaster::agent
