// The typed requests clients send an agent (ringmaster/agent/requests.h):
// what each field reads as, what a bad one is refused with, and the command
// line each request becomes.
#include "ringmaster/agent/requests.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ringmaster/status.h"

namespace ringmaster::agent {
namespace {

using nlohmann::json;

// What parsing `message` as a Request is refused with; "accepted" if it is not.
template <class Request>
std::string refusal_of(const json& message) {
  try {
    Request::parse(message);
  } catch (const Error& e) {
    return e.status().message();
  }
  return "accepted";
}

std::string refusal(const json& perf) {
  return refusal_of<PerfRequest>(perf);
}

// Every field survives its way through JSON; a field at its default is
// left out of the message, and sizes read as numbers or as nccl-tests
// writes them.
TEST(PerfRequest, RoundTripsThroughJson) {
  PerfRequest r;
  r.collective = Collective::reduce_scatter;
  r.min_bytes = 8;
  r.max_bytes = 64u << 20;
  r.step_factor = 2;
  r.iters = 7;
  r.warmup = 0;
  r.warmup_ms = 250;
  r.check = false;
  r.type = DataType::bf16;
  r.op = RedOp::max;
  r.root = 3;
  r.blocking = true;
  r.algorithm = Algorithm::tree;
  r.protocol = Protocol::ll128;
  r.channels = 4;
  r.agg_iters = 2;
  r.run_cycles = 0;
  r.average = 3;
  EXPECT_EQ(PerfRequest::parse(r.to_json()), r);
  EXPECT_EQ(PerfRequest{}.to_json(), json({{"collective", "all_reduce"}}));
  const auto sizes = PerfRequest::parse({{"collective", "all_reduce_perf"}, {"min_bytes", "64K"}, {"max_bytes", 1024}});
  EXPECT_EQ(sizes.min_bytes, 64u << 10);
  EXPECT_EQ(sizes.max_bytes, 1024u);
  EXPECT_EQ(PerfRequest::parse({{"collective", "alltoall"}}).collective, Collective::all_to_all);
  EXPECT_EQ(PerfRequest::parse({{"collective", "sendrecv"}, {"algo", ""}}).algorithm, std::nullopt);
}

// A bad field is refused naming it and what is wrong with it; so is a
// field no request has.
TEST(PerfRequest, BadFieldsAreNamed) {
  EXPECT_EQ(refusal(json::array()), "run.perf must be an object, got array");
  EXPECT_EQ(refusal({{"iters", 2}}), "run.perf is missing field 'collective' (string)");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"iters", "2"}}), "run.perf.iters must be an integer, got string");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"iters", 0}}), "run.perf.iters must be an integer from 1, got 0");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"min_bytes", -8}}).rfind("run.perf.min_bytes must be a size", 0),
            0u);
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"max_bytes", "12Q"}}).rfind("run.perf.max_bytes is not a size", 0),
            0u);
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"algo", "nvls"}}), "run.perf.algo 'nvls' is neither Ring nor Tree");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"dtype", "float7"}}).rfind("run.perf.dtype 'float7' is not", 0),
            0u);
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"average", 4}}).rfind("run.perf.average must be 0", 0), 0u);
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"engine", "mpi"}}),
            "run.perf.engine must be ringmaster or nccl, got 'mpi'");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"engine", "nccl"}, {"dtype", "float"}}),
            "run.perf.dtype is not taken with engine nccl (fp32 sums, every size checked once)");
  EXPECT_EQ(refusal({{"collective", "all_reduce"}, {"iterations", 5}}).rfind("run.perf has no field 'iterations'", 0),
            0u);
  EXPECT_EQ(refusal({{"collective", "hypercube"}}).rfind("run.perf.collective 'hypercube' is none of", 0), 0u);
}

