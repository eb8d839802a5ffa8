// Console figures: GUI-thread time per 100 ms tick while 16 ranks on two
// nodes stream 32 channels each, every channel through one of a node's 32
// NICs (the samples of one tick applied to the models, then the chart
// redrawn), and resident memory after 1 and 10 minutes of
// streamed data (fed as fast as the models take it; the buffers must stay
// bounded by the 60 s window). First, the Topology tab's drawing of a
// declared 4-node cluster of p5.48xlarge nodes (8 GPUs, 32 NICs each):
// each node laid out and drawn at 1600x1000 (four views in a 2 x 2 grid,
// each in a quarter of the window), then redrawn at each step of a zoom.
//
//   QT_QPA_PLATFORM=offscreen console_bench [--topology-only]
#include <QApplication>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <QGridLayout>
#include <QPixmap>
#include <QWidget>

#include "models/console.h"
#include "panels/bandwidth_chart.h"
#include "panels/topology_drawing.h"
#include "ringmaster/tools/topology.h"

using nlohmann::json;
using ringmaster::ui::AgentMessage;

namespace {

long rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The drawing of 4 declared p5 nodes: layout per node, and whole frames
// (every node painted) at each zoom step.
void topology_figures() {
  const auto p5 = ringmaster::topo::Topology::load_file(RINGMASTER_TOPOLOGY_DIR "/p5.48xl-topo.xml");
  const json topology = json::parse(p5.to_json());
  QWidget window;
  window.resize(1600, 1000);
  auto* grid = new QGridLayout(&window);
  std::vector<ringmaster::ui::TopologyDrawing*> nodes;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(new ringmaster::ui::TopologyDrawing);
    grid->addWidget(nodes.back(), i / 2, i % 2);
  }
  window.show();
  QApplication::processEvents();
  std::vector<double> layout_ms, frame_ms;
  QPixmap frame(window.size());
  for (int round = 0; round < 20; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (auto* n : nodes)
      n->set_topology(topology);
    layout_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
                        static_cast<double>(nodes.size()));
  }
  // Each node with a ring drawn over it, as after a run: in by NIC0, through
  // its 8 GPUs, out by NIC0 (the group holding NIC0 opens).
  using End = ringmaster::ui::DevicePath::End;
  ringmaster::ui::DevicePath ring;
  ring.title = "channel 0's ring";
  ring.hops.push_back({End{End::Kind::away, 1, "agent 1 · rank 15"}, End{End::Kind::nic, 0, "rdmap79s0"}, "SOCKET"});
  ring.hops.push_back({End{End::Kind::nic, 0, "rdmap79s0"}, End{End::Kind::gpu, 0, {}}, "rank 0"});
  for (int g = 0; g + 1 < 8; ++g)
    ring.hops.push_back({End{End::Kind::gpu, g, {}}, End{End::Kind::gpu, g + 1, {}}, "SHM"});
  ring.hops.push_back({End{End::Kind::gpu, 7, {}}, End{End::Kind::nic, 0, "rdmap79s0"}, "rank 7"});
  ring.hops.push_back({End{End::Kind::nic, 0, "rdmap79s0"}, End{End::Kind::away, 1, "agent 1 · rank 8"}, "SOCKET"});
  for (auto* n : nodes)
    n->set_path(ring);
  int devices = 0;
  for (const auto& b : nodes.front()->boxes())
    devices += b.kind == "gpu" || b.kind == "nic" || b.kind == "group" ? 1 : 0;
  for (int step = 0; step < 40; ++step) {
    const double zoom = 1 + (step % 20) * 0.5;
    const auto start = std::chrono::steady_clock::now();
    for (auto* n : nodes)
      n->set_zoom(zoom, QPointF(n->width() / 2.0, n->height() / 2.0));
    window.render(&frame);
    frame_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf(
      "Topology, 4 declared p5.48xlarge nodes (32 GPUs, 128 NICs; %d device boxes a node, a ring of 11 hops drawn "
      "over each) at 1600x1000: layout %.2f ms a node, frame on zoom median %.2f ms, max %.2f ms (aim < 30 ms)\n",
      devices, median(layout_ms), median(frame_ms), *std::max_element(frame_ms.begin(), frame_ms.end()));
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  // --nodes N --ranks-per-node R --channels C: the stream's shape (2 x 8 x 32
  // by default); --minutes M of stream in all (10, at least 2);
  // --no-topology skips the drawing figures.
  int nodes = 2, per_node = 8, kChannels = 32, minutes = 10;
  bool topology = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--topology-only") {
      topology_figures();
      return 0;
    }
    if (a == "--no-topology") topology = false;
    if (i + 1 < argc && a == "--nodes") nodes = std::atoi(argv[++i]);
    if (i + 1 < argc && a == "--ranks-per-node") per_node = std::atoi(argv[++i]);
    if (i + 1 < argc && a == "--channels") kChannels = std::atoi(argv[++i]);
    if (i + 1 < argc && a == "--minutes") minutes = std::max(2, std::atoi(argv[++i]));
  }
  if (topology) topology_figures();
  const int kRanks = nodes * per_node;
  ringmaster::ui::RunState run;
  // Nodes of per_node ranks; each channel's ring enters a node at its first
  // rank and leaves from its last, through the channel's NIC.
  std::vector<int> placement(static_cast<std::size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r)
    placement[static_cast<std::size_t>(r)] = r / per_node;
  run.begin("bench", kRanks, nodes, placement);
  ringmaster::ui::BandwidthChart chart(run.bandwidth, &run);
  chart.resize(1200, 500);
  chart.show();

  std::vector<std::uint64_t> bytes(kRanks * kChannels, 0);
  long long t_us = 1'000'000;
  // One tick's messages: a sample per rank, every channel moving ~1 GB/s.
  auto tick_messages = [&] {
    std::vector<AgentMessage> out;
    t_us += 100'000;
    for (int r = 0; r < kRanks; ++r) {
      json channels = json::array();
      for (int c = 0; c < kChannels; ++c) {
        bytes[static_cast<std::size_t>(r * kChannels + c)] +=
            100'000'000ULL / kChannels + static_cast<std::uint64_t>(c * 1000);
        json channel = {{"channel", c},
                        {"bytes_sent", bytes[static_cast<std::size_t>(r * kChannels + c)]},
                        {"bytes_received", bytes[static_cast<std::size_t>(r * kChannels + c)]},
                        {"busy_ns", 0},
                        {"steps", 0}};
        if (r % per_node == 0) channel["nic_in"] = "rdmap" + std::to_string(79 + c) + "s0";
        if (r % per_node == per_node - 1) channel["nic_out"] = "rdmap" + std::to_string(79 + c) + "s0";
        channels.push_back(std::move(channel));
      }
      json body = {{"type", "event"},
                   {"run_id", "bench"},
                   {"rank", r},
                   {"event", {{"type", "sample"}, {"t_us", t_us}, {"channels", channels}}}};
      // Read as an agent's I/O thread reads it: the GUI thread gets the event.
      out.push_back(ringmaster::ui::agent_message("bench", std::move(body)));
    }
    return out;
  };

  // Fill the 60 s window first, as after a minute of streaming.
  for (int i = 0; i < 600; ++i) {
    for (const auto& m : tick_messages())
      run.apply(m);
  }
  // A minute of streaming includes its painting: draw before measuring.
  for (int i = 0; i < 10; ++i) {
    chart.refresh();
    app.processEvents();
  }
  const long rss_minute_1 = rss_kib();

  std::vector<double> tick_ms, apply_ms, replace_ms;
  for (int i = 0; i < 300; ++i) {
    const auto messages = tick_messages();  // built off the clock: they arrive parsed
    const auto start = std::chrono::steady_clock::now();
    for (const auto& m : messages)
      run.apply(m);
    const auto applied = std::chrono::steady_clock::now();
    chart.refresh();
    const auto replaced = std::chrono::steady_clock::now();
    app.processEvents();
    const auto painted = std::chrono::steady_clock::now();
    tick_ms.push_back(std::chrono::duration<double, std::milli>(painted - start).count());
    apply_ms.push_back(std::chrono::duration<double, std::milli>(applied - start).count());
    replace_ms.push_back(std::chrono::duration<double, std::milli>(replaced - applied).count());
  }
  std::sort(tick_ms.begin(), tick_ms.end());
  std::sort(apply_ms.begin(), apply_ms.end());
  std::sort(replace_ms.begin(), replace_ms.end());
  // Up to 10 minutes of stream time.
  long rss_minute_2 = 0, rss_minute_5 = 0;
  for (int i = 900; i < minutes * 600; ++i) {
    for (const auto& m : tick_messages())
      run.apply(m);
    if (i % 10 == 0) chart.refresh();
    if (i == 1200) rss_minute_2 = rss_kib();
    if (i == 3000) rss_minute_5 = rss_kib();
  }
  chart.refresh();
  const long rss_minute_10 = rss_kib();  // the last minute's

  std::printf(
      "GUI thread per 100 ms tick, %d ranks x %d channels (apply %d samples + redraw %d series): "
      "median %.2f ms, p99 %.2f ms, max %.2f ms (aim < 8 ms)\n",
      kRanks, kChannels, kRanks, kChannels + 1, tick_ms[tick_ms.size() / 2], tick_ms[tick_ms.size() * 99 / 100],
      tick_ms.back());
  std::printf("  of which: models %.2f ms, series replace %.2f ms (medians); the rest is Qt Charts painting\n",
              apply_ms[apply_ms.size() / 2], replace_ms[replace_ms.size() / 2]);
  std::printf(
      "RSS after 1 min of stream: %ld KiB; 2 min: %ld KiB; 5 min: %ld KiB; %d min: %ld KiB (%+.1f%% from 1 min, "
      "aim within 10%%)\n",
      rss_minute_1, rss_minute_2, rss_minute_5, minutes, rss_minute_10,
      100.0 * static_cast<double>(rss_minute_10 - rss_minute_1) / static_cast<double>(rss_minute_1));
  return 0;
}
