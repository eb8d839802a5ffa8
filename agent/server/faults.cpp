// Fault injection through nftables and tc, with the connect filter as the
// fallback where the agent may not change the network.
#include "faults.h"

#include "ringmaster/agent/command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "memory_cgroup.h"
#include "ringmaster/agent/log.h"
#include "ringmaster/status.h"
#include "run_cgroup.h"

extern char** environ;

namespace ringmaster::agent {

using nlohmann::json;

namespace {

constexpr const char* kTablePrefix = "ringmaster_agent_";

// When process PID started (clock ticks after boot, field 22 of
// /proc/PID/stat). With the pid it names one agent for good: in a
// container every agent is pid 1, so a table named by pid alone would look
// alive to the next agent there.
std::optional<unsigned long long> start_time_of(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return std::nullopt;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

}  // namespace

FaultManager::FaultManager(bool enabled, std::vector<std::uint16_t> exempt_ports, std::string state_dir)
    : state_dir_(std::move(state_dir)),
      enabled_(enabled),
      table_(fmt::format("{}{}_{}", kTablePrefix, ::getpid(), start_time_of(::getpid()).value_or(0))),
      exempt_(std::move(exempt_ports)) {
  if (!enabled_) return;
  for (const auto& removed : remove_left_behind(state_dir_))
    log::info("removed {}", removed);
  // A mount namespace of the agent's own (a slave of the host's: mounts
  // made there still reach it), so a tmpfs over /dev/shm is this agent's
  // and its ranks' alone. Made here, before the agent starts any thread.
  if (::unshare(CLONE_NEWNS) != 0) {
    mount_problem_ = fmt::format("cannot make a mount namespace: {}", std::strerror(errno));
  } else if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    mount_problem_ = fmt::format("cannot make the agent's mounts its own: {}", std::strerror(errno));
  } else {
    own_mounts_ = true;
  }
  const auto [code, output] = run_command({"nft", "list", "tables"});
  if (code != 0) {
    nft_problem_ = code == 127 ? "nft (Debian package nftables) is not installed"
                               : "nft cannot change rules here (no CAP_NET_ADMIN?): " + trim(output);
    return;
  }
  nft_ = true;
}

std::vector<std::string> FaultManager::remove_left_behind(const std::string& state_dir) {
  std::vector<std::string> removed;
  // Tables of agents that died without cleaning up.
  const auto [code, output] = run_command({"nft", "list", "tables"});
  std::istringstream lines(code == 0 ? output : std::string());
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find(kTablePrefix);
    if (at == std::string::npos || line.rfind("table inet ", 0) != 0) continue;
    const std::string name = line.substr(at);
    // ringmaster_agent_PID_START (ringmaster_agent_PID before 0.1.0's
    // packaging): its agent lives when that process runs and, where the
    // name has one, started when the table's agent did.
    const char* id = name.c_str() + std::strlen(kTablePrefix);
    char* rest = nullptr;
    const long pid = std::strtol(id, &rest, 10);
    bool alive = pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH);
    if (alive && rest != nullptr && *rest == '_') {
      alive = start_time_of(static_cast<int>(pid)) == std::strtoull(rest + 1, nullptr, 10);
    }
    if (alive) continue;
    if (run_command({"nft", "delete", "table", "inet", name}).first == 0) removed.push_back("nftables table " + name);
  }
  // Root qdiscs with our handle on the interfaces recorded: one somebody
  // else put there since stays.
  if (state_dir.empty()) return removed;
  const std::string path = state_dir + "/faults.json";
  std::FILE* in = std::fopen(path.c_str(), "r");
  if (in == nullptr) return removed;
  std::string text;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), in)) > 0 && text.size() < (1u << 20);)
    text.append(buffer, n);
  std::fclose(in);
  const auto recorded = nlohmann::json::parse(text, nullptr, false);
  if (recorded.is_object() && recorded.contains("interfaces") && recorded["interfaces"].is_array()) {
    for (const auto& name : recorded["interfaces"]) {
      if (!name.is_string() || name.get_ref<const std::string&>().empty() ||
          name.get_ref<const std::string&>().size() >= 16) {
        continue;
      }
      const std::string dev = name.get<std::string>();
      const auto [shown_code, shown] = run_command({"tc", "qdisc", "show", "dev", dev, "root"});
      if (shown_code == 0 && shown.find(std::string(" ") + kQdiscHandle + " ") != std::string::npos &&
          delete_our_qdisc(dev)) {
        removed.push_back("the qdisc a previous agent left on " + dev);
      }
    }
  }
  std::remove(path.c_str());
  return removed;
}

