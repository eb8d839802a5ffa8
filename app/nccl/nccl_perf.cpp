// ringmaster-nccl-perf: the same sweep as `ringmaster-cli perf`, run
// through NCCL on this node's GPUs, with what NCCL decided (its rings,
// trees, channels, transports and per-size algorithm and protocol) read
// back from its NCCL_DEBUG=INFO lines (tools/nccl_log.h). Ringmaster's
// figures and NCCL's, taken on the same nodes, then sit side by side.
//
// Built against nccl.h; libnccl.so.2 is opened at run time (--nccl or
// RINGMASTER_NCCL_LIBRARY names another file, e.g. the one a PyTorch wheel
// carries), so the program runs wherever NCCL is and says why not where
// it is not. One process drives every GPU it is given (-g), as nccl-tests
// does with -g; under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT) each process drives GPU LOCAL_RANK and the ranks share
// NCCL's unique id through a TCP store on MASTER_ADDR:MASTER_PORT
// (torchrun's, or one rank 0 starts).
//
// Exit status: 0 when the sweep ran and every element checked out, 1 when
// one was wrong or a call failed, 0 with "not run: why" (and "ran": false
// in the JSON) when there is no GPU or no NCCL here. With --events (an
// agent's run) stdout carries the agent's event lines, and not running is
// exit 2 with an "error" event saying why.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringmaster/agent/events.h"
#include "ringmaster/store.h"
#include "ringmaster/tools/nccl_log.h"
#include "ringmaster/tools/preflight.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The NCCL calls the sweep makes, from the library opened at run time.
struct Nccl {
  void* handle = nullptr;
  std::string path, why;
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclCommInitAll) init_all = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;

  bool open(const std::string& file) {
    handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = ::dlerror();
      why = e != nullptr ? e : file + " did not load";
      return false;
    }
    path = file;
    auto load = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (fn == nullptr && why.empty()) why = file + " has no " + name;
    };
    load(get_version, "ncclGetVersion");
    load(get_unique_id, "ncclGetUniqueId");
    load(init_rank, "ncclCommInitRank");
    load(init_all, "ncclCommInitAll");
    load(destroy, "ncclCommDestroy");
    load(error_string, "ncclGetErrorString");
    load(group_start, "ncclGroupStart");
    load(group_end, "ncclGroupEnd");
    load(all_reduce, "ncclAllReduce");
    load(all_gather, "ncclAllGather");
    load(reduce_scatter, "ncclReduceScatter");
    load(broadcast, "ncclBroadcast");
    return why.empty();
  }
  void check(ncclResult_t r, const char* what) const {
    if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + error_string(r));
  }
};

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

enum class Op { all_reduce, all_gather, reduce_scatter, broadcast };

std::optional<Op> op_named(const std::string& name) {
  if (name == "all_reduce" || name == "all_reduce_perf") return Op::all_reduce;
  if (name == "all_gather" || name == "all_gather_perf") return Op::all_gather;
  if (name == "reduce_scatter" || name == "reduce_scatter_perf") return Op::reduce_scatter;
  if (name == "broadcast" || name == "broadcast_perf") return Op::broadcast;
  return std::nullopt;
}

// nccl-tests' bus bandwidth factor for n ranks.
double bus_factor(Op op, int n) {
  switch (op) {
    case Op::all_reduce:
      return 2.0 * (n - 1) / n;
    case Op::all_gather:
    case Op::reduce_scatter:
      return static_cast<double>(n - 1) / n;
    case Op::broadcast:
      return 1.0;
  }
  return 1.0;
}

std::uint64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  const double v = std::stod(text, &used);
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "B" ? 1
                       : unit == "K"               ? 1024.0
                       : unit == "M"               ? 1024.0 * 1024
                       : unit == "G"               ? 1024.0 * 1024 * 1024
                                                   : -1;
  if (scale < 0 || v < 0) throw std::invalid_argument("a size like 8, 64K, 1M or 1G: '" + text + "'");
  return static_cast<std::uint64_t>(v * scale);
}

