// `ringmaster-cli certify --agents h1:p,h2:p,...`: the bring-up checks in
// order (nodes alike, preflight, every link, collective sweeps) with a
// verdict per node and per link (exit 1 when any is isolated).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string_view>

#include <signal.h>
#include <unistd.h>

#include "agent_set.h"
#include "commands.h"
#include "ringmaster/agent/certify.h"
#include "ringmaster/agent/client.h"
#include "ringmaster/agent/command.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/envelope.h"

namespace ringmaster::cli {
namespace {

using nlohmann::json;

struct CertifyCommandOptions {
  AgentSet agents;
  agent::CertifyOptions certify;
  std::vector<std::string> env;
  std::vector<std::string> collectives;
  bool json_out = false;
  std::string json_file;
  std::string html_file;
  std::string state_file;
  std::string history;  // empty: the default file; "off": none
};

void check_options(CertifyCommandOptions& o) {
  read_env_options(o.env, o.certify.env);
  if (!o.collectives.empty()) {
    o.certify.collectives.clear();
    for (const auto& name : o.collectives) {
      const auto c = agent::perf_collective_named(name);
      if (!c) throw Error(ErrorCategory::config, "--collectives: no collective named " + name);
      o.certify.collectives.push_back(*c);
    }
  }
  if (o.certify.np_per_agent < 1) throw Error(ErrorCategory::config, "--np-per-agent must be at least 1");
  if (o.certify.iters < 1) throw Error(ErrorCategory::config, "--iters must be at least 1");
  const auto min = agent::parse_request_size(o.certify.min_bytes), max = agent::parse_request_size(o.certify.max_bytes);
  if (min == 0 || min > max) throw Error(ErrorCategory::config, "--min-bytes must be above 0 and at most --max-bytes");
  (void)agent::parse_request_size(o.certify.linkcheck.bytes);
}

// --state FILE: the report so far after each step, with the agents it is
// of; a certification stopped half way (^C, a lost agent, a machine
// restarted) resumes from it, running only the steps it did not finish.
// Once it ran to its end, the next one starts afresh.
void keep_state(CertifyCommandOptions& o, const SubscribedAgents& agents) {
  std::vector<std::string> addresses;
  for (const auto& n : agents.nodes)
    addresses.push_back(n.address);
  o.certify.resume = agent::load_unfinished_certification(o.state_file, addresses);
  if (o.certify.resume) {
    const std::size_t done = o.certify.resume->steps.size();
    std::fprintf(stderr, "# resuming the certification in %s: %zu step(s) finished before are kept\n",
                 o.state_file.c_str(), done);
  }
  o.certify.on_progress = [path = o.state_file, addresses](const agent::CertifyReport& so_far) {
    agent::save_certification_state(path, addresses, so_far);
  };
}

// Where the certification is kept: the history the console reads (an
// SQLite file by default, a team's PostgreSQL server with --history
// postgresql://...), through ringmaster-history (the console's package:
// Qt SQL stays out of the agent's). Opened before anything runs, so a
// history that cannot be written is said at once rather than after the
// checks. The location reaches the program in its environment, so a URL's
// password is not in `ps`.
class CertifyHistory {
 public:
  explicit CertifyHistory(const std::string& where) {
    off_ = where == "off";
    if (off_) return;
    const char* from_env = std::getenv("RINGMASTER_HISTORY");
    asked_ = !where.empty() || (from_env && *from_env);
    location_ = !where.empty() ? where : from_env ? from_env : "";
    program_ = find_program();
    if (program_.empty()) {
      if (asked_)
        throw Error(ErrorCategory::config,
                    "--history: ringmaster-history is not installed beside ringmaster-cli nor on PATH (the "
                    "ringmaster-console package)");
      return;
    }
    std::string output;
    if (run({"check"}, "", output) != 0) {
      const auto at = output.find("ringmaster-history: ");
      throw Error(ErrorCategory::config,
                  "--history " + trimmed(at == std::string::npos ? output : output.substr(at + 20)));
    }
  }