// The ranks' command lines: ringmaster-cli perf with every flag (its own
// defaults where the request keeps them), NCCL's runner with the sweep
// and NCCL's variables for what the request forces.
TEST(PerfRequest, CommandLines) {
  PerfRequest r = PerfRequest::parse(
      {{"collective", "all_gather"}, {"min_bytes", "1K"}, {"max_bytes", "1M"}, {"step_factor", 4}, {"proto", "ll"}});
  const auto argv = r.to_argv();
  const std::vector<std::string> head = {"perf", "all_gather", "--json", "-b", "1024", "-e", "1048576", "-f", "4"};
  ASSERT_GE(argv.size(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), argv.begin()));
  auto after = [&](const std::vector<std::string>& v, const std::string& flag) {
    const auto it = std::find(v.begin(), v.end(), flag);
    return it == v.end() || it + 1 == v.end() ? std::string("(absent)") : *(it + 1);
  };
  EXPECT_EQ(after(argv, "-d"), "float");
  EXPECT_EQ(after(argv, "-o"), "sum");
  EXPECT_EQ(after(argv, "--proto"), "LL");
  EXPECT_EQ(after(argv, "--algo"), "(absent)");
  EXPECT_EQ(after(argv, "-i"), "(absent)");  // the factor steps the sizes
  r.engine = PerfRequest::Engine::nccl;
  r.channels = 2;
  const auto nccl = r.to_nccl_argv();
  EXPECT_EQ(nccl.front(), "all_gather");
  EXPECT_EQ(after(nccl, "-g"), "1");
  EXPECT_EQ(after(nccl, "-d"), "(absent)");
  const auto env = r.to_nccl_env();
  EXPECT_EQ(env.at("NCCL_PROTO"), "LL");
  EXPECT_EQ(env.at("NCCL_MIN_NCHANNELS"), "2");
  EXPECT_EQ(env.count("NCCL_ALGO"), 0u);
  EXPECT_EQ(r.nccl_refusal(), "");
  r.collective = Collective::all_to_all;
  EXPECT_NE(r.nccl_refusal().find("not 'all_to_all'"), std::string::npos) << r.nccl_refusal();
}

std::string run_refusal(const json& run) {
  return refusal_of<RunRequest>(run);
}

// A run survives its way through JSON; each field out of shape or range is
// refused naming it, the perf request's too, and a name a client made up
// is printed only when it is a plain name.
TEST(RunRequest, RoundTripsAndRefusesByName) {
  RunRequest r;
  r.run_id = "console-1";
  r.world_size = 4;
  r.ranks = {2, 3};
  r.master_addr = "10.0.0.1";
  r.master_port = 29500;
  r.perf.collective = Collective::broadcast;
  r.env = {{"NCCL_DEBUG", "INFO"}};
  r.coll_timeout_s = 30;
  const json j = r.to_json();
  EXPECT_EQ(j["type"], "run");
  EXPECT_EQ(RunRequest::parse(j), r);
  auto with = [&](const char* key, const json& value) {
    json m = j;
    m[key] = value;
    return run_refusal(m);
  };
  EXPECT_EQ(with("ranks", {1, 4}), "run.ranks holds 4, not a rank in [0, 4)");
  EXPECT_EQ(with("ranks", json::array()), "run.ranks is missing or empty: give the global ranks this agent runs");
  EXPECT_EQ(with("world_size", 0), "run.world_size must be an integer from 1, got 0");
  EXPECT_EQ(with("master_port", 70000), "run.master_port 70000 is not a TCP port");
  EXPECT_EQ(with("run_id", ""), "run.run_id is missing or empty");
  EXPECT_EQ(with("env", {{"NCCL_DEBUG", 1}}), "run.env.NCCL_DEBUG must be a string, got number");
  EXPECT_EQ(with("timeouts", {{"store_s", -1}}),
            "run.timeouts.store_s must be a positive number of seconds, at most 86400 (a day)");
  EXPECT_EQ(with("timeouts", {{"x\ny", 1}}),
            "run.timeouts.(a name of 3 bytes) is not one of store_s, bootstrap_s, coll_s");
  EXPECT_EQ(with("perf", {{"collective", "all_reduce"}, {"iters", -1}}),
            "run.perf.iters must be an integer from 1, got -1");
  json no_perf = j;
  no_perf.erase("perf");
  EXPECT_EQ(run_refusal(no_perf), "run is missing field 'perf' (object)");
}

}  // namespace
}  // namespace ringmaster::agent
