// ringmaster-cli perf: the nccl-tests sweep over a communicator (tools/perf.h).
#include "ringmaster/tools/perf.h"
#include "base/bytes.h"
#include "perf/check_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>

#include "ringmaster/status.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;
using perf_values::fill;
using perf_values::matches;
using perf_values::reference_reduction;

// One size of a sweep, as nccl-tests counts it: the size is the total of
// the larger buffer; counts per rank for the block collectives are that
// divided by the ranks, in whole elements.
struct SizeShape {
  std::size_t count = 0, total = 0, in_count = 0, out_count = 0;
  bool gathers = false, scatters = false, exchanges = false;
};

SizeShape shape_of(const PerfSpec& spec, int n, std::size_t requested) {
  SizeShape z;
  const std::size_t es = size_of(spec.type);
  // Output of n blocks (all_gather, gather) or input of n blocks
  // (reduce_scatter, scatter); gather and scatter only at the root.
  z.gathers = spec.collective == Collective::all_gather || spec.collective == Collective::gather;
  z.scatters = spec.collective == Collective::reduce_scatter || spec.collective == Collective::scatter;
  z.exchanges = spec.collective == Collective::all_to_all;
  z.count = requested / es;
  const bool blocks = z.gathers || z.scatters || z.exchanges;
  if (blocks) z.count /= static_cast<std::size_t>(n);
  z.total = z.count * es * (blocks ? static_cast<std::size_t>(n) : 1);
  z.in_count = (z.scatters || z.exchanges) ? z.count * static_cast<std::size_t>(n) : z.count;
  z.out_count = (z.gathers || z.exchanges) ? z.count * static_cast<std::size_t>(n) : z.count;
  return z;
}

// What rank `r` must hold after the collective, from every rank's input:
// the bytes of a moved input, or for a reduction the values and the
// largest term of each (reference_reduction).
struct Expected {
  std::vector<std::byte> bytes;
  std::vector<double> values, largest;
};

Expected expected_after(const PerfSpec& spec, int n, int r, const SizeShape& z) {
  Expected e;
  const std::size_t es = size_of(spec.type);
  const std::size_t count = z.count, total = z.total;
  const int from = (r - 1 + n) % n;
  std::vector<std::byte> other;
  switch (spec.collective) {
    case Collective::all_reduce:
    case Collective::reduce:
    case Collective::reduce_scatter: {
      e.values = reference_reduction(spec.type, spec.op, n, z.in_count, total, e.largest);
      if (z.scatters) {
        e.values.erase(e.values.begin(), e.values.begin() + static_cast<std::ptrdiff_t>(r * count));
        e.values.resize(count);
        e.largest.erase(e.largest.begin(), e.largest.begin() + static_cast<std::ptrdiff_t>(r * count));
        e.largest.resize(count);
      }
      break;
    }
    case Collective::all_gather:
    case Collective::gather:
      for (int q = 0; q < n; ++q) {
        fill(other, count, spec.type, spec.op, q, total);
        e.bytes.insert(e.bytes.end(), other.begin(), other.end());
      }
      break;
    case Collective::scatter: {
      // Block r of the root's input.
      fill(other, z.in_count, spec.type, spec.op, spec.root, total);
      const auto* begin = other.data() + static_cast<std::size_t>(r) * count * es;
      e.bytes.assign(begin, begin + count * es);
      break;
    }
    case Collective::broadcast:
      fill(e.bytes, count, spec.type, spec.op, spec.root, total);
      break;
    case Collective::all_to_all:
      // Block q comes from rank q: its input's block for us.
      for (int q = 0; q < n; ++q) {
        fill(other, z.in_count, spec.type, spec.op, q, total);
        const auto* begin = other.data() + static_cast<std::size_t>(r) * count * es;
        e.bytes.insert(e.bytes.end(), begin, begin + count * es);
      }
      break;
    case Collective::send_recv:
      if (n > 1) fill(e.bytes, count, spec.type, spec.op, from, total);
      break;
    case Collective::barrier:
      break;
  }
  return e;
}