bool delete_our_qdisc(const std::string& dev) {
  return run_command({"tc", "qdisc", "del", "dev", dev, "root", "handle", kQdiscHandle}).first == 0;
}

FaultManager::~FaultManager() {
  try {
    clear(std::nullopt);
  } catch (...) {
  }
}

void FaultManager::apply_nft() {
  // The agent's own ports are accepted first, in rules of their own: nft
  // merges adjacent `tcp sport != P tcp dport != P` into one comparison of
  // both fields, which is not the same test.
  std::string exempt;
  for (const auto port : exempt_)
    exempt += fmt::format("    tcp dport {0} accept\n    tcp sport {0} accept\n", port);
  std::string input, output, excepted;
  for (const auto& [id, f] : faults_) {
    if (f.mechanism != "nftables") continue;
    if (const auto* d = std::get_if<DropPorts>(&f.spec)) {
      // `except`: ports left open, as a security group's narrower allow
      // rules; `skip_loopback`: traffic within this host is not filtered
      // (a cloud's security group sees only traffic between hosts).
      for (const auto port : d->except)
        excepted += fmt::format("    tcp dport {0} accept\n    tcp sport {0} accept\n", port);
      const std::string rule = fmt::format("tcp dport {} counter {} comment \"fault {}\"\n", port_range(*d),
                                           d->reject ? "reject with tcp reset" : "drop", id);
      if (d->direction != Direction::out)
        input += std::string("    ") + (d->skip_loopback ? "iifname != \"lo\" " : "") + rule;
      if (d->direction != Direction::in)
        output += std::string("    ") + (d->skip_loopback ? "oifname != \"lo\" " : "") + rule;
    } else if (const auto* l = std::get_if<Loss>(&f.spec)) {
      // A share of what leaves (oifname) or arrives on (iifname) the
      // interface, in hundredths of a percent.
      const std::string rule = fmt::format("\"{}\" numgen random mod 10000 < {} counter drop comment \"fault {}\"\n",
                                           l->interface, std::lround(l->percent * 100), id);
      if (l->direction != Direction::in) output += "    oifname " + rule;
      if (l->direction != Direction::out) input += "    iifname " + rule;
    } else if (const auto* a = std::get_if<DropAddress>(&f.spec)) {
      const std::string family = a->ipv6() ? "ip6" : "ip";
      if (a->direction != Direction::out)
        input += fmt::format("    {} saddr {} counter drop comment \"fault {}\"\n", family, a->address, id);
      if (a->direction != Direction::in)
        output += fmt::format("    {} daddr {} counter drop comment \"fault {}\"\n", family, a->address, id);
    }
  }
  if (input.empty() && output.empty()) {
    if (table_exists_) {
      run_command({"nft", "delete", "table", "inet", table_});
      table_exists_ = false;
    }
    return;
  }
  if (!input.empty()) input = exempt + excepted + input;
  if (!output.empty()) output = exempt + excepted + output;
  // Replace the whole table in one transaction.
  const std::string rules = fmt::format(
      "table inet {0}\ndelete table inet {0}\ntable inet {0} {{\n"
      "  chain input {{\n    type filter hook input priority -10; policy accept;\n{1}  }}\n"
      "  chain output {{\n    type filter hook output priority -10; policy accept;\n{2}  }}\n}}\n",
      table_, input, output);
  const auto [code, out] = run_command({"nft", "-f", "-"}, rules);
  if (code != 0) throw Error(ErrorCategory::config, "nft refused the fault rules: " + trim(out));
  table_exists_ = true;
}

