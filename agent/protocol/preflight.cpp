// The JSON of the preflight types and run_preflight(): listen everywhere,
// probe everywhere at once, release, gather.
#include "ringmaster/agent/preflight.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <map>
#include <optional>

#include "ringmaster/agent/client.h"

namespace ringmaster::agent {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

json to_json(const PortListeners::Port& p) {
  json out = {{"port", p.port}, {"listening", p.listening}};
  if (!p.note.empty()) out["note"] = p.note;
  return out;
}

PortListeners::Port port_from_json(const json& j) {
  return {j.value("port", std::uint16_t{0}), j.value("listening", false), j.value("note", std::string())};
}

// Waits for a reply; an error reply or no reply is the message, else empty.
std::string wait_reply(std::future<json>& f, std::chrono::milliseconds limit, const char* what, json& reply) {
  if (f.wait_for(limit) != std::future_status::ready) {
    return fmt::format("no answer to {} in {} s", what, limit.count() / 1000);
  }
  reply = f.get();
  if (reply.value("type", "") == "error") return fmt::format("{}: {}", what, reply.value("message", "refused"));
  return {};
}

// The port a node's interface probes go to: MASTER_PORT when it listens
// there, else its first port listened on.
std::optional<std::uint16_t> interface_probe_port(const PreflightNode& node) {
  std::optional<std::uint16_t> first;
  for (const auto& [cls, ports] : node.ports) {
    for (const auto& p : ports) {
      if (!p.listening) continue;
      if (cls == "master") return p.port;
      if (!first) first = p.port;
    }
  }
  return first;
}

// Every probe node i makes, and the distinct targets they need.
struct ProbePlan {
  std::vector<ReachTarget> targets;
  std::vector<std::pair<PreflightProbe, std::size_t>> probes;  // each probe and its target
  std::map<std::pair<std::string, std::uint16_t>, std::size_t> index;

  void add(PreflightProbe p) {
    const auto key = std::make_pair(p.host, p.port);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, targets.size()).first;
      targets.push_back({p.host, p.port});
    }
    probes.emplace_back(std::move(p), it->second);
  }
};

ProbePlan plan_probes(const PreflightReport& r, int i) {
  ProbePlan plan;
  const int n = static_cast<int>(r.nodes.size());
  for (int j = 0; j < n; ++j) {
    const PreflightNode& to = r.nodes[static_cast<std::size_t>(j)];
    if (j == i || !to.error.empty()) continue;
    for (const auto& [cls, ports] : to.ports) {
      // A port taken by another listener still tells whether the path is open.
      for (const auto& p : ports) {
        if (p.listening || p.note == "in use") plan.add({i, j, cls, {}, to.address, p.port, {}});
      }
    }
    const auto port = interface_probe_port(to);
    if (!port) continue;
    for (const auto& f : to.facts.interfaces) {
      if (f.loopback || f.addresses.empty()) continue;
      std::string address = f.addresses.front();
      for (const auto& a : f.addresses) {
        if (a.find(':') == std::string::npos) {
          address = a;
          break;
        }
      }
      plan.add({i, j, {}, f.name, address, *port, {}});
    }
  }
  return plan;
}

}  // namespace

