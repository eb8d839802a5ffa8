// Console figures, three ways:
//
//   QT_QPA_PLATFORM=offscreen console_bench [--topology-only | --no-topology]
//       [--nodes N --ranks-per-node R --channels C --minutes M]
// A made-up stream: N nodes of R ranks (2 x 8 by default) stream C
// channels each (32), every channel through one of a node's NICs, into the
// main window (every rank's init stages on the timeline first). GUI-thread
// time per 100 ms tick (the samples of one tick applied to the models,
// the chart redrawn, the window painted), and resident memory after 1 and
// M minutes of streamed data (fed as fast as the models take it; the
// buffers must stay bounded by the 60 s window). First, the Topology
// tab's drawing of a declared 4-node cluster of p5.48xlarge nodes (8
// GPUs, 32 NICs each): each node laid out and drawn at 1600x1000, then
// redrawn at each step of a zoom.
//
//   console_bench --agents H:P,... --token-file F [--np-per-agent R]
//       [--channels C] [--seconds S] [--record FILE]
// A run over real agents (tests/bench/console_agents.sh starts them) in
// the main window, as the console shows it: the GUI thread's CPU time in
// each 100 ms of the run's first S seconds (60), then the run is
// cancelled; --record keeps its messages for --replay.
//
//   console_bench --replay FILE --scale K [--ranks-per-agent R] [--seconds S]
// A recorded run scaled up: each agent's messages copied to K agents, and
// each rank's to R/(its ranks per agent) ranks of each, fed at the pace
// they were recorded (by their events' clocks) from a thread standing for
// the agents' I/O threads, into the main window; the GUI thread's CPU time
// in each 100 ms.
//
//   console_bench --flood decision|stage|stage_progress|result|mixed
//       [--lines N] [--world R]
// A recording of N lines (1 M) of that kind from R ranks (16) replayed
// into the main window: how long it takes and the peak resident memory.
#include <QApplication>
#include <QFile>
#include <QFileInfo>
#include <QGridLayout>
#include <QPixmap>
#include <QTimer>
#include <QWidget>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "main_window.h"
#include "models/console.h"
#include "panels/bandwidth_chart.h"
#include "panels/topology_drawing.h"
#include "ringmaster/stage.h"
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
  const auto topology = ringmaster::agent::TopologyInfo::parse(json::parse(p5.to_json()));
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

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// The GUI thread's CPU time in each 100 ms while it runs, scaled to 100 ms
// of wall time where the timer came late (a busy thread delays it); the
// ticks before the run's first sample (its ranks' init stages arriving)
// apart from those after (streaming).
class GuiLoad {
 public:
  explicit GuiLoad(const ringmaster::ui::RunState& run) : run_(run) {}
  void start() {
    last_cpu_ = thread_cpu_ms();
    last_wall_ = std::chrono::steady_clock::now();
    QObject::connect(&timer_, &QTimer::timeout, [this] {
      const double cpu = thread_cpu_ms();
      const auto wall = std::chrono::steady_clock::now();
      const double wall_ms = std::chrono::duration<double, std::milli>(wall - last_wall_).count();
      auto& ticks = run_.samples() > 0 ? streaming_ : init_;
      if (wall_ms > 0) ticks.push_back((cpu - last_cpu_) * 100.0 / std::max(100.0, wall_ms));
      last_cpu_ = cpu;
      last_wall_ = wall;
    });
    timer_.start(100);
  }
  void stop() { timer_.stop(); }
  void print(const char* what) const {
    std::printf("%s: GUI thread CPU per 100 ms (aim < 8 ms); RSS %ld KiB\n", what, rss_kib());
    print_ticks("init, before the first sample", init_);
    print_ticks("streaming", streaming_);
  }

