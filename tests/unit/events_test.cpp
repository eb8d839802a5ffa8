// The typed events of a run (ringmaster/agent/events.h): every type the
// protocol lists reads back what its producer wrote, field for field; bad
// input is refused naming the event, the object and the field; types and
// fields this build does not know pass.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "ringmaster/agent/events.h"
#include "ringmaster/agent/telemetry.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/job_watch.h"

namespace {

using nlohmann::json;
namespace ev = ringmaster::agent::events;
using namespace ringmaster;

// What each producer writes, from engine records where the rank makes the
// event from one.
std::vector<json> one_of_each() {
  std::vector<json> out;
  StageEvent stage;
  stage.stage = Stage::store_barrier;
  stage.rank = 3;
  stage.begin = std::chrono::system_clock::time_point(std::chrono::microseconds(1'796'262'001'196'033));
  stage.duration = std::chrono::nanoseconds(1'234'567);
  stage.detail = "4/4 joined";
  out.push_back(agent::to_json(stage));
  StageEvent retrying = stage;
  retrying.stage = Stage::store_connect;
  retrying.in_progress = true;
  retrying.connect_outcome = "unanswered";
  retrying.remote_address = "10.0.0.5:29500";
  retrying.attempts = 2;
  retrying.detail = "retrying STORE_CONNECT: SYN to 10.0.0.5:29500 unanswered for 3 s (2 attempts)";
  out.push_back(agent::to_json(retrying));
  StageFailure failure;
  failure.stage = Stage::store_barrier;
  failure.category = ErrorCategory::timeout;
  failure.rank = 1;
  failure.local_address = "10.0.0.6:41000";
  failure.remote_address = "10.0.0.5:29500";
  failure.errno_text = "ETIMEDOUT";
  failure.elapsed = std::chrono::milliseconds(30'000);
  failure.timeout = std::chrono::milliseconds(30'000);
  failure.world_size = 4;
  failure.joined = 3;
  failure.missing = {2};
  failure.summary = "3/4 ranks joined";
  failure.hint = "rank 2 never connected";
  failure.conntrack = "262144 of 262144 entries, 12 new connection(s) dropped";
  out.push_back(agent::to_json(failure));
  PerfSpec spec;
  spec.collective = Collective::all_reduce;
  spec.root = -1;
  PerfRow row;
  row.bytes = 1 << 20;
  row.count = 1 << 18;
  row.out_of_place = {123.5, 8.49, 12.7, 0};
  row.in_place = {120.25, 8.72, 13.1, 2};
  out.push_back(agent::to_json(spec, row));
  row.has_in_place = false;
  spec.collective = Collective::all_to_all;
  out.push_back(agent::to_json(spec, row));
  CollectiveRecord record;
  record.bytes = 4096;
  record.protocol = Protocol::ll;
  record.nchannels = 2;
  record.time = std::chrono::nanoseconds(15'500);
  out.push_back(agent::to_json(record));
  tune::Decision decision;
  decision.bytes = 4096;
  decision.nranks = 4;
  tune::Candidate ring;
  ring.predicted_us = 12.5;
  ring.latency_us = 11;
  ring.bandwidth_gbs = 3.5;
  tune::Candidate tree = ring;
  tree.algorithm = Algorithm::tree;
  tree.excluded = "NCCL_ALGO=Ring";
  decision.candidates = {ring, tree};
  decision.chosen = 0;
  out.push_back(agent::to_json(decision));
  ConnectionInfo shm{0, 1, true, "SHM", "127.0.0.1:40000", "", 1};
  ConnectionInfo socket{-1, 2, false, "SOCKET", "10.0.0.6:40001", "the ranks are on different hosts", 4};
  out.push_back(agent::connections_json({shm, socket}));
  PeerLinkCounters measured{1, 8 << 20, 4'000'000, 0, 9 << 20};
  PeerLinkCounters ahead{2, 0, 0, 12, 1 << 20};
  out.push_back(agent::links_json({measured, ahead}, {shm, socket}));
  StallReport report;
  report.reporter = 1;
  report.seq = 1234;
  report.stalled_for = std::chrono::milliseconds(10'000);
  report.gathered_in = std::chrono::milliseconds(700);
  report.diagnosis = "rank 1 waits on rank 2 at all_reduce #1234 step 3";
  RankWavefront waiting;
  waiting.rank = 1;
  waiting.answered = true;
  waiting.last_called = 1234;
  CallRecord call;
  call.seq = 1234;
  call.bytes = 1 << 20;
  call.state = CallState::running;
  call.age = std::chrono::microseconds(10'500'000);
  call.duration = std::chrono::microseconds(10'500'000);
  call.step = 3;
  call.waits_on = 2;
  waiting.calls = {call};
  RankWavefront silent;
  silent.rank = 2;
  report.ranks = {waiting, silent};
  out.push_back(agent::to_json(report));
  // The events made from no engine record.
  ev::Sample sample;
  sample.t_us = 1'796'262'001'296'033;
  sample.channels = {{0, 100, 200, 300, 4, "rdmap79s0", ""}, {1, 5, 6, 7, 8, "", "eth0"}};
  sample.peers = {{1, 200}};
  sample.calls_started = 9;
  sample.calls_ended = 8;
  for (const ev::Event& e : std::vector<ev::Event>{
           sample,
           ev::Rings{{{0, {0, 2, 3, 1}, {}, {}}, {1, {0, 1, 3, 2}, {}, {}}}, {}},
           ev::Rings{{{0, {0, 1, 3, 2}, {0, 0, 0, 0}, {"rdmap79s0", "rdmap79s0", "rdmap79s0", "rdmap79s0"}},
                      {1, {1, 0, 2, 3}, {4, 4, 4, 4}, {"rdmap96s0", "rdmap96s0", "rdmap96s0", "rdmap96s0"}}},
                     {0, 1, 0, 1}},
           ev::Trees{{{0, {-1, 0, 0, 1}}, {1, {2, 2, -1, 2}}}},
           ev::CollectiveError{"timeout", "x"},
           ev::RankDone{0, 18, 0},
           ev::Bisect{2, {{{4, 5}, 0.01, true, ""}, {{6, 7}, 2.92, false, ""}}, "", -1, -1, -1, {}, {}, ""},
           ev::Bisect{3, {}, "node", 5, -1, -1, {}, {}, "node 5: with node 1 it reaches 0.01 GB/s"},
           ev::Bisect{1, {}, "between", -1, -1, -1, {0, 1}, {2, 3}, "a link between the two halves"},
           ev::RankOutput{"{\"not\": \"an event\"}", true},
           ev::RankExit{0},
           ev::RankFailed{4242, std::nullopt, 9, "SIGKILL", "rank 2 was killed by SIGKILL", "..."},
           ev::RankFailed{4243, 3, std::nullopt, "", "rank 1 exited with status 3", ""},
           ev::RunDone{false, true},
           ev::FaultApplied{1, agent::DropPorts{1025, 65535, agent::Direction::in, {29500}, true}, "nftables",
                            "nftables table inet ringmaster_agent_42_7"},
           ev::FaultReverted{2, agent::Rate{"eth0", 40, {}}, "run_ended"},
           ev::NicSample{1'796'262'001'296'033,
                         {{"eth0", 1000, 2000, 100000, false}, {"rdmap79s0:1", 3000, 4000, 100000, true}}},
           ev::JobWavefront{{"process group 0 (default_pg): rank 2 has not called gloo:all_reduce #5 (ranks 0, 1, 3 "
                             "have); its last call was gloo:all_reduce #4, completed",
                             "ranks 4, 5: no Flight Recorder record (it published no debug server)"}},
           ev::JobNcclLog{4022, 1, "/tmp/nccl.node-2.4022.log", "NCCL 2.27.3+cuda12.9, 2 coll channels",
                          json{{"version", "2.27.3+cuda12.9"}, {"coll_channels", 2}}},
           ev::JobRas{"localhost:28028",
                      "json",
                      {"communicator 0x0c44a9e1b7f25d36: ranks 2, 5 have launched 4811 AllReduce, the furthest 4812"},
                      ""},
           ev::JobRas{"localhost:28028", "", {}, "cannot connect to NCCL's RAS port localhost:28028"}}) {
    out.push_back(ev::to_json(e));
  }
  // A watched rank, as the watcher reads it, and one it could not read.
  WatchedRank unanswered;
  unanswered.pid = 19908;
  unanswered.rank = 1;
  unanswered.world_size = 4;
  unanswered.outcome = "unanswered";
  unanswered.remote = unanswered.master_addr = "127.0.0.1";
  unanswered.master_port = 29500;
  unanswered.syn_retransmits = 1;
  unanswered.detail = "SYN to 127.0.0.1:29500 unanswered for at least 1 s (1 retransmission)";
  unanswered.hint = "Connection attempts to MASTER_PORT 29500 got no answer at all";
  unanswered.command = "python train.py";
  out.push_back(ev::to_json(ev::job_rank(unanswered)));
  ev::JobRank gone;
  gone.pid = 4242;
  gone.error = "process 4242 is gone";
  out.push_back(ev::to_json(gone));
  return out;
}

TEST(Events, EveryTypeReadsBackWhatItsProducerWrote) {
  std::set<std::string> seen;
  for (const json& j : one_of_each()) {
    const ev::Event e = ev::parse_event(j);
    EXPECT_FALSE(std::holds_alternative<ev::Unknown>(e)) << j.dump();
    EXPECT_EQ(ev::type_of(e), j["type"].get<std::string>());
    EXPECT_EQ(ev::to_json(e), j) << "written: " << j.dump() << "\nread back: " << ev::to_json(e).dump();
    seen.insert(std::string(ev::type_of(e)));
  }
  // Every type of the variant but Unknown was tried.
  EXPECT_EQ(seen.size(), std::variant_size_v<ev::Event> - 1);
}

TEST(Events, FieldsAreTyped) {
  const auto e = ev::parse_event(one_of_each()[0]);
  const auto& stage = std::get<ev::StageEnded>(e);
  EXPECT_EQ(stage.stage, Stage::store_barrier);
  EXPECT_EQ(stage.rank, 3);
  EXPECT_EQ(stage.begin_us, 1'796'262'001'196'033);
  EXPECT_DOUBLE_EQ(stage.duration_ms, 1.234567);
  const auto links = std::get<ev::Links>(ev::parse_event(one_of_each()[8]));
  ASSERT_EQ(links.links.size(), 2u);
  EXPECT_DOUBLE_EQ(*links.links[0].gbs, 2.097152);
  EXPECT_EQ(links.links[0].transport, "SHM");
  EXPECT_FALSE(links.links[1].gbs);  // every transfer was ahead of its reader
  EXPECT_EQ(links.links[1].ahead, 12u);
}

// Each message names the event, the object within it and the field.
TEST(Events, BadFieldsAreNamed) {
  auto error_of = [](const json& j) {
    try {
      ev::parse_event(j);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::protocol);
      return e.status().message();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error_of({{"type", "stage"}, {"stage", "STORE_CONNECT"}, {"ok", "yes"}}),
            "event 'stage': 'ok' is a string, not a boolean");
  EXPECT_EQ(error_of({{"type", "stage"}, {"stage", "STORE_CONECT"}, {"ok", true}}),
            "event 'stage': 'stage' names no init stage: 'STORE_CONECT'");
  EXPECT_EQ(error_of({{"type", "stage"}, {"ok", true}}), "event 'stage': 'stage' is missing");
  EXPECT_EQ(error_of({{"type", "result"}, {"collective", "all_reduce"}, {"bytes", 8}}),
            "event 'result': 'out_of_place' is missing");
  EXPECT_EQ(
      error_of({{"type", "result"}, {"collective", "all_reduce"}, {"bytes", -8}, {"out_of_place", json::object()}}),
      "event 'result': 'bytes' is an integer, not an integer of at least 0");
  EXPECT_EQ(error_of({{"type", "links"}, {"links", {{{"from", 1}}, {{"from", "2"}}}}}),
            "event 'links': links[1]: 'from' is a string, not an integer");
  EXPECT_EQ(error_of({{"type", "sample"}, {"t_us", 1}, {"channels", {{{"channel", 0}, {"bytes_sent", 1.5}}}}}),
            "event 'sample': channels[0]: 'bytes_sent' is a number, not an integer");
  EXPECT_EQ(error_of({{"type", "tuner"},
                      {"collective", "all_reduce"},
                      {"bytes", 8},
                      {"chosen", 2},
                      {"candidates", json::array()}}),
            "event 'tuner': 'chosen' is 2, but there are 0 candidates");
  EXPECT_EQ(error_of({{"type", "rings"}, {"rings", {{{"channel", 0}, {"ranks", {0, 1.5}}}}}}),
            "event 'rings': rings[0]: 'ranks' is a number, not an integer");
  EXPECT_EQ(error_of({{"type", "run_done"}, {"ok", nullptr}}), "event 'run_done': 'ok' is null, not a boolean");
  EXPECT_EQ(error_of({{"type", "fault_applied"},
                      {"fault_id", 1},
                      {"mechanism", "netem"},
                      {"fault", {{"kind", "delay"}, {"interface", "lo"}, {"ms", "fifty"}}}}),
            "event 'fault_applied': fault 'delay': 'ms' is a string of 5 characters, not a number");
  EXPECT_EQ(error_of({{"type", 7}}), "an event needs 'type', a string");
  EXPECT_EQ(error_of(json::array()), "an event is an object, not array");
}

// A newer rank or agent: a type this build does not know is kept whole,
// and fields it does not know are skipped.
TEST(Events, UnknownTypesAndFieldsPass) {
  const json future = {{"type", "gpu_sample"}, {"gpus", {{{"index", 0}, {"util", 0.93}}}}};
  const ev::Event e = ev::parse_event(future);
  ASSERT_TRUE(std::holds_alternative<ev::Unknown>(e));
  EXPECT_EQ(ev::type_of(e), "gpu_sample");
  EXPECT_EQ(ev::to_json(e), future);
  json stage = one_of_each()[0];
  stage["nvlink"] = "up";
  EXPECT_EQ(std::get<ev::StageEnded>(ev::parse_event(stage)).detail, "4/4 joined");
}

TEST(Events, TheEnvelopeNamesTheRankAndRun) {
  EXPECT_FALSE(ev::parse_event_message({{"type", "heartbeat"}, {"time_us", 1}}));
  const json good = {{"type", "event"}, {"run_id", "r1"}, {"rank", 2}, {"event", one_of_each()[0]}};
  const auto m = ev::parse_event_message(good);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->run_id, "r1");
  EXPECT_EQ(m->rank, 2);
  EXPECT_TRUE(std::holds_alternative<ev::StageEnded>(m->event));
  json body = ev::to_json(*m);
  body["type"] = "event";
  EXPECT_EQ(body, good);
  try {
    ev::parse_event_message({{"type", "event"}, {"run_id", "r1"}, {"rank", 2}, {"event", {{"type", "done"}}}});
    FAIL() << "accepted a done event without exit_code";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(), "rank 2 of run r1: event 'done': 'exit_code' is missing");
  }
}

// docs/protocol.md's table of events lists exactly the types there are.
TEST(Events, TheProtocolDocumentListsEveryType) {
  std::ifstream in(RINGMASTER_DOCS_DIR "/protocol.md");
  ASSERT_TRUE(in) << RINGMASTER_DOCS_DIR "/protocol.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const auto from = doc.find("\n## Events");
  ASSERT_NE(from, std::string::npos);
  const auto to = doc.find("\n## ", from + 1);
  const std::string section = doc.substr(from, to - from);
  std::set<std::string> documented;
  const std::regex row(R"(\n\| `([a-z_]+)` \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  std::set<std::string> types;
  for (const json& j : one_of_each())
    types.insert(j["type"].get<std::string>());
  documented.erase("type");  // the header row
  EXPECT_EQ(documented, types);
}

// Fault specs (ringmaster/agent/fault.h): each kind reads back what it
// wrote, and a bad spec is refused naming the kind and the field, without
// echoing what was sent.
TEST(FaultSpecs, EveryKindReadsBackWhatItWrote) {
  const std::vector<json> specs = {{{"kind", "drop_ports"},
                                    {"ports", "1025-65535"},
                                    {"direction", "in"},
                                    {"except", "29500,29600"},
                                    {"skip_loopback", true}},
                                   {{"kind", "drop_ports"}, {"ports", "29500"}, {"direction", "both"}},
                                   {{"kind", "drop_ports"}, {"ports", "29500"}, {"direction", "in"}, {"reject", true}},
                                   {{"kind", "drop_address"}, {"address", "198.18.0.1"}, {"direction", "out"}},
                                   {{"kind", "drop_address"}, {"address", "fd00::2"}, {"direction", "both"}},
                                   {{"kind", "delay"}, {"interface", "eth0"}, {"ms", 50.0}},
                                   {{"kind", "rate"}, {"interface", "veth-h1.0"}, {"mbit", 40.0}},
                                   {{"kind", "shm_size"}, {"bytes", 65536}},
                                   {{"kind", "limit"}, {"resource", "nofile"}, {"value", 64}},
                                   {{"kind", "loss"}, {"interface", "eth0"}, {"percent", 2.5}, {"direction", "out"}},
                                   {{"kind", "limit"}, {"resource", "memlock"}, {"value", 65536}},
                                   {{"kind", "loss"}, {"interface", "eth0"}, {"percent", 3.0}, {"direction", "in"}},
                                   {{"kind", "memory_limit"}, {"bytes", 134217728}},
                                   {{"kind", "rate"}, {"interface", "eth0"}, {"mbit", 40.0}, {"to", "198.18.0.7"}}};
  for (const json& j : specs) {
    const agent::FaultSpec f = agent::parse_fault(j);
    EXPECT_EQ(agent::kind_of(f), j["kind"].get<std::string>());
    EXPECT_EQ(agent::to_json(f), j) << j.dump();
  }
  // Defaults: both ways; the ports as nft writes them.
  const auto d = std::get<agent::DropPorts>(agent::parse_fault({{"kind", "drop_ports"}, {"ports", "80-80"}}));
  EXPECT_EQ(d.direction, agent::Direction::both);
  EXPECT_EQ(agent::port_range(d), "80");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[0])),
            "drop TCP to ports 1025-65535 arriving, except 29500, 29600, not on loopback");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[2])), "reject TCP to port 29500 arriving, with a TCP reset");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[6])), "limit veth-h1.0 to 40 Mbit/s");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[8])), "ranks may open 64 file descriptors (RLIMIT_NOFILE)");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[10])), "ranks may lock 65536 bytes of memory (RLIMIT_MEMLOCK)");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[9])), "lose 2.5% of what eth0 sends");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[11])), "lose 3% of what eth0 receives");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[12])), "ranks run in a memory cgroup limited to 134217728 bytes");
  EXPECT_EQ(agent::describe(agent::parse_fault(specs[13])), "limit what eth0 sends to 198.18.0.7 to 40 Mbit/s");
  // A loss without a direction is of what the interface sends.
  EXPECT_EQ(
      std::get<agent::Loss>(agent::parse_fault({{"kind", "loss"}, {"interface", "eth0"}, {"percent", 1}})).direction,
      agent::Direction::out);
}

