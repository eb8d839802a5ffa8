// Calibration of a communicator's links (tune/calibrate.h).
#include "tune/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/params.h"

namespace ringmaster::tune {

namespace {

using Clock = std::chrono::steady_clock;

// Sequence numbers of calibration's own collectives: far above any call's
// (which count from 0; transport::kFirstCalibrationSeq), one per purpose,
// so a rank that runs another step fails naming which.
enum : std::uint64_t {
  kSeqSync = ~std::uint64_t{0} - 2,        // a zero-byte all_reduce that lines the ranks up
  kSeqSmall = ~std::uint64_t{0} - 3,       // the timed calls and the ranks' go/stop votes
  kSeqOffer = ~std::uint64_t{0} - 4,       // rank 0's cached calibration
  kSeqAgreeLines = ~std::uint64_t{0} - 5,  // whether every rank's links carry LL128's lines
};
static_assert(kSeqAgreeLines >= transport::kFirstCalibrationSeq);

// What rank 0 offers from its cache: present 1 and the figures, or 0.
struct CacheOffer {
  double present = 0;
  Packed figures{};
};
static_assert(sizeof(CacheOffer) == (kPackedFigures + 1) * sizeof(double), "sent as doubles");

}  // namespace

Packed pack(const Calibration& c) {
  Packed p{};
  auto* out = p.data();
  auto put = [&](const double* v, std::size_t n) { out = std::copy(v, v + n, out); };
  put(c.hop_us, 3);
  put(c.share, 3);
  put(c.tree_hop_us, 3);
  *out++ = c.gbs;
  *out++ = c.gbs_all;
  *out++ = c.tree_share;
  put(c.bandwidth_factor, kCalibrationPoints);
  put(c.tree_share_by_size, kCalibrationPoints);
  *out++ = static_cast<double>(c.measured_at);
  *out++ = c.took_ms;
  return p;
}

Calibration unpack(const Packed& p) {
  Calibration c;
  const double* in = p.data();
  auto take = [&](double* v, std::size_t n) {
    std::copy(in, in + n, v);
    in += n;
  };
  take(c.hop_us, 3);
  take(c.share, 3);
  take(c.tree_hop_us, 3);
  c.gbs = *in++;
  c.gbs_all = *in++;
  c.tree_share = *in++;
  take(c.bandwidth_factor, kCalibrationPoints);
  take(c.tree_share_by_size, kCalibrationPoints);
  c.measured_at = static_cast<std::int64_t>(*in++);
  c.took_ms = *in++;
  return c;
}

namespace {

// Whether a cached calibration still holds for the links as they are now;
// why not, the same on every rank (rank 0's reading), or empty. The small
// all_reduce's hop (`hop_now`, timed by the caller) over twice the cached
// one says the cache was taken on a busier machine or a slower path; a
// faster hop keeps it (the machine busy now says nothing against figures
// taken when it was quiet: measuring anew whenever the hop was 1.5x off
// either way made a busy machine calibrate at most inits, and the shared
// memory test matrix of 1-3 ranks took 647 s instead of 160). A 256 KiB
// ring all_reduce (where links slower than a few Gbit/s show, and which
// costs a cached init 3-13 ms over loopback sockets where 1 MiB cost 25)
// over four times slower than the cached figures predict,
// or four times faster, says the network is not the one measured: a link
// degraded since (a rate limit, a lossy optic) or mended.
std::string cached_departs(algo::Context& ctx, const algo::Task& small, double hop_now, const Calibration& cached,
                           std::size_t buffsize, const LinkModel& link) {
  const bool shared_memory_only = link.transport == "shm";
  constexpr int kSimple = static_cast<int>(Protocol::simple);
  constexpr int kPoint = 1;
  static_assert(kCalibrationSizes[kPoint] == 256 << 10);
  const double n = ctx.nranks;
  const double b = kCalibrationSizes[kPoint];
  std::vector<std::byte> in(static_cast<std::size_t>(b)), out(in.size());
  algo::Task op = small;
  op.slot_bytes = buffsize / 8 / 4 * 4;
  algo::Task sync = small;
  sync.seq = kSeqSync;
  std::byte token{};
  std::vector<double> times;
  for (int t = 0; t < 4; ++t) {  // the first a lead-in: buffers grow on first use
    algo::all_reduce(ctx, sync, &token, &token, 0);
    const auto start = Clock::now();
    algo::all_reduce(ctx, op, in.data(), out.data(), in.size() / 4);
    if (t > 0) times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  const double now_us = times[times.size() / 2];
  const double steps = 2 * (n - 1) * cached.hop_us[kSimple];
  const double gbs = cached.gbs * cached.bandwidth_factor[kPoint];
  const double predicted_us = b * 2 * (n - 1) / n / (gbs * 1e3) + steps;
  // Rank 0's reading decides: 2 slower, 1 the hop, 3 faster (the 256 KiB
  // call's slower reading named first: it says what changed, where a
  // cached hop taken in a busy spell says only that). A hop is
  // over twice now's by more than 2 us before it counts: shared memory's
  // sub-microsecond hops read 0.3 one time and 0.7 the next, and each
  // such reading measured the whole calibration anew (~0.2 s an init).
  // Over shared memory alone the hop rule is all: memory is no network
  // that changes between runs, and a 256 KiB call there took 47 us one
  // run and 645 us the next with the ranks as unbound threads.
  constexpr double kHopNoiseUs = 2.0;
  std::int32_t verdict = 0;
  if (ctx.rank == 0) {
    const double hop = cached.hop_us[kSimple];
    verdict = !shared_memory_only && now_us > 4 * predicted_us   ? 2
              : hop > 2 * hop_now && hop > hop_now + kHopNoiseUs ? 1
              : shared_memory_only                               ? 0
              : now_us * 4 < predicted_us                        ? 3
                                                                 : 0;
  }
  algo::Task vote = small;
  vote.type = DataType::int32;
  vote.op = RedOp::max;
  algo::all_reduce(ctx, vote, reinterpret_cast<std::byte*>(&verdict), reinterpret_cast<std::byte*>(&verdict), 1);
  switch (verdict) {
    case 0:
      return {};
    case 1:
      return fmt::format(
          "the cached calibration ({:.1f} us a hop) is over twice what the links take now ({:.1f} us): "
          "measured anew",
          cached.hop_us[kSimple], hop_now);
    default:
      return fmt::format(
          "the cached calibration predicted a 256 KiB all_reduce in {:.0f} us and it took {:.0f} us now: the links are "
          "not what was measured ({} since), so they were measured anew",
          predicted_us, now_us, verdict == 2 ? "slower" : "faster");
  }
}

}  // namespace

namespace {

// The measuring of one calibration: the ranks' common calls and clocks,
// and the figures each step fills in (`m`, starting from the model's).
class Calibrator {
 public:
  Calibrator(const CalibrationRun& run, LinkModel& link, Calibration& m)
      : run_(run), link_(link), m_(m), ctx_(run.rings[0]), n_(run.nranks) {
    sync_.collective = Collective::barrier;
    sync_.seq = kSeqSync;
    op_small_ = sync_;
    op_small_.seq = kSeqSmall;
    op_small_.type = DataType::fp32;
  }

