// ringmaster-agent's server: the control port, authentication, inventory,
// runs of ranks as child processes, and the relay of their telemetry.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringmaster/agent/protocol.h"

namespace ringmaster::agent {

struct AgentOptions {
  std::string listen = "127.0.0.1:29600";  // ADDR:PORT; port 0 picks a free one
  std::string token;                       // empty: STATE_DIR/agent.token, made at first start; every role
  std::vector<RoleToken> role_tokens;      // more tokens, each with its roles (--role-tokens)
  std::string topology_file;               // declared topology; empty: hwloc discovery
  std::string cli_path;                    // the ringmaster-cli that runs ranks
  std::string metrics_listen;              // ADDR:PORT for Prometheus GET /metrics; empty: off
  // Where the agent keeps its state: runs/<run_id>/ holds what a run's
  // file-naming variables (NCCL_DEBUG_FILE, ...) name. Empty: the default
  // (default_state_dir()).
  std::string state_dir;
  // Who ranks run as when the agent is root: empty means `nobody`; "root"
  // must be said. An agent that is not root runs them as its own user.
  std::string rank_user;
  // When ranks switch user (an agent running as root, a rank user other
  // than root): each run takes a uid of its own from LOW-HIGH, with the
  // rank user's groups, so that no run can write another's directory.
  // uids with a user in the password database, or owning a process, are
  // passed over. Empty: every run as the rank user itself.
  std::string rank_uids = "61000-61183";
  int max_ranks = 256;  // ranks running on this agent at once, over all runs
  int max_runs = 16;    // runs at once
  // Authenticated control connections at once. Those whose token can only
  // read hold at most three quarters of them; past the cap a client that
  // may run or inject faults takes the place of the read-only connection
  // heard from least recently, so dashboards cannot lock out a launcher or
  // the administrator. Clients still authenticating have as many places
  // again, apart.
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_address = 64;     // unauthenticated ones from one client address
  std::size_t max_client_queue_bytes = 64u << 20;   // unsent to one client; past it the client is dropped
  std::size_t max_queued_bytes_total = 256u << 20;  // unsent to all clients; the one that passes it is dropped
  bool allow_fault_injection = false;               // fault / fault_clear (docs/protocol.md)
  // LOW-HIGH: the ports preflight_listen may make the agent listen on
  // (MASTER_PORT, the sampled classes, a port_range), unprivileged only.
  std::string preflight_ports = "1024-65535";
  std::string tls_cert, tls_key;  // PEM files: serve the control port over TLS
  // Serve TLS with a certificate the agent makes for itself on its first
  // start (STATE_DIR/tls/agent.crt; clients check it with --tls-ca).
  bool tls_self_signed = false;
  // Plain TCP beyond loopback is refused unless this says the network is
  // private: without TLS the token's proof is bound to no session.
  bool allow_plaintext = false;
  // PEM CA: under TLS, every client must present a certificate it signed
  // (mutual TLS), on top of the token. Empty: no client certificates.
  std::string tls_client_ca;
  std::chrono::milliseconds heartbeat{1000};
  std::chrono::milliseconds client_silence_limit{10000};
  std::chrono::milliseconds auth_deadline{5000};  // a client that has not authenticated by then is dropped
  std::chrono::milliseconds cancel_grace{2000};   // SIGTERM, then SIGKILL after this
};

// Reverts the faults that agents no longer running left behind (their
// nftables tables, the qdiscs STATE_DIR/faults.json records) and returns
// what it removed, one line each: `ringmaster-agent --clear-faults`, for
// systemd's ExecStopPost. An agent does the same when it starts.
std::vector<std::string> clear_faults_left_behind(const std::string& state_dir);

class AgentServer {
 public:
  // Makes the state directory (and the token, when none is given), binds
  // the control port and reads the topology. Throws Error(config) for a
  // state directory or token file it cannot use, a bad topology file or a
  // missing ringmaster-cli; Error(network) when the port cannot be bound.
  explicit AgentServer(AgentOptions options);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  std::uint16_t port() const noexcept;
  std::uint16_t metrics_port() const noexcept;  // 0 when metrics are off
  // Serves until a client sends shutdown, stop() is called, or SIGTERM /
  // SIGINT arrives (when handle_signals). Children still running are
  // killed before it returns.
  void run(bool handle_signals = false);
  // From any thread.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster::agent
