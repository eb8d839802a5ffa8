#include "ringmaster/agent/requests.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ringmaster/agent/protocol.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/perf.h"

namespace ringmaster::agent {

using nlohmann::json;

namespace {

const std::vector<std::pair<std::string_view, Collective>>& perf_names() {
  static const std::vector<std::pair<std::string_view, Collective>> names = {
      {"all_reduce", Collective::all_reduce},
      {"all_gather", Collective::all_gather},
      {"reduce_scatter", Collective::reduce_scatter},
      {"broadcast", Collective::broadcast},
      {"reduce", Collective::reduce},
      {"all_to_all", Collective::all_to_all},
      {"gather", Collective::gather},
      {"scatter", Collective::scatter},
      {"sendrecv", Collective::send_recv}};
  return names;
}

// What NCCL's runner does not take: nccl-tests' float sums, every size
// checked once.
constexpr std::string_view kNotForNccl[] = {"check",     "dtype",      "op",      "root",   "blocking",    "warmup_ms",
                                            "agg_iters", "run_cycles", "average", "bisect", "bisect_below"};

// Reads one field of a perf request, naming it in what it throws.
class Fields {
 public:
  Fields(const json& perf, std::string_view where) : perf_(perf), where_(where) {}

  const json* find(std::string_view key) const {
    const auto it = perf_.find(std::string(key));
    return it == perf_.end() ? nullptr : &*it;
  }
  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw Error(ErrorCategory::config, fmt::format("{}.{} {}", where_, key, what));
  }
  [[noreturn]] void wrong_kind(std::string_view key, const char* kind, const json& v) const {
    fail(key, fmt::format("must be {}, got {}", kind, v.type_name()));
  }

  std::optional<std::string> text(std::string_view key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) wrong_kind(key, "a string", *v);
    return v->get<std::string>();
  }
  void integer(std::string_view key, int& out, int least) const {
    const json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_number_integer()) wrong_kind(key, "an integer", *v);
    const auto n = v->get<long long>();
    if (n < least || n > std::numeric_limits<int>::max()) {
      fail(key, fmt::format("must be an integer from {}, got {}", least, v->dump()));
    }
    out = static_cast<int>(n);
  }
  void size(std::string_view key, std::uint64_t& out) const {
    const json* v = find(key);
    if (v == nullptr) return;
    if (v->is_number_unsigned() || (v->is_number_integer() && v->get<long long>() >= 0)) {
      out = v->get<std::uint64_t>();
    } else if (v->is_string()) {
      try {
        out = parse_size(v->get<std::string>());
      } catch (const Error& e) {
        fail(key, fmt::format("is not a size ({})", e.status().message()));
      }
    } else {
      wrong_kind(key, "a size in bytes (8, \"64K\", \"1M\")", *v);
    }
  }
  void number(std::string_view key, double& out, double least) const {
    const json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_number()) wrong_kind(key, "a number", *v);
    out = v->get<double>();
    if (!(out >= least) || !std::isfinite(out))
      fail(key, fmt::format("must be a number from {}, got {}", least, v->dump()));
  }
  void flag(std::string_view key, bool& out) const {
    const json* v = find(key);
    if (v == nullptr) return;
    if (v->is_boolean()) {
      out = v->get<bool>();
    } else if (v->is_number_integer() && (v->get<long long>() == 0 || v->get<long long>() == 1)) {
      out = v->get<long long>() == 1;
    } else {
      wrong_kind(key, "true, false, 0 or 1", *v);
    }
  }

 private:
  const json& perf_;
  std::string_view where_;
};

}  // namespace

std::uint64_t parse_request_size(std::string_view text) {
  return parse_size(std::string(text));
}

std::optional<Collective> perf_collective_named(std::string_view given) {
  std::string n(given);
  if (n.size() > 5 && n.ends_with("_perf")) n.resize(n.size() - 5);
  if (n == "alltoall" || n == "all2all") n = "all_to_all";
  if (n == "allreduce") n = "all_reduce";
  if (n == "allgather") n = "all_gather";
  if (n == "reducescatter") n = "reduce_scatter";
  if (n == "send_recv") n = "sendrecv";
  for (const auto& [name, c] : perf_names()) {
    if (name == n) return c;
  }
  return std::nullopt;
}