 private:
  static void print_ticks(const char* phase, std::vector<double> t) {
    if (t.empty()) {
      std::printf("  %s: no tick\n", phase);
      return;
    }
    std::sort(t.begin(), t.end());
    double sum = 0;
    for (double v : t)
      sum += v;
    std::printf("  %s, %zu ticks: median %.2f ms, mean %.2f ms, p99 %.2f ms, max %.2f ms\n", phase, t.size(),
                t[t.size() / 2], sum / static_cast<double>(t.size()), t[t.size() * 99 / 100], t.back());
  }
  const ringmaster::ui::RunState& run_;
  QTimer timer_;
  double last_cpu_ = 0;
  std::chrono::steady_clock::time_point last_wall_;
  std::vector<double> init_, streaming_;
};

// A run over real agents, in the main window.
int live_run(const QString& agents, const QString& token_file, int per_agent, int channels, int seconds,
             const QString& record) {
  QFile f(token_file);
  if (!f.open(QIODevice::ReadOnly)) {
    std::fprintf(stderr, "console_bench: cannot read %s\n", qPrintable(token_file));
    return 2;
  }
  const QString token = QString::fromUtf8(f.readLine()).trimmed();
  ringmaster::ui::Console console;
  if (!record.isEmpty() && !console.record_to(record)) {
    std::fprintf(stderr, "console_bench: cannot write %s\n", qPrintable(record));
    return 2;
  }
  const QStringList list = agents.split(',', Qt::SkipEmptyParts);
  for (const QString& a : list)
    console.connect_agent(a.section(':', 0, -2), static_cast<quint16>(a.section(':', -1).toInt()), token);
  ringmaster::ui::MainWindow window(console);
  window.resize(1600, 1000);
  window.show();
  ringmaster::ui::RunSpec spec;
  spec.collective = "all_reduce";
  spec.min_bytes = "1M";
  spec.max_bytes = "8M";
  spec.iters = 20;
  spec.warmup = 2;
  spec.channels = channels;
  spec.ranks_per_agent = per_agent;
  GuiLoad load(console.run);
  int connected = 0;
  bool cancelled = false;
  const auto began = std::chrono::steady_clock::now();
  double measured_s = 0;
  auto end_run = [&] {
    if (measured_s > 0) return;
    load.stop();
    measured_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    QTimer::singleShot(3000, [] { QCoreApplication::exit(0); });
  };
  QObject::connect(&console, &ringmaster::ui::Console::agent_connected, [&] {
    if (++connected != static_cast<int>(list.size())) return;
    console.start_run(spec);
    load.start();
    QTimer::singleShot(seconds * 1000, [&] {
      if (measured_s > 0) return;
      cancelled = true;
      end_run();
      console.cancel_run();
    });
  });
  QObject::connect(&console.run, &ringmaster::ui::RunState::finished, [&] { end_run(); });
  QObject::connect(&console, &ringmaster::ui::Console::agent_lost, [](const QString& a, const QString& why) {
    std::fprintf(stderr, "console_bench: agent %s: %s\n", qPrintable(a), qPrintable(why));
    QCoreApplication::exit(1);
  });
  QObject::connect(&console, &ringmaster::ui::Console::run_launch_failed, [](const QString& why) {
    std::fprintf(stderr, "console_bench: run not started: %s\n", qPrintable(why));
    QCoreApplication::exit(1);
  });
  if (QApplication::exec() != 0) return 1;
  char what[160];
  std::snprintf(what, sizeof what, "%d real agents x %d ranks x %d channels, all_reduce 1M-8M, %.0f s%s",
                static_cast<int>(list.size()), per_agent, channels, measured_s, cancelled ? " (then cancelled)" : "");
  load.print(what);
  std::printf("  %zu samples, %d result rows; run %s\n", console.run.samples(), console.run.results.rowCount(),
              cancelled          ? "cancelled"
              : console.run.ok() ? "ok"
                                 : qPrintable("failed: " + console.run.problems().join("; ")));
  return 0;
}