// One GPU's part: its communicator, stream and buffers.
struct Part {
  int device = 0;
  int rank = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
};

struct Options {
  std::string collective = "all_reduce";
  std::string min_bytes = "8", max_bytes = "128M", step_bytes = "1M";
  double factor = 2;
  int iters = 20, warmup = 5, gpus = 0;
  std::string nccl, json_file;
  bool events = false;  // the agent's event lines on stdout (docs/protocol.md), the table on stderr
};

std::string debug_dir() {
  char pattern[] = "/tmp/ringmaster-nccl-XXXXXX";
  const char* made = ::mkdtemp(pattern);
  return made != nullptr ? made : "/tmp";
}

// Everything NCCL wrote to NCCL_DEBUG_FILE under `dir`, read back.
ringmaster::NcclDecisions read_debug_files(const std::string& dir) {
  std::string text;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::ifstream in(entry.path());
    text += std::string(std::istreambuf_iterator<char>(in), {});
    fs::remove(entry.path(), ec);
  }
  fs::remove(dir, ec);
  return ringmaster::read_nccl_log(text);
}

// Exit status of a run asked for with --events that could not start.
constexpr int kNotRun = 2;

std::string fmt_not_run(const std::string& host, const std::string& why) {
  return "NCCL side by side not run on " + host + ": " + why;
}

const char* collective_name(Op op) {
  switch (op) {
    case Op::all_reduce:
      return "all_reduce";
    case Op::all_gather:
      return "all_gather";
    case Op::reduce_scatter:
      return "reduce_scatter";
    case Op::broadcast:
      return "broadcast";
  }
  return "?";
}

// NCCL's name for a collective in its TUNING lines.
const char* nccl_function_name(Op op) {
  switch (op) {
    case Op::all_reduce:
      return "AllReduce";
    case Op::all_gather:
      return "AllGather";
    case Op::reduce_scatter:
      return "ReduceScatter";
    case Op::broadcast:
      return "Broadcast";
  }
  return "?";
}

// What the sweep measured and NCCL decided, as the agent's events (the
// events `ringmaster-cli perf --json` writes), so a run through NCCL shows
// in the console as Ringmaster's do: its rows (candidate "NCCL <version>",
// with NCCL's pick for each size), its decisions, and the rings, trees and
// connections rank 0 read from NCCL's lines.
template <class Emit>
void emit_events(Emit& emit, Op op, int nranks, const std::vector<Part>& parts, const json& rows,
                 const ringmaster::NcclDecisions& decisions, const std::string& version) {
  namespace ev = ringmaster::agent::events;
  const std::string name = collective_name(op);
  const ringmaster::NcclPick* last = nullptr;
  for (const auto& p : decisions.picks) {
    if (p.collective != nccl_function_name(op)) continue;
    if (last == nullptr || last->bytes != p.bytes) {
      emit(ev::Decision{name, p.bytes, p.algorithm, p.protocol, p.channel_hi - p.channel_lo + 1, 0});
    }
    last = &p;
  }
  for (const auto& row : rows) {
    ev::Result r;
    r.collective = name;
    r.dtype = std::string(ringmaster::name_of(ringmaster::DataType::fp32));
    r.redop = std::string(ringmaster::name_of(ringmaster::RedOp::sum));
    r.bytes = row["bytes"].get<std::uint64_t>();
    r.count = row["count"].get<std::uint64_t>();
    r.root = 0;
    r.out_of_place = {row["time_us"].get<double>(), row["algbw_gbs"].get<double>(), row["busbw_gbs"].get<double>(),
                      row["wrong"].get<long long>()};
    r.candidate = "NCCL " + version;
    // NCCL logs a call's bytes as its count times the type's size.
    for (const auto& p : decisions.picks) {
      if (p.collective == nccl_function_name(op) && p.bytes == r.count * sizeof(float)) {
        r.tuner = ev::Result::Pick{p.algorithm, p.protocol, p.channel_hi - p.channel_lo + 1, 0};
      }
    }
    emit(r);
  }
  const int rank = parts.empty() ? -1 : parts.front().rank;
  if (rank == 0 && !decisions.rings.empty()) {
    ev::Rings rings;
    for (const auto& ring : decisions.rings)
      rings.rings.push_back({ring.channel, ring.ranks, {}, {}});
    emit(rings);
  }
  if (!decisions.trees.empty()) {
    std::map<int, std::vector<int>> parents;  // by channel
    for (const auto& t : decisions.trees) {
      auto& of = parents.try_emplace(t.channel, std::vector<int>(static_cast<std::size_t>(nranks), -1)).first->second;
      if (t.rank >= 0 && t.rank < nranks) of[static_cast<std::size_t>(t.rank)] = t.parent;
    }
    ev::Trees trees;
    for (auto& [channel, of] : parents)
      trees.trees.push_back({channel, std::move(of)});
    emit(trees);
  }
  ev::Connections connections;
  for (const auto& c : decisions.connections) {
    if (c.from == rank) connections.connections.push_back({c.channel, c.to, true, c.transport, "", "", 1});
  }
  if (!connections.connections.empty()) emit(connections);
}

