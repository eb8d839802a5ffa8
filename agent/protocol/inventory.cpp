// An agent's inventory, typed both ways (ringmaster/agent/requests.h).
#include <fmt/format.h>

#include "fields.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/status.h"

namespace ringmaster::agent {

using detail::Fields;
using nlohmann::json;

namespace {

TopologyNode read_node(const Fields& f, int id) {
  TopologyNode n;
  n.id = f.integer("id", id);
  if (n.id != id) {
    throw Error(ErrorCategory::protocol, fmt::format("{}: 'id' is {}, not its place {}", f.where(), n.id, id));
  }
  n.kind = f.text("kind", true);
  n.name = f.text("name");
  n.origin = f.text("origin");
  n.parent = f.integer("parent", -1);
  n.index = f.integer("index", -1);
  n.children = f.integers<int>("children");
  n.implicit = f.flag("implicit", false);
  n.model = f.text("model");
  n.attributes = f.text_map("attributes");
  return n;
}

// Every id a node or link names is a node of the topology: the console
// walks children and parents without checking each.
void check_ids(const TopologyInfo& t, std::string_view where) {
  const auto refuse = [&](const std::string& what) {
    throw Error(ErrorCategory::protocol, fmt::format("{}: {}", where, what));
  };
  for (const auto& n : t.nodes) {
    if (n.parent != -1 && !t.has(n.parent)) refuse(fmt::format("nodes[{}]: parent {} is not a node", n.id, n.parent));
    for (int c : n.children) {
      if (!t.has(c) || c == n.id) refuse(fmt::format("nodes[{}]: child {} is not another node", n.id, c));
      if (t.node(c).parent != n.id)
        refuse(fmt::format("nodes[{}]: child {} names parent {}", n.id, c, t.node(c).parent));
    }
  }
  for (std::size_t i = 0; i < t.links.size(); ++i) {
    if (!t.has(t.links[i].a) || !t.has(t.links[i].b)) refuse(fmt::format("links[{}]: an end is not a node", i));
  }
  for (std::size_t i = 0; i < t.devices.size(); ++i) {
    if (!t.has(t.devices[i].id)) refuse(fmt::format("matrix: devices[{}]: {} is not a node", i, t.devices[i].id));
  }
  if (!t.paths.empty() && t.paths.size() != t.devices.size()) {
    refuse(fmt::format("matrix: paths has {} rows for {} devices", t.paths.size(), t.devices.size()));
  }
  for (std::size_t r = 0; r < t.paths.size(); ++r) {
    if (r >= t.devices.size() || t.paths[r].size() != t.devices.size()) {
      refuse(fmt::format("matrix: paths[{}] is not a row of {} devices", r, t.devices.size()));
    }
  }
}

}  // namespace

const std::string& TopologyNode::attribute(const std::string& key) const {
  static const std::string none;
  const auto it = attributes.find(key);
  return it == attributes.end() ? none : it->second;
}

json TopologyInfo::to_json() const {
  json nodes_out = json::array();
  for (const auto& n : nodes) {
    json o = {{"id", n.id},         {"kind", n.kind},   {"name", n.name},         {"origin", n.origin},
              {"parent", n.parent}, {"index", n.index}, {"children", n.children}, {"attributes", n.attributes}};
    if (n.implicit) o["implicit"] = true;
    if (!n.model.empty()) o["model"] = n.model;
    nodes_out.push_back(std::move(o));
  }
  json links_out = json::array();
  for (const auto& l : links) {
    links_out.push_back(
        {{"a", l.a}, {"b", l.b}, {"type", l.type}, {"bandwidth_gbps", l.bandwidth_gbps}, {"count", l.count}});
  }
  json devices_out = json::array();
  for (const auto& d : devices)
    devices_out.push_back({{"id", d.id}, {"name", d.name}});
  json paths_out = json::array();
  for (const auto& row : paths) {
    json r = json::array();
    for (const auto& p : row)
      r.push_back({{"class", p.label}, {"bandwidth_gbps", p.bandwidth_gbps}, {"hops", p.hops}});
    paths_out.push_back(std::move(r));
  }
  return {{"source", source},
          {"origin", origin},
          {"summary", summary},
          {"warnings", warnings},
          {"nodes", nodes_out},
          {"links", links_out},
          {"matrix", {{"devices", devices_out}, {"paths", paths_out}}}};
}

TopologyInfo TopologyInfo::parse(const json& topology, std::string_view where) {
  const Fields f(topology, std::string(where));
  TopologyInfo t;
  t.source = f.text("source");
  t.origin = f.text("origin");
  t.summary = f.text("summary");
  t.warnings = f.texts("warnings");
  f.each("nodes", [&](const Fields& n) { t.nodes.push_back(read_node(n, static_cast<int>(t.nodes.size()))); });
  f.each("links", [&](const Fields& l) {
    t.links.push_back({l.integer("a", 0, true), l.integer("b", 0, true), l.text("type"), l.number("bandwidth_gbps"),
                       l.integer("count", 0)});
  });
  if (const auto matrix = f.object("matrix")) {
    matrix->each("devices", [&](const Fields& d) { t.devices.push_back({d.integer("id", 0, true), d.text("name")}); });
    matrix->each_cell("paths", [&](std::size_t row, std::size_t, const Fields& p) {
      if (t.paths.size() <= row) t.paths.resize(row + 1);
      t.paths[row].push_back({p.text("class"), p.number("bandwidth_gbps"), p.integer("hops", 0)});
    });
  }
  check_ids(t, where);
  return t;
}

json to_json(const ActiveRun& r) {
  json ranks = json::array();
  for (const auto& k : r.ranks)
    ranks.push_back({{"rank", k.rank}, {"pid", k.pid}, {"exited", k.exited}});
  json j = {{"run_id", r.run_id}, {"ranks", std::move(ranks)}, {"cancelled", r.cancelled}};
  if (r.watch) j["watch"] = true;
  return j;
}

json to_json(const ActiveFault& f) {
  return {{"fault_id", f.fault_id},
          {"fault", f.fault ? to_json(*f.fault) : f.unread},
          {"mechanism", f.mechanism},
          {"runs", f.runs}};
}

json Inventory::to_json() const {
  json interfaces_out = json::array();
  for (const auto& i : interfaces) {
    interfaces_out.push_back({{"name", i.name},
                              {"family", i.family},
                              {"address", i.address},
                              {"up", i.up},
                              {"loopback", i.loopback},
                              {"speed_mbps", i.speed_mbps}});
  }
  json runs_out = json::array();
  for (const auto& r : runs)
    runs_out.push_back(agent::to_json(r));
  json faults_out = json::array();
  for (const auto& f : faults)
    faults_out.push_back(agent::to_json(f));
  json unusable = json::array();
  for (const auto& u : transports_unusable)
    unusable.push_back({{"name", u.name}, {"why", u.why}});
  json stack_out = json::array();
  for (const auto& [component, version] : stack)
    stack_out.push_back({{"component", component}, {"version", version}});
  return {{"hostname", hostname},
          {"agent_version", agent_version},
          {"protocol", protocol},
          {"topology", topology.to_json()},
          {"topology_summary", topology_summary},
          {"gpus", gpus},
          {"interfaces", std::move(interfaces_out)},
          {"clock_us", clock_us},
          {"uptime_s", uptime_s},
          {"runs", std::move(runs_out)},
          {"runs_started", runs_started},
          {"runs_failed", runs_failed},
          {"faults", std::move(faults_out)},
          {"fault_injection", fault_injection},
          {"pid", pid},
          {"transports", transports},
          {"transports_unusable", std::move(unusable)},
          {"stack", std::move(stack_out)},
          {"rank_env", rank_env}};
}

Inventory Inventory::parse(const json& reply) {
  const Fields f(reply, "inventory");
  Inventory inv;
  inv.hostname = f.text("hostname");
  inv.agent_version = f.text("agent_version");
  inv.protocol = f.integer("protocol", 0);
  if (const json* t = f.raw("topology"); t && !t->is_null())
    inv.topology = TopologyInfo::parse(*t, "inventory: topology");
  inv.topology_summary = f.text("topology_summary");
  if (const json* g = f.raw("gpus")) inv.gpus = *g;
  f.each("interfaces", [&](const Fields& i) {
    inv.interfaces.push_back({i.text("name"), i.text("family"), i.text("address"), i.flag("up", false),
                              i.flag("loopback", false), i.integer("speed_mbps", 0)});
  });
  inv.clock_us = f.integer<std::int64_t>("clock_us");
  inv.uptime_s = f.number("uptime_s");
  f.each("runs", [&](const Fields& r) {
    ActiveRun run{r.text("run_id", true), {}, r.flag("cancelled", false), r.flag("watch", false)};
    r.each("ranks", [&](const Fields& k) {
      run.ranks.push_back({k.integer("rank", 0, true), k.integer("pid", 0), k.flag("exited", false)});
    });
    inv.runs.push_back(std::move(run));
  });
  inv.runs_started = f.integer<std::int64_t>("runs_started");
  inv.runs_failed = f.integer<std::int64_t>("runs_failed");
  f.each("faults", [&](const Fields& a) {
    ActiveFault fault;
    fault.fault_id = a.integer("fault_id", 0, true);
    fault.mechanism = a.text("mechanism");
    fault.runs = a.texts("runs");
    const json* spec = a.raw("fault", true);
    try {
      fault.fault = parse_fault(*spec);
    } catch (const Error& e) {
      fault.unread = *spec;
      fault.why_unread = e.status().message();
    }
    inv.faults.push_back(std::move(fault));
  });
  inv.fault_injection = f.flag("fault_injection", false);
  inv.pid = f.integer("pid", 0);
  inv.transports = f.texts("transports");
  f.each("transports_unusable", [&](const Fields& u) {
    inv.transports_unusable.push_back({u.text("name", true), u.text("why")});
  });
  f.each("stack", [&](const Fields& c) { inv.stack.emplace_back(c.text("component", true), c.text("version")); });
  inv.rank_env = f.text_map("rank_env");
  return inv;
}

}  // namespace ringmaster::agent