// A recorded run, its agents and ranks multiplied, fed into the main window
// at the pace it was recorded.
int replay_scaled(const QString& path, int scale, int per_agent, int seconds) {
  std::ifstream in(path.toStdString());
  if (!in) {
    std::fprintf(stderr, "console_bench: cannot read %s\n", qPrintable(path));
    return 2;
  }
  json begin;
  struct Recorded {
    long long t_us;
    std::string agent;
    std::string message;  // compact JSON: the trees of a minute of 64 ranks took 500 MB
  };
  std::vector<Recorded> recorded;
  long long last_t = 0;
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("run_begin")) {
      if (!begin.is_null()) break;  // the first run only
      begin = std::move(j);
      continue;
    }
    if (begin.is_null()) continue;  // before the run: inventories, hellos
    json& m = j["message"];
    const json& e = m.value("event", json::object());
    // When the agent sent it: a sample's clock, a stage's end; else as the
    // message before it.
    long long t = e.value("t_us", 0LL);
    if (t == 0 && e.contains("begin_us"))
      t = e.value("begin_us", 0LL) + static_cast<long long>(e.value("duration_ms", 0.0) * 1000);
    if (t == 0) t = last_t;
    last_t = std::max(last_t, t);
    recorded.push_back({t, j.value("agent", ""), m.dump()});
  }
  // Those before the first timed message: at its time.
  const auto timed = std::find_if(recorded.begin(), recorded.end(), [](const Recorded& r) { return r.t_us > 0; });
  for (auto it = recorded.begin(); it != timed && timed != recorded.end(); ++it)
    it->t_us = timed->t_us;
  if (begin.is_null() || recorded.empty()) {
    std::fprintf(stderr, "console_bench: %s holds no run\n", qPrintable(path));
    return 2;
  }
  std::stable_sort(recorded.begin(), recorded.end(),
                   [](const Recorded& a, const Recorded& b) { return a.t_us < b.t_us; });
  const auto placement = begin.value("placement", std::vector<int>{});
  const int agents = begin.value("agents", 0);
  int source_per_agent = 0;
  for (int a : placement)
    source_per_agent += a == 0 ? 1 : 0;
  if (agents <= 0 || source_per_agent <= 0) {
    std::fprintf(stderr, "console_bench: %s: the run does not say where its ranks ran\n", qPrintable(path));
    return 2;
  }
  per_agent = std::max(per_agent, source_per_agent);
  const int copies_per_rank = per_agent / source_per_agent;
  const int world = agents * scale * per_agent;
  std::vector<int> scaled_placement(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    scaled_placement[static_cast<std::size_t>(r)] = r / per_agent;
  std::vector<std::vector<QString>> rails;
  std::vector<QString> addresses;
  for (int a = 0; a < agents * scale; ++a) {
    addresses.push_back(
        QString("copy%1.%2")
            .arg(a / agents)
            .arg(QString::fromStdString(begin.value(
                "agent_addresses", std::vector<std::string>(static_cast<std::size_t>(agents),
                                                            "agent"))[static_cast<std::size_t>(a % agents)])));
  }
  // Each source rank's place on its agent.
  std::vector<int> local(placement.size(), 0);
  {
    std::vector<int> seen(static_cast<std::size_t>(agents), 0);
    for (std::size_t r = 0; r < placement.size(); ++r)
      if (placement[r] >= 0 && placement[r] < agents) local[r] = seen[static_cast<std::size_t>(placement[r])]++;
  }

  ringmaster::ui::Console console;
  ringmaster::ui::MainWindow window(console);
  window.resize(1600, 1000);
  window.show();
  const QString run_id = QString::fromStdString(begin.value("run_begin", ""));
  console.run.begin(run_id, world, agents * scale, scaled_placement);
  console.run.set_agents(addresses, rails);
  // The agents list: every agent connected, its round trip updated each
  // second as the console polls it.
  std::map<std::string, int> agent_index;  // recorded address -> its index
  {
    const auto recorded_addresses = begin.value("agent_addresses", std::vector<std::string>{});
    for (std::size_t a = 0; a < recorded_addresses.size(); ++a)
      agent_index[recorded_addresses[a]] = static_cast<int>(a);
  }
  for (const QString& a : addresses) {
    console.agents.add(a);
    console.agents.set_state(a, "connected");
  }
  QTimer poll;
  QObject::connect(&poll, &QTimer::timeout, [&] {
    for (std::size_t a = 0; a < addresses.size(); ++a)
      console.agents.set_rtt(addresses[a], 0.1 + 0.001 * static_cast<double>(a));
  });
  poll.start(1000);

  // The agents' messages made ahead, each 100 ms of recorded time copied
  // and read as an agent's I/O thread reads them, a few ticks ahead.
  using Tick = std::vector<AgentMessage>;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Tick> ready;
  bool producer_done = false, stop = false;
  const long long first_us = recorded.front().t_us;
  const long long end_us = std::min(recorded.back().t_us, first_us + seconds * 1'000'000LL);
  std::thread producer([&] {
    std::size_t next = 0;
    for (long long tick_end = first_us + 100'000; tick_end <= end_us + 100'000; tick_end += 100'000) {
      Tick tick;
      for (; next < recorded.size() && recorded[next].t_us < tick_end; ++next) {
        const Recorded& r = recorded[next];
        const json message = json::parse(r.message);
        const int rank = message.value("rank", -1);
        const bool ranked =
            rank >= 0 && rank < static_cast<int>(placement.size()) && placement[static_cast<std::size_t>(rank)] >= 0;
        const std::string type = message.value("event", json::object()).value("type", "");
        // Rings, trees and links name the recorded ranks: kept once, as
        // recorded. An agent's own NIC counters go to each of its copies.
        const auto from = agent_index.find(r.agent);
        const bool nic_sample = rank == -1 && type == "nic_sample" && from != agent_index.end();
        const bool copied = ranked && (type == "stage" || type == "stage_progress" || type == "failure" ||
                                       type == "sample" || type == "rank_exit");
        if (nic_sample) {
          for (int k = 0; k < scale; ++k)
            tick.push_back(
                ringmaster::ui::agent_message(addresses[static_cast<std::size_t>(from->second + k * agents)], message));
          continue;
        }
        for (int k = 0; k < (copied ? scale : 1); ++k) {
          for (int c = 0; c < (copied ? copies_per_rank : 1); ++c) {
            json body = message;
            QString agent = QString::fromStdString(r.agent);
            if (ranked) {
              const int a = placement[static_cast<std::size_t>(rank)] + k * agents;
              const int scaled = a * per_agent + local[static_cast<std::size_t>(rank)] + c * source_per_agent;
              body["rank"] = scaled;
              if (body.contains("event") && body["event"].contains("rank")) body["event"]["rank"] = scaled;
              agent = addresses[static_cast<std::size_t>(a)];
            }
            tick.push_back(ringmaster::ui::agent_message(agent, std::move(body)));
          }
        }
      }
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return ready.size() < 20 || stop; });
      if (stop) return;
      ready.push_back(std::move(tick));
      cv.notify_all();
    }
    std::lock_guard lock(mutex);
    producer_done = true;
    cv.notify_all();
  });
  // Let the producer get ahead.
  {
    std::unique_lock lock(mutex);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return ready.size() >= 10 || producer_done; });
  }
  GuiLoad load(console.run);
  load.start();
  // The agents' I/O threads: each 100 ms a tick's messages arrive, and
  // each goes where an agent's message goes (the samples taken on this
  // thread, the rest queued for the GUI thread).
  std::atomic<int> late{0};
  std::atomic<std::size_t> fed{0};
  std::thread arrivals([&, arrived = console.arrival()] {
    auto at = std::chrono::steady_clock::now();
    for (;;) {
      at += std::chrono::milliseconds(100);
      std::this_thread::sleep_until(at);
      Tick tick;
      {
        std::lock_guard lock(mutex);
        if (stop) return;
        if (ready.empty()) {
          if (producer_done) {
            QMetaObject::invokeMethod(
                qApp, [] { QCoreApplication::exit(0); }, Qt::QueuedConnection);
            return;
          }
          ++late;
          continue;
        }
        tick = std::move(ready.front());
        ready.pop_front();
        cv.notify_all();
      }
      for (auto& m : tick)
        arrived(std::move(m));
      fed += tick.size();
    }
  });
  QApplication::exec();
  load.stop();
  {
    std::lock_guard lock(mutex);
    stop = true;
    cv.notify_all();
  }
  arrivals.join();
  producer.join();
  char what[200];
  std::snprintf(what, sizeof what, "%s x %d: %d agents x %d ranks (%d channels a rank), %.0f s as recorded",
                qPrintable(QFileInfo(path).fileName()), scale, agents * scale, per_agent,
                console.run.bandwidth().read()->channels(0), static_cast<double>(end_us - first_us) / 1e6);
  load.print(what);
  std::printf("  %zu messages fed, %zu samples, %d ticks the feed was not ready\n", fed.load(), console.run.samples(),
              late.load());
  return 0;
}