// One call of the spec's collective over `count` elements; sendrecv is a
// ring of point-to-point transfers (to the next rank, from the previous).
Request launch_call(Communicator& comm, const PerfSpec& spec, std::size_t count, const std::byte* send,
                    std::byte* recv) {
  const int n = comm.size(), r = comm.rank();
  switch (spec.collective) {
    case Collective::all_reduce:
      return comm.all_reduce(send, recv, count, spec.type, spec.op);
    case Collective::all_gather:
      return comm.all_gather(send, recv, count, spec.type);
    case Collective::reduce_scatter:
      return comm.reduce_scatter(send, recv, count, spec.type, spec.op);
    case Collective::broadcast:
      return comm.broadcast(send, recv, count, spec.type, spec.root);
    case Collective::reduce:
      return comm.reduce(send, recv, count, spec.type, spec.op, spec.root);
    case Collective::barrier:
      return comm.barrier();
    case Collective::all_to_all:
      return comm.all_to_all(send, recv, count, spec.type);
    case Collective::gather:
      return comm.gather(send, recv, count, spec.type, spec.root);
    case Collective::scatter:
      return comm.scatter(send, recv, count, spec.type, spec.root);
    case Collective::send_recv:
      if (n == 1) {
        copy_bytes(recv, send, count * size_of(spec.type));
        return {};
      }
      return comm.sendrecv(send, (r + 1) % n, recv, (r - 1 + n) % n, count, spec.type);
  }
  return {};
}

// The warm-up calls of each candidate in turn (`turn` the first), each
// followed by a reset of the buffers; with `first` (the sweep's first
// size and placement) also the time-based warm-up (-W ms), for which every
// rank must run as many calls: they agree every 64 calls on whether all
// have warmed up long enough.
void warm_up(Communicator& comm, const PerfSpec& spec, std::size_t nc, std::size_t turn,
             const std::function<void(std::size_t)>& use, const std::function<void()>& call_and_reset, bool first) {
  for (std::size_t k = 0; k < nc; ++k) {
    use((k + turn) % nc);
    const auto warm_start = Clock::now();
    for (int i = 0; i < spec.warmup; ++i)
      call_and_reset();
    if (!first || k != 0 || spec.warmup_ms <= 0) continue;
    for (;;) {
      std::int32_t warm = Clock::now() - warm_start >= std::chrono::milliseconds(spec.warmup_ms) ? 1 : 0;
      comm.unfiltered([&] { comm.all_reduce(&warm, &warm, 1, DataType::int32, RedOp::min).wait(); });
      if (warm == 1) break;
      for (int i = 0; i < 64; ++i)
        call_and_reset();
    }
  }
}

