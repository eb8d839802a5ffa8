// `ringmaster-cli remote --agents h1:p,h2:p --np-per-agent N perf ...`:
// the headless console. Sends each agent its share of a run, then prints
// rank 0's stage table and the nccl-tests table from the relayed events.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <unistd.h>
#include <algorithm>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <variant>

#include "agent_set.h"
#include "commands.h"
#include "perf_options.h"
#include "remote_watch.h"
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/fault.h"
#include "ringmaster/agent/node_gate.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"

namespace ringmaster::cli {
namespace {

using nlohmann::json;

struct RemoteOptions {
  AgentSet agents;
  int np_per_agent = 1;
  std::string master_addr;
  double timeout_s = 600;
  double coll_timeout_s = 0;
  double store_timeout_s = 0;
  double bootstrap_timeout_s = 0;
  std::string events_file;
  PerfOptions perf;
  std::string engine = "ringmaster";  // perf: ringmaster, nccl (ringmaster-nccl-perf on each agent) or both
  bool allow_mixed_nodes = false;     // perf: launch although the node gate refuses
  // fault
  std::string kind, ports, except, address, direction = "both", interface, to;
  bool skip_loopback = false;
  double ms = 0, mbit = 0, percent = 0;
  std::int64_t bytes = 0;
  std::string resource;
  std::int64_t limit_value = 0;
  int fault_id = 0;
};

// The run's perf request through `engine`: the engine's whole, or what
// NCCL's runner takes (sizes, iterations, NCCL_ALGO/NCCL_PROTO/channels;
// fp32 sums).
agent::PerfRequest remote_perf_request(const RemoteOptions& o, const std::string& engine) {
  const agent::PerfRequest all = perf_request(o.perf);
  if (engine == "ringmaster") return all;
  agent::PerfRequest nccl;
  nccl.engine = agent::PerfRequest::Engine::nccl;
  nccl.collective = all.collective;
  nccl.min_bytes = all.min_bytes;
  nccl.max_bytes = all.max_bytes;
  nccl.step_factor = all.step_factor;
  nccl.step_bytes = all.step_bytes;
  nccl.iters = all.iters;
  nccl.warmup = all.warmup;
  nccl.algorithm = all.algorithm;
  nccl.protocol = all.protocol;
  nccl.channels = all.channels;
  return nccl;
}

// --engine, checked before any agent is asked: the engines it names, in
// the order they run.
std::vector<std::string> engines_of(const RemoteOptions& o) {
  if (o.engine == "ringmaster") return {"ringmaster"};
  if (o.engine != "nccl" && o.engine != "both") {
    throw Error(ErrorCategory::config, "--engine " + o.engine + ": ringmaster, nccl or both");
  }
  const std::string refused = agent::nccl_runner_refusal(o.perf.collective, o.perf.type, o.perf.op);
  if (!refused.empty()) throw Error(ErrorCategory::config, "--engine " + o.engine + ": " + refused);
  if (o.engine == "nccl") return {"nccl"};
  return {"ringmaster", "nccl"};
}

// One sweep's end: the exit code it gives, rank 0's rows, and the first
// failure a rank reported.
struct Sweep {
  int code = 0;
  std::vector<PerfRow> rows;
  std::string failure;
  std::vector<agent::events::StageFailed> failures;  // every rank's, read together by the caller
};

// A connection to every agent, their messages in one inbox.
struct Agents {
  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  std::vector<std::unique_ptr<agent::AgentClient>> clients;
};

Agents subscribe_all(const RemoteOptions& o) {
  Agents agents;
  const auto endpoints = endpoints_of(o.agents, "remote");
  const std::string token = token_of(o.agents);
  for (const auto& endpoint : endpoints) {
    const agent::ClientOptions c = client_options(o.agents, endpoint, token);
    const std::string address = endpoint.host + ":" + std::to_string(endpoint.port);
    auto inbox = agents.inbox;
    agents.clients.push_back(agent::AgentClient::connect(
        c, [inbox](const json& m) { inbox->push(m); },
        [inbox, address](const std::string& why) {
          inbox->push(json{{"type", "closed"}, {"agent", address}, {"message", why}});
        }));
    agents.clients.back()->call({{"type", "subscribe"}});
  }
  return agents;
}

// Starts `run` on every agent, agent i holding ranks i*np..: agent 0 holds
// rank 0 and hosts the store, so it picks the port first. When an agent
// refuses the run, those that took it cancel it; false then (with
// --engine both, NCCL's refusal is its column's reason, in `sweep`).
bool start_on_every_agent(const RemoteOptions& o, const std::string& engine,
                          std::vector<std::unique_ptr<agent::AgentClient>>& clients, agent::RunRequest& run,
                          Sweep& sweep) {
  for (std::size_t i = 0; i < clients.size(); ++i) {
    run.ranks.clear();
    for (int l = 0; l < o.np_per_agent; ++l)
      run.ranks.push_back(static_cast<int>(i) * o.np_per_agent + l);
    if (run.perf.bisect) run.env["GROUP_RANK"] = std::to_string(i);  // --bisect splits the job by agent
    try {
      const json reply = clients[i]->call(run.to_json());
      if (i == 0) run.master_port = reply.at("master_port").get<int>();
    } catch (const Error& e) {
      for (std::size_t j = 0; j < i; ++j)
        clients[j]->request({{"type", "cancel"}, {"run_id", run.run_id}});
      if (engine != "nccl" || o.engine != "both") throw;
      std::fprintf(stderr, "# %s\n", e.what());
      sweep.code = exit_code::failed;
      sweep.failure = e.what();
      return false;
    }
  }
  return true;
}

// Runs the sweep through `engine` on every agent and prints rank 0's stage
// table and the nccl-tests table as the events come.
Sweep run_sweep(const RemoteOptions& o, const std::string& engine, Agents& agents) {
  const PerfSpec spec = make_perf_spec(o.perf);
  auto& clients = agents.clients;
  auto& inbox = agents.inbox;
  const auto endpoints = endpoints_of(o.agents, "remote");
  const int world = static_cast<int>(clients.size()) * o.np_per_agent;
  const std::string run_id = "remote-" + std::to_string(::getpid()) + "-" +
                             std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000);
  agent::RunRequest run;
  run.run_id = run_id;
  run.world_size = world;
  run.master_addr = o.master_addr.empty() ? endpoints[0].host : o.master_addr;
  run.perf = remote_perf_request(o, engine);
  if (o.store_timeout_s > 0) run.store_timeout_s = o.store_timeout_s;
  if (o.bootstrap_timeout_s > 0) run.bootstrap_timeout_s = o.bootstrap_timeout_s;
  if (o.coll_timeout_s > 0) run.coll_timeout_s = o.coll_timeout_s;
  Sweep sweep;
  if (!start_on_every_agent(o, engine, clients, run, sweep)) return sweep;