  // Everyone here first (a zero-byte all_reduce), so no rank times its
  // neighbours' start-up.
  void line_up() { algo::all_reduce(ctx_, sync_, &token_, &token_, 0); }

  // Rank 0 offers a calibration of this very shape from the cache;
  // everyone takes it, or everyone measures.
  CacheOffer offer(const std::string& cache, const std::string& key) {
    CacheOffer offer;
    if (run_.rank == 0) {
      if (const auto c = load_calibration(cache, key, std::chrono::hours(1))) {
        offer.present = 1;
        offer.figures = pack(*c);
      }
    }
    algo::Task offer_op = sync_;
    offer_op.seq = kSeqOffer;
    offer_op.type = DataType::fp64;
    offer_op.root = 0;
    algo::broadcast(ctx_, offer_op, reinterpret_cast<std::byte*>(&offer), sizeof(offer) / sizeof(double));
    return offer;
  }

  // First a warm-up of small all_reduces for kWarmUp (rank 0's clock
  // decides, the others follow its answer): a rank's first tens of
  // milliseconds after start run several times slower on a VM, and
  // the figures below would carry that.
  void warm_up(Clock::time_point started) {
    constexpr auto kWarmUp = std::chrono::milliseconds(30);
    for (std::int32_t go = 1; go != 0;)
      go = vote(run_.rank == 0 && Clock::now() - started < kWarmUp ? 1 : 0, RedOp::max);
  }