// A recording of `lines` event lines of one kind (or of each kind in turn:
// "mixed") from `world` ranks, written to `path` as the console records;
// then replayed into the main window at 1366x768, as `ringmaster-console
// --replay` does: the time it takes and the peak resident memory.
int flood(const std::string& kind, long lines, int world, const std::string& path) {
  namespace ev = ringmaster::agent::events;
  const std::vector<std::string> kinds = kind == "mixed"
                                             ? std::vector<std::string>{"decision", "stage", "stage_progress", "result"}
                                             : std::vector<std::string>{kind};
  for (const auto& k : kinds) {
    if (k != "decision" && k != "stage" && k != "stage_progress" && k != "result") {
      std::fprintf(stderr, "console_bench: --flood takes decision, stage, stage_progress, result or mixed\n");
      return 2;
    }
  }
  {
    std::ofstream out(path);
    const int agents = std::max(1, world / 8);
    std::vector<int> placement;
    for (int r = 0; r < world; ++r)
      placement.push_back(r * agents / world);
    out << json{{"run_begin", "flood"}, {"world_size", world}, {"agents", agents}, {"placement", placement}}.dump()
        << '\n';
    for (long i = 0; i < lines; ++i) {
      const std::string& k = kinds[static_cast<std::size_t>(i) % kinds.size()];
      ev::EventMessage m;
      m.run_id = "flood";
      m.rank = static_cast<int>(i % world);
      const std::uint64_t bytes = std::uint64_t{8} << (i / world % 24);
      if (k == "decision") {
        m.rank = 0;
        m.event = ev::Decision{"all_reduce", bytes, "Ring", "LL", 2, 40.0 + static_cast<double>(i % 7)};
      } else if (k == "stage") {
        ev::StageEnded e;
        e.stage = static_cast<ringmaster::Stage>(i / world % (static_cast<long>(ringmaster::Stage::ready) + 1));
        e.rank = m.rank;
        e.begin_us = 1'700'000'000'000'000 + i * 10;
        e.duration_ms = 1.5;
        e.detail = "connected to rank " + std::to_string((m.rank + 1) % world) + " via SOCKET 10.0.0.1:40000";
        m.event = e;
      } else if (k == "stage_progress") {
        ev::StageProgress e;
        e.stage = ringmaster::Stage::store_connect;
        e.rank = m.rank;
        e.outcome = "unanswered";
        e.remote = "10.0.0.1:29500";
        e.attempts = static_cast<int>(i / world + 1);
        e.begin_us = 1'700'000'000'000'000 + m.rank;
        e.elapsed_ms = static_cast<double>(i / world) * 1000.0;
        e.detail = "STORE_CONNECT: connecting to 10.0.0.1:29500, attempt " + std::to_string(e.attempts) +
                   ": no answer (SYN unanswered) for " + std::to_string(i / world) + " s";
        m.event = e;
      } else {
        m.rank = 0;
        ev::Result r;
        r.collective = "all_reduce";
        r.dtype = "float";
        r.redop = "sum";
        r.bytes = bytes;
        r.count = bytes / 4;
        r.out_of_place = {12.5, 1.0, 1.9, 0};
        r.in_place = ev::Result::Timing{12.0, 1.0, 1.95, 0};
        r.tuner = ev::Result::Pick{"Ring", "Simple", 2, 11.0};
        m.event = r;
      }
      json body = ev::to_json(m);
      body["type"] = "event";
      out << json{{"agent", "10.0.0." + std::to_string(m.rank % 250 + 1) + ":29600"}, {"message", body}}.dump() << '\n';
    }
  }
  const long before = rss_kib();
  ringmaster::ui::Console console;
  ringmaster::ui::MainWindow window(console);
  window.resize(1366, 768);
  window.show();
  QApplication::processEvents();
  const auto start = std::chrono::steady_clock::now();
  const int n = ringmaster::ui::Console::replay(QString::fromStdString(path), console.run);
  QApplication::processEvents();
  QPixmap frame(window.size());
  window.render(&frame);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  long peak = 0;
  {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("VmHWM:", 0) == 0) peak = std::atol(line.c_str() + 6);
  }
  std::printf(
      "Replay of %d %s lines from %d ranks into the main window at 1366x768: %.1f s; RSS %ld KiB before, %ld KiB "
      "after, peak %ld KiB (aim < 60 s and < 500 MB for 1 M lines, < 300 MB for 300,000 stage_progress lines of "
      "2,048 ranks)\n",
      n, kind.c_str(), world, seconds, before, rss_kib(), peak);
  std::remove(path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  int nodes = 2, per_node = 8, kChannels = 32, minutes = 10;
  bool topology = true;
  QString agents, token_file, record, replay;
  int per_agent = 0, seconds = 60, scale = 8;
  std::string flood_kind;
  long flood_lines = 1'000'000;
  int flood_world = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--topology-only") {
      topology_figures();
      return 0;
    }
    if (a == "--no-topology") topology = false;
    const bool value = i + 1 < argc;
    if (value && a == "--nodes") nodes = std::atoi(argv[++i]);
    if (value && a == "--ranks-per-node") per_node = std::atoi(argv[++i]);
    if (value && a == "--channels") kChannels = std::atoi(argv[++i]);
    if (value && a == "--minutes") minutes = std::max(2, std::atoi(argv[++i]));
    if (value && a == "--agents") agents = argv[++i];
    if (value && a == "--token-file") token_file = argv[++i];
    if (value && a == "--np-per-agent") per_agent = std::atoi(argv[++i]);
    if (value && a == "--ranks-per-agent") per_agent = std::atoi(argv[++i]);
    if (value && a == "--seconds") seconds = std::max(1, std::atoi(argv[++i]));
    if (value && a == "--record") record = argv[++i];
    if (value && a == "--replay") replay = argv[++i];
    if (value && a == "--scale") scale = std::max(1, std::atoi(argv[++i]));
    if (value && a == "--flood") flood_kind = argv[++i];
    if (value && a == "--lines") flood_lines = std::atol(argv[++i]);
    if (value && a == "--world") flood_world = std::max(1, std::atoi(argv[++i]));
  }
  if (!flood_kind.empty())
    return flood(flood_kind, flood_lines, flood_world,
                 "/tmp/console_bench_flood." + std::to_string(getpid()) + ".jsonl");
  if (!agents.isEmpty())
    return live_run(agents, token_file, std::max(1, per_agent), kChannels == 32 ? 4 : kChannels, seconds, record);
  if (!replay.isEmpty()) return replay_scaled(replay, scale, per_agent, seconds);
  if (topology) topology_figures();
  const int kRanks = nodes * per_node;
  // The main window, as the console shows a run.
  ringmaster::ui::Console console;
  ringmaster::ui::MainWindow window(console);
  window.resize(1600, 1000);
  window.show();
  ringmaster::ui::RunState& run = console.run;
  // Nodes of per_node ranks; each channel's ring enters a node at its first
  // rank and leaves from its last, through the channel's NIC.
  std::vector<int> placement(static_cast<std::size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r)
    placement[static_cast<std::size_t>(r)] = r / per_node;
  run.begin("bench", kRanks, nodes, placement);
  ringmaster::ui::BandwidthChart& chart = *window.bandwidth();
  // Every rank through every init stage, as before its samples come.
  for (int r = 0; r < kRanks; ++r) {
    for (int s = 0; s < static_cast<int>(ringmaster::Stage::ready) + 1; ++s) {
      json body = {{"type", "event"},
                   {"run_id", "bench"},
                   {"rank", r},
                   {"event",
                    {{"type", "stage"},
                     {"stage", std::string(ringmaster::name_of(static_cast<ringmaster::Stage>(s)))},
                     {"begin_us", 1'000 + s * 2'000 + r},
                     {"duration_ms", 1.5},
                     {"ok", true},
                     {"detail", ""}}}};
      run.apply(ringmaster::ui::agent_message("bench", std::move(body)));
    }
  }

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

  // A tick's messages arrive as an agent's do: on a thread of their own
  // (an agent's I/O thread), where the samples are taken.
  auto arrive = [arrived = console.arrival()](std::vector<AgentMessage> messages) {
    std::thread io([&] {
      for (auto& m : messages)
        arrived(std::move(m));
    });
    io.join();
  };
  // Fill the 60 s window first, as after a minute of streaming.
  for (int i = 0; i < 600; ++i)
    arrive(tick_messages());
  // A minute of streaming includes its painting: draw before measuring.
  for (int i = 0; i < 10; ++i) {
    chart.refresh();
    app.processEvents();
  }
  const long rss_minute_1 = rss_kib();

  std::vector<double> tick_ms, apply_ms, replace_ms;
  for (int i = 0; i < 300; ++i) {
    auto messages = tick_messages();  // built off the clock: they arrive parsed
    const auto start = std::chrono::steady_clock::now();
    arrive(std::move(messages));
    const auto applied = std::chrono::steady_clock::now();
    chart.refresh();
    const auto replaced = std::chrono::steady_clock::now();
    app.processEvents();
    const auto painted = std::chrono::steady_clock::now();
    tick_ms.push_back(std::chrono::duration<double, std::milli>(painted - applied).count());
    apply_ms.push_back(std::chrono::duration<double, std::milli>(applied - start).count());
    replace_ms.push_back(std::chrono::duration<double, std::milli>(replaced - applied).count());
  }
  std::sort(tick_ms.begin(), tick_ms.end());
  std::sort(apply_ms.begin(), apply_ms.end());
  std::sort(replace_ms.begin(), replace_ms.end());
  // Up to 10 minutes of stream time.
  long rss_minute_2 = 0, rss_minute_5 = 0;
  for (int i = 900; i < minutes * 600; ++i) {
    arrive(tick_messages());
    if (i % 10 == 0) chart.refresh();
    if (i + 1 == 1200) rss_minute_2 = rss_kib();
    if (i + 1 == 3000) rss_minute_5 = rss_kib();
  }
  chart.refresh();
  const long rss_minute_10 = rss_kib();  // the last minute's

  std::printf(
      "GUI thread per 100 ms tick, %d ranks x %d channels in the main window (%d samples taken where they arrive, "
      "then redraw the chart's %d series, paint): median %.2f ms, p99 %.2f ms, max %.2f ms (aim < 8 ms)\n",
      kRanks, kChannels, kRanks, static_cast<int>(chart.series_names().size()), tick_ms[tick_ms.size() / 2],
      tick_ms[tick_ms.size() * 99 / 100], tick_ms.back());
  std::printf(
      "  off the GUI thread: the samples taken %.2f ms; on it: series read and replaced %.2f ms (medians), the rest "
      "painting\n",
      apply_ms[apply_ms.size() / 2], replace_ms[replace_ms.size() / 2]);
  std::printf(
      "RSS after 1 min of stream: %ld KiB; 2 min: %ld KiB; 5 min: %ld KiB; %d min: %ld KiB (%+.1f%% from 1 min, "
      "aim within 10%%)\n",
      rss_minute_1, rss_minute_2, rss_minute_5, minutes, rss_minute_10,
      100.0 * static_cast<double>(rss_minute_10 - rss_minute_1) / static_cast<double>(rss_minute_1));
  return 0;
}