std::string perf_collective_name(Collective c) {
  for (const auto& [name, known] : perf_names()) {
    if (known == c) return std::string(name);
  }
  return std::string(name_of(c));
}

PerfRequest PerfRequest::parse(const json& perf, std::string_view where) {
  if (!perf.is_object()) {
    throw Error(ErrorCategory::config, fmt::format("{} must be an object, got {}", where, perf.type_name()));
  }
  static constexpr std::string_view kKnown[] = {
      "engine",    "collective", "min_bytes",  "max_bytes", "step_factor", "step_bytes",  "iters", "warmup",
      "warmup_ms", "check",      "dtype",      "op",        "root",        "blocking",    "algo",  "proto",
      "channels",  "agg_iters",  "run_cycles", "average",   "bisect",      "bisect_below"};
  for (const auto& [key, _] : perf.items()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      throw Error(ErrorCategory::config,
                  fmt::format("{} has no field '{}' (it takes {})", where, shown_name(key), fmt::join(kKnown, ", ")));
    }
  }
  const Fields f(perf, where);
  PerfRequest r;
  if (const auto engine = f.text("engine")) {
    if (*engine == "nccl") {
      r.engine = Engine::nccl;
    } else if (*engine != "ringmaster") {
      f.fail("engine", fmt::format("must be ringmaster or nccl, got '{}'", shown_name(*engine)));
    }
  }
  const auto collective = f.text("collective");
  if (!collective) throw Error(ErrorCategory::config, fmt::format("{} is missing field 'collective' (string)", where));
  const auto c = perf_collective_named(*collective);
  if (!c) {
    f.fail("collective", fmt::format("'{}' is none of all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                                     "all_to_all, gather, scatter, sendrecv",
                                     shown_name(*collective)));
  }
  r.collective = *c;
  f.size("min_bytes", r.min_bytes);
  f.size("max_bytes", r.max_bytes);
  f.size("step_bytes", r.step_bytes);
  if (const json* v = f.find("step_factor")) {
    if (!v->is_number()) f.wrong_kind("step_factor", "a number", *v);
    r.step_factor = v->get<double>();
    if (!(r.step_factor > 0) || !std::isfinite(r.step_factor)) {
      f.fail("step_factor", fmt::format("must be a finite number above 0, got {}", v->dump()));
    }
  }
  f.integer("iters", r.iters, 1);
  f.integer("warmup", r.warmup, 0);
  f.integer("warmup_ms", r.warmup_ms, 0);
  f.flag("check", r.check);
  if (const auto dtype = f.text("dtype")) {
    const auto t = parse_data_type(*dtype);
    if (!t)
      f.fail("dtype",
             fmt::format("'{}' is not a data type ({})", shown_name(*dtype), fmt::join(data_type_names(), ", ")));
    r.type = *t;
  }
  if (const auto op = f.text("op")) {
    const auto o = parse_red_op(*op);
    if (!o) f.fail("op", fmt::format("'{}' is not a reduction ({})", shown_name(*op), fmt::join(red_op_names(), ", ")));
    r.op = *o;
  }
  f.integer("root", r.root, 0);
  f.flag("blocking", r.blocking);
  if (const auto algo = f.text("algo"); algo && !algo->empty()) {
    r.algorithm = parse_algorithm(*algo);
    if (!r.algorithm) f.fail("algo", fmt::format("'{}' is not Ring, Tree or Pair", shown_name(*algo)));
  }
  if (const auto proto = f.text("proto"); proto && !proto->empty()) {
    r.protocol = parse_protocol(*proto);
    if (!r.protocol) f.fail("proto", fmt::format("'{}' is none of LL, LL128, Simple", shown_name(*proto)));
  }
  f.integer("channels", r.channels, 0);
  f.integer("agg_iters", r.agg_iters, 1);
  f.integer("run_cycles", r.run_cycles, 0);
  f.integer("average", r.average, 0);
  f.flag("bisect", r.bisect);
  f.number("bisect_below", r.bisect_below, 0);
  if (r.bisect_below > 0) r.bisect = true;
  if (r.bisect && r.collective != Collective::all_reduce)
    f.fail("bisect", "is taken with all_reduce only (its groups' all_reduce busbw is what it compares)");
  if (r.average > 3)
    f.fail("average", fmt::format("must be 0 (rank 0), 1 (mean), 2 (min) or 3 (max), got {}", r.average));
  if (r.engine == Engine::nccl) {
    for (const auto key : kNotForNccl) {
      if (f.find(key)) f.fail(key, "is not taken with engine nccl (fp32 sums, every size checked once)");
    }
  }
  return r;
}