events::FaultApplied FaultManager::add(const FaultSpec& spec) {
  if (!enabled_) {
    throw Error(ErrorCategory::config, "fault injection is off; start the agent with --allow-fault-injection");
  }
  Fault f;
  f.id = next_id_;
  f.spec = spec;
  std::string note;
  if (std::holds_alternative<Loss>(spec)) {
    // Random drops need nftables (the kernel may lack sch_netem; the
    // connect filter cannot drop packets of a connection).
    if (!nft_) throw Error(ErrorCategory::config, "loss needs nftables: " + nft_problem_);
    f.mechanism = "nftables";
    note = fmt::format("nftables table inet {}", table_);
  } else if (std::holds_alternative<DropPorts>(spec) || std::holds_alternative<DropAddress>(spec)) {
    if (nft_) {
      f.mechanism = "nftables";
      note = fmt::format("nftables table inet {}", table_);
    } else {
      f.mechanism = "connect_filter";
      note = "falling back to the engine's connect filter for ranks started from now on (outbound connects only): " +
             nft_problem_;
    }
  } else if (const std::string dev = tc_interface(f); !dev.empty()) {
    const auto* delay = std::get_if<Delay>(&spec);
    const auto* rate = std::get_if<Rate>(&spec);
    for (const auto& [id, other] : faults_) {
      if (tc_interface(other) == dev) {
        throw Error(ErrorCategory::config,
                    fmt::format("{} already has fault {} ({}); clear it first", dev, id, describe(other.spec)));
      }
    }
    std::vector<std::vector<std::string>> commands;
    if (delay) {
      commands.push_back({"tc", "qdisc", "add", "dev", dev, "root", "handle", kQdiscHandle, "netem", "delay",
                          fmt::format("{}ms", delay->ms)});
      f.mechanism = "netem";
    } else {
      // Only the data crawls: packets under 128 bytes (the TCP ACKs of
      // what this host receives) take an unshaped class. Queued behind
      // our own sends they would throttle every flow into this host too,
      // and the slow link would no longer be the only one slow.
      const std::string limit = fmt::format("{}mbit", rate->mbit);
      const std::vector<std::string> filter = {"tc", "filter", "add", "dev", dev, "parent", kQdiscHandle};
      auto with = [](std::vector<std::string> head, std::initializer_list<std::string> tail) {
        head.insert(head.end(), tail);
        return head;
      };
      // With `to`, everything else takes the unshaped class and only what
      // goes to that address crawls: one slow link, not a slow host.
      commands = {
          {"tc", "qdisc", "add", "dev", dev, "root", "handle", kQdiscHandle, "htb", "default",
           rate->to.empty() ? "20" : "10"},
          {"tc", "class", "add", "dev", dev, "parent", kQdiscHandle, "classid", "5247:10", "htb", "rate", "100gbit",
           "quantum", "60000"},
          {"tc", "class", "add", "dev", dev, "parent", kQdiscHandle, "classid", "5247:20", "htb", "rate", limit, "ceil",
           limit, "quantum", "60000"},
          with(filter,
               {"protocol", "ip", "prio", "1", "u32", "match", "u16", "0", "0xff80", "at", "2", "flowid", "5247:10"}),
          with(filter,
               {"protocol", "ipv6", "prio", "2", "u32", "match", "u16", "0", "0xff80", "at", "4", "flowid", "5247:10"}),
      };
      if (!rate->to.empty()) {
        const bool v6 = rate->to.find(':') != std::string::npos;
        commands.push_back(with(filter, {"protocol", v6 ? "ipv6" : "ip", "prio", "3", "u32", "match", v6 ? "ip6" : "ip",
                                         "dst", rate->to + (v6 ? "/128" : "/32"), "flowid", "5247:20"}));
      }
      f.mechanism = "htb";
    }
    for (const auto& argv : commands) {
      const auto [code, out] = run_command(argv);
      if (code != 0) {
        delete_our_qdisc(dev);
        throw Error(ErrorCategory::config, fmt::format("cannot {} {}: `{}` failed: {}", delay ? "delay" : "rate-limit",
                                                       dev, fmt::join(argv, " "), trim(out)));
      }
    }
    note = fmt::format("tc {} on {}", f.mechanism, dev);
  } else if (const auto* limit = std::get_if<Limit>(&spec)) {
    note = check_limit(*limit);
    f.mechanism = "rlimit";
  } else if (const auto* memory = std::get_if<MemoryLimit>(&spec)) {
    note = check_memory_limit(*memory);
    f.mechanism = "cgroup";
  } else {
    const auto bytes = std::get<ShmSize>(spec).bytes;
    for (const auto& [id, other] : faults_) {
      if (other.mechanism == "tmpfs")
        throw Error(ErrorCategory::config, fmt::format("/dev/shm already has fault {}", id));
    }
    // Only inside the mount namespace the agent made for itself: on a
    // real node a tmpfs over /dev/shm would shrink it for every process.
    if (!own_mounts_) {
      throw Error(ErrorCategory::config,
                  "shm_size needs a mount namespace of the agent's own, and it could not make one (" + mount_problem_ +
                      "); here the tmpfs would shrink /dev/shm for the whole machine");
    }
    const std::string options = fmt::format("size={},mode=1777", bytes);
    if (::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      throw Error(ErrorCategory::config,
                  fmt::format("cannot mount a {}-byte tmpfs over /dev/shm: {}", bytes, std::strerror(errno)));
    }
    f.mechanism = "tmpfs";
    note = fmt::format("/dev/shm is now a {}-byte tmpfs for this agent's ranks", bytes);
  }
  ++next_id_;
  faults_[f.id] = f;
  record_qdiscs();
  if (f.mechanism == "nftables") {
    try {
      apply_nft();
    } catch (...) {
      faults_.erase(f.id);
      throw;
    }
  }
  return {f.id, f.spec, f.mechanism, note};
}

