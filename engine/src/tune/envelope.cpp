// The published runs and the envelope around the simulator's prediction
// (tools/envelope.h).
#include "ringmaster/tools/envelope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "ringmaster/status.h"

namespace ringmaster::tune {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr Collective kAllReduce = Collective::all_reduce;

constexpr std::string_view kNccl527 = "NVIDIA/nccl#527 (NCCL 2.9.9, 2022)";
constexpr std::string_view kAwsome = "aws-samples/awsome-distributed-training, micro-benchmarks/nccl-tests/README.md";
constexpr std::string_view kHyperPod =
    "crazyguitar/aws-gpu-communication-benchmark, data/nccl_all_reduce.csv (SageMaker HyperPod)";

// docs/tuner.md, "Against published runs", says what each fits or checks.
constexpr PublishedRun kRuns[] = {
    {"p4d.24xlarge", 1, kAllReduce, kGiB, 230.77, 0, true, kNccl527},
    {"p4d.24xlarge", 2, kAllReduce, kGiB, 57.17, 0, false, kNccl527},
    {"p4d.24xlarge", 3, kAllReduce, kGiB, 31.77, 0, true, kNccl527},
    {"p4d.24xlarge", 4, kAllReduce, kGiB, 29.61, 0, false, kNccl527},
    {"p4d.24xlarge", 2, kAllReduce, 8, 0, 182.0, true, "dstackai/dstack#3865"},
    {"p4de.24xlarge", 2, kAllReduce, 8, 0, 164.3, false, kAwsome},
    {"p4de.24xlarge", 2, kAllReduce, kGiB, 76.79, 0, false, kAwsome},
    {"p5.48xlarge", 1, kAllReduce, 8 * kGiB, 480, 0, true, "NVIDIA/nccl-tests#212 (NVLink SHARP peak)"},
    {"p5.48xlarge", 2, kAllReduce, 8, 0, 69.29, true, "aws/aws-k8s-tester#585"},
    {"p5.48xlarge", 2, kAllReduce, 8, 0, 69.12, false, kAwsome},
    {"p5.48xlarge", 2, kAllReduce, kGiB, 436.95, 0, false, kAwsome},
    {"p5.48xlarge", 2, kAllReduce, 8 * kGiB, 479.28, 0, false, kAwsome},
    {"p5.48xlarge", 2, kAllReduce, kGiB, 435.14, 0, false, kHyperPod},
    {"p5.48xlarge", 2, kAllReduce, 2 * kGiB, 445.05, 0, false, kHyperPod},
    {"p5.48xlarge", 2, kAllReduce, 4 * kGiB, 465.81, 0, false, kHyperPod},
    {"p5.48xlarge", 2, kAllReduce, 8 * kGiB, 477.71, 0, false, kHyperPod},
    {"p5.48xlarge", 4, kAllReduce, kGiB, 280.30, 0, false, kHyperPod},
    {"p5.48xlarge", 4, kAllReduce, 2 * kGiB, 347.57, 0, false, kHyperPod},
    {"p5.48xlarge", 4, kAllReduce, 4 * kGiB, 354.45, 0, false, kHyperPod},
    {"p5.48xlarge", 4, kAllReduce, 8 * kGiB, 356.99, 0, false, kHyperPod},
    {"p5.48xlarge", 8, kAllReduce, kGiB, 274.47, 0, false, kHyperPod},
    {"p5.48xlarge", 8, kAllReduce, 2 * kGiB, 278.15, 0, false, kHyperPod},
    {"p5.48xlarge", 8, kAllReduce, 4 * kGiB, 351.32, 0, false, kHyperPod},
    {"p5.48xlarge", 8, kAllReduce, 8 * kGiB, 355.36, 0, false, kHyperPod},
    {"p5.48xlarge", 16, kAllReduce, kGiB, 269.23, 0, false, kHyperPod},
    {"p5.48xlarge", 16, kAllReduce, 2 * kGiB, 270.91, 0, false, kHyperPod},
    {"p5.48xlarge", 16, kAllReduce, 4 * kGiB, 306.15, 0, false, kHyperPod},
    {"p5.48xlarge", 16, kAllReduce, 8 * kGiB, 356.27, 0, false, kHyperPod},
    {"p5.48xlarge", 32, kAllReduce, kGiB, 220.08, 0, false, kHyperPod},
    {"p5.48xlarge", 32, kAllReduce, 2 * kGiB, 269.47, 0, false, kHyperPod},
    {"p5.48xlarge", 32, kAllReduce, 4 * kGiB, 302.81, 0, false, kHyperPod},
    {"p5.48xlarge", 32, kAllReduce, 8 * kGiB, 321.10, 0, false, kHyperPod},
    {"p6-b200.48xlarge", 2, kAllReduce, 8, 0, 50.58, false, "dstackai/dstack#3961"},
};

std::string size_text(std::size_t bytes) {
  if (bytes >= kGiB && bytes % kGiB == 0) return fmt::format("{} GiB", bytes / kGiB);
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::string run_text(const PublishedRun& r) {
  return fmt::format("{} at {} on {} node{} ({})",
                     r.busbw_gbs > 0 ? fmt::format("{:.1f} GB/s", r.busbw_gbs) : fmt::format("{:.1f} us", r.time_us),
                     size_text(r.bytes), r.nodes, r.nodes == 1 ? "" : "s", r.source);
}

// The simulator's prediction for a shape; none for a collective the model
// does not cover.
std::optional<Envelope> predicted_envelope(const Shape& shape, std::string instance, int nodes, Collective c,
                                           std::size_t bytes, double tolerance) {
  if (!(tolerance >= 0 && tolerance < 1)) {
    throw Error(ErrorCategory::config, fmt::format("tolerance {}: expected at least 0 and under 1", tolerance));
  }
  if (c != Collective::all_reduce && c != Collective::all_gather && c != Collective::reduce_scatter &&
      c != Collective::broadcast && c != Collective::reduce) {
    return std::nullopt;
  }
  const Tuner tuner(shape);
  const auto rows = simulate(tuner, c, DataType::fp32, bytes, bytes, 2);
  if (rows.empty()) return std::nullopt;
  Envelope e;
  e.instance = std::move(instance);
  e.nodes = nodes;
  e.collective = c;
  e.bytes = rows.front().bytes;
  e.predicted_busbw_gbs = rows.front().busbw_gbs;
  e.predicted_time_us = rows.front().time_us;
  e.tolerance = tolerance;
  return e;
}

}  // namespace

std::span<const PublishedRun> published_runs() {
  return kRuns;
}

bool within_envelope_bounds(const PublishedRun& run, double predicted) {
  if (run.busbw_gbs > 0) return std::abs(predicted / run.busbw_gbs - 1) <= (run.fitted ? 0.05 : 0.25);
  const double ratio = std::max(predicted / run.time_us, run.time_us / predicted);
  return ratio <= (run.fitted ? 1.05 : 2.0);
}

std::optional<Envelope> expected_envelope(std::string_view instance, int nodes, Collective c, std::size_t bytes,
                                          double tolerance) {
  const InstanceProfile& profile = instance_profile(instance);
  auto e = predicted_envelope(instance_shape(profile, nodes), std::string(profile.name), nodes, c, bytes, tolerance);
  if (!e) return e;
  for (const auto& r : kRuns) {
    if (r.instance == profile.name && r.collective == c) e->published.push_back(r);
  }
  const auto distance = [&](const PublishedRun& r) {
    const double size = std::abs(std::log2(static_cast<double>(std::max<std::size_t>(r.bytes, 1))) -
                                 std::log2(static_cast<double>(std::max<std::size_t>(e->bytes, 1))));
    return std::make_pair(std::abs(r.nodes - nodes), size);
  };
  std::stable_sort(e->published.begin(), e->published.end(),
                   [&](const PublishedRun& a, const PublishedRun& b) { return distance(a) < distance(b); });
  return e;
}

std::vector<const InstanceProfile*> profiles_declared_by(const topo::Topology& node) {
  const auto gpus = node.gpus();
  const auto nics = node.nics();
  std::vector<const InstanceProfile*> out;
  if (gpus.empty()) return out;
  const std::uint32_t device = node.gpu_device(gpus.front());
  const std::string* sm_text = node.node(gpus.front()).attribute("sm");
  const int sm = sm_text != nullptr ? std::atoi(sm_text->c_str()) : 0;
  for (const auto& p : instance_profiles()) {
    if (p.gpus != static_cast<int>(gpus.size()) || p.nics != static_cast<int>(nics.size())) continue;
    if (device != 0 && device != p.gpu_device) continue;
    if (sm != 0 && sm != p.sm) continue;
    out.push_back(&p);
  }
  return out;
}

std::string declared_node_text(const topo::Topology& node) {
  const auto gpus = node.gpus();
  std::string model;
  if (!gpus.empty()) {
    model = node.gpu_model(gpus.front());
    if (const std::string* sm = node.node(gpus.front()).attribute("sm"); model.empty() && sm != nullptr)
      model = "sm_" + *sm;
  }
  return fmt::format("{} GPU{}{}, {} NIC{}", gpus.size(), gpus.size() == 1 ? "" : "s",
                     model.empty() ? "" : " (" + model + ")", node.nics().size(), node.nics().size() == 1 ? "" : "s");
}

std::optional<Envelope> expected_envelope(const topo::Topology& node, std::string_view instance, int nodes,
                                          Collective c, std::size_t bytes, double tolerance) {
  const std::string declares = declared_node_text(node);
  if (node.gpus().empty()) {
    throw Error(ErrorCategory::config,
                fmt::format("{} declares no GPU ({}): nothing to predict a collective from", node.source(), declares));
  }
  if (!instance.empty()) {
    const InstanceProfile& p = instance_profile(instance);
    if (p.gpus != static_cast<int>(node.gpus().size()) || p.nics != static_cast<int>(node.nics().size())) {
      throw Error(ErrorCategory::config, fmt::format("{} declares {}; a {} has {} GPUs and {} NICs", node.source(),
                                                     declares, p.name, p.gpus, p.nics));
    }
    auto e = expected_envelope(p.name, nodes, c, bytes, tolerance);
    if (e) e->declared_by = fmt::format("{}: {}, a {} as declared", node.source(), declares, p.name);
    return e;
  }
  const auto profiles = profiles_declared_by(node);
  if (!profiles.empty()) {
    std::string names;
    for (const auto* p : profiles)
      names += (names.empty() ? "" : " or ") + std::string(p->name);
    auto e = expected_envelope(profiles.front()->name, nodes, c, bytes, tolerance);
    if (e) e->declared_by = fmt::format("{}: {}, a {}", node.source(), declares, names);
    return e;
  }
  auto e = predicted_envelope(declared_shape(node, nodes), node.source(), nodes, c, bytes, tolerance);
  if (e)
    e->declared_by =
        fmt::format("{}: {}, no instance type's profile (its own links predicted)", node.source(), declares);
  return e;
}

std::string Envelope::describe() const {
  std::string out =
      fmt::format("{} x {}, {} at {}: {:.1f} GB/s predicted, at least {:.1f} within {:.0f}%", instance, nodes,
                  name_of(collective), size_text(bytes), predicted_busbw_gbs, least_busbw_gbs(), tolerance * 100);
  out += published.empty() ? "; no published run of it to compare" : "; published " + run_text(published.front());
  if (!declared_by.empty()) out += " (declared by " + declared_by + ")";
  return out;
}

std::string gate_refusal(const Envelope& e, double gate_gbs) {
  double most = e.predicted_busbw_gbs;
  const PublishedRun* best = nullptr;
  for (const auto& r : e.published) {
    if (r.nodes != e.nodes || r.busbw_gbs <= 0) continue;
    if (best == nullptr || r.busbw_gbs > best->busbw_gbs) best = &r;
  }
  if (best != nullptr) most = std::max(most, best->busbw_gbs);
  const double allowed = most * (1 + e.tolerance);
  if (gate_gbs <= allowed) return {};
  return fmt::format(
      "a gate of {:.1f} GB/s for {} over {} x {} is above what such a cluster reaches: {:.1f} GB/s predicted{}, "
      "{:.1f} GB/s at most with the {:.0f}% tolerance",
      gate_gbs, name_of(e.collective), e.nodes, e.instance, e.predicted_busbw_gbs,
      best != nullptr ? "; the best published run " + run_text(*best) : std::string(), allowed, e.tolerance * 100);
}

}  // namespace ringmaster::tune