// The time of one call (µs) of each of `nc` candidates at one size and
// placement: without candidates (`use` empty) the mean over iters x
// agg_iters calls; with, candidates take turns, each turn a lead-in call
// and a timed one, the first turning with the iteration and `turn`, and a
// candidate's time is the median of its timed calls. Then -a's reading
// over every rank, as nccl-tests reports it (over MPI there: whatever
// NCCL_ALGO allows, here).
std::vector<double> time_calls(Communicator& comm, const PerfSpec& spec, std::size_t nc, std::size_t turn,
                               const std::function<void(std::size_t)>& use, const std::function<Request()>& launch) {
  std::vector<double> times(nc);
  if (!use) {
    std::vector<Request> pending;
    const auto start = Clock::now();
    const int agg = std::max(spec.agg_iters, 1);
    for (int i = 0; i < spec.iters; ++i) {
      for (int a = 0; a < agg; ++a) {
        auto req = launch();
        if (spec.blocking) {
          req.wait();
        } else {
          pending.push_back(req);
        }
      }
    }
    for (auto& req : pending)
      req.wait();
    times[0] = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / std::max(spec.iters * agg, 1);
  } else {
    std::vector<std::vector<double>> calls(nc);
    for (int i = 0; i < spec.iters; ++i) {
      for (std::size_t k = 0; k < nc; ++k) {
        const std::size_t c = (k + static_cast<std::size_t>(i) + turn) % nc;
        use(c);
        // The lead-in call leaves the ranks as this candidate leaves
        // them (a tree's root leaves before its leaves): the timed one
        // then costs what a loop of it costs.
        launch().wait();
        const auto start = Clock::now();
        launch().wait();
        calls[c].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
    }
    for (std::size_t c = 0; c < nc; ++c) {
      auto& v = calls[c];
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      times[c] = v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    }
  }
  if (spec.average == 0) {
    comm.unfiltered([&] { comm.broadcast(times.data(), times.data(), times.size(), DataType::fp64, 0).wait(); });
  } else if (spec.average >= 1 && spec.average <= 3) {
    const RedOp how = spec.average == 1 ? RedOp::sum : spec.average == 2 ? RedOp::min : RedOp::max;
    comm.unfiltered([&] { comm.all_reduce(times.data(), times.data(), times.size(), DataType::fp64, how).wait(); });
    if (spec.average == 1) {
      for (auto& t : times)
        t /= comm.size();
    }
  }
  return times;
}

// --candidates all: every algorithm and protocol the tuner could pick
// here (what the transports run and NCCL_ALGO / NCCL_PROTO leave), and
// auto; otherwise the spec's candidates.
std::vector<PerfCandidate> candidates_of(Communicator& comm, const PerfSpec& spec) {
  std::vector<PerfCandidate> candidates = spec.candidates;
  if (candidates.size() != 1 || candidates[0].name != "all") return candidates;
  candidates.clear();
  comm.select(std::nullopt, std::nullopt);
  for (const auto& c : comm.decide(spec.collective, spec.min_bytes).candidates) {
    const std::string name = fmt::format("{}/{}", name_of(c.algorithm), name_of(c.protocol));
    const bool seen = std::any_of(candidates.begin(), candidates.end(), [&](auto& k) { return k.name == name; });
    if (c.excluded.empty() && !seen) candidates.push_back({name, c.algorithm, c.protocol});
  }
  candidates.push_back({"auto", std::nullopt, std::nullopt});
  return candidates;
}

// The sizes of the sweep, min_bytes to max_bytes by step_factor or step_bytes.
std::vector<std::size_t> sizes_of(const PerfSpec& spec) {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = spec.min_bytes; bytes <= spec.max_bytes;) {
    sizes.push_back(bytes);
    std::size_t next =
        spec.step_factor > 1 ? static_cast<std::size_t>(std::ceil(bytes * spec.step_factor)) : bytes + spec.step_bytes;
    if (next <= bytes) next = bytes + 1;
    bytes = next;
  }
  return sizes;
}

}  // namespace

std::size_t parse_size(const std::string& text) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    throw Error(ErrorCategory::config, "size '" + text + "' is not a number (use e.g. 8, 64K, 1M, 2G)");
  }
  std::string suffix = text.substr(pos);
  double scale = 1;
  if (suffix == "K" || suffix == "k")
    scale = 1024.0;
  else if (suffix == "M" || suffix == "m")
    scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    throw Error(ErrorCategory::config, "size '" + text + "': unknown suffix '" + suffix + "'");
  if (value < 0) throw Error(ErrorCategory::config, "size '" + text + "' is negative");
  return static_cast<std::size_t>(value * scale);
}

std::vector<PerfCandidate> parse_candidates(const std::string& text) {
  auto lower = [](std::string v) {
    for (auto& c : v)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return v;
  };
  if (lower(text) == "all") return {{"all", std::nullopt, std::nullopt}};
  std::vector<PerfCandidate> out;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string entry = text.substr(begin, end - begin);
    PerfCandidate c;
    if (lower(entry) == "auto") {
      c.name = "auto";
    } else {
      const std::size_t slash = std::min(entry.find('/'), entry.size());
      c.algorithm = parse_algorithm(std::string_view(entry).substr(0, slash));
      if (!c.algorithm) {
        throw Error(ErrorCategory::config, "--candidates entry '" + entry +
                                               "': expected Algorithm/Protocol (Ring or Tree / LL, LL128 or Simple), "
                                               "auto, or all alone");
      }
      c.protocol = parse_protocol(slash < entry.size() ? std::string_view(entry).substr(slash + 1) : "");
      if (!c.protocol) {
        throw Error(ErrorCategory::config,
                    "--candidates entry '" + entry + "': the protocol after '/' must be LL, LL128 or Simple");
      }
      c.name = fmt::format("{}/{}", name_of(*c.algorithm), name_of(*c.protocol));
    }
    for (const auto& seen : out) {
      if (seen.name == c.name) throw Error(ErrorCategory::config, "--candidates lists " + c.name + " twice");
    }
    out.push_back(std::move(c));
    if (end == text.size()) break;
    begin = end + 1;
  }
  return out;
}

