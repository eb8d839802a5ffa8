// ringmaster-agent: the daemon on every node. Serves the control protocol
// (docs/protocol.md) and runs ranks as child processes.
#include <signal.h>

#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <string_view>

#include "completion_cli11.h"
#include "ringmaster/agent/log.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/server.h"
#include "ringmaster/status.h"
#include "ringmaster/version.h"

// libfabric's psm and psm2 providers load PSM, which puts a backtrace
// handler on SIGTERM, SIGINT and the fault signals that calls exit()
// inside the signal (seen once a preflight had loaded it): the agent's
// own SIGTERM handling (stop the runs, revert the faults) was bypassed,
// and a SIGTERM that came while the agent was inside malloc deadlocked
// in the exit handlers' free(), a hang instead of a stop. The ranks,
// which inherit this environment, keep their own handlers likewise.
static void keep_psm_signal_handlers_off() {
  ::setenv("IPATH_NO_BACKTRACE", "1", 0);
  ::setenv("HFI_NO_BACKTRACE", "1", 0);
}

int main(int argc, char** argv) {
  // A reader of the agent's output that goes away (a closed terminal, a
  // log collector restarted) costs the write, not the agent: writes then
  // fail with EPIPE. Ranks get SIGPIPE back at their start (spawn.cpp).
  ::signal(SIGPIPE, SIG_IGN);
  keep_psm_signal_handlers_off();
  CLI::App app{"ringmaster-agent: runs Ringmaster ranks on this node for the console and ringmaster-cli remote"};
  app.name("ringmaster-agent");
  ringmaster::agent::AgentOptions options;
  std::string token_file;
  bool print_port = false;
  app.add_option("--listen", options.listen, "ADDR:PORT to serve (port 0: any free port)")->capture_default_str();
  std::string role_tokens_file;
  app.add_option("--role-tokens", role_tokens_file,
                 "File of more tokens, one a line as ROLES TOKEN (ROLES: read, run, fault, comma-separated), mode 600");
  app.add_option("--token-file", token_file, "File whose first line is the shared token (required beyond loopback)");
  app.add_option("--topology-file", options.topology_file,
                 "NCCL or hwloc XML to report instead of discovering this machine (shown as declared); this "
                 "agent's ranks read it as NCCL_TOPO_FILE and are a node of their own (NCCL_HOSTID)");
  app.add_option("--cli", options.cli_path, "ringmaster-cli that runs ranks (default: next to this binary)");
  app.add_flag("--allow-fault-injection", options.allow_fault_injection,
               "Accept fault/fault_clear: nftables drops and tc delay/rate in this network namespace");
  app.add_option("--tls-cert", options.tls_cert, "PEM certificate (chain): serve the control port over TLS");
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert");
  app.add_flag("--tls-self-signed", options.tls_self_signed,
               "Serve TLS with a certificate this agent makes on its first start (STATE_DIR/tls/agent.crt, for "
               "this host's names and addresses); clients check it with --tls-ca and that file");
  app.add_flag("--allow-plaintext", options.allow_plaintext,
               "Serve plain TCP beyond loopback (refused without it): on a private network only, since the "
               "token's proof is then bound to no session");
  app.add_option("--tls-client-ca", options.tls_client_ca,
                 "PEM CA: clients must also present a certificate it signed (mutual TLS; needs --tls-cert)");
  app.add_option("--preflight-ports", options.preflight_ports,
                 "LOW-HIGH: the only ports a preflight may make this agent listen on (MASTER_PORT, the sampled "
                 "classes, a port range); within 1024-65535")
      ->capture_default_str();
  app.add_option("--metrics", options.metrics_listen, "ADDR:PORT serving Prometheus GET /metrics (default: off)");
  app.add_option("--state-dir", options.state_dir,
                 "Directory of the agent's state, made private to its user; runs/<run_id>/ holds the files a run's "
                 "variables name (default: /var/lib/ringmaster for root, else ~/.local/state/ringmaster)");
  app.add_option("--rank-user", options.rank_user,
                 "User the ranks run as when the agent is root, with that user's groups (default: nobody; root "
                 "must be named); an agent that is not root runs them as its own user");
  app.add_option("--rank-uids", options.rank_uids,
                 "LOW-HIGH: each run's ranks take a uid of their own from this range (with --rank-user's groups), "
                 "so no run can write another's directory; uids that have a user or a process are passed over. "
                 "Empty: every run as --rank-user")
      ->capture_default_str();
  app.add_option("--max-ranks", options.max_ranks, "Ranks running at once, over all runs")->capture_default_str();
  app.add_option("--max-runs", options.max_runs, "Runs at once")->capture_default_str();
  app.add_option("--max-client-queue", options.max_client_queue_bytes,
                 "Bytes waiting to be sent to one client before it is dropped as too slow")
      ->capture_default_str();
  app.add_option("--max-queued-total", options.max_queued_bytes_total,
                 "Bytes waiting to be sent to all clients together; the client whose message would pass it is "
                 "dropped")
      ->capture_default_str();
  app.add_option("--max-connections", options.max_connections,
                 "Authenticated control connections at once; read-only tokens hold at most three quarters of them")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 20));
  std::string log_level = "info";
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn, error or off (timestamps unless journald takes the output)")
      ->capture_default_str();
  bool clear_faults = false;
  app.add_flag("--clear-faults", clear_faults,
               "Revert the faults that stopped agents left (nftables tables, recorded qdiscs) and exit (for "
               "systemd's ExecStopPost)");
  app.add_flag("--print-port", print_port,
               "Print the bound control port on stdout once listening (and then the metrics port, if any)");
  app.set_version_flag("--version", "ringmaster-agent " RINGMASTER_VERSION_STRING);
  if (argc == 2 && std::string_view(argv[1]) == "--bash-completion") {  // for the build; not in --help
    std::fputs(ringmaster::app::bash_completion_script(app, "ringmaster-agent").c_str(), stdout);
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help, --version; else a usage error
  }
  // A daemon serving many clients: descriptors up to the hard limit (the
  // connection caps bound what clients may hold).
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  try {
    ringmaster::agent::log::setup(ringmaster::agent::log::parse_level(log_level));
    if (clear_faults) {
      const auto removed = ringmaster::agent::clear_faults_left_behind(options.state_dir);
      for (const auto& what : removed)
        ringmaster::agent::log::info("removed {}", what);
      if (removed.empty()) ringmaster::agent::log::info("no fault left behind");
      return 0;
    }
    if (!token_file.empty()) options.token = ringmaster::agent::read_token_file(token_file);
    if (!role_tokens_file.empty()) options.role_tokens = ringmaster::agent::read_role_tokens_file(role_tokens_file);
    if (options.cli_path.empty()) {
      options.cli_path = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "ringmaster-cli").string();
    }
    ringmaster::agent::AgentServer server(options);
    // The start-up line first: whoever has read the port has the line too.
    ringmaster::agent::log::info("ringmaster-agent {} listening on port {} (pid {})", ringmaster::agent::kAgentVersion,
                                 server.port(), ::getpid());
    if (print_port) {
      std::printf("%u\n", static_cast<unsigned>(server.port()));
      if (server.metrics_port() != 0) std::printf("%u\n", static_cast<unsigned>(server.metrics_port()));
      std::fflush(stdout);
    }
    server.run(/*handle_signals=*/true);
  } catch (const ringmaster::Error& e) {
    ringmaster::agent::log::error("{}", e.what());
    return e.category() == ringmaster::ErrorCategory::config ? 2 : 1;
  }
  return 0;
}