  std::ofstream events = o.events_file.empty() ? std::ofstream() : std::ofstream(o.events_file);
  std::vector<agent::events::StageEnded> stages;
  std::vector<std::string> bisect;  // the bisection's lines, printed under the table
  std::vector<PerfRow>& rows = sweep.rows;
  std::vector<std::pair<int, agent::events::Links>> links;
  bool header_printed = false;
  std::size_t agents_done = 0;
  bool ok = true;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  auto print_stages = [&] {
    if (header_printed) return;
    header_printed = true;
    std::printf("# rank 0 init stages (run %s over %zu agents)\n", run_id.c_str(), clients.size());
    for (const auto& e : stages) {
      std::printf("#   %-17s %-6s %9.3f ms  %s\n", std::string(name_of(e.stage)).c_str(), e.ok ? "ok" : "FAILED",
                  e.duration_ms, e.detail.c_str());
    }
    std::printf("#\n%s", perf_header(spec, world).c_str());
    std::fflush(stdout);
  };
  while (agents_done < clients.size()) {
    auto m = inbox->pop(deadline);
    if (!m) {
      std::fprintf(stderr, "ringmaster-cli remote: run %s did not finish within %.0f s; cancelling\n", run_id.c_str(),
                   o.timeout_s);
      for (auto& c : clients)
        c->request({{"type", "cancel"}, {"run_id", run_id}});
      sweep.code = exit_code::remote_failed;
      return sweep;
    }
    const std::string type = m->value("type", "");
    if (type == "closed") {
      std::fprintf(stderr, "ringmaster-cli remote: agent %s: %s\n", m->value("agent", "?").c_str(),
                   m->value("message", "").c_str());
      sweep.code = exit_code::remote_failed;
      return sweep;
    }
    if (type != "event" || m->value("run_id", "") != run_id) continue;
    if (events.is_open()) events << m->dump() << "\n";
    std::optional<agent::events::EventMessage> message;
    try {
      message = agent::events::parse_event_message(*m);
    } catch (const Error& e) {
      std::fprintf(stderr, "# skipped an event: %s\n", e.status().message().c_str());
      continue;
    }
    const int rank = message->rank;
    std::visit(
        [&](const auto& e) {
          using E = std::decay_t<decltype(e)>;
          namespace ev = agent::events;
          if constexpr (std::is_same_v<E, ev::StageEnded>) {
            if (rank == 0) stages.push_back(e);
          } else if constexpr (std::is_same_v<E, ev::Result>) {
            if (rank != 0) return;
            print_stages();
            rows.push_back(ev::perf_row(e));
            std::fputs(perf_row_line(spec, rows.back()).c_str(), stdout);
            std::fflush(stdout);
          } else if constexpr (std::is_same_v<E, ev::StageFailed>) {
            ok = false;
            std::fprintf(stderr, "# rank %d failed at %s: %s\n#   hint: %s\n", rank,
                         std::string(name_of(e.stage)).c_str(), e.summary.c_str(), e.hint.c_str());
            sweep.failures.push_back(e);
            if (sweep.failure.empty()) sweep.failure = e.summary;
          } else if constexpr (std::is_same_v<E, ev::CollectiveError>) {
            ok = false;
            std::fprintf(stderr, "# rank %d: %s\n", rank, e.message.c_str());
            if (sweep.failure.empty()) sweep.failure = e.message;
          } else if constexpr (std::is_same_v<E, ev::RankFailed>) {
            ok = false;
            std::fprintf(stderr, "# %s\n", e.summary.empty() ? "a rank failed" : e.summary.c_str());
            if (sweep.failure.empty()) sweep.failure = e.summary;
          } else if constexpr (std::is_same_v<E, ev::Links>) {
            links.emplace_back(rank, e);
          } else if constexpr (std::is_same_v<E, ev::Bisect>) {
            if (rank == 0) bisect.push_back("# " + ev::describe(e) + "\n");  // after the table
          } else if constexpr (std::is_same_v<E, ev::RunDone>) {
            ++agents_done;
            ok = ok && e.ok;
          }
        },
        message->event);
  }
  if (!rows.empty()) std::fputs(perf_footer(rows).c_str(), stdout);
  for (const auto& line : bisect)
    std::fputs(line.c_str(), stdout);
  // Every rank measured the links into it; one far below the others is
  // named (the run still completed).
  for (const auto& l : agent::find_slow_links(links))
    std::printf("# %s link: %s\n", l.lossy() ? "Lossy" : "Slow", l.describe().c_str());
  long wrong = 0;
  for (const auto& r : rows)
    wrong += r.out_of_place.wrong + r.in_place.wrong;
  sweep.code = ok && wrong == 0 ? 0 : 1;
  return sweep;
}

// busbw through both engines, size by size (out of place): where NCCL did
// not run its column is "-" and the reason follows.
void print_engines_compared(const Sweep& ringmaster, const Sweep& nccl) {
  std::printf("#\n# Ringmaster against NCCL, out-of-place busbw (GB/s)\n");
  std::printf("# %12s %12s %12s %16s\n", "size", "Ringmaster", "NCCL", "NCCL/Ringmaster");
  std::map<std::size_t, std::pair<const PerfRow*, const PerfRow*>> by_size;
  for (const auto& r : ringmaster.rows)
    by_size[r.bytes].first = &r;
  for (const auto& r : nccl.rows)
    by_size[r.bytes].second = &r;
  auto cell = [](const PerfRow* r) { return r ? fmt::format("{:.4g}", r->out_of_place.busbw) : std::string("-"); };
  for (const auto& [bytes, pair] : by_size) {
    const auto [a, b] = pair;
    const std::string ratio = a && b && a->out_of_place.busbw > 0
                                  ? fmt::format("{:.3g}", b->out_of_place.busbw / a->out_of_place.busbw)
                                  : std::string("-");
    std::printf("  %12zu %12s %12s %16s\n", bytes, cell(a).c_str(), cell(b).c_str(), ratio.c_str());
  }
  if (nccl.rows.empty()) {
    std::printf("# NCCL did not run: %s\n", nccl.failure.empty() ? "see above" : nccl.failure.c_str());
  }
  std::fflush(stdout);
}

// Before any run: every agent's inventory through the node gate, for each
// engine the sweep runs. What differs is said on stderr; a difference the
// gate refuses stops the launch unless --allow-mixed-nodes.
void gate_nodes(const RemoteOptions& o, const std::vector<std::string>& engines, Agents& agents) {
  std::vector<agent::Inventory> nodes;
  for (auto& c : agents.clients)
    nodes.push_back(agent::Inventory::parse(c->call({{"type", "inventory"}})));
  for (const auto& engine : engines) {
    const agent::NodeGate gate = agent::check_nodes_alike(
        nodes, engine == "nccl" ? agent::PerfRequest::Engine::nccl : agent::PerfRequest::Engine::ringmaster);
    for (const auto& note : gate.notes)
      std::fprintf(stderr, "# note: %s\n", note.c_str());
    if (gate.passed()) continue;
    if (!o.allow_mixed_nodes) throw Error(ErrorCategory::config, gate.refusal("launch with --allow-mixed-nodes"));
    for (const auto& r : gate.refusals)
      std::fprintf(stderr, "# going ahead (--allow-mixed-nodes) although %s\n", r.c_str());
  }
}

int run_remote(const RemoteOptions& o) {
  (void)make_perf_spec(o.perf);
  (void)make_comm_options(o.perf);  // the same checks perf makes, before anything starts
  const std::vector<std::string> engines = engines_of(o);
  (void)endpoints_of(o.agents, "remote");
  if (o.np_per_agent < 1) throw Error(ErrorCategory::config, "--np-per-agent must be at least 1");
  Agents agents = subscribe_all(o);
  gate_nodes(o, engines, agents);
  std::vector<Sweep> sweeps;
  for (const auto& engine : engines) {
    if (!sweeps.empty()) std::printf("#\n# The same sweep through NCCL\n");
    sweeps.push_back(run_sweep(o, engine, agents));
    for (const auto& t : agent::events::read_together(sweeps.back().failures))
      std::fprintf(stderr, "# Read together: %s\n", t.c_str());
    if (sweeps.back().code == exit_code::remote_failed) return exit_code::remote_failed;
  }
  if (sweeps.size() == 2) print_engines_compared(sweeps[0], sweeps[1]);
  for (const auto& s : sweeps)
    if (s.code != 0) return s.code;
  return 0;
}

std::vector<std::unique_ptr<agent::AgentClient>> connect_all(const RemoteOptions& o) {
  const std::string token = token_of(o.agents);
  std::vector<std::unique_ptr<agent::AgentClient>> clients;
  for (const auto& e : endpoints_of(o.agents, "remote"))
    clients.push_back(agent::AgentClient::connect(client_options(o.agents, e, token)));
  return clients;
}

// One request to every agent; prints each reply as a JSON line.
int each_agent(const RemoteOptions& o, const json& request) {
  for (auto& c : connect_all(o)) {
    json reply = c->call(request);
    for (const char* k : {"type", "id", "v", "re", "ok"})
      reply.erase(k);
    std::printf("%s %s\n", c->address().c_str(), reply.dump().c_str());
  }
  return 0;
}

}  // namespace