  // Keeps the report with the agents it ran through; false (said on
  // stderr) when it could not.
  bool keep(const nlohmann::json& report, const std::string& instance, const std::vector<Endpoint>& agents) {
    if (program_.empty()) {
      if (!asked_ && location_.empty() && !off_)
        std::fprintf(stderr, "# not kept in a history: ringmaster-history is not installed (ringmaster-console)\n");
      return true;
    }
    std::string list;
    for (const auto& e : agents)
      list += fmt::format("{}{}:{}", list.empty() ? "" : ",", e.host, e.port);
    std::string output;
    const int code = run({"keep", "--instance", instance, "--agents", list}, report.dump(), output);
    std::fprintf(stderr, "%s%s\n", code == 0 ? "# " : "certify: history: ", trimmed(output).c_str());
    return code == 0;
  }

 private:
  static std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
      s.pop_back();
    return s;
  }

  static std::string find_program() {
    std::error_code ec;
    const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "ringmaster-history";
    if (!ec && ::access(beside.c_str(), X_OK) == 0) return beside.string();
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "";
    for (std::size_t at = 0; at <= dirs.size();) {
      const auto end = std::min(dirs.find(':', at), dirs.size());
      const std::string candidate = dirs.substr(at, end - at) + "/ringmaster-history";
      if (end > at && ::access(candidate.c_str(), X_OK) == 0) return candidate;
      at = end + 1;
    }
    return {};
  }

  // The program with `args`, `input` on its stdin, the location in its
  // environment; its exit code, stdout and stderr together in `output`.
  int run(const std::vector<std::string>& args, const std::string& input, std::string& output) const {
    std::vector<std::string> argv{program_};
    argv.insert(argv.end(), args.begin(), args.end());
    std::map<std::string, std::string> env;
    if (!location_.empty()) env["RINGMASTER_HISTORY"] = location_;
    // A program that stopped before reading (no history to open) must not
    // take this one down with SIGPIPE.
    struct sigaction ignore {
    }, before{};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &before);
    auto [code, said] = agent::run_command(argv, input, env);
    ::sigaction(SIGPIPE, &before, nullptr);
    output = std::move(said);
    return code;
  }

  std::string location_, program_;
  bool asked_ = false, off_ = false;
};

int run_certify_command(CertifyCommandOptions& o) {
  check_options(o);
  if (o.certify.gate_gbs < 0) throw Error(ErrorCategory::config, "--gate must be a busbw in GB/s above 0");
  const std::vector<Endpoint> endpoints = endpoints_of(o.agents, "certify");
  const std::size_t nodes = endpoints.size();
  // Refused before anything runs: an unknown type, a topology file that
  // declares no GPU or not the type named with it, a gate without either.
  const auto declared = agent::certify_declared_cluster(o.certify, static_cast<int>(nodes));
  if (!declared.declared_by.empty()) std::fprintf(stderr, "# envelope: declared by %s\n", declared.declared_by.c_str());
  if (declared.name.empty() && o.certify.gate_gbs > 0) {
    throw Error(ErrorCategory::config,
                "--gate needs --instance or --topology: a gate is checked against the declared cluster's envelope");
  }
  if (const std::string refused = agent::certify_gate_refusal(o.certify, static_cast<int>(nodes)); !refused.empty())
    throw Error(ErrorCategory::config, "--gate: " + refused);
  CertifyHistory history(o.history);
  SubscribedAgents agents = subscribe_agents(o.agents, "certify", 2);
  // Progress on stderr, a line as each step begins and ends.
  o.certify.on_step = [](const agent::CertifyStep& s, bool ended) {
    if (!ended) {
      std::fprintf(stderr, "# %s: %s over %zu node(s) ...\n", s.name.c_str(), s.title.c_str(), s.nodes.size());
    } else {
      std::fprintf(stderr, "# %s: %s (%s, %.1f s)\n", s.name.c_str(), s.summary.c_str(), agent::name_of(s.state),
                   s.seconds);
    }
  };
  if (!o.state_file.empty()) keep_state(o, agents);
  const agent::CertifyReport report = agent::certify(
      agents.nodes, [&agents](std::chrono::steady_clock::time_point deadline) { return agents.next(deadline); },
      o.certify);
  const nlohmann::json document = agent::to_json(report);
  if (!o.state_file.empty()) {
    std::vector<std::string> addresses;
    for (const auto& n : report.nodes)
      addresses.push_back(n.address);
    agent::save_certification_state(o.state_file, addresses, report);
  }
  print_report(document, agent::render_certify(report), o.json_out, o.json_file);
  if (!o.html_file.empty()) {
    std::ofstream html(o.html_file);
    html << agent::render_certify_html(document);
    if (!html.flush()) throw Error(ErrorCategory::config, "--report " + o.html_file + ": cannot write it");
  }
  const bool kept = history.keep(document, declared.name, endpoints);
  return report.exit_code() == 0 && kept ? exit_code::ok : exit_code::failed;
}

}  // namespace

