// A job's rendezvous read from /proc (ringmaster/tools/job_watch.h).
#include "ringmaster/tools/job_watch.h"

#include <dirent.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "bootstrap/hints.h"
#include "net/port_use.h"

namespace ringmaster {
namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

// NUL-separated words (environ, cmdline).
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\0', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::optional<std::map<std::string, std::string>> environment_of(int pid) {
  const auto text = read_file(fmt::format("/proc/{}/environ", pid));
  if (!text) return std::nullopt;
  std::map<std::string, std::string> env;
  for (const auto& word : words(*text)) {
    const auto eq = word.find('=');
    if (eq != std::string::npos) env.emplace(word.substr(0, eq), word.substr(eq + 1));
  }
  return env;
}

int number(const std::map<std::string, std::string>& env, const char* name) {
  const auto it = env.find(name);
  int v = -1;
  if (it == env.end()) return -1;
  const auto [ptr, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return ec == std::errc() && ptr == it->second.data() + it->second.size() ? v : -1;
}

// The inodes of the process's socket descriptors ("socket:[12345]").
std::set<std::uint64_t> socket_inodes(int pid, std::string* error) {
  std::set<std::uint64_t> out;
  const std::string dir = fmt::format("/proc/{}/fd", pid);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (error != nullptr) *error = fmt::format("cannot list {}: {}", dir, std::strerror(errno));
    return out;
  }
  while (const dirent* e = ::readdir(d)) {
    char target[64] = {};
    const auto n = ::readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    if (n <= 0 || std::strncmp(target, "socket:[", 8) != 0) continue;
    std::uint64_t inode = 0;
    std::from_chars(target + 8, target + n, inode);
    out.insert(inode);
  }
  ::closedir(d);
  return out;
}

// The seconds a SYN has gone unanswered by the time of its `retransmits`-th
// retransmission: Linux waits 1 s, then doubles (1, 3, 7, 15, 31, 63 s).
int unanswered_for_s(int retransmits) {
  return (1 << std::min(retransmits, 20)) - 1;
}

// "127.0.0.1:29500" for an IPv4 address in an IPv6 socket's row
// ("[::ffff:127.0.0.1]", torch's dual-stack sockets), the address as it
// is otherwise.
std::string endpoint_text(const std::string& address, std::uint16_t port) {
  constexpr std::string_view kMapped = "[::ffff:";
  if (address.starts_with(kMapped) && address.find('.') != std::string::npos) {
    return fmt::format("{}:{}", address.substr(kMapped.size(), address.size() - kMapped.size() - 1), port);
  }
  return fmt::format("{}:{}", address, port);
}

}  // namespace

WatchedRank read_rendezvous(int pid, const std::map<std::string, std::string>& environment,
                            const std::vector<WatchedSocket>& own_sockets) {
  WatchedRank r;
  r.pid = pid;
  r.rank = number(environment, "RANK");
  r.world_size = number(environment, "WORLD_SIZE");
  r.local_rank = number(environment, "LOCAL_RANK");
  r.master_port = std::max(0, number(environment, "MASTER_PORT"));
  if (const auto it = environment.find("MASTER_ADDR"); it != environment.end()) r.master_addr = it->second;
  if (const auto it = environment.find("TORCHELASTIC_RUN_ID"); it != environment.end()) r.run_id = it->second;
  if (const auto it = environment.find("NCCL_RAS_ADDR"); it != environment.end()) r.nccl_ras_addr = it->second;
  const auto port = static_cast<std::uint16_t>(r.master_port);
  const WatchedSocket* listener = nullptr;
  const WatchedSocket* connected = nullptr;
  const WatchedSocket* syn = nullptr;
  for (const auto& s : own_sockets) {
    if (s.local_port == r.master_port && s.state == "LISTEN") listener = &s;
    if (s.local_port == r.master_port && s.state == "ESTABLISHED") ++r.store_clients;
    if (s.remote_port != r.master_port || r.master_port == 0) continue;
    if (s.state == "ESTABLISHED" && connected == nullptr) connected = &s;
    if (s.state == "SYN_SENT" && (syn == nullptr || s.retransmits > syn->retransmits)) syn = &s;
  }
  if (listener != nullptr) {
    r.outcome = "hosting";
    r.stage = Stage::store_barrier;
    r.detail = fmt::format("hosts the store on {} with {} client connection{}", listener->local, r.store_clients,
                           r.store_clients == 1 ? "" : "s");
  } else if (connected != nullptr) {
    r.outcome = "connected";
    r.stage = Stage::store_handshake;
    r.remote = connected->remote;
    r.detail = fmt::format("connected to the store at {} from {}", connected->remote, connected->local);
  } else if (syn != nullptr) {
    r.outcome = "unanswered";
    r.remote = syn->remote;
    r.syn_retransmits = syn->retransmits;
    r.detail = syn->retransmits == 0 ? fmt::format("SYN to {} not answered yet", syn->remote)
                                     : fmt::format("SYN to {} unanswered for at least {} s ({} retransmission{})",
                                                   syn->remote, unanswered_for_s(syn->retransmits), syn->retransmits,
                                                   syn->retransmits == 1 ? "" : "s");
    if (syn->retransmits > 0) r.hint = hint_store_connect(ETIMEDOUT, port);
  } else {
    r.outcome = "not_connected";
    r.detail = r.master_port == 0 ? std::string("no MASTER_PORT in its environment")
                                  : fmt::format(
                                        "no connection toward MASTER_PORT {} now (a refused connect leaves no socket; "
                                        "between retries, or not there yet)",
                                        r.master_port);
  }
  return r;
}