std::vector<PerfRow> run_perf(Communicator& comm, const PerfSpec& spec,
                              const std::function<void(const PerfRow&)>& on_row) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t es = size_of(spec.type);
  const bool rooted = spec.collective == Collective::gather || spec.collective == Collective::scatter;
  const bool exchanges = spec.collective == Collective::all_to_all;
  const bool p2p = spec.collective == Collective::send_recv;
  std::vector<PerfRow> rows;
  std::vector<PerfCandidate> candidates = candidates_of(comm, spec);
  const bool compares = !candidates.empty();
  if (!compares) candidates.push_back({});
  std::size_t sizes_done = 0;
  for (const std::size_t requested : sizes_of(spec)) {
    const SizeShape z = shape_of(spec, n, requested);
    const std::size_t count = z.count, total = z.total;
    const bool gathers = z.gathers, scatters = z.scatters;
    std::vector<std::byte> input;
    fill(input, z.in_count, spec.type, spec.op, r, total);
    const Expected expected = spec.check ? expected_after(spec, n, r, z) : Expected{};
    const bool checks_here =
        spec.check &&
        !((spec.collective == Collective::reduce || spec.collective == Collective::gather) && r != spec.root);

    auto launch = [&](const std::byte* send, std::byte* recv) { return launch_call(comm, spec, count, send, recv); };

    // With --candidates the candidates take turns: each iteration runs
    // every candidate once, the first turning with the iteration and the
    // size, a turn being a lead-in call and a timed one, each waited for;
    // a row's time is the median of its timed calls. So every candidate
    // meets the same moments of the machine, and one hiccup costs one
    // call, not a row.
    const std::size_t nc = candidates.size();
    auto use = [&](std::size_t c) {
      if (compares) comm.select(candidates[c].algorithm, candidates[c].protocol);
    };
    std::vector<PerfRow> size_rows(nc);
    for (std::size_t c = 0; c < nc; ++c) {
      PerfRow& row = size_rows[c];
      row.bytes = total;
      row.count = count;
      row.candidate = candidates[c].name;
      row.has_in_place = !(exchanges || p2p);
      use(c);
      if (!(exchanges || p2p || rooted || spec.collective == Collective::barrier)) {
        const auto d = comm.decide(spec.collective, total);
        if (d.chosen >= 0) row.pick = d.pick();
      }
    }
    // all_to_all and sendrecv read and write the same blocks at once, so
    // they have no in-place form (as in NCCL); their in-place columns say N/A.
    const int passes = (exchanges || p2p) ? 1 : 2;
    for (int in_place = 0; in_place < passes; ++in_place) {
      std::vector<std::byte> send_store, recv_store(std::max(z.in_count, z.out_count) * es);
      std::byte* send = nullptr;
      std::byte* recv = recv_store.data();
      auto reset = [&] {
        std::byte* base = recv_store.data();
        if (in_place != 0) {
          // In place as NCCL defines it: all_gather's input is this rank's
          // block of the output; reduce_scatter's output is its block of the input.
          send = gathers ? base + static_cast<std::size_t>(r) * count * es : base;
          recv = scatters ? base + static_cast<std::size_t>(r) * count * es : base;
          copy_bytes(send, input.data(), input.size());
        } else {
          send_store = input;
          send = send_store.data();
          recv = base;
        }
      };
      reset();
      warm_up(
          comm, spec, nc, sizes_done, use,
          [&] {
            launch(send, recv).wait();
            reset();
          },
          sizes_done == 0 && in_place == 0);
      std::function<void(std::size_t)> turn_to;  // none: one configuration, timed as a loop
      if (compares) turn_to = use;
      const std::vector<double> times =
          time_calls(comm, spec, nc, sizes_done, turn_to, [&] { return launch(send, recv); });
      for (std::size_t c = 0; c < nc; ++c) {
        PerfResult result;
        result.time_us = times[c];
        result.algbw = times[c] > 0 ? static_cast<double>(total) / (times[c] * 1e3) : 0;
        result.busbw = result.algbw * bus_factor(spec.collective, n);
        if (spec.check) {
          // One more run from fresh inputs (the timed ones reduce in place
          // over their own results). Every rank runs it, so sequence numbers
          // stay in step; only ranks that receive a result compare it.
          use(c);
          reset();
          launch(send, recv).wait();
        }
        if (checks_here) {
          for (std::size_t i = 0; i < expected.bytes.size() / es; ++i) {
            if (std::memcmp(recv + i * es, expected.bytes.data() + i * es, es) != 0) ++result.wrong;
          }
          for (std::size_t i = 0; i < expected.values.size(); ++i) {
            if (!matches(recv + i * es, expected.values[i], spec.type, spec.op, n, expected.largest[i])) ++result.wrong;
          }
        }
        (in_place != 0 ? size_rows[c].in_place : size_rows[c].out_of_place) = result;
      }
    }
    for (std::size_t k = 0; k < nc; ++k) {
      rows.push_back(size_rows[(k + sizes_done) % nc]);
      if (on_row) on_row(rows.back());
    }
    ++sizes_done;
  }
  if (compares) comm.select(std::nullopt, std::nullopt);
  return rows;
}