json PerfRequest::to_json() const {
  const PerfRequest d;
  json j = {{"collective", perf_collective_name(collective)}};
  if (engine == Engine::nccl) j["engine"] = "nccl";
  auto put = [&](const char* key, const auto& value, const auto& fallback) {
    if (value != fallback) j[key] = value;
  };
  put("min_bytes", min_bytes, d.min_bytes);
  put("max_bytes", max_bytes, d.max_bytes);
  put("step_factor", step_factor, d.step_factor);
  put("step_bytes", step_bytes, d.step_bytes);
  put("iters", iters, d.iters);
  put("warmup", warmup, d.warmup);
  put("warmup_ms", warmup_ms, d.warmup_ms);
  put("check", check, d.check);
  if (type != d.type) j["dtype"] = std::string(name_of(type));
  if (op != d.op) j["op"] = std::string(name_of(op));
  put("root", root, d.root);
  put("blocking", blocking, d.blocking);
  if (algorithm) j["algo"] = std::string(name_of(*algorithm));
  if (protocol) j["proto"] = std::string(name_of(*protocol));
  put("channels", channels, d.channels);
  put("agg_iters", agg_iters, d.agg_iters);
  put("run_cycles", run_cycles, d.run_cycles);
  put("average", average, d.average);
  put("bisect", bisect, d.bisect);
  put("bisect_below", bisect_below, d.bisect_below);
  return j;
}

json RunRequest::to_json() const {
  json j = {{"type", "run"},         {"run_id", run_id},           {"world_size", world_size},
            {"ranks", ranks},        {"master_addr", master_addr}, {"master_port", master_port},
            {"perf", perf.to_json()}};
  if (!env.empty()) j["env"] = env;
  json timeouts = json::object();
  if (store_timeout_s) timeouts["store_s"] = *store_timeout_s;
  if (bootstrap_timeout_s) timeouts["bootstrap_s"] = *bootstrap_timeout_s;
  if (coll_timeout_s) timeouts["coll_s"] = *coll_timeout_s;
  if (!timeouts.empty()) j["timeouts"] = timeouts;
  return j;
}