  // Whether the cached figures still hold (cached_departs): empty when
  // they do, else why not.
  std::string departs(const Calibration& offered) {
    op_small_.protocol = Protocol::simple;
    return cached_departs(ctx_, op_small_, typical(small(), 8, 5) / (2 * (n_ - 1)), offered, run_.buffsize, link_);
  }

  void measure_small_calls();
  // Returns the bytes of the largest size measured.
  std::size_t measure_sizes();
  void measure_protocol_shares();
  void measure_all_channels(std::size_t all_bytes);
  // Every rank takes the median of all ranks' figures.
  void agree();

 private:
  // 16 floats a rank: every step of the ring carries a piece, as in the
  // calls the tuner picks for. With 2 floats, at 4 ranks half the steps
  // went empty and the ring's hop came out light: rings were predicted
  // at 0.67-0.77 of their time from 128 B to 4 KiB and picked where
  // trees ran 1.2-1.7x faster.
  std::function<void()> small() {
    return [this] { algo::all_reduce(ctx_, op_small_, small_value(), small_value(), small_values_.size()); };
  }
  std::byte* small_value() { return reinterpret_cast<std::byte*>(small_values_.data()); }

  // An int32 all_reduce of every rank's `value` (`op`: max or min).
  std::int32_t vote(std::int32_t value, RedOp op) {
    algo::Task vote_op = op_small_;
    vote_op.type = DataType::int32;
    vote_op.op = op;
    algo::all_reduce(ctx_, vote_op, reinterpret_cast<std::byte*>(&value), reinterpret_cast<std::byte*>(&value), 1);
    return value;
  }

  static double batch_from_here(const std::function<void()>& f, int rounds) {
    const auto t = Clock::now();
    for (int i = 0; i < rounds; ++i)
      f();
    return std::chrono::duration<double, std::micro>(Clock::now() - t).count() / rounds;
  }
  // Every timed batch starts from a zero-byte all_reduce, so the ranks
  // start it together. Without it a rank that left the previous batch
  // early (a tree's root finishes before its leaves) timed its wait for
  // the others as part of the next batch: the ring batches after tree
  // batches came out slow, and the tree's share at 1 MiB read 1.9-4.5
  // on the four ranks of one calibration and 2.9-10.6 in the next.
  double batch(const std::function<void()>& f, int rounds) {
    line_up();
    return batch_from_here(f, rounds);
  }
  // One call timed as a loop of it runs: after the common start a
  // lead-in call, then the timed one, which starts where the lead-in
  // left each rank (a tree's root leaves a call before its leaves).
  // Timed straight from the common start, a 1 MiB ring at 4 ranks
  // over sockets read 0.9 GB/s where back-to-back calls ran at 1.3.
  double after_lead_in(const std::function<void()>& f, int calls) {
    line_up();
    f();
    return batch_from_here(f, calls);
  }
  // The median of several batches: the fastest one is where every
  // rank happened to run at once, which with more ranks than CPUs
  // is the exception, and the model should predict the rule.
  static double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  // Small calls one by one after a lead-in, the median call: a batch's
  // mean carries every call that waited for a rank the scheduler had
  // parked (4 ranks on 2 CPUs), and the means put the 4-rank hop at
  // 1.2-1.4x what single calls in a loop take, the time a training
  // loop sees and perf reports.
  double median_call(const std::function<void()>& f, int calls) {
    line_up();
    f();
    std::vector<double> times;
    for (int i = 0; i < calls; ++i)
      times.push_back(batch_from_here(f, 1));
    return median_of(std::move(times));
  }
  double typical(const std::function<void()>& f, int calls, int batches) {
    std::vector<double> times;
    for (int i = 0; i < batches; ++i)
      times.push_back(median_call(f, calls));
    return median_of(std::move(times));
  }

  // The large calls' task: Simple, slots of the channel's buffer.
  algo::Task op_big() const {
    algo::Task op = op_small_;
    op.protocol = Protocol::simple;
    op.slot_bytes = run_.buffsize / 8 / 4 * 4;
    return op;
  }

  static constexpr int kSimple = static_cast<int>(Protocol::simple);
  static constexpr int kPoints = kCalibrationPoints;

