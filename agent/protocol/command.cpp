// run_command: posix_spawnp with pipes, waited for.
#include "ringmaster/agent/command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

extern char** environ;

namespace ringmaster::agent {

std::pair<int, std::string> run_command(const std::vector<std::string>& argv, const std::string& input,
                                        const std::map<std::string, std::string>& env) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    if (!env.contains(std::string(entry.substr(0, entry.find('='))))) env_text.emplace_back(entry);
  }
  for (const auto& [name, value] : env)
    env_text.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : env_text)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2], in[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {127, std::strerror(errno)};
  if (::pipe2(in, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return {127, std::strerror(errno)};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  // The tool (nft, tc, ip) gets nothing else of the agent's: not its
  // listener, not a client's session, whatever was opened without O_CLOEXEC.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (auto& s : copy)
    args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    return {127, fmt::format("cannot run {}: {}", argv[0], std::strerror(rc))};
  }
  // Scripts are small: write all, then read all.
  std::size_t done = 0;
  while (done < input.size()) {
    const ssize_t n = ::write(in[1], input.data() + done, input.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(in[1]);
  std::string output;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n > 0) {
      output.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

}  // namespace ringmaster::agent
