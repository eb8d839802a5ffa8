// Reading a preflight report: the findings that name the likely rule or
// setting (the cells and the text form are in report.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "net/conntrack.h"
#include "net/socket.h"
#include "preflight/words.h"
#include "ringmaster/tools/node_compare.h"
#include "ringmaster/tools/preflight.h"

namespace ringmaster {
namespace {

using Severity = PreflightFinding::Severity;
using preflight_words::bytes_text;
using preflight_words::limit_text;

// What an outcome between nodes usually means.
std::string what_it_means(Reach r) {
  switch (r) {
    case Reach::dropped:
      return "dropped (the SYNs get no answer: a firewall or security group drops them)";
    case Reach::rejected:
      return "rejected (an ICMP unreachable or prohibited answer: a host firewall's reject rule)";
    case Reach::refused:
      return "refused although an agent listens there (a firewall answers with TCP resets)";
    case Reach::no_route:
      return "without a route (the prober's routing table has none to the address)";
    case Reach::unresolved:
      return "not resolvable";
    default:
      return "failing";
  }
}

struct Reader {
  const PreflightReport& report;
  std::vector<PreflightFinding> out;
  // Nodes whose connection-tracking table is full -> the dropped probes
  // to or from them, taken out of `report` before it was read: the table
  // explains them, not a rule.
  std::map<int, int> dropped_by_table = {};

  int n() const { return static_cast<int>(report.nodes.size()); }
  bool present(int i) const { return report.nodes[static_cast<std::size_t>(i)].error.empty(); }
  const std::string& name(int i) const { return report.nodes[static_cast<std::size_t>(i)].name; }
  // The node the findings being read are about, while a loop reads one
  // node's side; -1 otherwise.
  int about = -1;
  void add(Severity s, std::string text) {
    out.push_back({s, std::move(text), about >= 0 ? std::vector<int>{about} : std::vector<int>{}});
  }
  void add_about(int node, Severity s, std::string text) { out.push_back({s, std::move(text), {node}}); }

  // The tested off-diagonal cells of a class, and how many are ok.
  struct ClassSummary {
    int tested = 0, ok = 0, partial = 0;
    std::map<Reach, int> bad;  // cell outcome -> count (partial cells under their worst)
    Reach main_bad() const {
      Reach best = Reach::error;
      int count = -1;
      for (const auto& [r, c] : bad) {
        if (c > count) best = r, count = c;
      }
      return best;
    }
    bool all_bad() const { return tested > 0 && ok == 0; }
    bool all_ok() const { return tested > 0 && ok == tested; }
  };

  ClassSummary summarise(const std::string& cls) const {
    ClassSummary s;
    for (int i = 0; i < n(); ++i) {
      for (int j = 0; j < n(); ++j) {
        if (i == j || !present(i) || !present(j)) continue;
        const Reach r = report.cell(i, j, cls);
        if (r == Reach::untested) continue;
        ++s.tested;
        if (r == Reach::ok) {
          ++s.ok;
          continue;
        }
        ++s.bad[r];
        if (report.cell_text(i, j, cls).find("ok") != std::string::npos) ++s.partial;
      }
    }
    return s;
  }

  const PortClass* port_class(std::string_view name) const {
    for (const auto& c : report.classes) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }

  // "port 33000 ok, port 50000 dropped" over every probe of a class.
  std::string ports_text(const std::string& cls) const {
    std::map<std::uint16_t, std::map<Reach, int>> by_port;
    for (const auto& p : report.probes) {
      if (p.port_class == cls) ++by_port[p.port][p.result.reach];
    }
    std::vector<std::string> parts;
    for (const auto& [port, outcomes] : by_port) {
      auto most = std::max_element(outcomes.begin(), outcomes.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
      parts.push_back(fmt::format("{} {}", port, name_of(most->first)));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
  }

  void read_port_classes() {
    std::map<std::string, ClassSummary> summaries;
    for (const auto& c : report.classes)
      summaries[c.name] = summarise(c.name);
    // The whole range, or everything but MASTER_PORT: the rules behind the
    // seed's two cases, said once rather than once per class.
    bool every_class_bad = !report.classes.empty();
    for (const auto& [name, s] : summaries)
      every_class_bad = every_class_bad && s.all_bad() && s.partial == 0;
    const auto master = summaries.find("master");
    const auto ephemeral = summaries.find("ephemeral");
    if (every_class_bad) {
      const Reach r = summaries.begin()->second.main_bad();
      add(Severity::problem,
          fmt::format("every port sampled from 1025 to 65535 is {} between every pair of nodes: no rule lets the "
                      "nodes reach each other on TCP (a security group needs a rule allowing all TCP from itself, "
                      "its self-referencing rule); the store connect of every rank but MASTER_ADDR's will hang",
                      what_it_means(r)));
      return;
    }
    std::set<std::string> explained;
    if (master != summaries.end() && master->second.all_ok() && ephemeral != summaries.end() &&
        ephemeral->second.all_bad() && ephemeral->second.partial == 0) {
      const PortClass* c = port_class("ephemeral");
      add(Severity::problem,
          fmt::format("{}: {} between every pair of nodes while MASTER_PORT {} is open: the security group's "
                      "self-referencing rule is missing or narrowed to MASTER_PORT; the store will work, and the "
                      "bootstrap ring and the data connections (which listen on ephemeral ports) will not",
                      c ? c->label : "the ephemeral ports", what_it_means(ephemeral->second.main_bad()),
                      report.master_port));
      explained.insert("ephemeral");
    }
    if (master != summaries.end() && master->second.all_bad() && master->second.partial == 0) {
      bool others_ok = false;
      for (const auto& [name, s] : summaries)
        others_ok = others_ok || (name != "master" && s.ok > 0);
      if (others_ok) {
        add(Severity::problem,
            fmt::format("MASTER_PORT {} is {} between every pair of nodes while other ports answer: a rule "
                        "leaves out exactly the rendezvous port; every rank but MASTER_ADDR's will hang at "
                        "STORE_CONNECT",
                        report.master_port, what_it_means(master->second.main_bad())));
        explained.insert("master");
      }
    }
    const std::set<std::pair<int, int>> told = read_pairs_closed_on_every_class(explained);
    for (const auto& c : report.classes) {
      if (explained.count(c.name) != 0) continue;
      const ClassSummary& s = summaries[c.name];
      if (s.tested == 0 || s.all_ok()) continue;
      read_one_class(c, s, told);
    }
  }

  // Pairs closed on every class (while other pairs are open), said once
  // per pair rather than once per class; returns them.
  std::set<std::pair<int, int>> read_pairs_closed_on_every_class(const std::set<std::string>& explained) {
    std::set<std::pair<int, int>> closed;
    std::vector<std::string> pairs;
    for (int i = 0; i < n(); ++i) {
      for (int j = 0; j < n(); ++j) {
        if (i == j || !present(i) || !present(j)) continue;
        int tested = 0, bad = 0;
        Reach worst = Reach::ok;
        for (const auto& c : report.classes) {
          if (explained.count(c.name) != 0) continue;
          const Reach r = report.cell(i, j, c.name);
          if (r == Reach::untested) continue;
          ++tested;
          if (r != Reach::ok) ++bad, worst = r;
        }
        if (tested < 2 || bad != tested) continue;
        closed.insert({i, j});
        bool back_open = false;
        for (const auto& c : report.classes)
          back_open = back_open || report.cell(j, i, c.name) == Reach::ok;
        pairs.push_back(fmt::format("node {} -> node {} {}{}", i, j, what_it_means(worst),
                                    back_open ? "; the other way is open: a one-way rule (a network ACL, or an "
                                                "outbound rule on the first node or an inbound one on the second)"
                                              : ""));
      }
    }
    if (!pairs.empty()) {
      const std::size_t shown = std::min<std::size_t>(pairs.size(), 6);
      add(Severity::problem,
          fmt::format("closed on every port class: {}{}",
                      fmt::join(pairs.begin(), pairs.begin() + static_cast<std::ptrdiff_t>(shown), "; "),
                      pairs.size() > shown ? fmt::format("; and {} more pairs", pairs.size() - shown) : ""));
    }
    return closed;
  }

  // A class with some bad cells: a whole range, a node's column or row, or pairs.
  void read_one_class(const PortClass& c, const ClassSummary& s, std::set<std::pair<int, int>> told) {
    if (s.all_bad() && s.partial == s.tested) {
      add(Severity::problem, fmt::format("only part of {} is open between the nodes (ports: {}): a rule covers a "
                                         "narrower range than the one the kernel picks ports from",
                                         c.label, ports_text(c.name)));
      return;
    }
    if (s.all_bad()) {
      add(Severity::problem, fmt::format("{}: {} between every pair of nodes", c.label, what_it_means(s.main_bad())));
      return;
    }
    // A node every other one fails to reach: its inbound side.
    for (int j = 0; j < n() && n() > 2; ++j) {
      if (!present(j)) continue;
      std::map<Reach, int> bad;
      int tested = 0;
      for (int i = 0; i < n(); ++i) {
        if (i == j || !present(i)) continue;
        const Reach r = report.cell(i, j, c.name);
        if (r == Reach::untested) continue;
        ++tested;
        if (r != Reach::ok) ++bad[r];
      }
      int bad_count = 0;
      for (const auto& [r, k] : bad)
        bad_count += k;
      if (tested < 2 || bad_count != tested) continue;
      add_about(j, Severity::problem,
                fmt::format("{} on node {} ({}): {} from every other node: that node's own "
                            "firewall, or a security group or ACL on its side",
                            c.label, j, name(j), what_it_means(bad.begin()->first)));
      for (int i = 0; i < n(); ++i)
        told.insert({i, j});
    }
    // A node that reaches no other: its outbound side.
    for (int i = 0; i < n() && n() > 2; ++i) {
      if (!present(i)) continue;
      int tested = 0, bad_count = 0;
      Reach r_bad = Reach::error;
      for (int j = 0; j < n(); ++j) {
        if (i == j || !present(j)) continue;
        const Reach r = report.cell(i, j, c.name);
        if (r == Reach::untested) continue;
        ++tested;
        if (r != Reach::ok) ++bad_count, r_bad = r;
      }
      if (tested < 2 || bad_count != tested) continue;
      add_about(i, Severity::problem,
                fmt::format("node {} ({}) reaches no other node on {}: {}; an outbound rule or the routes on that node",
                            i, name(i), c.label, what_it_means(r_bad)));
      for (int j = 0; j < n(); ++j)
        told.insert({i, j});
    }
    std::vector<std::string> pairs;
    for (int i = 0; i < n(); ++i) {
      for (int j = 0; j < n(); ++j) {
        if (i == j || !present(i) || !present(j) || told.count({i, j}) != 0) continue;
        const Reach r = report.cell(i, j, c.name);
        if (r == Reach::ok || r == Reach::untested) continue;
        const bool back_ok = report.cell(j, i, c.name) == Reach::ok;
        pairs.push_back(fmt::format("node {} -> node {} {}{}", i, j, name_of(r),
                                    back_ok ? " (the other way is open: a one-way rule)" : ""));
      }
    }
    if (pairs.empty()) return;
    const std::size_t shown = std::min<std::size_t>(pairs.size(), 6);
    add(Severity::problem,
        fmt::format("{}: blocked between some nodes only: {}{}", c.label,
                    fmt::join(pairs.begin(), pairs.begin() + static_cast<std::ptrdiff_t>(shown), "; "),
                    pairs.size() > shown ? fmt::format("; and {} more pairs", pairs.size() - shown) : ""));
  }

  // Interfaces: which reach every node, and whether NCCL_SOCKET_IFNAME picks one.
  void read_interfaces() {
    std::map<std::string, std::pair<int, int>> probes;  // interface -> (probes, ok)
    for (const auto& p : report.probes) {
      if (p.interface.empty()) continue;
      auto& [count, ok] = probes[p.interface];
      ++count;
      ok += p.result.reach == Reach::ok ? 1 : 0;
    }
    std::vector<std::string> everywhere;
    for (const auto& [interface, counts] : probes) {
      const std::string& name = interface;  // Debian 12's clang cannot capture a structured binding
      bool on_every_node = true;
      for (int i = 0; i < n(); ++i) {
        if (!present(i)) continue;
        const auto& ifs = report.nodes[static_cast<std::size_t>(i)].facts.interfaces;
        on_every_node = on_every_node && std::any_of(ifs.begin(), ifs.end(), [&](const InterfaceFacts& f) {
                          return f.name == name && !f.addresses.empty();
                        });
      }
      if (on_every_node && counts.first > 0 && counts.second == counts.first) everywhere.push_back(name);
    }
    const std::string suggestion =
        everywhere.empty() ? std::string()
                           : fmt::format("NCCL_SOCKET_IFNAME={} reaches every node", fmt::join(everywhere, ","));
    if (!report.socket_ifname.empty()) {
      for (int i = 0; i < n(); ++i) {
        if (!present(i)) continue;
        const NodeFacts& f = report.nodes[static_cast<std::size_t>(i)].facts;
        if (!f.socket_ifname_matches.empty()) continue;
        std::vector<std::string> names;
        for (const auto& x : f.interfaces)
          names.push_back(x.name);
        add(Severity::problem,
            fmt::format("NCCL_SOCKET_IFNAME={} matches no interface on node {} ({}), which has {}: its ranks "
                        "will fail at BOOTSTRAP_LISTEN{}",
                        report.socket_ifname, i, name(i), fmt::join(names, ", "),
                        suggestion.empty() ? "" : "; " + suggestion));
      }
    }
    if (!probes.empty() && everywhere.empty()) {
      add(Severity::problem,
          "no interface reaches every node from every node: check the nodes' subnets and "
          "routes (ip route get ADDRESS on each node)");
    } else if (!everywhere.empty()) {
      add(Severity::info,
          fmt::format("interfaces that reach every node: {}; {}", fmt::join(everywhere, ", "), suggestion));
    }
  }

  void read_master_addr() {
    std::set<std::vector<std::string>> answers;
    std::vector<int> unresolved;
    std::string error;
    int asked = 0;
    for (int i = 0; i < n(); ++i) {
      if (!present(i)) continue;
      const NodeFacts& f = report.nodes[static_cast<std::size_t>(i)].facts;
      if (f.master_addr.empty()) continue;
      ++asked;
      if (!f.master_error.empty()) {
        unresolved.push_back(i);
        error = f.master_error;
      } else {
        answers.insert(f.master_resolves_to);
      }
    }
    if (!unresolved.empty() && static_cast<int>(unresolved.size()) == asked && asked > 1) {
      add(Severity::problem, fmt::format("MASTER_ADDR {} resolves on no node ({}): the name is wrong, or no "
                                         "resolver has it yet; every rank will fail at RESOLVE_MASTER",
                                         report.master_addr, error));
    } else {
      for (const int i : unresolved) {
        const NodeFacts& f = report.nodes[static_cast<std::size_t>(i)].facts;
        add(Severity::problem,
            fmt::format("MASTER_ADDR {} does not resolve on node {} ({}): {}; its /etc/hosts or DNS lacks the "
                        "name, and its ranks will fail at RESOLVE_MASTER",
                        f.master_addr, i, name(i), f.master_error));
      }
    }
    // A name that is loopback on one node while others resolve it to an
    // address they can reach: rank 0 there serves the store on loopback,
    // where no other node reaches it. (Every node on loopback is agents
    // of one machine, or a job that never leaves it.)
    const auto is_loopback = [](const std::string& a) { return net::is_loopback_host(a); };
    bool routable = false;
    for (const auto& a : answers)
      routable = routable || std::any_of(a.begin(), a.end(), [&](const auto& x) { return !is_loopback(x); });
    for (int i = 0; i < n() && asked > 1 && routable; ++i) {
      if (!present(i)) continue;
      const NodeFacts& f = report.nodes[static_cast<std::size_t>(i)].facts;
      const auto loop = std::find_if(f.master_resolves_to.begin(), f.master_resolves_to.end(), is_loopback);
      if (loop == f.master_resolves_to.end()) continue;
      add(Severity::problem,
          fmt::format("MASTER_ADDR {} resolves to {}, a loopback address, on node {} ({}): a store served there "
                      "listens on loopback and no other node reaches it (Debian's /etc/hosts maps a host's own name "
                      "to 127.0.1.1); use the node's address on the job's network",
                      report.master_addr, *loop, i, name(i)));
    }
    if (answers.size() > 1) {
      std::vector<std::string> seen;
      for (const auto& a : answers)
        seen.push_back(fmt::format("{}", fmt::join(a, "/")));
      add(Severity::problem, fmt::format("MASTER_ADDR {} resolves differently across nodes ({}): ranks look for "
                                         "the store at different places (compare /etc/hosts and DNS on each node)",
                                         report.master_addr, fmt::join(seen, " vs ")));
    }
    // MASTER_PORT taken on the master's node by something other than a preflight listener.
    for (int i = 0; i < n(); ++i) {
      const PreflightNode& node = report.nodes[static_cast<std::size_t>(i)];
      for (const auto& [cls, ports] : node.ports) {
        if (cls != "master" || ports.empty() || ports.front().listening) continue;
        bool shared = false;  // another agent of the same address holds it
        for (const auto& other : report.nodes) {
          for (const auto& [c2, p2] : other.ports)
            shared = shared || (other.address == node.address && c2 == "master" && !p2.empty() && p2[0].listening);
        }
        if (shared) continue;
        const NodeFacts& f = node.facts;
        if (report.master_port >= f.ephemeral_lo && report.master_port <= f.ephemeral_hi) {
          add_about(i, Severity::problem,
                    fmt::format("MASTER_PORT {0} is taken on node {1} ({2}): {3}; it lies inside that node's "
                                "ip_local_port_range {4}-{5}, where the kernel hands ports to outbound connections, so "
                                "any connection can take it before rank 0 listens (sysctl -w "
                                "net.ipv4.ip_local_reserved_ports={0}, or a MASTER_PORT outside the range)",
                                report.master_port, i, node.name, ports.front().note, f.ephemeral_lo, f.ephemeral_hi));
        } else {
          add_about(
              i, Severity::warning,
              fmt::format("MASTER_PORT {} is taken on node {} ({}): {}; a store left by an earlier job may hold it",
                          report.master_port, i, node.name, ports.front().note));
        }
      }
    }
  }

  // RINGMASTER_PORT_RANGE against each node's ip_local_port_range and
  // what holds its ports there.
  void read_port_range() {
    int lo = 0, hi = 0;
    if (std::sscanf(report.port_range.c_str(), "%d-%d", &lo, &hi) != 2) return;
    for (int i = 0; i < n(); ++i) {
      if (!present(i)) continue;
      const PreflightNode& node = report.nodes[static_cast<std::size_t>(i)];
      const NodeFacts& f = node.facts;
      const bool overlaps = lo <= f.ephemeral_hi && hi >= f.ephemeral_lo;
      int tried = 0, taken = 0;
      std::string note;
      for (const auto& [cls, ports] : node.ports) {
        if (cls != "port_range") continue;
        for (const auto& p : ports) {
          ++tried;
          if (p.listening) continue;
          if (taken++ == 0) note = fmt::format("{}: {}", p.port, p.note);
        }
      }
      const std::string reserve = fmt::format(
          "the kernel hands ports there to outbound connections (sysctl -w net.ipv4.ip_local_reserved_ports={}-{}, or "
          "a "
          "range outside it)",
          lo, hi);
      if (taken > 0) {
        add_about(i, overlaps ? Severity::problem : Severity::warning,
                  fmt::format(
                      "RINGMASTER_PORT_RANGE {}-{}: {} of the {} port(s) tried are taken on node {} ({}; {}){}", lo, hi,
                      taken, tried, i, name(i), note,
                      overlaps ? fmt::format(": the range lies inside that node's ip_local_port_range {}-{}, where {}",
                                             f.ephemeral_lo, f.ephemeral_hi, reserve)
                               : std::string(": another job or a stale process holds them")));
      } else if (overlaps) {
        add_about(i, Severity::warning,
                  fmt::format("RINGMASTER_PORT_RANGE {}-{} overlaps node {}'s ({}) ip_local_port_range {}-{}: {}", lo,
                              hi, i, name(i), f.ephemeral_lo, f.ephemeral_hi, reserve));
      }
    }
  }

  void read_node_limits() {
    std::set<std::pair<int, int>> ranges;
    std::set<std::vector<std::string>> transports;
    for (int i = 0; i < n(); ++i) {
      if (!present(i)) continue;
      const PreflightNode& node = report.nodes[static_cast<std::size_t>(i)];
      const NodeFacts& f = node.facts;
      about = i;  // what follows is this node's own
      ranges.insert({f.ephemeral_lo, f.ephemeral_hi});
      transports.insert(f.transports);
      if (!f.shm_error.empty()) {
        add(Severity::problem, fmt::format("node {} ({}): {}", i, name(i), f.shm_error));
      } else if (f.shm_bytes < (1ULL << 30)) {
        const bool small = f.shm_bytes < (128ULL << 20);
        add(small ? Severity::problem : Severity::warning,
            fmt::format("/dev/shm on node {} ({}) is {} ({} free): ranks on one node {} (a container gets 64 MiB "
                        "unless a memory-backed emptyDir is mounted at /dev/shm, or docker --shm-size)",
                        i, name(i), bytes_text(f.shm_bytes), bytes_text(f.shm_free_bytes),
                        small ? "cannot make their shared-memory segments and fall back to sockets"
                              : "may run out of room for shared-memory segments with many channels"));
      }
      if (f.conntrack_max > 0 && f.conntrack_count >= 0 && f.conntrack_count * 10 >= f.conntrack_max * 7) {
        const bool full = f.conntrack_count * 10 >= f.conntrack_max * 9;
        const auto blamed = dropped_by_table.find(i);
        add(full ? Severity::problem : Severity::warning,
            fmt::format("node {} ({}): the connection-tracking table holds {} of {} entries ({:.0f}%): when it fills "
                        "the kernel drops new connections ('nf_conntrack: table full, dropping packet' in dmesg) and "
                        "ranks fail at STORE_CONNECT or TRANSPORT_CONNECT as if a firewall dropped them{}. Raise "
                        "net.netfilter.nf_conntrack_max (sysctl -w net.netfilter.nf_conntrack_max={}), or find "
                        "what holds the entries (conntrack -S, conntrack -L)",
                        i, name(i), f.conntrack_count, f.conntrack_max,
                        100.0 * static_cast<double>(f.conntrack_count) / static_cast<double>(f.conntrack_max),
                        blamed == dropped_by_table.end()
                            ? std::string()
                            : fmt::format("; {} of this preflight's probes to or from the node got no answer for "
                                          "that reason, not a firewall rule",
                                          blamed->second),
                        f.conntrack_max * 4));
      }
      if (!f.efa_devices.empty() && f.memlock_soft >= 0) {
        add(Severity::problem, fmt::format("node {} ({}) has EFA devices and a memlock limit of {} bytes: "
                                           "libfabric's EFA provider registers memory and needs it unlimited "
                                           "(LimitMEMLOCK=infinity, ulimit -l unlimited)",
                                           i, name(i), f.memlock_soft));
      }
      if (!f.efa_devices.empty() && std::find(f.transports.begin(), f.transports.end(), "ofi") == f.transports.end()) {
        std::string why;
        for (const auto& [t, w] : f.transports_unusable) {
          if (t == "ofi") why = w;
        }
        add(Severity::problem, fmt::format("node {} ({}) has EFA devices ({}) but libfabric cannot serve them: {}", i,
                                           name(i), fmt::join(f.efa_devices, ", "), why.empty() ? "?" : why));
      }
      if (f.nofile_hard >= 0 && f.nofile_hard < 1024) {
        // Ranks raise their soft limit as far as the hard one, no further.
        add(Severity::problem,
            fmt::format("node {} ({}) allows {} open files ({} hard): a rank holds a socket per peer, channel and "
                        "socket of a connection, and cannot raise its limit past the hard one, so ranks there fail "
                        "at TRANSPORT_CONNECT (raise LimitNOFILE=, --ulimit nofile=N:N, or nofile in "
                        "/etc/security/limits.conf)",
                        i, name(i), f.nofile_soft, limit_text(f.nofile_hard)));
      } else if (f.nofile_soft >= 0 && f.nofile_soft < 4096) {
        add(Severity::warning,
            fmt::format("node {} ({}) allows {} open files ({} hard): a rank opens sockets per peer and channel, "
                        "so large jobs run out (LimitNOFILE, ulimit -n)",
                        i, name(i), f.nofile_soft, limit_text(f.nofile_hard)));
      }
      if (std::abs(node.clock_offset_ms) > 1000) {
        add(Severity::warning, fmt::format("node {} ({})'s clock is {:+.1f} s off node 0's: timelines across "
                                           "nodes will not line up (chrony or NTP)",
                                           i, name(i), node.clock_offset_ms / 1000));
      }
    }
    about = -1;
    if (ranges.size() > 1) {
      std::vector<std::string> seen;
      for (const auto& [lo, hi] : ranges)
        seen.push_back(fmt::format("{}-{}", lo, hi));
      add(Severity::info,
          fmt::format("the nodes' ephemeral port ranges differ ({}): a rule written for one misses ports of "
                      "another",
                      fmt::join(seen, ", ")));
    }
    if (transports.size() > 1) {
      std::vector<std::string> seen;
      for (const auto& t : transports)
        seen.push_back(fmt::format("[{}]", fmt::join(t, ",")));
      add(Severity::warning, fmt::format("the nodes offer different transports ({}): a job takes the ones every "
                                         "node has",
                                         fmt::join(seen, " vs ")));
    }
  }

  // The software and the settings every node of a job must share
  // (tools/node_compare.h), for a job through NCCL: what breaks a run is
  // a problem, the launchers' node gate refuses it; what does not, a
  // note.
  void read_software() {
    std::vector<NodeSoftware> nodes;
    for (int i = 0; i < n(); ++i) {
      if (!present(i)) continue;
      const NodeFacts& f = report.nodes[static_cast<std::size_t>(i)].facts;
      nodes.push_back({i, name(i), f.stack, f.settings, f.settings_known});
    }
    for (const auto& d : compare_nodes(nodes, true)) {
      if (d.breaks_a_run) {
        add(Severity::problem, d.sentence +
                                   "; every node of a job must run the same versions and give its ranks the "
                                   "same settings (Ringmaster's launchers refuse such a run)");
      } else {
        add(Severity::info, d.sentence);
      }
    }
  }

  void read_absent_nodes() {
    for (int i = 0; i < n(); ++i) {
      if (!present(i))
        add_about(i, Severity::problem,
                  fmt::format("node {} took no part: {}", i, report.nodes[static_cast<std::size_t>(i)].error));
    }
  }
};

}  // namespace

namespace {

// A node whose connection-tracking table is full drops every new
// connection to it and from it: the report without the dropped probes
// that touch such a node (the rest is read as usual), and how many each
// such node accounts for.
std::pair<PreflightReport, std::map<int, int>> without_full_tables(const PreflightReport& report) {
  std::set<int> full;
  for (std::size_t i = 0; i < report.nodes.size(); ++i) {
    const NodeFacts& f = report.nodes[i].facts;
    if (report.nodes[i].error.empty() && net::ConntrackTable{.count = f.conntrack_count, .max = f.conntrack_max}.full())
      full.insert(static_cast<int>(i));
  }
  PreflightReport kept = report;
  std::map<int, int> dropped;
  if (full.empty()) return {std::move(kept), dropped};
  kept.probes.clear();
  for (const auto& p : report.probes) {
    const bool touches = full.count(p.from) != 0 || full.count(p.to) != 0;
    if (!touches || p.result.reach != Reach::dropped) {
      kept.probes.push_back(p);
      continue;
    }
    ++dropped[full.count(p.to) != 0 ? p.to : p.from];
  }
  return {std::move(kept), dropped};
}

}  // namespace

std::vector<PreflightFinding> diagnose_preflight(const PreflightReport& whole) {
  const auto [report, dropped_by_table] = without_full_tables(whole);
  Reader reader{report, {}, dropped_by_table};
  reader.read_absent_nodes();
  reader.read_port_classes();
  reader.read_master_addr();
  reader.read_interfaces();
  reader.read_node_limits();
  reader.read_port_range();
  reader.read_software();
  std::stable_sort(reader.out.begin(), reader.out.end(),
                   [](const PreflightFinding& a, const PreflightFinding& b) { return a.severity < b.severity; });
  return std::move(reader.out);
}

}  // namespace ringmaster