std::string FaultManager::check_limit(const Limit& limit) const {
  for (const auto& [id, other] : faults_) {
    if (const auto* l = std::get_if<Limit>(&other.spec); l && l->resource == limit.resource) {
      throw Error(ErrorCategory::config,
                  fmt::format("{} already has fault {}; clear it first", to_string(l->resource), id));
    }
  }
  // It only ever lowers what ranks would inherit from the agent: a
  // fault is a tight limit, never a way to lift one for a rank.
  const int resource = limit.resource == Limit::Resource::nofile ? RLIMIT_NOFILE : RLIMIT_MEMLOCK;
  rlimit now{};
  if (::getrlimit(resource, &now) == 0 && now.rlim_max != RLIM_INFINITY && limit.value > now.rlim_max) {
    throw Error(ErrorCategory::config,
                fmt::format("a limit fault only lowers a limit: {} is above the hard {} limit of {} that ranks "
                            "inherit from the agent",
                            limit.value, to_string(limit.resource), now.rlim_max));
  }
  return fmt::format("ranks started from now on get RLIMIT_{} {} (soft and hard)",
                     limit.resource == Limit::Resource::nofile ? "NOFILE" : "MEMLOCK", limit.value);
}

std::string FaultManager::check_memory_limit(const MemoryLimit& limit) const {
  for (const auto& [id, other] : faults_) {
    if (std::holds_alternative<MemoryLimit>(other.spec))
      throw Error(ErrorCategory::config, fmt::format("the ranks' memory already has fault {}; clear it first", id));
  }
  std::string why;
  if (!MemoryWatch::can_limit(find_cgroup_home().dir, why))
    throw Error(ErrorCategory::config, "memory_limit needs a memory cgroup the agent may make: " + why);
  return fmt::format("ranks started from now on run in a memory cgroup limited to {}", memory_text(limit.bytes));
}

std::optional<std::int64_t> FaultManager::rank_memory_limit() const {
  for (const auto& [id, f] : faults_) {
    if (const auto* m = std::get_if<MemoryLimit>(&f.spec)) return m->bytes;
  }
  return std::nullopt;
}

std::vector<RankLimit> FaultManager::rank_limits() const {
  std::vector<RankLimit> limits;
  for (const auto& [id, f] : faults_) {
    if (const auto* l = std::get_if<Limit>(&f.spec)) {
      limits.push_back(
          {l->resource == Limit::Resource::nofile ? RLIMIT_NOFILE : RLIMIT_MEMLOCK, static_cast<rlim_t>(l->value)});
    }
  }
  return limits;
}

