// `ringmaster-cli linkcheck --agents h1:p,h2:p,...`: the bandwidth of every
// link between the agents' nodes, both directions, pair by pair in rounds
// of disjoint pairs; prints the matrix and names a slow node or link
// (exit 1 when one is slow or a pair could not be measured).

#include "agent_set.h"
#include "commands.h"
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/linkcheck.h"
#include "ringmaster/status.h"

namespace ringmaster::cli {
namespace {

using nlohmann::json;

struct LinkcheckCommandOptions {
  AgentSet agents;
  agent::LinkcheckOptions linkcheck;
  std::vector<std::string> env;
  int per_pair_s = 60;
  bool json_out = false;
  std::string json_file;
};

int run_linkcheck_command(LinkcheckCommandOptions& o) {
  read_env_options(o.env, o.linkcheck.env);
  if (o.linkcheck.iters < 1) throw Error(ErrorCategory::config, "--iters must be at least 1");
  if (o.per_pair_s < 5) throw Error(ErrorCategory::config, "--pair-timeout must be at least 5 s");
  o.linkcheck.per_pair = std::chrono::seconds(o.per_pair_s);
  SubscribedAgents agents = subscribe_agents(o.agents, "linkcheck", 2);
  const auto report = agent::run_linkcheck(
      agents.nodes, [&agents](std::chrono::steady_clock::time_point deadline) { return agents.next(deadline); },
      o.linkcheck);
  const auto findings = agent::diagnose_links(report);
  print_report(agent::to_json(report, findings), agent::render_linkcheck(report, findings), o.json_out, o.json_file);
  return findings.empty() ? exit_code::ok : exit_code::failed;
}

}  // namespace

Runner add_linkcheck_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("linkcheck",
                                 "Bandwidth of every link between the agents' nodes, both directions, pair by pair "
                                 "in rounds of disjoint pairs; names a slow node or link (exit 1 when one is)");
  auto o = std::make_shared<LinkcheckCommandOptions>();
  add_agent_set_options(*cmd, o->agents);
  cmd->add_option("-b,--bytes", o->linkcheck.bytes, "Bytes each rank sends per transfer")->capture_default_str();
  cmd->add_option("-n,--iters", o->linkcheck.iters, "Timed transfers per pair")->capture_default_str();
  cmd->add_option("--env", o->env, "NAME=VALUE for the ranks (e.g. NCCL_SHM_DISABLE=1, NCCL_NET=OFI); repeatable");
  cmd->add_option("--pair-timeout", o->per_pair_s, "Seconds a round of pairs may take")->capture_default_str();
  cmd->add_flag("--json", o->json_out, "Print the report as one JSON object instead of the text");
  cmd->add_option("--json-file", o->json_file, "Also write the report as JSON to this file");
  return [o] { return run_linkcheck_command(*o); };
}

}  // namespace ringmaster::cli
