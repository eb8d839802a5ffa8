// PyTorch's Flight Recorder of a job Ringmaster did not start, read
// through torch's debug server (torch.distributed.debug.start_debug_server
// in the job, TORCH_FR_BUFFER_SIZE set): each rank publishes its worker
// server's address in the job's store as "/debug_server/rank<N>" (the key
// torch's client sends for "debug_server/rank<N>"), and
// answers POST /handler/fr_trace_json with its recorder (format 2.10:
// entries with collective_seq_id, profiling_name and state, and per
// process group the last collective enqueued, started and completed).
// Read together, the ranks give the hang's wavefront: the collective the
// furthest ranks entered and the ranks that have not called it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ringmaster {

struct FlightRecorderCall {
  std::int64_t seq = -1;      // collective_seq_id within its process group
  std::string process_group;  // "0 (default_pg)"
  std::string name;           // "gloo:all_reduce", "nccl:all_reduce"
  std::string state;          // "scheduled", "started", "completed"
};

struct FlightRecorderGroup {
  std::string process_group;  // as in FlightRecorderCall
  std::int64_t last_enqueued = -1, last_started = -1, last_completed = -1;
};

struct FlightRecord {
  int rank = -1;
  std::string source;  // where it was read ("http://node-1:34167")
  std::string error;   // why there is no record; empty when read
  std::vector<FlightRecorderGroup> groups;
  std::vector<FlightRecorderCall> calls;
};

// One rank's fr_trace_json text. `error` names what was wrong with it.
FlightRecord parse_flight_record(int rank, const std::string& json);

// What the records say together, one sentence each: per process group,
// the ranks that have not called the collective the furthest ranks
// entered ("process group 0 (default_pg): rank 1 has not called
// gloo:all_reduce #4 (rank 0 has); its last call was gloo:all_reduce #3,
// completed"), or every rank in the same call and those that have not
// completed it. Ranks without a record are named as such, those with the
// same reason in one sentence.
std::vector<std::string> read_wavefront(const std::vector<FlightRecord>& ranks);

// Each rank's record, fetched through the job's store at
// master_addr:master_port (ranks 0..world_size-1); a rank that published
// no address, or whose server does not answer within `timeout`, gets a
// record with its error.
std::vector<FlightRecord> fetch_flight_records(const std::string& master_addr, int master_port, int world_size,
                                               std::chrono::milliseconds timeout);

}  // namespace ringmaster
