// `ringmaster-cli preflight --agents h1:p,h2:p,...`: before any job, every
// agent listens on sample ports of each class (MASTER_PORT, the ephemeral
// range, below and above it, RINGMASTER_PORT_RANGE) and probes every other
// one's; prints an N x N matrix per class, each node's facts, and the
// findings that name the likely rule or setting.
#include <algorithm>
#include <cstdlib>

#include "agent_set.h"
#include "commands.h"
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/preflight.h"
#include "ringmaster/status.h"

namespace ringmaster::cli {
namespace {

struct PreflightCommandOptions {
  AgentSet agents;
  agent::PreflightOptions preflight;
  int master_port = 0;  // 0: MASTER_PORT, else 29500
  int window_ms = 3000;
  std::string json_file;
  bool json_out = false;
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

int run_preflight_command(PreflightCommandOptions& o) {
  agent::PreflightOptions& p = o.preflight;
  if (p.master_addr.empty()) p.master_addr = env_or("MASTER_ADDR", "");
  if (p.socket_ifname.empty()) p.socket_ifname = env_or("NCCL_SOCKET_IFNAME", "");
  if (p.port_range.empty()) p.port_range = env_or("RINGMASTER_PORT_RANGE", "");
  const int master_port = o.master_port != 0 ? o.master_port : std::atoi(env_or("MASTER_PORT", "29500").c_str());
  if (master_port < 1 || master_port > 65535) {
    throw Error(ErrorCategory::config, "--master-port (or MASTER_PORT) must be in 1-65535");
  }
  if (o.window_ms < 100 || o.window_ms > agent::kPreflightMaxWindowMs) {
    throw Error(ErrorCategory::config,
                "--window-ms must be in [100, " + std::to_string(agent::kPreflightMaxWindowMs) + "]");
  }
  if (p.ports_per_class < 1 || p.ports_per_class > agent::kPreflightMaxPortsPerClass) {
    throw Error(ErrorCategory::config,
                "--ports-per-class must be in [1, " + std::to_string(agent::kPreflightMaxPortsPerClass) + "]");
  }
  p.master_port = static_cast<std::uint16_t>(master_port);
  p.window = std::chrono::milliseconds(o.window_ms);

  const auto endpoints = endpoints_of(o.agents, "preflight");
  const std::string token = token_of(o.agents);
  std::vector<std::unique_ptr<agent::AgentClient>> clients;
  std::vector<agent::PreflightAgent> agents;
  for (const auto& e : endpoints) {
    clients.push_back(agent::AgentClient::connect(client_options(o.agents, e, token)));
    agents.push_back({clients.back().get(), e.host});
  }
  const PreflightReport report = agent::run_preflight(agents, p);
  const auto findings = diagnose_preflight(report);
  print_report(agent::to_json(report, findings), render_preflight(report, findings), o.json_out, o.json_file);
  const bool problem = std::any_of(findings.begin(), findings.end(), [](const PreflightFinding& f) {
    return f.severity == PreflightFinding::Severity::problem;
  });
  return problem ? exit_code::failed : exit_code::ok;
}

}  // namespace

Runner add_preflight_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "preflight",
      "Before a job: whether the agents' nodes reach each other on every port class a job uses, and what each "
      "node lacks (an N x N matrix per port class and findings; exit 1 when a problem is found)");
  auto o = std::make_shared<PreflightCommandOptions>();
  add_agent_set_options(*cmd, o->agents);
  cmd->add_option("--master-addr", o->preflight.master_addr,
                  "MASTER_ADDR to resolve on every node (default: $MASTER_ADDR, else the first agent's host)");
  cmd->add_option("--master-port", o->master_port,
                  "MASTER_PORT to listen on and probe (default: $MASTER_PORT, else 29500)");
  cmd->add_option("--socket-ifname", o->preflight.socket_ifname,
                  "NCCL_SOCKET_IFNAME to check on every node (default: $NCCL_SOCKET_IFNAME)");
  cmd->add_option("--port-range", o->preflight.port_range,
                  "RINGMASTER_PORT_RANGE LOW-HIGH to sample too (default: $RINGMASTER_PORT_RANGE)");
  cmd->add_option("--ports-per-class", o->preflight.ports_per_class, "Ports each node listens on per range")
      ->capture_default_str();
  cmd->add_option("--window-ms", o->window_ms, "How long one connect waits for an answer before it counts as dropped")
      ->capture_default_str();
  cmd->add_flag("--json", o->json_out, "Print the report as one JSON object instead of the text");
  cmd->add_option("--json-file", o->json_file, "Also write the report as JSON to this file");
  return [o] { return run_preflight_command(*o); };
}

}  // namespace ringmaster::cli