json to_json(const NodeFacts& f) {
  json interfaces = json::array();
  for (const auto& i : f.interfaces) {
    interfaces.push_back({{"name", i.name},
                          {"addresses", i.addresses},
                          {"up", i.up},
                          {"loopback", i.loopback},
                          {"mtu", i.mtu},
                          {"speed_mbps", i.speed_mbps}});
  }
  json unusable = json::array();
  for (const auto& [name, why] : f.transports_unusable)
    unusable.push_back({{"name", name}, {"why", why}});
  json stack = json::array();
  for (const auto& [component, version] : f.stack)
    stack.push_back({{"component", component}, {"version", version}});
  return {{"hostname", f.hostname},
          {"ephemeral", {f.ephemeral_lo, f.ephemeral_hi}},
          {"interfaces", interfaces},
          {"master_addr", f.master_addr},
          {"master_resolves_to", f.master_resolves_to},
          {"master_error", f.master_error},
          {"socket_ifname", f.socket_ifname},
          {"socket_ifname_matches", f.socket_ifname_matches},
          {"shm_bytes", f.shm_bytes},
          {"shm_free_bytes", f.shm_free_bytes},
          {"shm_error", f.shm_error},
          {"memlock", {f.memlock_soft, f.memlock_hard}},
          {"nofile", {f.nofile_soft, f.nofile_hard}},
          {"conntrack", {f.conntrack_count, f.conntrack_max}},
          {"efa_devices", f.efa_devices},
          {"transports", f.transports},
          {"transports_unusable", unusable},
          {"stack", stack},
          {"settings", f.settings},
          {"settings_known", f.settings_known}};
}

NodeFacts node_facts_from_json(const json& j) {
  NodeFacts f;
  f.hostname = j.value("hostname", std::string());
  const auto pair = [&](const char* key, auto& lo, auto& hi) {
    const json v = j.value(key, json::array());
    if (v.is_array() && v.size() == 2) {
      lo = v[0].get<std::remove_reference_t<decltype(lo)>>();
      hi = v[1].get<std::remove_reference_t<decltype(hi)>>();
    }
  };
  pair("ephemeral", f.ephemeral_lo, f.ephemeral_hi);
  for (const auto& i : j.value("interfaces", json::array())) {
    f.interfaces.push_back({i.value("name", std::string()), i.value("addresses", std::vector<std::string>{}),
                            i.value("up", false), i.value("loopback", false), i.value("mtu", 0),
                            i.value("speed_mbps", 0)});
  }
  f.master_addr = j.value("master_addr", std::string());
  f.master_resolves_to = j.value("master_resolves_to", std::vector<std::string>{});
  f.master_error = j.value("master_error", std::string());
  f.socket_ifname = j.value("socket_ifname", std::string());
  f.socket_ifname_matches = j.value("socket_ifname_matches", std::vector<std::string>{});
  f.shm_bytes = j.value("shm_bytes", std::uint64_t{0});
  f.shm_free_bytes = j.value("shm_free_bytes", std::uint64_t{0});
  f.shm_error = j.value("shm_error", std::string());
  pair("memlock", f.memlock_soft, f.memlock_hard);
  pair("nofile", f.nofile_soft, f.nofile_hard);
  pair("conntrack", f.conntrack_count, f.conntrack_max);
  f.efa_devices = j.value("efa_devices", std::vector<std::string>{});
  f.transports = j.value("transports", std::vector<std::string>{});
  for (const auto& u : j.value("transports_unusable", json::array()))
    f.transports_unusable.emplace_back(u.value("name", std::string()), u.value("why", std::string()));
  for (const auto& c : j.value("stack", json::array())) {
    if (c.is_object()) f.stack.emplace_back(c.value("component", std::string()), c.value("version", std::string()));
  }
  if (const auto s = j.find("settings"); s != j.end() && s->is_object()) {
    for (const auto& [k, v] : s->items()) {
      if (v.is_string()) f.settings.emplace(k, v.get<std::string>());
    }
  }
  f.settings_known = j.value("settings_known", false);
  return f;
}

