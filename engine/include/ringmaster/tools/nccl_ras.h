// A client of NCCL's RAS port (NCCL 2.24 and later; docs of NCCL's user
// guide, "RAS"): every NCCL process runs a RAS thread, and the one that
// listens on NCCL_RAS_ADDR (localhost:28028 by default) answers a text
// protocol: "CLIENT PROTOCOL 2" / "SERVER PROTOCOL 2", "TIMEOUT <s>",
// "SET FORMAT json" (2.28.7 and later), then "STATUS" or "VERBOSE STATUS",
// after which it writes the job's status and closes. The status is read
// in both of NCCL's forms: the JSON dump of every communicator's ranks,
// and the text report's Errors and Warnings sections.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster {

struct RasRank {
  int rank = -1;
  std::string host;
  long long pid = 0;
  int cuda_dev = -1;
  bool missing = false;       // listed under missing_ranks: RAS could not get its data
  bool unresponsive = false;  // missing because RAS could not reach it
  bool dead = false;          // considered dead (unreachable for 60 s)
  int init_state = 0;         // 0 initialised, 7 still initialising, else an error
  int async_error = 0;
  std::map<std::string, long long> collective_counts;  // "AllReduce" -> operations launched
};

struct RasCommunicator {
  std::string hash;
  int size = 0;
  std::vector<RasRank> ranks;  // those that answered, then the missing ones
};

struct RasStatus {
  std::string format;  // "json" or "text"
  std::string nccl_version;
  std::vector<RasCommunicator> communicators;
  double collection_time_s = 0;
  int timeouts = 0;
  // The text report's own Errors and Warnings sections, a block each
  // ("#0-0 (cf264af53edbe986) INCOMPLETE: Missing communicator data from 1
  // rank; The missing rank: 21").
  std::vector<std::string> errors, warnings;
  std::string error;  // why nothing could be read; empty when read
};

// NCCL's JSON status (SET FORMAT json). `error` names what was wrong.
RasStatus parse_ras_json(std::string_view text);
// NCCL's text report (STATUS, VERBOSE STATUS).
RasStatus parse_ras_text(std::string_view text);

// What the status says, one sentence each: dead and unresponsive ranks
// by rank, host, pid and GPU; per communicator and collective the ranks
// behind the furthest ("communicator 0xae94...: ranks 3, 7 have launched
// 6649 AllReduce, the others 6650"); a rank whose init failed or that has
// an asynchronous error; the text report's errors and warnings. Empty
// when every rank answered and agrees.
std::vector<std::string> read_ras(const RasStatus& status);

// Asks the RAS port at host:port for the job's status: JSON where NCCL
// takes it, else text. A status with `error` set when nothing could be
// read (nothing listening: RAS off, NCCL_RAS_ENABLE=0 or no NCCL process
// here; another protocol; the deadline).
RasStatus query_ras(const std::string& host, int port, std::chrono::milliseconds timeout);

// NCCL_RAS_ADDR's host and port ("host:port", "[v6]:port"); NCCL's
// default, localhost:28028, for an empty one.
std::pair<std::string, int> ras_address(std::string_view nccl_ras_addr);

}  // namespace ringmaster