std::string perf_header(const PerfSpec& spec, int nranks) {
  std::string out;
  // nccl-tests' first line (nThread and nGpus are 1: one rank per process).
  out += fmt::format(
      "# nranks {} nThread 1 nGpus 1 minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: {} "
      "validation: {} graph: 0\n",
      nranks, spec.min_bytes, spec.max_bytes,
      spec.step_factor > 1 ? fmt::format("{:g}", spec.step_factor) : std::to_string(spec.step_bytes),
      spec.step_factor > 1 ? "factor" : "bytes", spec.warmup, spec.iters, spec.agg_iters, spec.check ? 1 : 0);
  out += "#\n";
  out += fmt::format("# {:>10} {:>12} {:>8} {:>6} {:>6}   {:>27}   {:>27}\n", "", "", "", "", "", "out-of-place",
                     "in-place");
  out += fmt::format("# {:>10} {:>12} {:>8} {:>6} {:>6} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}\n", "size",
                     "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                     "#wrong");
  out += fmt::format("# {:>10} {:>12} {:>8} {:>6} {:>6} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}\n", "(B)",
                     "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  return out;
}

std::string perf_row_line(const PerfSpec& spec, const PerfRow& row) {
  const bool has_op = spec.collective == Collective::all_reduce || spec.collective == Collective::reduce ||
                      spec.collective == Collective::reduce_scatter;
  const bool has_root = spec.collective == Collective::broadcast || spec.collective == Collective::reduce ||
                        spec.collective == Collective::gather || spec.collective == Collective::scatter;
  auto part = [&](const PerfResult& r) {
    return fmt::format("{:>9.2f} {:>7.2f} {:>7.2f} {:>6}", r.time_us, r.algbw, r.busbw,
                       spec.check ? std::to_string(r.wrong) : std::string("N/A"));
  };
  return fmt::format(
      "  {:>10} {:>12} {:>8} {:>6} {:>6} {} {}\n", row.bytes, row.count, name_of(spec.type),
      has_op ? std::string(name_of(spec.op)) : std::string("none"),
      has_root ? std::to_string(spec.root) : std::string("-1"), part(row.out_of_place),
      row.has_in_place ? part(row.in_place) : fmt::format("{:>9} {:>7} {:>7} {:>6}", "N/A", "N/A", "N/A", "N/A"));
}

PerfSummary summarize(const std::vector<PerfRow>& rows) {
  PerfSummary s;
  double busbw = 0;
  int parts = 0;
  for (const auto& r : rows) {
    s.wrong += r.out_of_place.wrong + r.in_place.wrong;
    busbw += r.out_of_place.busbw + (r.has_in_place ? r.in_place.busbw : 0);
    parts += r.has_in_place ? 2 : 1;
  }
  s.avg_busbw = parts == 0 ? 0 : busbw / parts;
  return s;
}

std::string perf_footer(const std::vector<PerfRow>& rows) {
  const auto s = summarize(rows);
  return fmt::format("# Out of bounds values : {} {}\n# Avg bus bandwidth    : {:g} \n#\n", s.wrong,
                     s.wrong == 0 ? "OK" : "FAILED", s.avg_busbw);
}

}  // namespace ringmaster
