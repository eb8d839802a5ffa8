// A job Ringmaster did not launch, seen from outside through /proc: its
// ranks (processes with RANK in their environment, chosen by PID,
// TORCHELASTIC_RUN_ID or MASTER_PORT) and where each one's rendezvous
// stands by its sockets toward MASTER_PORT: hosting the store (a listener
// on it, with its clients counted), connected to it, a connect whose SYN
// goes unanswered (SYN_SENT, with the kernel's retransmissions), or no
// connection at all. The stage names and hints are the bootstrap's, so a
// torchrun job stuck at its store connect reads as Ringmaster's own ranks
// do. Reading another user's process needs the rights to its /proc files
// (the same user, or CAP_SYS_PTRACE); what cannot be read is said.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ringmaster/stage.h"

namespace ringmaster {

struct JobSelector {
  std::vector<int> pids;  // these processes (each must have RANK set)
  std::string run_id;     // or every process with this TORCHELASTIC_RUN_ID
  int master_port = 0;    // or every process with this MASTER_PORT
};

// One socket of a watched process, as the kernel lists it.
struct WatchedSocket {
  std::string local, remote;  // "127.0.0.1:29500"
  int local_port = 0, remote_port = 0;
  std::string state;  // "SYN_SENT", "ESTABLISHED", "LISTEN", ...
  int retransmits = 0;
};

struct WatchedRank {
  int pid = 0;
  std::string command;  // the process's command line, spaces between its words
  int rank = -1, world_size = -1, local_rank = -1;
  std::string master_addr, run_id;
  int master_port = 0;
  Stage stage = Stage::store_connect;
  // "hosting" (listens on MASTER_PORT), "connected", "unanswered" (a SYN
  // with no answer), or "not_connected" (no socket toward MASTER_PORT now:
  // refused attempts leave none); read_resets() turns the last into
  // "refused" or "rejected" where the namespace counted reset connects
  std::string outcome;
  std::string remote;  // the store address its connect goes to, when one is seen
  int syn_retransmits = 0;
  int store_clients = 0;  // hosting: connections accepted on MASTER_PORT
  std::string detail;     // one line: what the sockets say
  std::string hint;       // the bootstrap's hint for that stage and outcome, or empty
  // The job's NCCL_DEBUG_FILE for this process, NCCL's %h (host name) and
  // %p (PID) filled in; empty when it has none.
  std::string nccl_debug_file;
  std::string nccl_ras_addr;  // its NCCL_RAS_ADDR; empty when unset (NCCL's default)
};

// The processes `selector` names (PIDs as given; else a scan of /proc),
// in PID order. Only processes whose environment can be read and has RANK.
std::vector<int> job_processes(const JobSelector& selector);

// One process's rendezvous, read from /proc/PID (environ, cmdline, fd,
// net/tcp and net/tcp6 of its network namespace). Nothing, and `error`
// says why, when the process is gone or its files cannot be read.
std::optional<WatchedRank> watch_process(int pid, std::string* error = nullptr);

// The reading itself, from what /proc gave: the process's environment,
// the TCP sockets of its network namespace and the inodes of its own
// socket descriptors. For tests.
WatchedRank read_rendezvous(int pid, const std::map<std::string, std::string>& environment,
                            const std::vector<WatchedSocket>& own_sockets);

// Connects that have failed in the process's network namespace so far:
// the kernel's TCP AttemptFails (/proc/PID/net/snmp), which counts a
// connect answered by a reset. Nothing when it cannot be read.
std::optional<std::uint64_t> failed_connects(int pid);

// One look's ranks read together with the connects that failed in each
// one's network namespace in the last seconds (by pid): a rank with no
// connection toward MASTER_PORT whose namespace counted failures is
// "refused" (answered by a reset: nothing listens, or a rule rejects),
// and "rejected" when a rank of the same job is seen hosting the store on
// that port: it listens, so a rule resets the connects; that rank is
// named.
void read_resets(std::vector<WatchedRank>& ranks, const std::map<int, std::uint64_t>& failed_recently);

// "rank 1 (pid 4242) STORE_CONNECT unanswered: ..." on one line.
std::string describe(const WatchedRank& rank);

}  // namespace ringmaster