std::optional<WatchedRank> watch_process(int pid, std::string* error) {
  const auto env = environment_of(pid);
  if (!env) {
    if (error != nullptr) {
      *error = fmt::format(
          "cannot read /proc/{}/environ: {} (gone, or another user's: the watch needs the same "
          "user or CAP_SYS_PTRACE)",
          pid, std::strerror(errno));
    }
    return std::nullopt;
  }
  const auto inodes = socket_inodes(pid, error);
  std::vector<WatchedSocket> own;
  for (const auto& [file, ipv6] : {std::pair{"tcp", false}, std::pair{"tcp6", true}}) {
    const auto text = read_file(fmt::format("/proc/{}/net/{}", pid, file));
    if (!text) continue;
    for (const auto& s : net::parse_tcp_table(*text, ipv6)) {
      if (!inodes.contains(s.inode)) continue;
      own.push_back({endpoint_text(s.local, s.local_port), endpoint_text(s.remote, s.remote_port), s.local_port,
                     s.remote_port, s.state, s.retransmits});
    }
  }
  WatchedRank r = read_rendezvous(pid, *env, own);
  if (const auto it = env->find("NCCL_DEBUG_FILE"); it != env->end() && !it->second.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    for (std::size_t i = 0; i < it->second.size(); ++i) {
      const char c = it->second[i];
      if (c == '%' && i + 1 < it->second.size() && (it->second[i + 1] == 'h' || it->second[i + 1] == 'p')) {
        r.nccl_debug_file += it->second[++i] == 'h' ? std::string(host) : std::to_string(pid);
      } else {
        r.nccl_debug_file += c;
      }
    }
  }
  if (const auto cmdline = read_file(fmt::format("/proc/{}/cmdline", pid))) {
    for (const auto& word : words(*cmdline))
      r.command += (r.command.empty() ? "" : " ") + word;
  }
  return r;
}

std::vector<int> job_processes(const JobSelector& selector) {
  std::vector<int> candidates = selector.pids;
  if (candidates.empty()) {
    if (DIR* d = ::opendir("/proc")) {
      while (const dirent* e = ::readdir(d)) {
        int pid = 0;
        const auto* end = e->d_name + std::strlen(e->d_name);
        if (std::from_chars(e->d_name, end, pid).ptr == end && pid > 0) candidates.push_back(pid);
      }
      ::closedir(d);
    }
  }
  std::vector<int> out;
  for (int pid : candidates) {
    const auto env = environment_of(pid);
    if (!env || !env->contains("RANK")) continue;
    if (selector.pids.empty()) {
      const auto run_id = env->find("TORCHELASTIC_RUN_ID");
      if (!selector.run_id.empty() && (run_id == env->end() || run_id->second != selector.run_id)) continue;
      if (selector.master_port != 0 && number(*env, "MASTER_PORT") != selector.master_port) continue;
      if (selector.run_id.empty() && selector.master_port == 0) continue;
    }
    out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::uint64_t> failed_connects(int pid) {
  const auto text = read_file(fmt::format("/proc/{}/net/snmp", pid));
  if (!text) return std::nullopt;
  // Two "Tcp:" lines: the names, then the values in the same order.
  std::istringstream lines(*text);
  std::vector<std::string> names;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("Tcp:")) continue;
    std::istringstream fields(line.substr(4));
    if (names.empty()) {
      for (std::string name; fields >> name;)
        names.push_back(name);
      continue;
    }
    std::string value;
    for (const auto& name : names) {
      if (!(fields >> value)) break;
      std::uint64_t n = 0;
      if (name == "AttemptFails" && std::from_chars(value.data(), value.data() + value.size(), n).ec == std::errc())
        return n;
    }
    break;
  }
  return std::nullopt;
}

void read_resets(std::vector<WatchedRank>& ranks, const std::map<int, std::uint64_t>& failed_recently) {
  for (auto& r : ranks) {
    const auto failed = failed_recently.find(r.pid);
    if (r.outcome != "not_connected" || r.master_port == 0 || failed == failed_recently.end() || failed->second == 0)
      continue;
    const auto port = static_cast<std::uint16_t>(r.master_port);
    const auto host = std::find_if(ranks.begin(), ranks.end(), [&](const WatchedRank& h) {
      return h.outcome == "hosting" && h.master_port == r.master_port;
    });
    if (host != ranks.end()) {
      r.outcome = "rejected";
      r.detail = fmt::format("{} connect{} reset in the last seconds while rank {} (pid {}) listens on MASTER_PORT {}",
                             failed->second, failed->second == 1 ? "" : "s", host->rank, host->pid, r.master_port);
      r.hint = hint_store_rejected(port, host->rank, host->pid);
    } else {
      r.outcome = "refused";
      r.detail = fmt::format(
          "{} connect{} answered with a reset since the last look (TCP AttemptFails of its "
          "network namespace); no connection toward MASTER_PORT {}",
          failed->second, failed->second == 1 ? "" : "s", r.master_port);
      r.hint = hint_store_connect(ECONNREFUSED, port);
    }
  }
}

std::string describe(const WatchedRank& r) {
  std::string line = fmt::format("rank {} (pid {}) {} {}: {}", r.rank, r.pid, name_of(r.stage), r.outcome, r.detail);
  if (!r.hint.empty()) line += " - " + r.hint;
  return line;
}

}  // namespace ringmaster