RunRequest RunRequest::parse(const json& m) {
  if (!m.is_object()) throw Error(ErrorCategory::config, fmt::format("run must be an object, got {}", m.type_name()));
  const Fields f(m, "run");
  auto fail = [](const std::string& what) { throw Error(ErrorCategory::config, what); };
  RunRequest r;
  const auto id = f.text("run_id");
  if (!id || id->empty()) fail("run.run_id is missing or empty");
  r.run_id = *id;
  if (!f.find("world_size")) fail("run is missing field 'world_size' (integer)");
  f.integer("world_size", r.world_size, 1);
  const json* ranks = f.find("ranks");
  if (ranks == nullptr || !ranks->is_array() || ranks->empty()) {
    fail("run.ranks is missing or empty: give the global ranks this agent runs");
  }
  for (const auto& rank : *ranks) {
    if (!rank.is_number_integer() || rank.get<long long>() < 0 || rank.get<long long>() >= r.world_size) {
      fail(fmt::format("run.ranks holds {}, not a rank in [0, {})",
                       rank.is_number_integer() ? std::to_string(rank.get<long long>()) : std::string(rank.type_name()),
                       r.world_size));
    }
    r.ranks.push_back(rank.get<int>());
  }
  const auto addr = f.text("master_addr");
  if (!addr) fail("run is missing field 'master_addr' (string)");
  r.master_addr = *addr;
  if (!f.find("master_port")) fail("run is missing field 'master_port' (integer)");
  f.integer("master_port", r.master_port, 0);
  if (r.master_port > 65535) fail(fmt::format("run.master_port {} is not a TCP port", r.master_port));
  const json* perf = f.find("perf");
  if (perf == nullptr) fail("run is missing field 'perf' (object)");
  r.perf = PerfRequest::parse(*perf);
  if (const json* env = f.find("env")) {
    if (!env->is_object()) f.wrong_kind("env", "an object", *env);
    for (const auto& [k, value] : env->items()) {
      if (!value.is_string())
        fail(fmt::format("run.env.{} must be a string, got {}", shown_name(k), value.type_name()));
      r.env[k] = value.get<std::string>();
    }
  }
  if (const json* timeouts = f.find("timeouts")) {
    if (!timeouts->is_object()) f.wrong_kind("timeouts", "an object", *timeouts);
    for (const auto& [k, value] : timeouts->items()) {
      std::optional<double>* slot = k == "store_s"       ? &r.store_timeout_s
                                    : k == "bootstrap_s" ? &r.bootstrap_timeout_s
                                    : k == "coll_s"      ? &r.coll_timeout_s
                                                         : nullptr;
      if (slot == nullptr)
        fail(fmt::format("run.timeouts.{} is not one of store_s, bootstrap_s, coll_s", shown_name(k)));
      // A day at most: a rank takes whole seconds as a 64-bit count, and
      // 1e308 turned negative on the way.
      constexpr double kMaxSeconds = 86400;
      if (!value.is_number() || value.get<double>() <= 0 || value.get<double>() > kMaxSeconds) {
        fail(fmt::format("run.timeouts.{} must be a positive number of seconds, at most {:g} (a day)", shown_name(k),
                         kMaxSeconds));
      }
      *slot = value.get<double>();
    }
  }
  return r;
}

json WatchRequest::to_json() const {
  json j = {{"watch_id", watch_id}, {"duration_s", duration_s}, {"interval_s", interval_s}};
  if (!pids.empty()) j["pids"] = pids;
  if (!job_run_id.empty()) j["job_run_id"] = job_run_id;
  if (master_port != 0) j["master_port"] = master_port;
  if (flight_recorder) j["flight_recorder"] = true;
  if (nccl_log) j["nccl_log"] = true;
  if (nccl_ras) j["nccl_ras"] = true;
  return j;
}

WatchRequest WatchRequest::parse(const json& m) {
  if (!m.is_object()) throw Error(ErrorCategory::config, fmt::format("watch must be an object, got {}", m.type_name()));
  static constexpr std::string_view kKnown[] = {"watch_id",        "pids",       "job_run_id",
                                                "master_port",     "duration_s", "interval_s",
                                                "flight_recorder", "nccl_log",   "nccl_ras"};
  for (const auto& [key, _] : m.items()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      throw Error(ErrorCategory::config, fmt::format("watch.{} is not a field of a watch (known: {})", shown_name(key),
                                                     fmt::join(kKnown, ", ")));
    }
  }
  const Fields f(m, "watch");
  WatchRequest w;
  w.watch_id = f.text("watch_id").value_or("");
  if (w.watch_id.empty()) f.fail("watch_id", "is missing or empty");
  if (const json* pids = f.find("pids")) {
    if (!pids->is_array()) f.wrong_kind("pids", "an array of process ids", *pids);
    if (pids->size() > 4096) f.fail("pids", fmt::format("names {} processes; at most 4096", pids->size()));
    for (const auto& pid : *pids) {
      if (!pid.is_number_integer() || pid.get<long long>() < 1 || pid.get<long long>() > (1 << 22)) {
        f.fail("pids", fmt::format("holds {}, not a process id", pid.dump()));
      }
      w.pids.push_back(pid.get<int>());
    }
  }
  w.job_run_id = f.text("job_run_id").value_or("");
  f.integer("master_port", w.master_port, 0);
  if (w.master_port > 65535) f.fail("master_port", fmt::format("{} is not a TCP port", w.master_port));
  if (w.pids.empty() && w.job_run_id.empty() && w.master_port == 0) {
    throw Error(ErrorCategory::config, "watch names no job: give pids, job_run_id or master_port");
  }
  auto seconds = [&](std::string_view key, double& out, double least, double most) {
    const json* v = f.find(key);
    if (v == nullptr) return;
    if (!v->is_number() || !(v->get<double>() >= least && v->get<double>() <= most)) {
      f.fail(key, fmt::format("must be a number of seconds from {:g} to {:g}, got {}", least, most, v->dump()));
    }
    out = v->get<double>();
  };
  seconds("duration_s", w.duration_s, 0, 86400);
  seconds("interval_s", w.interval_s, 0.05, 60);
  f.flag("flight_recorder", w.flight_recorder);
  f.flag("nccl_log", w.nccl_log);
  f.flag("nccl_ras", w.nccl_ras);
  return w;
}