TEST(FaultSpecs, BadSpecsAreRefusedByKindAndField) {
  auto error_of = [](const json& j) {
    try {
      agent::parse_fault(j);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::config);
      return e.status().message();
    }
    return std::string("accepted");
  };
  const std::string secret = "s3cr3t-value";
  EXPECT_EQ(error_of({{"kind", "delay"}, {"interface", "lo"}, {"ms", "fifty"}}),
            "fault 'delay': 'ms' is a string of 5 characters, not a number");
  EXPECT_EQ(error_of({{"kind", "delay"}, {"interface", "lo"}, {"ms", 0}}),
            "fault 'delay': 'ms' must be above 0 and at most 60000 ms");
  EXPECT_EQ(error_of({{"kind", "delay"}, {"ms", 5}}), "fault 'delay': needs 'interface'");
  // One slow link: `to` must be an address, and is not echoed.
  EXPECT_EQ(error_of({{"kind", "rate"}, {"interface", "eth0"}, {"mbit", 5}, {"to", secret}}),
            "fault 'rate': 'to' is a string of 12 characters, not an IPv4 or IPv6 address");
  EXPECT_EQ(error_of({{"kind", "rate"}, {"interface", "eth0/../x"}, {"mbit", 5}}),
            "fault 'rate': 'interface' is a string of 9 characters, not a network device's name (1-15 letters, digits, "
            "'.', '_', '-')");
  // A typo would otherwise drop every port but the one meant to stay open.
  EXPECT_EQ(error_of({{"kind", "drop_ports"}, {"ports", "1025-65535"}, {"exept", "29500"}}),
            "fault 'drop_ports': 'exept' is not a field of drop_ports (its fields: ports, direction, except, "
            "skip_loopback, reject)");
  EXPECT_EQ(error_of({{"kind", "drop_ports"}, {"ports", "0-80"}}),
            "fault 'drop_ports': 'ports' is a string of 4 characters, not PORT or LOW-HIGH with ports in 1..65535");
  EXPECT_EQ(error_of({{"kind", "drop_ports"}, {"ports", "90-80"}}), "fault 'drop_ports': 'ports' has LOW above HIGH");
  EXPECT_EQ(error_of({{"kind", "drop_ports"}, {"ports", "80"}, {"direction", "up"}}),
            "fault 'drop_ports': 'direction' is a string of 2 characters, not in, out or both");
  EXPECT_EQ(error_of({{"kind", "drop_ports"}, {"ports", "80"}, {"except", "29500,x"}}),
            "fault 'drop_ports': 'except' is not ports in 1..65535 separated by commas");
  EXPECT_EQ(error_of({{"kind", "drop_address"}, {"address", "10.0.0.300"}}),
            "fault 'drop_address': 'address' is a string of 10 characters, not an IPv4 or IPv6 address");
  EXPECT_EQ(error_of({{"kind", "shm_size"}, {"bytes", 1.5}}), "fault 'shm_size': 'bytes' is a number, not an integer");
  EXPECT_EQ(error_of({{"kind", "shm_size"}, {"bytes", -1}}), "fault 'shm_size': 'bytes' must be 1..1099511627776");
  EXPECT_EQ(error_of({{"kind", "loss"}, {"interface", "eth0"}, {"percent", 120}}),
            "fault 'loss': 'percent' must be above 0 and at most 100 %");
  // A descriptor limit no program could exec under is refused.
  EXPECT_EQ(error_of({{"kind", "limit"}, {"resource", "nofile"}, {"value", 3}}),
            "fault 'limit': 'value' must be 8..1099511627776");
  EXPECT_EQ(error_of({{"kind", "limit"}, {"resource", "nproc"}, {"value", 3}}),
            "fault 'limit': 'resource' is a string of 5 characters, not nofile or memlock");
  EXPECT_EQ(error_of({{"kind", "limit"}, {"resource", "memlock"}, {"value", -1}}),
            "fault 'limit': 'value' is a number, not a count of bytes");
  EXPECT_EQ(error_of({{"kind", secret}}),
            "unknown fault kind (12 characters); the kinds are drop_ports, drop_address, delay, loss, rate, shm_size, "
            "limit or memory_limit");
  EXPECT_EQ(error_of({{"ports", "80"}}),
            "a fault needs a 'kind': drop_ports, drop_address, delay, loss, rate, shm_size, limit or memory_limit");
  // Less than a rank needs to start is refused.
  EXPECT_EQ(error_of({{"kind", "memory_limit"}, {"bytes", 4096}}),
            "fault 'memory_limit': 'bytes' must be 16777216..1099511627776");
  EXPECT_EQ(error_of({{"kind", "memory_limit"}, {"bytes", "64M"}}),
            "fault 'memory_limit': 'bytes' is a string of 3 characters, not an integer");
  EXPECT_EQ(error_of(json::array()), "a fault is an array, not an object");
  // What was sent never comes back.
  for (const json& j :
       {json{{"kind", "drop_address"}, {"address", secret}}, json{{"kind", "delay"}, {"interface", secret}, {"ms", 1}},
        json{{"kind", "drop_ports"}, {"ports", secret}}, json{{"kind", "drop_ports"}, {secret, 1}}}) {
    EXPECT_EQ(error_of(j).find(secret), std::string::npos) << error_of(j);
  }
}

}  // namespace