Runner add_certify_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "certify",
      "Bring-up checks in order over the agents' nodes (nodes alike, preflight, every link, collective sweeps) "
      "with a verdict per node and link: PASS, MONITOR or ISOLATE (exit 1 when any is isolated)");
  auto o = std::make_shared<CertifyCommandOptions>();
  add_agent_set_options(*cmd, o->agents);
  cmd->add_option("--np-per-agent", o->certify.np_per_agent, "Ranks each agent runs in the sweeps")
      ->capture_default_str();
  cmd->add_option("--env", o->env, "NAME=VALUE for the ranks (e.g. NCCL_SHM_DISABLE=1, NCCL_NET=OFI); repeatable");
  cmd->add_option("--collectives", o->collectives,
                  "The sweeps' collectives (default: all_reduce all_gather "
                  "reduce_scatter all_to_all)")
      ->delimiter(',');
  cmd->add_option("--min-bytes", o->certify.min_bytes, "Each sweep's smallest size")->capture_default_str();
  cmd->add_option("--max-bytes", o->certify.max_bytes, "Each sweep's largest size")->capture_default_str();
  cmd->add_option("-n,--iters", o->certify.iters, "Timed iterations per size")->capture_default_str();
  cmd->add_option("--link-bytes", o->certify.linkcheck.bytes, "Bytes per transfer in the link check")
      ->capture_default_str();
  cmd->add_option("--link-iters", o->certify.linkcheck.iters, "Timed transfers per link")->capture_default_str();
  cmd->add_option("--master-port", o->certify.preflight.master_port, "MASTER_PORT the preflight checks")
      ->capture_default_str();
  cmd->add_option("--sweep-timeout", o->certify.sweep_timeout_s, "Seconds one collective's sweep may take")
      ->capture_default_str();
  cmd->add_option("--instance", o->certify.instance,
                  "The nodes' instance type (p5.48xlarge, p4d, ...; `simulate --list`): each sweep is compared with "
                  "what such a cluster should reach");
  cmd->add_option("--topology", o->certify.topology_file,
                  "A node's topology file (NCCL's or hwloc's XML) declaring the cluster instead: recognised as an "
                  "instance type by its GPUs and NICs (AWS's files are), else its own links predicted; with "
                  "--instance, checked to have that type's GPUs and NICs");
  cmd->add_flag("!--no-bisect", o->certify.bisect,
                "Do not bisect an all_reduce sweep that falls under the envelope (by default the job's own ranks "
                "re-form communicators over halves of the nodes and name the slow node or link)");
  cmd->add_option("--tolerance", o->certify.tolerance, "How far under the envelope's prediction a sweep may fall")
      ->capture_default_str();
  cmd->add_option("--gate", o->certify.gate_gbs,
                  "all_reduce busbw in GB/s the sweep must reach at --max-bytes (refused when above what the "
                  "instance's envelope allows)");
  cmd->add_flag("--json", o->json_out, "Print the report as one JSON object instead of the text");
  cmd->add_option("--json-file", o->json_file, "Also write the report as JSON to this file");
  cmd->add_option("--state", o->state_file,
                  "Keep the certification's progress in this file after each step; a certification stopped half "
                  "way resumes from it");
  cmd->add_option("--history", o->history,
                  "Keep the certification in this history: an SQLite file or postgresql://user:password@host:port/db "
                  "(a team's server); 'off' keeps nothing (default: $RINGMASTER_HISTORY, else the console's "
                  "history.sqlite; through ringmaster-history, the console's package)");
  cmd->add_option("--report", o->html_file, "Also write the report as one self-contained HTML page to this file");
  return [o] { return run_certify_command(*o); };
}

}  // namespace ringmaster::cli