json to_json(const PreflightReport& r, const std::vector<PreflightFinding>& findings) {
  json nodes = json::array();
  for (const auto& n : r.nodes) {
    json ports = json::object();
    for (const auto& [cls, list] : n.ports) {
      json l = json::array();
      for (const auto& p : list)
        l.push_back(to_json(p));
      ports[cls] = l;
    }
    json node = {{"name", n.name}, {"address", n.address}, {"clock_offset_ms", n.clock_offset_ms}, {"ports", ports}};
    if (n.error.empty()) {
      node["facts"] = to_json(n.facts);
    } else {
      node["error"] = n.error;
    }
    nodes.push_back(std::move(node));
  }
  json classes = json::array();
  json matrices = json::object();
  const int count = static_cast<int>(r.nodes.size());
  for (const auto& c : r.classes) {
    classes.push_back({{"name", c.name}, {"label", c.label}});
    json rows = json::array();
    for (int i = 0; i < count; ++i) {
      json row = json::array();
      for (int j = 0; j < count; ++j)
        row.push_back(r.cell_text(i, j, c.name));
      rows.push_back(std::move(row));
    }
    matrices[c.name] = std::move(rows);
  }
  json probes = json::array();
  for (const auto& p : r.probes) {
    json one = {
        {"from", p.from},   {"to", p.to}, {"host", p.host}, {"port", p.port}, {"reach", name_of(p.result.reach)},
        {"ms", p.result.ms}};
    if (!p.port_class.empty()) one["class"] = p.port_class;
    if (!p.interface.empty()) one["interface"] = p.interface;
    if (p.result.path_mtu > 0) one["path_mtu"] = p.result.path_mtu;
    if (!p.result.detail.empty()) one["detail"] = p.result.detail;
    probes.push_back(std::move(one));
  }
  json out_findings = json::array();
  for (const auto& f : findings) {
    json one = {{"severity", name_of(f.severity)}, {"text", f.text}};
    if (!f.nodes.empty()) one["nodes"] = f.nodes;
    out_findings.push_back(std::move(one));
  }
  return {{"master_addr", r.master_addr}, {"master_port", r.master_port}, {"socket_ifname", r.socket_ifname},
          {"port_range", r.port_range},   {"seconds", r.seconds},         {"nodes", nodes},
          {"classes", classes},           {"matrices", matrices},         {"probes", probes},
          {"findings", out_findings}};
}

std::vector<std::string> wait_for_replies(std::vector<std::future<json>>& pending, std::chrono::milliseconds limit,
                                          const char* what, std::vector<json>& replies) {
  const std::size_t n = pending.size();
  replies.assign(n, json());
  std::vector<std::string> errors(n);
  std::vector<bool> read(n, false);
  auto last_reply = Clock::now();
  for (;;) {
    int first_waiting = -1;
    for (std::size_t i = 0; i < n; ++i) {
      if (read[i] || !pending[i].valid()) continue;
      if (pending[i].wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
        if (first_waiting < 0) first_waiting = static_cast<int>(i);
        continue;
      }
      read[i] = true;
      last_reply = Clock::now();
      errors[i] = wait_reply(pending[i], std::chrono::milliseconds(0), what, replies[i]);
    }
    if (first_waiting < 0 || Clock::now() - last_reply > limit) break;
    pending[static_cast<std::size_t>(first_waiting)].wait_for(std::chrono::milliseconds(20));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!read[i] && pending[i].valid())
      errors[i] = fmt::format("no answer to {} within {:g} s of the last reply from any node", what,
                              static_cast<double>(limit.count()) / 1000);
  }
  return errors;
}