std::vector<std::string> WatchRequest::to_argv() const {
  std::vector<std::string> argv = {
      "watch", "--json", "--for", fmt::format("{}", duration_s), "--interval", fmt::format("{}", interval_s)};
  for (int pid : pids)
    argv.insert(argv.end(), {"--pid", std::to_string(pid)});
  if (!job_run_id.empty()) argv.insert(argv.end(), {"--run-id", job_run_id});
  if (master_port != 0) argv.insert(argv.end(), {"--master-port", std::to_string(master_port)});
  if (flight_recorder) argv.emplace_back("--flight-recorder");
  if (nccl_log) argv.emplace_back("--nccl-log");
  if (nccl_ras) argv.emplace_back("--nccl-ras");
  return argv;
}

namespace {

// The sizes and iterations: nccl-tests' flags, as both runners take them.
void add_sweep(std::vector<std::string>& argv, const PerfRequest& r) {
  argv.insert(argv.end(), {"-b", std::to_string(r.min_bytes), "-e", std::to_string(r.max_bytes)});
  if (r.step_factor != 1) {
    argv.insert(argv.end(), {"-f", fmt::format("{}", r.step_factor)});
  } else {
    argv.insert(argv.end(), {"-i", std::to_string(r.step_bytes)});
  }
  argv.insert(argv.end(), {"-n", std::to_string(r.iters), "-w", std::to_string(r.warmup)});
}

}  // namespace

std::vector<std::string> PerfRequest::to_argv() const {
  std::vector<std::string> argv = {"perf", perf_collective_name(collective), "--json"};
  add_sweep(argv, *this);
  argv.insert(argv.end(),
              {"-c", check ? "1" : "0", "-d", std::string(name_of(type)), "-o", std::string(name_of(op)), "-r",
               std::to_string(root), "-z", blocking ? "1" : "0", "--warmup-ms", std::to_string(warmup_ms), "-m",
               std::to_string(agg_iters), "-N", std::to_string(run_cycles), "-a", std::to_string(average)});
  if (algorithm) argv.insert(argv.end(), {"--algo", std::string(name_of(*algorithm))});
  if (protocol) argv.insert(argv.end(), {"--proto", std::string(name_of(*protocol))});
  if (channels > 0) argv.insert(argv.end(), {"--channels", std::to_string(channels)});
  if (bisect_below > 0) {
    argv.insert(argv.end(), {"--bisect-below", fmt::format("{}", bisect_below)});
  } else if (bisect) {
    argv.push_back("--bisect");
  }
  return argv;
}

std::vector<std::string> PerfRequest::to_nccl_argv() const {
  std::vector<std::string> argv = {perf_collective_name(collective), "-g", "1", "--events"};
  add_sweep(argv, *this);
  return argv;
}

std::map<std::string, std::string> PerfRequest::to_nccl_env() const {
  std::map<std::string, std::string> env;
  if (algorithm) env["NCCL_ALGO"] = std::string(name_of(*algorithm));
  if (protocol) env["NCCL_PROTO"] = std::string(name_of(*protocol));
  if (channels > 0) env["NCCL_MIN_NCHANNELS"] = env["NCCL_MAX_NCHANNELS"] = std::to_string(channels);
  return env;
}

std::string PerfRequest::nccl_refusal() const {
  if (algorithm == Algorithm::pair) {
    return "NCCL has no Pair algorithm (Ringmaster's 2-rank exchange of whole inputs): name Ring or Tree, or leave "
           "the choice to NCCL";
  }
  return nccl_runner_refusal(perf_collective_name(collective), name_of(type), name_of(op));
}

}  // namespace ringmaster::agent