  const CalibrationRun& run_;
  LinkModel& link_;
  Calibration& m_;
  algo::Context ctx_;
  const double n_;
  algo::Task sync_, op_small_;
  std::byte token_{};
  std::vector<float> small_values_ = std::vector<float>(16 * static_cast<std::size_t>(n_), 0.0f);
  std::vector<std::byte> big_, big_out_;  // the large calls' buffers, once measure_sizes made them
};

void Calibrator::measure_small_calls() {
  double(&hop)[3] = m_.hop_us;
  double(&tree_hop)[3] = m_.tree_hop_us;  // not measured: the tree's factor times a hop
  const int rank = run_.rank;
  // A small tree all_reduce per protocol too: its levels cost what
  // the ring's hops do not tell (a rank waits on two children, and
  // the two trees' steps interleave).
  const auto& small_tree = *run_.tree;
  const int tree_depth = small_tree.depth_intra + small_tree.depth_inter;
  algo::Task op_small_tree = op_small_;
  op_small_tree.algorithm = Algorithm::tree;
  const auto small_ring = small();
  auto small_by_tree = [&] {
    algo::tree_all_reduce(ctx_, small_tree, op_small_tree, small_value(), small_value(), small_values_.size());
  };
  // The small calls are measured once more when they read over twice
  // what the same calls take right after: a spell of the machine
  // (another process woke up) had them all slow, and the tuner would
  // predict every small size at that pace for the communicator's life
  // (one calibration put 8 B at 90 us where calls took 22).
  for (int attempt = 0;; ++attempt) {
    // Ring and tree batches of every protocol take turns, round after
    // round, so all of them see the same spells of the machine (one
    // protocol's batches all in a quiet spell would make it look the
    // faster one, as the bandwidth shares below once did).
    auto measured_protocol = [&](int p) { return p != static_cast<int>(Protocol::ll128) || link_.ll128; };
    auto use = [&](int p) { op_small_.protocol = op_small_tree.protocol = static_cast<Protocol>(p); };
    for (int p = 0; p < 3; ++p) {
      if (!measured_protocol(p)) continue;
      use(p);
      batch(small_ring, 5);
      if (tree_depth > 0) batch(small_by_tree, 5);
    }
    std::vector<double> ring_times[3], tree_times[3];
    for (int i = 0; i < 7; ++i) {
      for (int p = 0; p < 3; ++p) {
        if (!measured_protocol(p)) continue;
        use(p);
        ring_times[p].push_back(median_call(small_ring, 8));
        if (tree_depth > 0) tree_times[p].push_back(median_call(small_by_tree, 8));
      }
    }
    // Simple's ring figure sets the scale; every other figure counts as
    // its ratio to the Simple ring figure of its own round (the median
    // of those ratios): a spell of the machine that slows one round
    // slows both sides of its ratios, where medians taken apart could
    // come from different spells (a tree level once measured 1.35
    // ring hops in one calibration and 0.7 in the next).
    auto paired = [&](const std::vector<double>& times) {
      std::vector<double> ratios;
      for (std::size_t i = 0; i < times.size(); ++i)
        ratios.push_back(times[i] / ring_times[kSimple][i]);
      return median_of(std::move(ratios)) * median_of(ring_times[kSimple]);
    };
    for (int p = 0; p < 3; ++p) {
      if (!measured_protocol(p)) continue;
      hop[p] = paired(ring_times[p]) / (2 * (n_ - 1));
      if (tree_depth > 0) tree_hop[p] = paired(tree_times[p]) / (2 * tree_depth);
    }
    if (!link_.ll128) {  // not a candidate; figures all the same
      hop[1] = hop[kSimple];
      tree_hop[1] = tree_hop[kSimple];
    }
    if (attempt == 1) break;
    op_small_.protocol = Protocol::simple;
    const double hop_now = typical(small_ring, 8, 3) / (2 * (n_ - 1));
    if (vote(rank == 0 && hop[kSimple] > 2 * hop_now ? 1 : 0, RedOp::max) == 0) break;
    if (rank == 0) {
      RM_INFO(tuning, "small calls measured at {:.1f} us a hop, {:.1f} us right after: measuring them again",
              hop[kSimple], hop_now);
    }
  }
  op_small_.protocol = Protocol::simple;
}

// Ring and tree at kCalibrationSizes (64 KiB to 16 MiB),
// taking turns, medians of several tries (the faster of two at 16
// MiB put the ring there at 0.77-0.85 of its time in runs, and the
// tuner took it over trees 1.2-1.4x faster): the bandwidth by size
// (CPU ranks copy and add faster per byte while the buffers stay in
// cache: one figure from 4 MiB predicted 16-64 MiB at 0.6-0.7 of
// their time and 0.5-1 MiB at 1.2-1.7; with 1 MiB the smallest
// size, the rings at 256-512 KiB ran in half their predicted time
// over sockets, and the tree at 2 MiB took 2.7x its 1 MiB time
// where log(bytes) between 1 and 4 MiB said 2) and the tree's share
// of it through the model's own formula (twice the buffer plus one
// piece of fill per level and pass). From 64 KiB: with 256 KiB the
// smallest, sizes below it took its figures, and over sockets at 4
// ranks the trees, all latency up to 64 KiB (95-120 us from 8 B),
// were predicted at 1.35-1.7x their time from 16 to 256 KiB.
std::size_t Calibrator::measure_sizes() {
  const double n = n_;
  double(&tree_share_at)[kPoints] = m_.tree_share_by_size;
  constexpr std::size_t kLargest = static_cast<std::size_t>(kCalibrationSizes[kPoints - 1]);
  big_.resize(kLargest);
  big_out_.resize(kLargest);
  const algo::Task op_ring = op_big();
  const double steps = 2 * (n - 1) * m_.hop_us[kSimple];
  const auto& tree = *run_.tree;
  algo::Task op_tree = op_ring;
  op_tree.algorithm = Algorithm::tree;
  const double depth = tree.depth_intra + tree.depth_inter;
  auto ring_at = [&](std::size_t bytes) { algo::all_reduce(ctx_, op_ring, big_.data(), big_out_.data(), bytes / 4); };
  auto tree_at = [&](std::size_t bytes) {
    algo::tree_all_reduce(ctx_, tree, op_tree, big_.data(), big_out_.data(), bytes / 4);
  };
  // Scratch and socket buffers grow on first use: each try's lead-in
  // call takes that. A size whose calls would take over kCallBudget
  // (a slow link: 16 MiB at 40 Mbit/s takes seconds a call) is not
  // measured; it and the sizes above keep the last measured figures.
  // The ranks agree on it from the slowest rank's estimate.
  constexpr double kCallBudgetUs = 250e3;
  double ring_gbs[kPoints] = {};
  int measured_points = 0;
  for (int i = 0; i < kPoints; ++i) {
    const auto bytes = static_cast<std::size_t>(kCalibrationSizes[i]);
    if (i > 0) {
      const double b = kCalibrationSizes[i];
      const double ring_us = b * 2 * (n - 1) / n / (ring_gbs[i - 1] * 1e3) + steps;
      const double tree_us = ring_us / std::max(tree_share_at[i - 1], 0.1);
      if (vote(std::max(ring_us, tree_us) <= kCallBudgetUs ? 1 : 0, RedOp::min) == 0) break;
    }
    measured_points = i + 1;
    std::vector<double> ring_tries, tree_tries;
    // Five tries up to 2 MiB, where a call takes a few milliseconds,
    // and up to 1 MiB each the mean of four calls (single calls of
    // 256 KiB, a few hundred microseconds on 2 CPUs shared by 4
    // ranks, put one rank's ring at 0.45 of the 4 MiB bandwidth and
    // another's at 1.8); three single calls above.
    const int tries = bytes <= (2u << 20) ? 5 : 3;
    const int calls = bytes <= (1u << 20) ? 4 : 1;
    // The first size's tries run twice, the first time unrecorded:
    // over shared memory at 4 ranks the first 25-35 tree calls of 64
    // KiB after the small ones took 600-870 us, then 60-80 us, as
    // perf and a loop find them (the tree's share came out 0.07-0.19
    // and the trees were predicted at 6-10x their time).
    for (int pass = i == 0 ? 0 : 1; pass < 2; ++pass) {
      ring_tries.clear();
      tree_tries.clear();
      for (int t = 0; t < tries; ++t) {
        ring_tries.push_back(after_lead_in([&] { ring_at(bytes); }, calls));
        tree_tries.push_back(after_lead_in([&] { tree_at(bytes); }, calls));
      }
    }
    const double b = static_cast<double>(bytes);
    // The time beyond the latency, but at least an eighth of the call:
    // at 64 KiB the latency is most of it, and a try that ran faster
    // than the small calls said must not read as endless bandwidth.
    auto beyond = [](double t, double latency) { return std::max(t - latency, t / 8); };
    auto ring_rate = [&](double t) { return b * 2 * (n - 1) / n / beyond(t, steps) / 1e3; };
    ring_gbs[i] = ring_rate(median_of(ring_tries));
    const double piece = std::min(b / 2, static_cast<double>(run_.buffsize / 8));
    const double tree_moved = 2.0 * b + 2 * depth * piece;
    const double tree_latency = 2 * depth * m_.tree_hop_us[kSimple];
    // The tree's share from each try's pair (a tree try and the ring
    // try next to it see the same spell of the machine), the median
    // of those: what decides between the two is their ratio, and
    // medians taken apart can come from different spells.
    std::vector<double> shares;
    for (std::size_t t = 0; t < tree_tries.size(); ++t) {
      const double tree_rate = tree_moved / beyond(tree_tries[t], tree_latency) / 1e3;
      shares.push_back(tree_rate / ring_rate(ring_tries[t]));
    }
    tree_share_at[i] = median_of(std::move(shares));
  }
  for (int i = measured_points; i < kPoints; ++i) {
    ring_gbs[i] = ring_gbs[measured_points - 1];
    tree_share_at[i] = tree_share_at[measured_points - 1];
  }
  if (measured_points < kPoints && run_.rank == 0) {
    RM_INFO(tuning, "calibration stopped after {} bytes: larger calls would take over {:.0f} ms each",
            kCalibrationSizes[measured_points - 1], kCallBudgetUs / 1e3);
  }
  m_.gbs = ring_gbs[kReferencePoint];
  m_.tree_share = tree_share_at[kReferencePoint];
  for (int i = 0; i < kPoints; ++i)
    m_.bandwidth_factor[i] = ring_gbs[i] / m_.gbs;
  return static_cast<std::size_t>(kCalibrationSizes[measured_points - 1]);
}

// Each protocol's share of Simple's bandwidth, at a size where
// bytes count more than steps: over shared memory LL and LL128 move
// their lines slower than the byte ring moves its bytes.
void Calibrator::measure_protocol_shares() {
  const double n = n_;
  const double(&hop)[3] = m_.hop_us;
  // The protocols take turns, several rounds, medians: three calls
  // each in a row once measured LL128 as fast as Simple at 4 ranks
  // on 2 CPUs (one quiet spell), where runs find it 2-3x slower.
  constexpr std::size_t kMid = 256 << 10;
  constexpr int kRounds = 5;
  auto run_mid = [&](int p) {
    algo::Task op_mid = op_big();
    op_mid.protocol = static_cast<Protocol>(p);
    if (op_mid.protocol == Protocol::ll) op_mid.slot_bytes = 0;
    algo::all_reduce(ctx_, op_mid, big_.data(), big_out_.data(), kMid / 4);
  };
  auto measured = [&](int p) { return p != static_cast<int>(Protocol::ll128) || link_.ll128; };
  std::vector<double> rounds[3];
  for (int p = 0; p < 3; ++p) {
    if (measured(p)) run_mid(p);
  }
  for (int r = 0; r < kRounds; ++r) {
    for (int p = 0; p < 3; ++p) {
      if (measured(p)) rounds[p].push_back(after_lead_in([&] { run_mid(p); }, 1));
    }
  }
  double t_mid[3] = {};
  for (int p = 0; p < 3; ++p) {
    if (measured(p)) t_mid[p] = median_of(rounds[p]);
  }
  const double simple_time = std::max(t_mid[kSimple] - 2 * (n - 1) * hop[kSimple], t_mid[kSimple] / 2);
  // At most what a line carries: over shared memory LL's lines hold
  // 8 bytes of data in 16, LL128's 120 in 128; over sockets and
  // libfabric LL is one eager frame of plain bytes, the line
  // Simple's (capped at 0.5 there too, the tuner kept sockets off
  // Ring/LL at 256 KiB-1 MiB, where it ran 1.3x faster than Simple).
  const bool lines = link_.transport.find("shm") != std::string::npos;
  const double most_share[3] = {lines ? 0.5 : 1.0, 0.9375, 1.0};
  for (int p = 0; p < 3; ++p) {
    if (p == kSimple || t_mid[p] <= 0) continue;
    const double time = std::max(t_mid[p] - 2 * (n - 1) * hop[p], t_mid[p] / 2);
    m_.share[p] = std::clamp(simple_time / time, 0.01, most_share[p]);
  }
  m_.share[kSimple] = 1;
}

// Every channel at once, each on its own buffers, `all_bytes` each.
void Calibrator::measure_all_channels(std::size_t all_bytes) {
  const auto& rings = run_.rings;
  m_.gbs_all = m_.gbs;
  if (rings.size() <= 1) return;
  const double moved = static_cast<double>(all_bytes) * 2 * (n_ - 1) / n_;
  const double steps = 2 * (n_ - 1) * m_.hop_us[kSimple];
  const algo::Task op = op_big();
  std::vector<double> times(rings.size());
  std::vector<std::exception_ptr> failed(rings.size());
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < rings.size(); ++c) {
    threads.emplace_back([&, c] {
      try {
        std::vector<std::byte> in(all_bytes), out(all_bytes);
        auto cc = rings[c];
        algo::all_reduce(cc, op, in.data(), out.data(), all_bytes / 4);
        // The median of three calls (two calls' mean once put two
        // channels at twice one's bandwidth at 8 ranks on 2 CPUs,
        // where they run no faster than one).
        std::vector<double> tries;
        for (int t = 0; t < 3; ++t) {
          tries.push_back(batch_from_here([&] { algo::all_reduce(cc, op, in.data(), out.data(), all_bytes / 4); }, 1));
        }
        times[c] = median_of(std::move(tries));
        // What this channel sent last must leave before its thread
        // does: nothing else drives this channel until init is over.
        rings[c].link.flush();
      } catch (...) {
        failed[c] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& f : failed) {
    if (f) std::rethrow_exception(f);
  }
  const double slowest = *std::max_element(times.begin(), times.end());
  m_.gbs_all = moved * static_cast<double>(rings.size()) / std::max(slowest - steps, slowest / 2) / 1e3;
}

void Calibrator::agree() {
  const auto& m = m_;
  RM_INFO(tuning,
          "calibration on this rank: hop {:.1f}/{:.1f}/{:.1f} us (LL/LL128/Simple), tree level {:.1f}/{:.1f}/{:.1f} "
          "us, {:.3f} GB/s per channel at 4 MiB (LL {:.2f}, LL128 {:.2f} of it; x{:.2f} at 64K/256K/1M/2M/4M/16M), "
          "{:.3f} GB/s on all channels, tree at {:.2f} of the ring's bandwidth",
          m.hop_us[0], m.hop_us[1], m.hop_us[2], m.tree_hop_us[0], m.tree_hop_us[1], m.tree_hop_us[2], m.gbs,
          m.share[0], m.share[1], fmt::join(m.bandwidth_factor, "/x"), m.gbs_all, fmt::join(m.tree_share_by_size, "/"));
  // Every rank takes the median of all ranks' figures: the same
  // numbers everywhere, and one rank's scheduling hiccup does not count.
  std::vector<Packed> all(static_cast<std::size_t>(run_.nranks));
  all[static_cast<std::size_t>(run_.rank)] = pack(m_);
  algo::Task gather_op = op_small_;
  gather_op.type = DataType::fp64;
  gather_op.slot_bytes = 0;
  algo::all_gather(ctx_, gather_op, reinterpret_cast<std::byte*>(all.data()), kPackedFigures, sizeof(Packed));
  // The tree's share too: each rank times its call after a lead-in
  // call, as a loop runs them, so the ranks read one pace, a root
  // that left the lead-in early a little more of it, a leaf that
  // left late a little less. (The slowest rank's share fitted calls
  // timed from a common start; after a lead-in it put Tree/Simple
  // at 8 ranks at 1.2-1.5x its time from 1 MiB up.)
  Packed agreed{};
  for (std::size_t field = 0; field < kPackedFigures; ++field) {
    std::vector<double> v;
    for (const auto& figures : all)
      v.push_back(figures[field]);
    agreed[field] = median_of(std::move(v));
  }
  m_ = unpack(agreed);
  run_.rings[0].link.flush();
}

// Every rank must offer LL128 alike, or they would pick different
// protocols: only when every rank's links are all shared memory.
bool every_rank_has_lines(const CalibrationRun& run, bool lines_here) {
  if (run.nranks <= 1) return lines_here;
  auto ctx = run.rings[0];
  algo::Task agree;
  agree.collective = Collective::barrier;
  agree.seq = kSeqAgreeLines;
  agree.type = DataType::int32;
  agree.op = RedOp::min;
  std::int32_t lines = lines_here ? 1 : 0;
  algo::all_reduce(ctx, agree, reinterpret_cast<const std::byte*>(&lines), reinterpret_cast<std::byte*>(&lines), 1);
  return lines == 1;
}

}  // namespace

LinkModel calibrate(const CalibrationRun& run, Shape& shape) {
  const int nranks = run.nranks;
  std::string& source = shape.source;
  LinkModel link = shape.intra;  // socket_shape's, with the RINGMASTER_TUNE_* figures
  // The figures, starting from the model's. Per protocol (LL, LL128,
  // Simple): shared memory lays each out its own way.
  Calibration m;
  std::copy(link.hop_latency_us, link.hop_latency_us + 3, m.hop_us);
  std::copy(link.protocol_efficiency, link.protocol_efficiency + 3, m.share);
  m.gbs = link.bandwidth_gbs;
  m.gbs_all = link.max_bandwidth_gbs;
  m.tree_share = shape.tree_efficiency;
  // The ring's bandwidth over gbs and the tree's share at each of
  // kCalibrationSizes; used only when measured (by_size).
  bool by_size = false;
  source = "defaults (RINGMASTER_TUNE_HOP_US, RINGMASTER_TUNE_GBS)";
  // The figures below are measured over what carries the links, so the
  // cache keeps transports apart.
  link.transport = run.transport.empty() ? "socket" : run.transport;
  // LL128's lines need every link to be shared memory; sockets and
  // libfabric carry a byte stream.
  link.ll128 = every_rank_has_lines(run, run.transport == "shm" || run.transport.empty());
  if (param_int(Param::Calibrate) != 0 && nranks > 1) {
    const auto started = Clock::now();
    Calibrator calibrator(run, link, m);
    calibrator.line_up();
    const std::string cache = calibration_cache_path();
    const std::string key = fmt::format("{} ranks={} hosts={} channels={} buffsize={} trees={}", link.transport, nranks,
                                        run.placement, run.rings.size(), run.buffsize, run.tree_nodes);
    const CacheOffer offer = calibrator.offer(cache, key);
    calibrator.warm_up(started);
    // A cached calibration is taken only while the links still match it
    // (cached_departs): else it is measured anew, and the source says why.
    bool cached = offer.present == 1;
    const Calibration offered = unpack(offer.figures);
    std::string departs;
    if (cached) {
      departs = calibrator.departs(offered);
      cached = departs.empty();
      if (!cached && run.rank == 0) RM_INFO(tuning, "{}", departs);
    }
    by_size = true;
    if (cached) {
      run.rings[0].link.flush();
      m = offered;
      const auto now =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
      source = fmt::format("calibration of this shape measured {} s ago, kept in {}", now - offered.measured_at, cache);
    } else {
      // The collective itself, timed in batches (ranks run in lock step,
      // so a batch amortises when each started): small all_reduces give
      // the hop latency (2(n-1) steps each), larger ones the bandwidth of
      // a step beyond that latency; all channels at once at 4 MiB, or at
      // the largest size measured.
      calibrator.measure_small_calls();
      const std::size_t largest = calibrator.measure_sizes();
      calibrator.measure_protocol_shares();
      calibrator.measure_all_channels(std::min<std::size_t>(4 << 20, largest));
      calibrator.agree();
      const double took = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
      source = fmt::format("calibrated at init in {:.1f} ms (median of the ranks' figures){}", took,
                           departs.empty() ? std::string() : "; " + departs);
      if (run.rank == 0) {
        Calibration c = m;
        c.measured_at =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        c.took_ms = took;
        if (store_calibration(cache, key, c)) source += "; kept in " + cache + " for an hour";
      }
    }
  }
  std::copy(m.hop_us, m.hop_us + 3, link.hop_latency_us);
  std::copy(m.share, m.share + 3, link.protocol_efficiency);
  std::copy(m.tree_hop_us, m.tree_hop_us + 3, link.tree_hop_latency_us);
  link.bandwidth_gbs = m.gbs;
  link.max_bandwidth_gbs = std::max(m.gbs, m.gbs_all);
  shape.tree_efficiency = m.tree_share;
  if (by_size) {
    for (int i = 0; i < kCalibrationPoints; ++i) {
      link.bandwidth_by_size.push_back({kCalibrationSizes[i], m.bandwidth_factor[i]});
      shape.tree_efficiency_by_size.push_back({kCalibrationSizes[i], m.tree_share_by_size[i]});
    }
  }
  return link;
}

}  // namespace ringmaster::tune