Runner add_remote_command(CLI::App& app) {
  auto* remote = app.add_subcommand("remote", "Drive ringmaster-agents: run a collective sweep across them");
  auto o = std::make_shared<RemoteOptions>();
  add_agent_set_options(*remote, o->agents);
  remote->add_option("--np-per-agent", o->np_per_agent, "Ranks each agent runs")->capture_default_str();
  remote->add_option("--master-addr", o->master_addr, "Address the ranks reach the first agent at (default: its host)");
  remote->add_option("--timeout", o->timeout_s, "Seconds the whole run may take")->capture_default_str();
  remote->add_option("--store-timeout", o->store_timeout_s, "RINGMASTER_STORE_TIMEOUT for the ranks, seconds");
  remote->add_option("--bootstrap-timeout", o->bootstrap_timeout_s,
                     "RINGMASTER_BOOTSTRAP_TIMEOUT for the ranks, seconds");
  remote->add_option("--coll-timeout", o->coll_timeout_s, "RINGMASTER_COLL_TIMEOUT for the ranks, seconds");
  remote->add_option("--json-file", o->events_file, "Write every relayed event as a JSON line to this file");
  remote->add_option("--events-file", o->events_file)->group("");  // the old spelling of --json-file
  remote->require_subcommand(1);
  auto* perf = remote->add_subcommand("perf", "nccl-tests style sweep, as `ringmaster-cli perf`");
  add_perf_options(perf, o->perf);
  perf->add_option("--engine", o->engine,
                   "ringmaster; nccl: the same sweep through NCCL on each agent's GPUs (ringmaster-nccl-perf, "
                   "float sums; its rows come back as \"NCCL <version>\"); both: Ringmaster, then NCCL, and "
                   "their busbw size by size")
      ->capture_default_str();
  perf->add_flag("--allow-mixed-nodes", o->allow_mixed_nodes,
                 "Launch although the agents' nodes load different software or give their ranks different NCCL_* "
                 "settings (refused otherwise, naming the nodes and the difference)");
  auto* inventory = remote->add_subcommand("inventory", "Print each agent's inventory as a JSON line");
  auto* fault = remote->add_subcommand(
      "fault", "Inject a fault on every agent (needs --allow-fault-injection there; docs/protocol.md)");
  fault->add_option("kind", o->kind, "drop_ports, drop_address, delay, loss, rate, shm_size, limit or memory_limit")
      ->required()
      ->check(
          CLI::IsMember({"drop_ports", "drop_address", "delay", "loss", "rate", "shm_size", "limit", "memory_limit"}));
  fault->add_option("--ports", o->ports, "drop_ports: PORT or LOW-HIGH");
  fault->add_option("--except", o->except, "drop_ports: ports left open, comma-separated");
  fault->add_flag("--skip-loopback", o->skip_loopback, "drop_ports: traffic within the host passes");
  fault->add_option("--address", o->address, "drop_address: the peer's IP");
  fault->add_option("--direction", o->direction, "in, out or both")->capture_default_str();
  fault->add_option("--interface", o->interface, "delay, loss, rate: the network device");
  fault->add_option(
      "--percent", o->percent,
      "loss: the share of packets lost, 0-100 (of what the interface sends; with --direction in, of what it receives)");
  fault->add_option("--ms", o->ms, "delay: milliseconds");
  fault->add_option("--mbit", o->mbit, "rate: Mbit/s");
  fault->add_option("--to", o->to, "rate: only what the interface sends to this address (one slow link)");
  fault->add_option("--bytes", o->bytes,
                    "shm_size: the size /dev/shm shrinks to; memory_limit: the bytes ranks may use");
  fault->add_option("--resource", o->resource, "limit: nofile or memlock");
  fault->add_option("--value", o->limit_value, "limit: descriptors (nofile) or bytes (memlock) ranks get");
  auto* clear = remote->add_subcommand("fault-clear", "Revert faults on every agent");
  clear->add_option("--id", o->fault_id, "Only this fault (default: all)");
  auto watch_options = std::make_shared<RemoteWatchOptions>();
  auto* watch = remote->add_subcommand(
      "watch",
      "Watch a job this tool did not start on the agents' nodes (`watch` through each agent, as the job's user)");
  add_remote_watch_options(*watch, *watch_options);
  return [=]() -> int {
    if (watch->parsed()) return remote_watch(o->agents, *watch_options);
    if (inventory->parsed()) return each_agent(*o, {{"type", "inventory"}});
    if (fault->parsed()) {
      // Checked here, before any agent is asked: an option the kind does
      // not take is refused by name.
      const bool drop = o->kind == "drop_ports" || o->kind == "drop_address";
      json spec = {{"kind", o->kind}};
      if (drop || !fault->get_option("--direction")->empty()) spec["direction"] = o->direction;
      if (!fault->get_option("--ports")->empty()) spec["ports"] = o->ports;
      if (!fault->get_option("--except")->empty()) spec["except"] = o->except;
      if (o->skip_loopback) spec["skip_loopback"] = true;
      if (!fault->get_option("--address")->empty()) spec["address"] = o->address;
      if (!fault->get_option("--interface")->empty()) spec["interface"] = o->interface;
      if (!fault->get_option("--ms")->empty()) spec["ms"] = o->ms;
      if (!fault->get_option("--mbit")->empty()) spec["mbit"] = o->mbit;
      if (!fault->get_option("--to")->empty()) spec["to"] = o->to;
      if (!fault->get_option("--percent")->empty()) spec["percent"] = o->percent;
      if (!fault->get_option("--bytes")->empty()) spec["bytes"] = o->bytes;
      if (!fault->get_option("--resource")->empty()) spec["resource"] = o->resource;
      if (!fault->get_option("--value")->empty()) spec["value"] = o->limit_value;
      const agent::FaultSpec checked = agent::parse_fault(spec);
      std::printf("# %s\n", agent::describe(checked).c_str());
      return each_agent(*o, {{"type", "fault"}, {"fault", agent::to_json(checked)}});
    }
    if (clear->parsed()) {
      json request = {{"type", "fault_clear"}};
      if (o->fault_id > 0) request["fault_id"] = o->fault_id;
      return each_agent(*o, request);
    }
    return run_remote(*o);
  };
}

}  // namespace ringmaster::cli
