#include "comm/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string_view>
#include <thread>

#include "base/cpus.h"
#include "base/log.h"
#include "base/params.h"
#include "ringmaster/status.h"

namespace ringmaster::comm {
namespace {

std::string hex(std::string_view text) {
  std::string out;
  for (const unsigned char c : text) {
    out += "0123456789abcdef"[c >> 4];
    out += "0123456789abcdef"[c & 0xF];
  }
  return out;
}

std::optional<std::string> unhex(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(text.data() + i, text.data() + i + 2, value, 16);
    if (ec != std::errc() || end != text.data() + i + 2) return std::nullopt;
    out += static_cast<char>(value);
  }
  return out;
}

template <class T>
std::optional<T> number(const std::string& text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool is_hex_key(const std::string& key) {
  return std::all_of(key.begin(), key.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// "rank 0 has NCCL_ALGO=tree, rank 2 has it unset"
std::string has(int rank, const std::string& text) {
  return fmt::format("rank {} has {}", rank, text.empty() ? std::string("it unset") : text);
}

}  // namespace

// NCCL_NET as NCCL and its plugins name networks: Socket; OFI, and the
// aws-ofi-nccl plugin's "AWS Libfabric" and "Libfabric"; IB, NCCL's verbs
// transport, which is libfabric's verbs provider here. "" or "socket" or
// "ofi"; anything else is an error listing the names.
std::string network_named(const std::string& given) {
  std::string n;
  for (const char c : given) {
    if (c != ' ' && c != '-' && c != '_') n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (n.empty() || n == "socket") return n;
  if (n == "ofi" || n == "awslibfabric" || n == "libfabric") return "ofi";
  if (n == "ib") {
    RM_INFO(init, "NCCL_NET=IB: InfiniBand is reached through libfabric's verbs provider here (NCCL_NET=OFI)");
    return "ofi";
  }
  throw Error(ErrorCategory::config,
              "NCCL_NET (" + std::to_string(given.size()) +
                  " characters) names no network here: Socket, IB, OFI, AWS Libfabric or Libfabric");
}

LocalSettings LocalSettings::resolve(const CommOptions& options) {
  LocalSettings s;
  s.min_channels = static_cast<int>(options.min_channels.value_or(param_int(Param::MinChannels)));
  // Every channel is a progress thread, so by default there are no more
  // channels than half the cores (raised to two over the network, in agree).
  const int cores = base::host_cpus();
  const int default_max = std::clamp(cores / 2, 1, 4);
  const bool channels_given = options.max_channels || param_env(Param::MaxChannels);
  s.max_channels = static_cast<int>(
      options.max_channels.value_or(param_env(Param::MaxChannels) ? param_int(Param::MaxChannels) : default_max));
  s.may_raise_channels = !channels_given && cores >= 2;
  if (!options.min_channels && !param_env(Param::MinChannels))
    s.min_channels = std::min(s.min_channels, s.max_channels);
  if (s.min_channels < 1 || s.max_channels < s.min_channels || s.max_channels > 64) {
    throw Error(ErrorCategory::config, fmt::format("NCCL_MIN_NCHANNELS={} / NCCL_MAX_NCHANNELS={}: need 1 <= min <= "
                                                   "max <= 64",
                                                   s.min_channels, s.max_channels));
  }
  s.buffsize = options.buffsize.value_or(static_cast<std::size_t>(param_int(Param::BuffSize)));
  if (s.buffsize < 8) throw Error(ErrorCategory::config, "NCCL_BUFFSIZE must be at least 8 bytes");
  s.pair_bytes = static_cast<std::size_t>(std::max<std::int64_t>(0, param_int(Param::PairBytes)));
  s.pair_bytes_given = param_env(Param::PairBytes).has_value();
  s.shm_disabled = param_int(Param::ShmDisable) != 0;
  if (options.cuda_ipc) {
    s.cuda_ipc = *options.cuda_ipc;
  } else {
    const std::string ipc = param_string(Param::CudaIpc);
    if (ipc != "0" && ipc != "1")
      throw Error(ErrorCategory::config, "RINGMASTER_CUDA_IPC=" + ipc + ": expected 0 or 1");
    s.cuda_ipc = ipc == "1";
  }
  s.tree_nodes = param_string(Param::TreeNodes);
  if (const auto file = param_env(Param::TopoFile)) {
    std::ifstream in(*file, std::ios::binary);
    const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Unreadable: the TOPOLOGY stage says why; no two ranks agree on it.
    s.topology_key = in ? fmt::format("{:016x}", std::hash<std::string>{}(content)) : "unreadable";
  }
  if (s.tree_nodes != "rank" && s.tree_nodes != "host" && s.tree_nodes != "auto") {
    throw Error(ErrorCategory::config, "RINGMASTER_TREE_NODES=" + s.tree_nodes + ": expected rank, host or auto");
  }
  // NCCL_ALGO / NCCL_PROTO (or the options): a typo or an empty set fails
  // here, before anything connects, naming the variable.
  using Kind = tune::Selection::Kind;
  s.algorithms = options.algorithm ? tune::Selection::parse(Kind::algorithm, "--algo", name_of(*options.algorithm))
                                   : tune::Selection::from_env(Kind::algorithm);
  s.protocols = options.protocol ? tune::Selection::parse(Kind::protocol, "--proto", name_of(*options.protocol))
                                 : tune::Selection::from_env(Kind::protocol);
  s.shared_memory = options.shared_memory.value_or(!s.shm_disabled);
  s.net = network_named(options.net.value_or(param_string(Param::Net)));
  s.spin_yield = param_string(Param::SpinYield);
  if (s.spin_yield != "auto" && s.spin_yield != "0" && s.spin_yield != "1") {
    throw Error(ErrorCategory::config, fmt::format("RINGMASTER_SPIN_YIELD={}: need auto, 0 or 1", s.spin_yield));
  }
  s.spin = std::chrono::microseconds(std::max<std::int64_t>(0, param_int(Param::SocketSpin)));
  s.spin_given = param_env(Param::SocketSpin).has_value();
  s.inline_bytes = static_cast<std::size_t>(std::max<std::int64_t>(0, param_int(Param::InlineBytes)));
  s.inline_bytes_given = param_env(Param::InlineBytes).has_value();
  std::int64_t sockets = param_int(Param::NSocksPerChannel);
  if (sockets < 1 || sockets > 8) {
    throw Error(ErrorCategory::config, fmt::format("RINGMASTER_NSOCKS_PER_CHANNEL={}: need 1 to 8", sockets));
  }
  // NCCL's pair: a connection's sockets are threads x sockets per thread.
  if (!param_env(Param::NSocksPerChannel) && (param_env(Param::NSocksPerThread) || param_env(Param::SocketNThreads))) {
    const std::int64_t per_thread = param_env(Param::NSocksPerThread) ? param_int(Param::NSocksPerThread) : 1;
    const std::int64_t threads = param_env(Param::SocketNThreads) ? param_int(Param::SocketNThreads) : 1;
    if (per_thread < 1 || threads < 1 || per_thread * threads > 64) {
      throw Error(ErrorCategory::config,
                  fmt::format("NCCL_NSOCKS_PERTHREAD={} x NCCL_SOCKET_NTHREADS={}: need 1 to 64 sockets in all",
                              per_thread, threads));
    }
    sockets = std::min<std::int64_t>(8, per_thread * threads);
    RM_INFO(env, "NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS = {}: {} socket(s) per connection{}",
            per_thread * threads, sockets, per_thread * threads > 8 ? " (at most 8 here)" : "");
  }
  s.sockets_per_channel = static_cast<std::uint32_t>(sockets);
  s.shm_fifo_bytes = static_cast<std::size_t>(std::max<std::int64_t>(4096, param_int(Param::ShmFifoBytes)));
  s.timeout = options.timeout.value_or(std::chrono::milliseconds(param_int(Param::CollTimeout) * 1000));
  s.stall_after = options.stall_after.value_or(std::chrono::milliseconds(param_int(Param::StallS) * 1000));
  if (param_env(Param::FaultHoldAtCall)) {
    const std::int64_t at = param_int(Param::FaultHoldAtCall);
    if (at < 0) throw Error(ErrorCategory::config, fmt::format("RINGMASTER_FAULT_HOLD_AT_CALL={}: need 0 or more", at));
    s.hold_at_call = static_cast<std::uint64_t>(at);
  }
  if (s.stall_after.count() < 0) {
    throw Error(ErrorCategory::config,
                fmt::format("stall time {} ms (RINGMASTER_STALL_S): need 0 (never) or more", s.stall_after.count()));
  }
  return s;
}

std::string LocalSettings::encode() const {
  return fmt::format(
      "v1;minch={};maxch={};raise={};buf={};pair={};pairset={};shmoff={};ipc={};net={};tree={};topo={};algo={}/{};"
      "proto={}/{}",
      min_channels, max_channels, may_raise_channels ? 1 : 0, buffsize, pair_bytes, pair_bytes_given ? 1 : 0,
      shm_disabled ? 1 : 0, cuda_ipc ? 1 : 0, net.empty() ? std::string("-") : net, tree_nodes, topology_key,
      algorithms.allowed_key(), hex(algorithms.text()), protocols.allowed_key(), hex(protocols.text()));
}

std::optional<LocalSettings::Wire> LocalSettings::decode(const std::string& word) {
  std::map<std::string, std::string> fields;
  std::size_t start = 0;
  while (start <= word.size()) {
    const std::size_t end = std::min(word.find(';', start), word.size());
    const std::string item = word.substr(start, end - start);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (item != "v1") return std::nullopt;
    } else {
      fields[item.substr(0, eq)] = item.substr(eq + 1);
    }
    start = end + 1;
  }
  Wire w;
  const auto min = number<int>(fields["minch"]);
  const auto max = number<int>(fields["maxch"]);
  const auto raise = number<int>(fields["raise"]);
  const auto buf = number<std::size_t>(fields["buf"]);
  const auto pair = number<std::size_t>(fields["pair"]);
  const auto pairset = number<int>(fields["pairset"]);
  const auto shmoff = number<int>(fields["shmoff"]);
  if (!min || !max || !raise || !buf || !pair || !pairset || !shmoff) return std::nullopt;
  w.min_channels = *min;
  w.max_channels = *max;
  w.may_raise_channels = *raise != 0;
  w.buffsize = *buf;
  w.pair_bytes = *pair;
  w.pair_bytes_given = *pairset != 0;
  w.shm_disabled = *shmoff != 0;
  if (const auto ipc = fields.find("ipc"); ipc != fields.end()) {
    const auto on = number<int>(ipc->second);
    if (!on) return std::nullopt;
    w.cuda_ipc = *on != 0;
  }
  // NCCL_NET as network_named() spells it; absent from an older rank's word.
  if (const auto net = fields.find("net"); net != fields.end()) {
    if (net->second != "-" && net->second != "socket" && net->second != "ofi") return std::nullopt;
    w.net = net->second == "-" ? std::string() : net->second;
  }
  w.tree_nodes = fields["tree"];
  w.topology_key = fields["topo"];
  for (auto [name, key, text] : {std::tuple{"algo", &w.algorithms_key, &w.algorithms_text},
                                 std::tuple{"proto", &w.protocols_key, &w.protocols_text}}) {
    const std::string& value = fields[name];
    const std::size_t slash = value.find('/');
    if (slash == std::string::npos) return std::nullopt;
    *key = value.substr(0, slash);
    const auto decoded = unhex(std::string_view(value).substr(slash + 1));
    if (!decoded || !is_hex_key(*key)) return std::nullopt;
    *text = *decoded;
  }
  return w;
}

AgreedSettings agree(Bootstrap& bootstrap) {
  std::vector<int> firsts;
  for (const auto& group : bootstrap.settings_groups())
    firsts.push_back(group.first_rank);
  bootstrap.fetch_peers(firsts);
  std::vector<PeerInfo> peers;
  for (const int r : firsts)
    peers.push_back(bootstrap.peer(r));
  try {
    return agree(peers, bootstrap.config().world_size, bootstrap.host_count() > 1);
  } catch (const Error& e) {
    // Settings that cannot be reconciled fail the stage that exchanged them.
    if (e.status().category() != ErrorCategory::config) throw;
    auto f = bootstrap.failure(Stage::address_exchange, e.status().message());
    f.category = ErrorCategory::config;
    f.hint =
        "Every rank of a job must be started with the same NCCL_ALGO, NCCL_PROTO, RINGMASTER_TREE_NODES and, "
        "across hosts, NCCL_NET; compare the ranks' environments (the launcher's or Pod spec's env per node).";
    throw StageError(f);
  }
}

AgreedSettings agree(const std::vector<PeerInfo>& peers, int nranks, bool several_hosts) {
  std::vector<LocalSettings::Wire> all;
  for (const auto& p : peers) {
    auto w = LocalSettings::decode(p.settings);
    if (!w) {
      throw Error(ErrorCategory::config, fmt::format("rank {} ({}, pid {}) sent settings this rank cannot read: '{}' "
                                                     "(are all ranks running the same Ringmaster?)",
                                                     p.rank, p.host, p.pid, p.settings));
    }
    all.push_back(std::move(*w));
  }

  // What cannot be reconciled: the first rank that differs from rank 0.
  auto same = [&](auto field, const char* what, auto text_of) {
    for (std::size_t r = 1; r < all.size(); ++r) {
      if (field(all[r]) == field(all[0])) continue;
      throw Error(ErrorCategory::config,
                  fmt::format("ranks disagree on {}: {}, {}; every rank must set the same", what,
                              has(peers[0].rank, text_of(all[0])), has(peers[r].rank, text_of(all[r]))));
    }
  };
  same([](const auto& w) { return w.algorithms_key; }, "the algorithms (NCCL_ALGO)",
       [](const auto& w) { return w.algorithms_text; });
  same([](const auto& w) { return w.protocols_key; }, "the protocols (NCCL_PROTO)",
       [](const auto& w) { return w.protocols_text; });
  same([](const auto& w) { return w.tree_nodes; }, "RINGMASTER_TREE_NODES",
       [](const auto& w) { return "RINGMASTER_TREE_NODES=" + w.tree_nodes; });
  // libfabric asked for by some ranks and not others, across hosts: the
  // pairs between them would fall back to sockets, a run at sockets' speed
  // on a fabric built for more. Refused, as NCCL_ALGO is.
  if (several_hosts) {
    const auto ofi = [](const LocalSettings::Wire& w) { return w.net == "ofi"; };
    const auto asks = std::find_if(all.begin(), all.end(), ofi);
    const auto lacks = std::find_if_not(all.begin(), all.end(), ofi);
    if (asks != all.end() && lacks != all.end()) {
      const auto text = [](const LocalSettings::Wire& w) {
        return w.net.empty() ? std::string("NCCL_NET unset")
                             : "NCCL_NET=" + std::string(w.net == "ofi" ? "OFI" : "Socket");
      };
      const auto& a = peers[static_cast<std::size_t>(asks - all.begin())];
      const auto& b = peers[static_cast<std::size_t>(lacks - all.begin())];
      throw Error(
          ErrorCategory::config,
          fmt::format("ranks disagree on the network between hosts: rank {} ({}) has {}, rank {} ({}) has {}, "
                      "so their connections would fall back from libfabric to sockets; set NCCL_NET alike on "
                      "every rank (OFI where libfabric serves the fabric, Socket to run over sockets on purpose)",
                      a.rank, a.host, text(*asks), b.rank, b.host, text(*lacks)));
    }
  }

  AgreedSettings agreed;
  // Over the network the kernel does the copying, inside the channel's
  // system calls: a second channel keeps a CPU busy while the first waits
  // on its peer, and runs 1.3-1.6x faster from 1 MiB even on 2 cores
  // (docs/performance-history.md). Ranks that copy through shared memory
  // themselves keep one channel per two cores.
  const bool network =
      std::any_of(all.begin(), all.end(), [](const auto& w) { return w.shm_disabled; }) || several_hosts;
  auto channels_asked = [&](const LocalSettings::Wire& w) {
    return w.may_raise_channels && network && nranks > 1 ? std::max(w.max_channels, 2) : w.max_channels;
  };
  // The smallest wins; `reconciled` says so when ranks differed.
  auto smallest = [&](auto field, const char* variable) {
    auto lo = field(all[0]);
    auto hi = lo;
    std::size_t lo_rank = 0;
    for (std::size_t r = 1; r < all.size(); ++r) {
      const auto v = field(all[r]);
      if (v < lo) {
        lo = v;
        lo_rank = r;
      }
      hi = std::max(hi, v);
    }
    if (lo != hi) {
      agreed.reconciled.push_back(
          fmt::format("{}: ranks asked for {} to {}; all use rank {}'s {}", variable, lo, hi, peers[lo_rank].rank, lo));
    }
    return lo;
  };
  agreed.max_channels = smallest(channels_asked, "channels (NCCL_MAX_NCHANNELS)");
  agreed.same_topology =
      !all[0].topology_key.empty() && all[0].topology_key != "unreadable" &&
      std::all_of(all.begin(), all.end(), [&](const auto& w) { return w.topology_key == all[0].topology_key; });
  if (!all[0].topology_key.empty() && !agreed.same_topology) {
    agreed.reconciled.push_back("NCCL_TOPO_FILE: the ranks read different topologies; rings follow rank order");
  }
  agreed.buffsize = smallest([](const auto& w) { return w.buffsize; }, "NCCL_BUFFSIZE");
  agreed.pair_bytes = smallest([](const auto& w) { return w.pair_bytes; }, "RINGMASTER_PAIR_BYTES");
  agreed.pair_bytes_given = std::any_of(all.begin(), all.end(), [](const auto& w) { return w.pair_bytes_given; });
  const auto asking_ipc = std::count_if(all.begin(), all.end(), [](const auto& w) { return w.cuda_ipc; });
  agreed.cuda_ipc = !several_hosts && asking_ipc == static_cast<std::ptrdiff_t>(all.size());
  if (asking_ipc > 0 && !agreed.cuda_ipc) {
    agreed.reconciled.push_back(several_hosts ? "RINGMASTER_CUDA_IPC: the ranks span several hosts; device buffers "
                                                "are staged through host memory"
                                              : "RINGMASTER_CUDA_IPC: not every rank asked for it; device buffers are "
                                                "staged through host memory");
  }
  int floor = 1;
  for (const auto& w : all)
    floor = std::max(floor, w.min_channels);
  agreed.min_channels = std::min(floor, agreed.max_channels);
  return agreed;
}

}  // namespace ringmaster::comm