PreflightReport run_preflight(const std::vector<PreflightAgent>& agents, const PreflightOptions& o) {
  const auto started = Clock::now();
  PreflightReport r;
  r.master_addr = o.master_addr.empty() && !agents.empty() ? agents.front().address : o.master_addr;
  r.master_port = o.master_port;
  r.socket_ifname = o.socket_ifname;
  r.port_range = o.port_range;
  const std::size_t n = agents.size();
  r.nodes.resize(n);

  // 1. Every agent listens and says what it has.
  json listen = {{"type", "preflight_listen"},   {"master_port", o.master_port},     {"count", o.ports_per_class},
                 {"master_addr", r.master_addr}, {"socket_ifname", o.socket_ifname}, {"hold_s", 120}};
  if (!o.port_range.empty()) listen["port_range"] = o.port_range;
  std::vector<std::future<json>> pending(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.nodes[i].address = agents[i].address;
    pending[i] = agents[i].client->request(listen);
  }
  std::optional<double> first_offset_ms;
  std::vector<json> replies;
  const auto listen_errors = wait_for_replies(pending, std::chrono::seconds(15), "preflight_listen", replies);
  for (std::size_t i = 0; i < n; ++i) {
    PreflightNode& node = r.nodes[i];
    const json& reply = replies[i];
    node.error = listen_errors[i];
    if (!node.error.empty()) continue;
    node.facts = node_facts_from_json(reply.value("facts", json::object()));
    node.name = node.facts.hostname;
    for (const auto& c : reply.value("classes", json::array())) {
      const std::string name = c.value("name", std::string());
      std::vector<PortListeners::Port> ports;
      for (const auto& p : c.value("ports", json::array()))
        ports.push_back(port_from_json(p));
      node.ports.emplace_back(name, std::move(ports));
      const bool known = std::any_of(r.classes.begin(), r.classes.end(), [&](const auto& k) { return k.name == name; });
      if (!known) r.classes.push_back({name, c.value("label", name)});
    }
  }
  // Clocks: a ping each, its answer's time against the middle of its round trip.
  for (std::size_t i = 0; i < n; ++i) {
    PreflightNode& node = r.nodes[i];
    if (!node.error.empty()) continue;
    const long long sent = wall_us();
    auto ping = agents[i].client->request({{"type", "ping"}});
    json reply;
    if (!wait_reply(ping, std::chrono::seconds(5), "ping", reply).empty()) continue;
    const double offset_ms =
        (static_cast<double>(reply.value("time_us", 0LL)) - static_cast<double>(sent + wall_us()) / 2) / 1000;
    if (!first_offset_ms) first_offset_ms = offset_ms;
    node.clock_offset_ms = offset_ms - *first_offset_ms;
  }

  // 2. Every agent probes every other one's ports, all at the same time.
  std::vector<ProbePlan> plans(n);
  pending = std::vector<std::future<json>>(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!r.nodes[i].error.empty()) continue;
    plans[i] = plan_probes(r, static_cast<int>(i));
    json targets = json::array();
    for (const auto& t : plans[i].targets)
      targets.push_back({{"host", t.host}, {"port", t.port}});
    pending[i] =
        agents[i].client->request({{"type", "preflight_probe"}, {"targets", targets}, {"window_ms", o.window.count()}});
  }
  std::size_t most_targets = 0;
  for (const auto& plan : plans)
    most_targets = std::max(most_targets, plan.targets.size());
  const auto batches = static_cast<long long>(most_targets / 512 + 1);
  const auto probe_errors = wait_for_replies(pending, std::chrono::milliseconds(o.window.count() * batches + 15000),
                                             "preflight_probe", replies);
  for (std::size_t i = 0; i < n; ++i) {
    if (!r.nodes[i].error.empty()) continue;
    const std::string& error = probe_errors[i];
    const json& reply = replies[i];
    const json results = error.empty() ? reply.value("results", json::array()) : json::array();
    for (auto& [probe, target] : plans[i].probes) {
      if (target < results.size()) {
        const json& res = results[target];
        probe.result.reach = reach_from_name(res.value("reach", "error")).value_or(Reach::error);
        probe.result.ms = res.value("ms", 0.0);
        probe.result.path_mtu = res.value("path_mtu", 0);
        probe.result.detail = res.value("detail", std::string());
      } else {
        probe.result = {Reach::error, 0, 0, error.empty() ? "the agent returned too few results" : error};
      }
      r.probes.push_back(std::move(probe));
    }
  }

  // 3. Ports back.
  pending = std::vector<std::future<json>>(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (r.nodes[i].error.empty()) pending[i] = agents[i].client->request({{"type", "preflight_release"}});
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (pending[i].valid()) pending[i].wait_for(std::chrono::seconds(5));
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return r;
}

}  // namespace ringmaster::agent