int run(const Options& o) {
  json out = {{"ran", false}, {"collective", o.collective}};
  auto finish = [&](int code) {
    if (!o.json_file.empty()) std::ofstream(o.json_file) << out.dump(2) << "\n";
    return code;
  };
  // In events mode the table goes to stderr: stdout carries events only.
  std::FILE* table = o.events ? stderr : stdout;
  auto emit = [&](const ringmaster::agent::events::Event& e) {
    std::printf("%s\n", ringmaster::agent::events::to_json(e).dump().c_str());
    std::fflush(stdout);
  };
  // Asked for by an agent's run, not running is that rank's failure, with
  // the reason; run by hand it is a clean skip.
  auto not_run = [&](const std::string& why) {
    out["why"] = why;
    if (o.events) {
      char host[256] = {};
      ::gethostname(host, sizeof(host) - 1);
      emit(ringmaster::agent::events::CollectiveError{"config", fmt_not_run(host, why)});
      emit(ringmaster::agent::events::RankDone{0, 0, kNotRun});
      return finish(kNotRun);
    }
    std::printf("not run: %s\n", why.c_str());
    return finish(0);
  };
  const auto op = op_named(o.collective);
  if (!op) throw std::invalid_argument("no collective '" + o.collective + "' (all_reduce, all_gather, ...)");

  // Without a driver the runtime's own error ("driver version is
  // insufficient") would mislead: say what is missing.
  if (void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); driver == nullptr) {
    const char* e = ::dlerror();
    return not_run(std::string("no NVIDIA driver (") + (e != nullptr ? e : "libcuda.so.1 did not load") + ")");
  }
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    return not_run(e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e)
                                    : std::string("no CUDA device"));
  }
  const char* named = std::getenv("RINGMASTER_NCCL_LIBRARY");
  Nccl nccl;
  const std::string library = !o.nccl.empty() ? o.nccl : named != nullptr && *named != '\0' ? named : "libnccl.so.2";
  if (!nccl.open(library)) return not_run("no NCCL: " + nccl.why);
  int version = 0;
  nccl.check(nccl.get_version(&version), "ncclGetVersion");
  // NCCL reads its debug settings when it first initialises: set them
  // before. A user's own NCCL_DEBUG_SUBSYS stays.
  const std::string dir = debug_dir();
  ::setenv("NCCL_DEBUG", "INFO", 1);
  ::setenv("NCCL_DEBUG_SUBSYS", "INIT,GRAPH,TUNING", 0);
  ::setenv("NCCL_DEBUG_FILE", (dir + "/nccl.%h.%p.log").c_str(), 1);

  // Ranks: torchrun's processes, or every GPU of this process.
  const char* world_env = std::getenv("WORLD_SIZE");
  const int world = world_env != nullptr ? std::atoi(world_env) : 1;
  std::vector<Part> parts;
  int nranks = 0;
  if (world > 1) {
    const int rank = std::atoi(std::getenv("RANK") != nullptr ? std::getenv("RANK") : "0");
    const int local = std::atoi(std::getenv("LOCAL_RANK") != nullptr ? std::getenv("LOCAL_RANK") : "0");
    const std::string host = std::getenv("MASTER_ADDR") != nullptr ? std::getenv("MASTER_ADDR") : "127.0.0.1";
    const auto port = static_cast<std::uint16_t>(
        std::atoi(std::getenv("MASTER_PORT") != nullptr ? std::getenv("MASTER_PORT") : "29500"));
    std::unique_ptr<ringmaster::TcpStoreServer> server;
    if (rank == 0) {
      try {
        ringmaster::StoreServerOptions so;
        so.port = port;
        server = std::make_unique<ringmaster::TcpStoreServer>(so);
      } catch (const std::exception&) {
        // torchrun's store is there already.
      }
    }
    ringmaster::TcpStoreClient store(host, port, std::chrono::seconds(60));
    ncclUniqueId id{};
    const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
    const std::string key =
        std::string("ringmaster-nccl-perf/") + (run_id != nullptr && *run_id != '\0' ? run_id : "run") + "/unique_id";
    if (rank == 0) {
      nccl.check(nccl.get_unique_id(&id), "ncclGetUniqueId");
      store.set(key, std::string(id.internal, sizeof(id.internal)));
    } else {
      const std::string value = store.get(key);
      if (value.size() != sizeof(id.internal)) throw std::runtime_error("the store's NCCL unique id is malformed");
      std::copy(value.begin(), value.end(), id.internal);
    }
    Part p;
    p.device = local % devices;
    p.rank = rank;
    cuda_check(cudaSetDevice(p.device), "cudaSetDevice");
    nccl.check(nccl.init_rank(&p.comm, world, id, rank), "ncclCommInitRank");
    parts.push_back(p);
    nranks = world;
    // NCCL's init returns once every rank has joined, so every rank has
    // read the id: rank 0's store may go.
  } else {
    nranks = o.gpus > 0 ? std::min(o.gpus, devices) : devices;
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(nranks));
    std::vector<int> list(static_cast<std::size_t>(nranks));
    for (int d = 0; d < nranks; ++d)
      list[static_cast<std::size_t>(d)] = d;
    nccl.check(nccl.init_all(comms.data(), nranks, list.data()), "ncclCommInitAll");
    for (int d = 0; d < nranks; ++d)
      parts.push_back({d, d, comms[static_cast<std::size_t>(d)], nullptr, nullptr, nullptr});
  }

  const std::uint64_t lo = parse_size(o.min_bytes), hi = std::max(lo, parse_size(o.max_bytes));
  const std::uint64_t step = std::max<std::uint64_t>(1, parse_size(o.step_bytes));
  std::uint64_t largest_elements = hi / sizeof(float) + static_cast<std::uint64_t>(nranks);
  for (auto& p : parts) {
    cuda_check(cudaSetDevice(p.device), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaMalloc(&p.send, largest_elements * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMalloc(&p.recv, largest_elements * sizeof(float)), "cudaMalloc");
  }
  // Every call's count per rank (nccl-tests' sizes: the largest buffer).
  auto counts_of = [&](std::uint64_t bytes) {
    const std::uint64_t total = bytes / sizeof(float);
    const std::uint64_t per = *op == Op::all_gather || *op == Op::reduce_scatter ? total / nranks : total;
    return per;
  };
  auto launch = [&](std::uint64_t count) {
    nccl.check(nccl.group_start(), "ncclGroupStart");
    for (auto& p : parts) {
      switch (*op) {
        case Op::all_reduce:
          nccl.check(nccl.all_reduce(p.send, p.recv, count, ncclFloat32, ncclSum, p.comm, p.stream), "ncclAllReduce");
          break;
        case Op::all_gather:
          nccl.check(nccl.all_gather(p.send, p.recv, count, ncclFloat32, p.comm, p.stream), "ncclAllGather");
          break;
        case Op::reduce_scatter:
          nccl.check(nccl.reduce_scatter(p.send, p.recv, count, ncclFloat32, ncclSum, p.comm, p.stream),
                     "ncclReduceScatter");
          break;
        case Op::broadcast:
          nccl.check(nccl.broadcast(p.send, p.recv, count, ncclFloat32, 0, p.comm, p.stream), "ncclBroadcast");
          break;
      }
    }
    nccl.check(nccl.group_end(), "ncclGroupEnd");
  };
  auto sync = [&] {
    for (auto& p : parts) {
      cuda_check(cudaSetDevice(p.device), "cudaSetDevice");
      cuda_check(cudaStreamSynchronize(p.stream), "cudaStreamSynchronize");
    }
  };
  // Rank r sends r + 1 in every element, so every result is a known small
  // integer (exact in fp32): the checked pass compares every element.
  auto checked = [&](std::uint64_t count) -> std::uint64_t {
    const std::uint64_t in_count = *op == Op::reduce_scatter ? count * nranks : count;
    const std::uint64_t out_count = *op == Op::all_gather ? count * nranks : count;
    for (auto& p : parts) {
      std::vector<float> fill(in_count, static_cast<float>(p.rank + 1));
      cuda_check(cudaSetDevice(p.device), "cudaSetDevice");
      cuda_check(cudaMemcpy(p.send, fill.data(), in_count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
      cuda_check(cudaMemset(p.recv, 0xff, out_count * sizeof(float)), "cudaMemset");
    }
    launch(count);
    sync();
    std::uint64_t wrong = 0;
    const float sum = static_cast<float>(nranks) * static_cast<float>(nranks + 1) / 2;
    for (auto& p : parts) {
      std::vector<float> got(out_count);
      cuda_check(cudaSetDevice(p.device), "cudaSetDevice");
      cuda_check(cudaMemcpy(got.data(), p.recv, out_count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
      for (std::uint64_t i = 0; i < out_count; ++i) {
        const float want = *op == Op::all_gather ? static_cast<float>(i / count + 1) : *op == Op::broadcast ? 1 : sum;
        wrong += got[i] != want ? 1 : 0;
      }
    }
    return wrong;
  };

  std::fprintf(table, "# ringmaster-nccl-perf: %s through NCCL %s (%s), %d rank(s)%s\n", o.collective.c_str(),
               ringmaster::nccl_version_text(version).c_str(), nccl.path.c_str(), nranks,
               world > 1 ? " (torchrun)" : " in one process");
  std::fprintf(table, "#%12s %12s %8s %10s %10s %10s %8s\n", "size", "count", "type", "time(us)", "algbw", "busbw",
               "#wrong");
  json rows = json::array();
  std::uint64_t wrong_total = 0;
  for (std::uint64_t bytes = lo; bytes <= hi;) {
    const std::uint64_t count = counts_of(bytes);
    const std::uint64_t wrong = checked(count);
    wrong_total += wrong;
    for (int i = 0; i < o.warmup; ++i)
      launch(count);
    sync();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i)
      launch(count);
    sync();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / o.iters;
    const double algbw = static_cast<double>(bytes) / us / 1e3;  // GB/s
    const double busbw = algbw * bus_factor(*op, nranks);
    std::fprintf(table, " %12llu %12llu %8s %10.2f %10.2f %10.2f %8llu\n", static_cast<unsigned long long>(bytes),
                 static_cast<unsigned long long>(count), "float", us, algbw, busbw,
                 static_cast<unsigned long long>(wrong));
    rows.push_back({{"bytes", bytes},
                    {"count", count},
                    {"time_us", us},
                    {"algbw_gbs", algbw},
                    {"busbw_gbs", busbw},
                    {"wrong", wrong}});
    const auto next = o.factor > 1 ? static_cast<std::uint64_t>(static_cast<double>(bytes) * o.factor) : bytes + step;
    if (next <= bytes) break;
    bytes = next;
  }
  for (auto& p : parts) {
    cuda_check(cudaSetDevice(p.device), "cudaSetDevice");
    nccl.destroy(p.comm);
    cudaFree(p.send);
    cudaFree(p.recv);
    cudaStreamDestroy(p.stream);
  }
  const auto decisions = read_debug_files(dir);
  std::fprintf(table, "# NCCL's decisions: %d coll channel(s), %zu ring(s), %zu tree line(s), %zu connection(s):",
               decisions.coll_channels, decisions.rings.size(), decisions.trees.size(), decisions.connections.size());
  std::vector<std::string> kinds;
  for (const auto& c : decisions.connections) {
    if (std::find(kinds.begin(), kinds.end(), c.transport) == kinds.end()) kinds.push_back(c.transport);
  }
  for (const auto& k : kinds)
    std::fprintf(table, " %s", k.c_str());
  std::fprintf(table, "\n");
  for (const auto& p : decisions.picks)
    std::fprintf(table, "#   %s %llu B: %s/%s on channels %d..%d\n", p.collective.c_str(),
                 static_cast<unsigned long long>(p.bytes), p.algorithm.c_str(), p.protocol.c_str(), p.channel_lo,
                 p.channel_hi);
  out["ran"] = true;
  out["nccl_version"] = ringmaster::nccl_version_text(version);
  out["nccl_library"] = nccl.path;
  out["ranks"] = nranks;
  out["rows"] = rows;
  out["decisions"] = json::parse(ringmaster::to_json(decisions));
  std::fprintf(table, "# %s\n", wrong_total == 0 ? "every element checked out" : "wrong elements");
  if (o.events) {
    emit_events(emit, *op, nranks, parts, rows, decisions, ringmaster::nccl_version_text(version));
    emit(ringmaster::agent::events::RankDone{static_cast<long long>(wrong_total), static_cast<long long>(rows.size()),
                                             wrong_total == 0 ? 0 : 1});
  }
  return finish(wrong_total == 0 ? 0 : 1);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"The perf sweep through NCCL on this node's GPUs, with NCCL's decisions read from its INFO lines"};
  app.add_option("collective", o.collective, "all_reduce, all_gather, reduce_scatter, broadcast")
      ->capture_default_str();
  app.add_option("-b,--minbytes", o.min_bytes, "Smallest size (K, M, G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", o.max_bytes, "Largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "Multiply the size by this each step")->capture_default_str();
  app.add_option("-i,--stepbytes", o.step_bytes, "Add this to the size each step (when -f is 1)")
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters, "Timed iterations")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup_iters", o.warmup, "Warm-up iterations")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("-g,--ngpus", o.gpus, "GPUs this process drives (0: all it sees; one under torchrun)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--nccl", o.nccl, "The NCCL library to open (default libnccl.so.2, or RINGMASTER_NCCL_LIBRARY)");
  app.add_option("--json", o.json_file, "Also write the rows and NCCL's decisions as JSON to this file");
  app.add_flag("--events", o.events,
               "Write the agent's event lines on stdout (rows, NCCL's decisions, rings, trees, connections) and the "
               "table on stderr; not running is then a failure (exit 2) with the reason");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringmaster-nccl-perf: %s\n", e.what());
    return 1;
  }
}