std::string FaultManager::tc_interface(const Fault& f) {
  if (const auto* delay = std::get_if<Delay>(&f.spec)) return delay->interface;
  if (const auto* rate = std::get_if<Rate>(&f.spec)) return rate->interface;
  return {};
}

void FaultManager::record_qdiscs() const {
  if (state_dir_.empty()) return;
  nlohmann::json interfaces = nlohmann::json::array();
  for (const auto& [id, f] : faults_) {
    if (const auto dev = tc_interface(f); !dev.empty()) interfaces.push_back(dev);
  }
  const std::string path = state_dir_ + "/faults.json";
  if (interfaces.empty()) {
    std::remove(path.c_str());
    return;
  }
  // Whole or not at all: written aside, then renamed over the old one.
  const std::string temporary = path + ".new";
  if (std::FILE* out = std::fopen(temporary.c_str(), "w")) {
    const std::string text = nlohmann::json{{"qdisc_handle", kQdiscHandle}, {"interfaces", interfaces}}.dump();
    const bool written = std::fwrite(text.data(), 1, text.size(), out) == text.size();
    if (std::fclose(out) == 0 && written) std::rename(temporary.c_str(), path.c_str());
  }
}

void FaultManager::revert(const Fault& f) {
  if (const auto dev = tc_interface(f); !dev.empty()) {
    delete_our_qdisc(dev);
  } else if (f.mechanism == "tmpfs") {
    ::umount2("/dev/shm", MNT_DETACH);
  }
}

std::vector<events::FaultReverted> FaultManager::clear(std::optional<int> id) {
  std::vector<events::FaultReverted> reverted;
  if (id) {
    auto it = faults_.find(*id);
    if (it == faults_.end()) throw Error(ErrorCategory::config, fmt::format("no fault {} on this agent", *id));
    const Fault f = it->second;
    faults_.erase(it);
    revert(f);
    reverted.push_back({f.id, f.spec, "cleared"});
  } else {
    for (const auto& [fid, f] : faults_) {
      revert(f);
      reverted.push_back({f.id, f.spec, "cleared"});
    }
    faults_.clear();
  }
  record_qdiscs();
  if (nft_) apply_nft();
  return reverted;
}

void FaultManager::run_started(const std::string& run_id) {
  for (auto& [id, f] : faults_)
    f.runs.push_back(run_id);
}

std::vector<events::FaultReverted> FaultManager::run_ended(const std::string& run_id) {
  std::vector<events::FaultReverted> reverted;
  for (auto it = faults_.begin(); it != faults_.end();) {
    const auto& runs = it->second.runs;
    if (std::find(runs.begin(), runs.end(), run_id) == runs.end()) {
      ++it;
      continue;
    }
    revert(it->second);
    reverted.push_back({it->second.id, it->second.spec, "run_ended"});
    it = faults_.erase(it);
  }
  if (reverted.empty()) return reverted;
  record_qdiscs();
  try {
    if (nft_) apply_nft();
  } catch (const Error& e) {
    log::error("reverting faults after run {}: {}", run_id, e.what());
  }
  return reverted;
}

std::vector<ActiveFault> FaultManager::active() const {
  std::vector<ActiveFault> out;
  for (const auto& [id, f] : faults_)
    out.push_back({id, f.spec, {}, {}, f.mechanism, f.runs});
  return out;
}

std::string FaultManager::connect_filter() const {
  std::vector<std::string> rules;
  for (const auto& [id, f] : faults_) {
    if (f.mechanism != "connect_filter") continue;
    if (const auto* d = std::get_if<DropPorts>(&f.spec); d && d->direction != Direction::in) {
      rules.push_back("drop:" + port_range(*d));
    } else if (const auto* a = std::get_if<DropAddress>(&f.spec); a && a->direction != Direction::in) {
      rules.push_back("drop:" + a->address);
    }
  }
  return fmt::format("{}", fmt::join(rules, ","));
}

}  // namespace ringmaster::agent
