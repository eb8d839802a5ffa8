// Runs launched from the console over real local agents, in a real
// (offscreen) Qt window: a 4-rank sweep, a run that cannot complete its
// barrier, the node gate, both engines side by side, live and failed
// stages, a stall, preflight and the links heatmap.

#include <signal.h>
#include <unistd.h>

#include <QAbstractItemModelTester>
#include <QAbstractScrollArea>
#include <QAbstractSpinBox>
#include <QAccessible>
#include <QAction>
#include <QApplication>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFont>
#include <QIdentityProxyModel>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "about.h"
#include "console_test_support.h"
#include "main_window.h"
#include "models/console.h"
#include "panels/bandwidth_chart.h"
#include "panels/bringup_panel.h"
#include "panels/busbw_plot.h"
#include "panels/history_panel.h"
#include "panels/links_panel.h"
#include "panels/preflight_panel.h"
#include "panels/rails_view.h"
#include "panels/rings_view.h"
#include "panels/scenarios_panel.h"
#include "panels/timeline_view.h"
#include "panels/topology_drawing.h"
#include "panels/topology_view.h"
#include "panels/tuner_panel.h"
#include "panels/watch_panel.h"
#include "placement.h"
#include "process.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"
#include "ringmaster/version.h"
#include "stage_event.h"

using namespace ringmaster::ui;
using namespace console_support;

class ConsoleRunsTest : public QObject {
  Q_OBJECT

 private slots:
  void sweepOverTwoLocalAgents();
  void missingRankShowsAtTheBarrier();
  void ncclEngineRunSaysWhyItDidNotRun();
  void bothEnginesCompareSizeBySize();
  void nodeGateRefusesAgentsThatDiffer();
  void retryingStageIsDrawnLive();
  void stallShowsEveryRanksCalls();
  void preflightOverLocalAgents();
  void linksHeatmapFromACheckAndFromARun();
  void failedInitOpensOnItsCause();
  void localAgentRefusingItsTopologySaysWhy();
  void attachToAJobTheConsoleDidNotLaunch();
  void watchShowsATorchJobsStoreHangAndCollectiveHang();
  void bringUpCertifiesTheLocalAgents();
  void bringUpResumesACertificationTheConsoleStopped();
};

void ConsoleRunsTest::sweepOverTwoLocalAgents() {
  QTemporaryDir dir;
  const QString recording = dir.filePath("stream.jsonl");
  Console console;
  QAbstractItemModelTester agents_tester(&console.agents);
  QAbstractItemModelTester timeline_tester(&console.run.timeline);
  QAbstractItemModelTester results_tester(&console.run.results);
  QAbstractItemModelTester decisions_tester(&console.run.decisions);
  QAbstractItemModelTester tuner_tester(&console.run.tuner);
  QVERIFY(console.record_to(recording));
  QString error;
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  MainWindow window(console);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  QCOMPARE(console.agents.rowCount(), 2);
  QCOMPARE(console.agents.data(console.agents.index(0, AgentsModel::state_column), Qt::DisplayRole).toString(),
           QString("connected"));
  QCOMPARE(console.agents.data(console.agents.index(0, AgentsModel::topology_column), Qt::DisplayRole).toString(),
           QString("discovered"));

  // The topology panel shows the first agent's node.
  auto* topology = window.findChild<TopologyView*>();
  QVERIFY(topology);
  QTRY_VERIFY(topology->tree_model().rowCount() > 0);
  QAbstractItemModelTester tree_tester(&topology->tree_model());
  QAbstractItemModelTester matrix_tester(&topology->matrix_model());

  RunSpec spec;
  spec.min_bytes = "1M";
  spec.max_bytes = "16M";
  spec.iters = 5;
  spec.warmup = 1;
  spec.ranks_per_agent = 2;
  QSignalSpy finished(&console.run, &RunState::finished);
  const QString run_id = console.start_run(spec);
  QVERIFY(!run_id.isEmpty());
  QVERIFY(finished.wait(180000));
  QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(console.run.problems().join("; ")));

  // Result rows: 1, 2, 4, 8, 16 MiB, nothing wrong.
  QCOMPARE(console.run.results.rowCount(), 5);
  for (int r = 0; r < 5; ++r) {
    QCOMPARE(console.run.results.data(console.run.results.index(r, 8), Qt::DisplayRole).toLongLong(), 0LL);
    QCOMPARE(console.run.results.data(console.run.results.index(r, 12), Qt::DisplayRole).toLongLong(), 0LL);
  }
  QCOMPARE(console.run.results.data(console.run.results.index(4, 0), Qt::DisplayRole).toString(), QString("16777216"));
  // Bandwidth points per channel, for every rank.
  for (int rank = 0; rank < 4; ++rank) {
    QVERIFY2(console.run.bandwidth().read()->points_received(rank, 0) >= 2, qPrintable(QString("rank %1").arg(rank)));
  }
  QVERIFY(window.bandwidth()->refresh() > 0);
  // Per peer: rank 0 hears from the ranks that send to it.
  {
    const auto series = console.run.bandwidth().read();
    QVERIFY(!series->peers(0).empty());
    QVERIFY(series->peer_points(0, series->peers(0).front(), 100).size() >= 2);
  }
  window.bandwidth()->set_per_peer(true);
  QVERIFY(window.bandwidth()->refresh() > 0);
  window.bandwidth()->set_per_peer(false);
  // READY for every rank on the timeline, every stage ok.
  const int ready = static_cast<int>(stage_names().indexOf("READY"));
  for (int rank = 0; rank < 4; ++rank) {
    for (int s = 0; s < stage_names().size(); ++s) {
      const auto& cell = console.run.timeline.cell(rank, s);
      QVERIFY2(cell.seen && cell.ok, qPrintable(QString("rank %1 %2").arg(rank).arg(stage_names()[s])));
    }
    QVERIFY(console.run.timeline.cell(rank, ready).seen);
  }
  const auto segments = layout_timeline(console.run.timeline, window.timeline()->plot_area());
  QCOMPARE(static_cast<int>(segments.size()), 4 * static_cast<int>(stage_names().size()));
  for (const auto& s : segments)
    QVERIFY(window.timeline()->plot_area().adjusted(-1, -1, 1, 1).contains(s.rect));
  // The axis fits the run, however short (this init takes about a
  // second): the last stage to end reaches the plot's right edge and the
  // first begins at its left, never a sliver on a fixed axis.
  {
    double left = 1e9, right = 0;
    for (const auto& s : segments) {
      left = std::min(left, s.rect.left());
      right = std::max(right, s.rect.right());
    }
    const QRectF plot = window.timeline()->plot_area();
    QVERIFY2(right >= plot.right() - 2 && left <= plot.left() + 2,
             qPrintable(QString("segments span %1..%2 of %3..%4 for an init of %5 ms")
                            .arg(left)
                            .arg(right)
                            .arg(plot.left())
                            .arg(plot.right())
                            .arg(console.run.timeline.span_ms())));
  }
  QVERIFY(console.run.decisions.rowCount() >= 5);
  // The tuner's table for every size, the chosen candidate marked, with
  // the measured time beside it; LL128 a candidate (the ranks share
  // memory, whose rings carry its lines; over sockets it is excluded).
  auto& tuner = console.run.tuner;
  QVERIFY(tuner.tables().contains("all_reduce 16 MiB"));
  tuner.select(static_cast<int>(tuner.tables().indexOf("all_reduce 16 MiB")));
  const int chosen = tuner.chosen_row();
  QVERIFY(chosen >= 0);
  QVERIFY(tuner.data(tuner.index(chosen, 0), Qt::FontRole).value<QFont>().bold());
  QVERIFY(tuner.data(tuner.index(chosen, 3), Qt::DisplayRole).toDouble() > 0);
  QVERIFY(tuner.data(tuner.index(chosen, 4), Qt::DisplayRole).toDouble() > 0);
  int ll128_rows = 0, ll128_excluded = 0;
  for (int r = 0; r < tuner.rowCount(); ++r) {
    if (tuner.data(tuner.index(r, 1), Qt::DisplayRole).toString() == "LL128") {
      ++ll128_rows;
      if (tuner.data(tuner.index(r, 6), Qt::DisplayRole).toString().startsWith("excluded: LL128")) ++ll128_excluded;
    }
  }
  QVERIFY(ll128_rows > 0);
  QCOMPARE(ll128_excluded, 0);
  auto* sizes = window.findChild<QComboBox*>("tunerSizes");
  QVERIFY(sizes);
  QCOMPARE(sizes->count(), tuner.tables().size());
  // Rings: every channel through all 4 ranks, drawn over the 2 agents.
  QVERIFY(!console.run.rings().empty());
  for (const auto& ring : console.run.rings())
    QCOMPARE(ring, (std::vector<int>{0, 1, 2, 3}));
  const auto rings = layout_rings(console.run.placement(), console.run.rings(), QRectF(0, 0, 800, 300));
  QCOMPARE(rings.nodes.size(), std::size_t{2});
  QVERIFY(rings.nodes[0].contains(rings.ranks[1]) && rings.nodes[1].contains(rings.ranks[2]));
  QCOMPARE(rings.channel_paths[0].size(), std::size_t{5});  // closed: back to rank 0
  // Both agents run on this host, so every hop of the ring is shared memory.
  for (int r = 0; r < 4; ++r)
    QCOMPARE(console.run.transport(r, (r + 1) % 4), QString("SHM"));
  // The all_reduce trees: two, each spanning the 4 ranks (3 edges) in the
  // lower half, drawn between the ranks' dots.
  QCOMPARE(console.run.trees().size(), std::size_t{2});
  const auto with_trees =
      layout_rings(console.run.placement(), console.run.rings(), QRectF(0, 0, 800, 600), console.run.trees());
  QCOMPARE(with_trees.tree_edges.size(), std::size_t{2});
  for (const auto& edges : with_trees.tree_edges) {
    QCOMPARE(edges.size(), std::size_t{3});
    for (const auto& e : edges) {
      QVERIFY(e.from.y() > 300 && e.to.y() > 300);
      QVERIFY(e.from != e.to);
    }
  }
  QVERIFY(with_trees.nodes[0].bottom() <= 300);

  // The recording replays into the same model contents.
  RunState replayed;
  QVERIFY(Console::replay(recording, replayed) > 0);
  QCOMPARE(replayed.run_id(), run_id);
  QCOMPARE(replayed.results.rowCount(), console.run.results.rowCount());
  for (int r = 0; r < replayed.results.rowCount(); ++r) {
    for (int c = 0; c < replayed.results.columnCount(); ++c) {
      QCOMPARE(replayed.results.data(replayed.results.index(r, c), Qt::DisplayRole),
               console.run.results.data(console.run.results.index(r, c), Qt::DisplayRole));
    }
  }
  for (int rank = 0; rank < 4; ++rank) {
    QCOMPARE(replayed.bandwidth().read()->points_received(rank, 0),
             console.run.bandwidth().read()->points_received(rank, 0));
    for (int s = 0; s < stage_names().size(); ++s) {
      QCOMPARE(replayed.timeline.cell(rank, s).duration_ms, console.run.timeline.cell(rank, s).duration_ms);
      QCOMPARE(replayed.timeline.cell(rank, s).detail, console.run.timeline.cell(rank, s).detail);
    }
  }
  QCOMPARE(replayed.ok(), true);
  QCOMPARE(replayed.rings(), console.run.rings());
  QCOMPARE(replayed.transport(3, 0), QString("SHM"));
  QCOMPARE(replayed.placement(), console.run.placement());
}

void ConsoleRunsTest::missingRankShowsAtTheBarrier() {
  Console console;
  QString error;
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  RunSpec spec;
  spec.min_bytes = spec.max_bytes = "1K";
  spec.ranks_per_agent = 1;
  spec.world_size = 3;  // rank 2 is placed nowhere
  spec.store_timeout_s = 2;
  QSignalSpy finished(&console.run, &RunState::finished);
  console.start_run(spec);
  QVERIFY(finished.wait(60000));
  QCOMPARE(finished.at(0).at(0).toBool(), false);
  const int barrier = static_cast<int>(stage_names().indexOf("STORE_BARRIER"));
  for (int rank = 0; rank < 2; ++rank) {
    const auto& cell = console.run.timeline.cell(rank, barrier);
    QVERIFY(cell.seen);
    QVERIFY(!cell.ok);
    QVERIFY2(cell.detail.contains("2/3 joined; missing ranks: 2"), qPrintable(cell.detail));
    QCOMPARE(console.run.timeline.data(console.run.timeline.index(rank, barrier), Qt::DisplayRole).toString(),
             QString("FAILED"));
  }
  bool red = false;
  for (const auto& s : layout_timeline(console.run.timeline, QRectF(0, 0, 800, 200)))
    red |= s.failed;
  QVERIFY(red);
}

// A short all_reduce sweep (8 B to 1 KiB, 2 iterations, a rank an agent)
// through `engine`.
RunSpec small_sweep(const QString& engine) {
  RunSpec spec;
  spec.min_bytes = "8";
  spec.max_bytes = "1K";
  spec.iters = 2;
  spec.ranks_per_agent = 1;
  spec.engine = engine;
  return spec;
}

// The console asks the node gate before it launches: two agents whose
// ranks would inherit different NCCL_PROTO are refused, naming the
// setting and the nodes, until "Allow nodes that differ" is ticked.
void ConsoleRunsTest::nodeGateRefusesAgentsThatDiffer() {
  QTemporaryDir dir;
  QFile token(dir.filePath("token"));
  QVERIFY(token.open(QIODevice::WriteOnly));
  token.write("0123456789abcdef0123456789abcdef\n");
  token.close();
  QVERIFY(token.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner));
  QProcess agents[2];
  quint16 ports[2] = {};
  for (int i = 0; i < 2; ++i) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    if (i == 1) env.insert("NCCL_PROTO", "Simple");
    agents[i].setProcessEnvironment(env);
    agents[i].setProcessChannelMode(QProcess::ForwardedErrorChannel);
    agents[i].start(RINGMASTER_AGENT, {"--listen", "127.0.0.1:0", "--print-port", "--token-file", token.fileName(),
                                       "--state-dir", dir.filePath(QString("state%1").arg(i)), "--rank-user",
                                       QString::fromStdString(ringmaster::agent::effective_user_name())});
    QVERIFY(agents[i].waitForStarted(5000));
    QByteArray line;
    while (!line.contains('\n') && agents[i].waitForReadyRead(10000))
      line += agents[i].readAllStandardOutput();
    ports[i] = static_cast<quint16>(line.trimmed().toInt());
    QVERIFY2(ports[i] > 0, line.constData());
  }
  Console console;
  MainWindow window(console);
  for (int i = 0; i < 2; ++i)
    console.connect_agent("127.0.0.1", ports[i], "0123456789abcdef0123456789abcdef");
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 15000);
  QTRY_VERIFY_WITH_TIMEOUT(console.agents.inventory(0) && console.agents.inventory(1), 15000);
  RunSpec spec = small_sweep("ringmaster");
  spec.ranks_per_agent = 1;
  spec.store_timeout_s = 5;
  window.set_run_spec(spec);
  QSignalSpy failed(&console, &Console::run_launch_failed);
  window.start_run();
  QCOMPARE(failed.size(), 1);
  const QString why = failed.at(0).at(0).toString();
  QVERIFY2(why.contains("refused before launch: the nodes' agents give their ranks different NCCL_PROTO: unset on "
                        "node 0 (") &&
               why.contains("NCCL_PROTO=Simple on node 1 (") && why.contains("Allow nodes that differ"),
           qPrintable(why));
  QCOMPARE(console.run.run_id(), QString());

  auto* allow = window.findChild<QCheckBox*>("allowMixedNodes");
  QVERIFY(allow);
  allow->setChecked(true);
  QVERIFY(window.run_spec().allow_mixed_nodes);
  QSignalSpy finished(&console.run, &RunState::finished);
  window.start_run();
  QCOMPARE(failed.size(), 1);
  QVERIFY(!console.run.run_id().isEmpty());
  // The ranks compare their settings in turn and stop at ADDRESS_EXCHANGE.
  QVERIFY(finished.wait(60000));
  QCOMPARE(finished.at(0).at(0).toBool(), false);
  QVERIFY2(console.run.problems().join("; ").contains("NCCL_PROTO"), qPrintable(console.run.problems().join("; ")));
  for (auto& a : agents) {
    a.terminate();
    a.waitForFinished(5000);
  }
}

// The Engine field runs the same sweep through NCCL on each agent's GPUs.
// On a node with a GPU it completes; here each rank fails and the run's
// problems say why (no driver); in a build without the CUDA toolkit the
// agents refuse it, naming the program they lack.
void ConsoleRunsTest::ncclEngineRunSaysWhyItDidNotRun() {
  Console console;
  QString error;
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  MainWindow window(console);
  const RunSpec spec = small_sweep("nccl");
  window.set_run_spec(spec);
  QCOMPARE(window.run_spec().engine, QString("nccl"));
  const bool built = QFileInfo::exists(QFileInfo(RINGMASTER_AGENT).dir().filePath("ringmaster-nccl-perf"));
  if (!built) {
    QSignalSpy failed(&console, &Console::run_launch_failed);
    console.start_run(window.run_spec());
    QVERIFY(failed.wait(20000));
    QVERIFY2(failed.at(0).at(0).toString().contains("engine nccl: this agent has no"),
             qPrintable(failed.at(0).at(0).toString()));
    return;
  }
  QSignalSpy finished(&console.run, &RunState::finished);
  console.start_run(window.run_spec());
  QVERIFY(finished.wait(60000));
  const QString problems = console.run.problems().join("; ");
  if (QProcess::execute("nvidia-smi", {"-L"}) == 0) {
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(problems));
    return;
  }
  QCOMPARE(finished.at(0).at(0).toBool(), false);
  QVERIFY2(problems.contains("NCCL side by side not run on") && problems.contains("no NVIDIA driver"),
           qPrintable(problems));
}

// Engine "both": the sweep through Ringmaster, then through NCCL over the
// same agents, the two kept and compared size by size in History. Where
// NCCL cannot run (no driver here) its column is empty and the note says
// why; where nvidia-smi lists a GPU both columns hold figures.
void ConsoleRunsTest::bothEnginesCompareSizeBySize() {
  QTemporaryDir dir;
  Console console;
  QString error;
  QVERIFY2(console.history.open(dir.filePath("history.sqlite"), &error), qPrintable(error));
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  MainWindow window(console);
  const RunSpec spec = small_sweep("both");
  window.set_run_spec(spec);
  QCOMPARE(window.run_spec().engine, QString("both"));

  // NCCL's runner sums floats: anything else is refused before a rank starts.
  {
    QSignalSpy failed(&console, &Console::run_launch_failed);
    RunSpec halves = spec;
    halves.dtype = "half";
    QVERIFY(console.start_run(halves).isEmpty());
    QCOMPARE(failed.size(), 1);
    QVERIFY2(failed.at(0).at(0).toString().contains("float sums"), qPrintable(failed.at(0).at(0).toString()));
    RunSpec all_to_all = spec;
    all_to_all.collective = "all_to_all";
    QVERIFY(console.start_run(all_to_all).isEmpty());
    QVERIFY2(failed.at(1).at(0).toString().contains(
                 "NCCL's runner takes all_reduce, all_gather, reduce_scatter or broadcast, not 'all_to_all'"),
             qPrintable(failed.at(1).at(0).toString()));
    QCOMPARE(console.history.rowCount(), 0);
  }

  const bool built = QFileInfo::exists(QFileInfo(RINGMASTER_AGENT).dir().filePath("ringmaster-nccl-perf"));
  QSignalSpy compared(&console, &Console::engines_compared);
  QSignalSpy failed(&console, &Console::run_launch_failed);
  QSignalSpy finished(&console.run, &RunState::finished);
  window.start_run();
  if (!built) {
    // The Ringmaster run is kept; the NCCL run is refused by the agents.
    QVERIFY(failed.wait(120000));
    QVERIFY2(failed.at(0).at(0).toString().contains("engine nccl: this agent has no"),
             qPrintable(failed.at(0).at(0).toString()));
    QCOMPARE(finished.size(), 1);
    QCOMPARE(console.history.rowCount(), 1);
    QCOMPARE(compared.size(), 0);
    return;
  }
  QVERIFY(compared.wait(180000));
  QCOMPARE(finished.size(), 2);
  QCOMPARE(finished.at(0).at(0).toBool(), true);  // Ringmaster's
  QCOMPARE(console.history.rowCount(), 2);
  const QString ours = compared.at(0).at(0).toString(), nccl = compared.at(0).at(1).toString();
  QCOMPARE(nccl, console.run.run_id());
  QCOMPARE(console.history.run_id_at(0), nccl);  // newest first
  QCOMPARE(console.history.run_id_at(1), ours);
  QVERIFY(console.history.data(console.history.index(0, RunHistory::what_column), Qt::DisplayRole)
              .toString()
              .startsWith("through NCCL: all_reduce 8..1K float sum"));

  auto* panel = window.findChild<HistoryPanel*>();
  QVERIFY(panel);
  QTableWidget* table = panel->comparison();
  QCOMPARE(table->horizontalHeaderItem(1)->text(), QString("busbw Ringmaster (GB/s)"));
  QCOMPARE(table->horizontalHeaderItem(2)->text(), QString("busbw NCCL (GB/s)"));
  QCOMPARE(table->horizontalHeaderItem(3)->text(), QString("NCCL / Ringmaster"));
  QCOMPARE(table->rowCount(), 8);  // 8 B .. 1 KiB
  const QString note = window.findChild<QLabel*>("historyNote")->text();
  QVERIFY2(note.contains(ours) && note.contains(nccl), qPrintable(note));
  const bool gpu = QProcess::execute("nvidia-smi", {"-L"}) == 0;
  for (int r = 0; r < table->rowCount(); ++r) {
    QCOMPARE(table->item(r, 0)->text().toULongLong(), 8ull << r);
    QVERIFY2(table->item(r, 1)->text().toDouble() > 0, qPrintable(table->item(r, 1)->text()));
    if (gpu) {
      QVERIFY2(table->item(r, 2)->text().toDouble() > 0, qPrintable(table->item(r, 2)->text()));
    } else {
      QCOMPARE(table->item(r, 2)->text(), QString("—"));
    }
  }
  if (!gpu) {
    QCOMPARE(console.run.ok(), false);
    QVERIFY2(note.contains("NCCL: ") && note.contains("no NVIDIA driver"), qPrintable(note));
  }
}

namespace {
// What rank 1 of 2 says, as the real CLI's events (probe --json), when
// nothing listens on MASTER_PORT `port` at 127.0.0.1: it retries, then
// fails at STORE_CONNECT after 1.5 s. Empty when the probe did not end.
QByteArray probe_unreachable_store(int port) {
  QProcess probe;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("RANK", "1");
  env.insert("WORLD_SIZE", "2");
  env.insert("MASTER_ADDR", "127.0.0.1");
  env.insert("MASTER_PORT", QString::number(port));
  env.insert("RINGMASTER_STORE_TIMEOUT", "1.5");
  probe.setProcessEnvironment(env);
  probe.start(RINGMASTER_CLI, {"probe", "--json"});
  if (!probe.waitForFinished(30000)) return {};
  return probe.readAllStandardOutput();
}
}  // namespace

// A rank whose store connect is refused (nothing listens on MASTER_PORT)
// says so while it retries; the events are the real CLI's (probe --json).
// The timeline shows the stage live, amber, with that line, before any
// timeout; the stage's final event then replaces it with the failure.
void ConsoleRunsTest::retryingStageIsDrawnLive() {
  const int port = 1;  // tcpmux: nothing listens there
  const QByteArray probed = probe_unreachable_store(port);
  QVERIFY2(!probed.isEmpty(), "probe did not finish");
  using nlohmann::json;
  namespace ev = ringmaster::agent::events;
  std::vector<ev::StageProgress> progress;
  std::vector<ev::StageEnded> finals;
  for (const QByteArray& line : probed.split('\n')) {
    if (line.isEmpty()) continue;
    const ev::Event e = ev::parse_event(json::parse(line.toStdString()));
    if (const auto* p = std::get_if<ev::StageProgress>(&e)) progress.push_back(*p);
    if (const auto* f = std::get_if<ev::StageEnded>(&e); f && f->stage == ringmaster::Stage::store_connect)
      finals.push_back(*f);
  }
  QVERIFY2(!progress.empty(), "probe printed no stage_progress event");
  QCOMPARE(finals.size(), std::size_t(1));

  TimelineModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.reset(2);
  TimelineView view(model);
  view.resize(900, 200);
  const int store_connect = static_cast<int>(stage_names().indexOf("STORE_CONNECT"));
  model.add_progress(1, progress.back());
  QVERIFY(model.cell(1, store_connect).live);
  QCOMPARE(model.index(1, store_connect).data().toString(), QString("retrying"));
  QVERIFY2(model.index(1, store_connect).data(Qt::ToolTipRole).toString().contains("refused the connection"),
           qPrintable(model.index(1, store_connect).data(Qt::ToolTipRole).toString()));
  QImage live(view.size(), QImage::Format_ARGB32);
  view.render(&live);
  auto amber_pixels = [](const QImage& image) {
    int n = 0;
    for (int y = 0; y < image.height(); ++y)
      for (int x = 0; x < image.width(); ++x)
        n += image.pixelColor(x, y) == QColor(0xff, 0xb3, 0x00) ? 1 : 0;
    return n;
  };
  QVERIFY2(amber_pixels(live) > 100, "the retrying stage is not drawn amber");

  model.add_stage(1, finals.front());
  QVERIFY(!model.cell(1, store_connect).live);
  QCOMPARE(model.index(1, store_connect).data().toString(), QString("FAILED"));
  QImage done(view.size(), QImage::Format_ARGB32);
  view.render(&done);
  QCOMPARE(amber_pixels(done), 0);
}

// Three real ranks (ringmaster-cli perf --json), one held before its
// collective #5 (RINGMASTER_FAULT_HOLD_AT_CALL): the stall event the
// others send shows in the Wavefront tab's grid, a row per rank, with the
// held rank's cell at #5 "not called" and the diagnosis above.
void ConsoleRunsTest::stallShowsEveryRanksCalls() {
  const QString port = QString::number(ringmaster::testing_support::free_port());
  std::vector<std::unique_ptr<QProcess>> ranks;
  for (int r = 0; r < 3; ++r) {
    auto p = std::make_unique<QProcess>();
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("RANK", QString::number(r));
    env.insert("WORLD_SIZE", "3");
    env.insert("MASTER_ADDR", "127.0.0.1");
    env.insert("MASTER_PORT", port);
    env.insert("RINGMASTER_STALL_S", "1");
    env.insert("RINGMASTER_COLL_TIMEOUT", "6");  // the report, at about 1.7 s, comes first
    if (r == 2) env.insert("RINGMASTER_FAULT_HOLD_AT_CALL", "5");
    p->setProcessEnvironment(env);
    p->start(RINGMASTER_CLI, {"perf", "all_reduce", "--json", "-b", "4K", "-e", "4K", "-n", "20", "-w", "1"});
    ranks.push_back(std::move(p));
  }
  using nlohmann::json;
  std::optional<std::pair<int, json>> stall;
  for (auto& p : ranks) {
    QVERIFY(p->waitForFinished(60000));
    for (const QByteArray& line : p->readAllStandardOutput().split('\n')) {
      if (!line.startsWith('{')) continue;
      const json e = json::parse(line.toStdString());
      if (e.value("type", "") == "stall") stall.emplace(e.value("rank", -1), e);
    }
  }
  QVERIFY2(stall.has_value(), "no rank sent a stall event");

  RunState run;
  QAbstractItemModelTester tester(&run.wavefront, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QSignalSpy stalled(&run, &RunState::stalled);
  run.begin("stalled", 3, 1);
  json body = {{"type", "event"}, {"run_id", "stalled"}, {"rank", stall->first}, {"event", stall->second}};
  run.apply(agent_message("a", std::move(body)));
  QCOMPARE(stalled.count(), 1);
  const WavefrontModel& m = run.wavefront;
  QCOMPARE(m.rowCount(), 3);
  const int at = m.stalled_column();
  QVERIFY(at >= 0);
  QCOMPARE(m.headerData(at, Qt::Horizontal, Qt::DisplayRole).toString(), QString("#5"));
  QCOMPARE(m.index(2, at).data().toString(), QString("not called"));
  QCOMPARE(m.index(2, at - 1).data().toString(), QString("done"));
  bool someone_waits_on_2 = false;
  for (int r = 0; r < 2; ++r)
    someone_waits_on_2 = someone_waits_on_2 || m.index(r, at).data().toString().startsWith("waits on rank 2");
  QVERIFY2(someone_waits_on_2, qPrintable(m.index(0, at).data().toString() + " / " + m.index(1, at).data().toString()));
  QVERIFY2(m.summary().contains("rank 2 is at #4 and has not called #5"), qPrintable(m.summary()));
  QVERIFY(run.problems().join("\n").contains("Stall: all_reduce #5"));

  // Drawn: the grid in a window, the stalled column's held cell in red.
  QTableView view;
  view.setModel(&run.wavefront);
  view.resize(900, 200);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  QImage shot(view.size(), QImage::Format_ARGB32);
  view.render(&shot);
  const QRect held = view.visualRect(m.index(2, at)).translated(view.viewport()->pos());
  QCOMPARE(shot.pixelColor(held.center() + QPoint(0, held.height() / 2 - 2)), QColor(0xf4, 0xa0, 0xa0));
}

// The Preflight tab over two local agents, from its Run button: every
// cell of every port class is ok, the findings hold no problem, the class
// shown can be switched, and the model passes QAbstractItemModelTester.
// The Bring-up tab: certify over three local agents, the third giving its
// ranks another NCCL_PROTO, declared as two-p5 nodes: each step shows its
// progress and result, the odd node is isolated with why and sits out,
// every sweep falls short of what p5 nodes reach; the preflight and link
// check steps open their own tabs holding their reports; the report
// exports as a self-contained page.
void ConsoleRunsTest::bringUpCertifiesTheLocalAgents() {
  QFile::remove(QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath("certify-state.json"));
  Console console;
  QAbstractItemModelTester tester(&console.certify, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QString error;
  QVERIFY(!console.start_certify({}, &error));
  QVERIFY2(error.contains("at least two"), qPrintable(error));
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  // The odd node: an agent whose ranks get NCCL_PROTO=Simple, as a node
  // whose image left a workaround behind.
  const QString token_file = QDir::temp().filePath(QString("certify-ui-token-%1").arg(::getpid()));
  {
    QFile token(token_file);
    QVERIFY(token.open(QIODevice::WriteOnly));
    token.write("certify-ui-token-0123456789\n");
    token.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner);
  }
  const quint16 port = static_cast<quint16>(ringmaster::testing_support::free_port());
  auto odd = ringmaster::testing_support::spawn(
      {RINGMASTER_AGENT, "--listen", "127.0.0.1:" + std::to_string(port), "--token-file", token_file.toStdString(),
       "--state-dir", QDir::temp().filePath(QString("certify-ui-state-%1").arg(::getpid())).toStdString()},
      {{"NCCL_PROTO", "Simple"}}, true);
  MainWindow window(console);
  window.resize(1360, 900);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  QTest::qWait(300);
  console.connect_agent("127.0.0.1", port, "certify-ui-token-0123456789");
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 3, 20000);
  auto* panel = window.findChild<BringupPanel*>();
  QVERIFY(panel);
  window.findChild<QTabWidget*>()->setCurrentWidget(panel);
  QCOMPARE(console.certify.rowCount(), 5);
  QCOMPARE(console.certify.state(0), QString("waiting"));
  panel->set_environment("NCCL_SHM_DISABLE=1");
  // A node's topology file declares the cluster: one that declares no GPU
  // (AWS's g5 file lists PCI addresses only) is refused before anything
  // runs; AWS's p5 file is a p5.
  panel->set_topology_file(RINGMASTER_TOPOLOGY_DIR "/g5.48xl-topo.xml");
  QVERIFY(!panel->start());
  QVERIFY2(panel->verdict()->text().contains("g5.48xl-topo.xml declares no GPU"), qPrintable(panel->verdict()->text()));
  QCOMPARE(console.certify.state(0), QString("waiting"));
  panel->set_instance("p5.48xlarge");
  panel->set_topology_file(RINGMASTER_TOPOLOGY_DIR "/p5.48xl-topo.xml");
  panel->findChild<QLineEdit*>()->setText("1M");  // the largest size: keep the sweeps short
  QSignalSpy done(&console, &Console::certify_finished);
  QSignalSpy failed(&console, &Console::certify_failed);
  QTest::mouseClick(panel->findChild<QPushButton*>("certifyRun"), Qt::LeftButton);
  QVERIFY(!panel->findChild<QPushButton*>("certifyRun")->isEnabled());
  QTRY_VERIFY_WITH_TIMEOUT(console.certify.state(0) != "waiting", 10000);  // progress shows as it goes
  QVERIFY2(done.wait(180000), failed.isEmpty() ? "no end" : qPrintable(failed.at(0).at(0).toString()));
  QVERIFY(panel->findChild<QPushButton*>("certifyRun")->isEnabled());
  QCOMPARE(console.certify.state(0), QString("found"));  // nodes: the odd one
  QCOMPARE(console.certify.state(1), QString("passed"));
  QVERIFY2(console.certify.state(2) == "passed" || console.certify.state(2) == "found",
           qPrintable(console.certify.state(2)));
  QCOMPARE(console.certify.state(3), QString("passed"));
  QCOMPARE(console.certify.state(4), QString("found"));  // loopback is no p5
  QVERIFY2(panel->verdict()->text().startsWith("ISOLATE: 3 node(s)"), qPrintable(panel->verdict()->text()));
  QVERIFY2(panel->verdict()->text().contains("fell short"), qPrintable(panel->verdict()->text()));
  QTableWidget* nodes = panel->nodes();
  QVERIFY(nodes->rowCount() >= 3);
  QCOMPARE(nodes->item(2, 3)->text(), QString("ISOLATE"));
  QVERIFY2(nodes->item(2, 4)->text().contains("NCCL_PROTO=Simple on node 2"), qPrintable(nodes->item(2, 4)->text()));
  QVERIFY2(nodes->item(0, 3)->text() != "ISOLATE", qPrintable(nodes->item(0, 4)->text()));
  // A step's findings when it is selected.
  panel->steps()->selectRow(4);
  QTRY_VERIFY(panel->findings()->count() >= 1);
  QVERIFY2(panel->findings()->item(0)->text().contains("under the envelope: p5.48xlarge x 2"),
           qPrintable(panel->findings()->item(0)->text()));
  QVERIFY2(panel->findings()->item(0)->text().contains("(declared by " RINGMASTER_TOPOLOGY_DIR "/p5.48xl-topo.xml"),
           qPrintable(panel->findings()->item(0)->text()));
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE"))
    window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-bring-up.png");
  // The preflight and link check steps open their tabs, which hold them:
  // over the two nodes still in.
  panel->open_step(1);
  QCOMPARE(window.findChild<QTabWidget*>()->tabText(window.findChild<QTabWidget*>()->currentIndex()),
           QString("Preflight"));
  QCOMPARE(console.preflight.rowCount(), 2);
  panel->open_step(2);
  QCOMPARE(window.findChild<QTabWidget*>()->tabText(window.findChild<QTabWidget*>()->currentIndex()), QString("Links"));
  QCOMPARE(console.links.rowCount(), 2);
  // The report, exported as the CLI writes it.
  const QString html = QDir::temp().filePath(QString("certify-ui-%1.html").arg(::getpid()));
  QVERIFY2(panel->export_report(html, &error), qPrintable(error));
  QFile page(html);
  QVERIFY(page.open(QIODevice::ReadOnly));
  const QString text = QString::fromUtf8(page.readAll());
  QVERIFY(text.contains("Ringmaster certification") && text.contains("<svg") && text.contains("ISOLATE"));
  QFile::remove(html);
  QFile::remove(token_file);
  ::kill(odd.pid, SIGTERM);
  odd.finish();
}

// A console closed while it certifies (here in the sweeps) keeps what it
// finished; the next certification over the same nodes keeps those steps
// and runs the rest, and says so.
void ConsoleRunsTest::bringUpResumesACertificationTheConsoleStopped() {
  QFile::remove(QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath("certify-state.json"));
  QString error;
  ringmaster::agent::CertifyOptions options;
  options.env["NCCL_SHM_DISABLE"] = "1";
  options.linkcheck.bytes = "1M";
  options.max_bytes = "64M";  // sweeps long enough to close the console in them
  {
    Console first;
    QVERIFY2(first.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
    QTRY_COMPARE_WITH_TIMEOUT(first.connected_count(), 2, 20000);
    QVERIFY2(first.start_certify(options, &error), qPrintable(error));
    QTRY_VERIFY_WITH_TIMEOUT(first.certify.state(3) == "running", 60000);
    QCOMPARE(first.certify.state(2), QString("passed"));
  }  // closed in the sweeps
  Console second;
  QVERIFY2(second.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  QTRY_COMPARE_WITH_TIMEOUT(second.connected_count(), 2, 20000);
  options.max_bytes = "1M";
  QSignalSpy done(&second, &Console::certify_finished);
  QVERIFY2(second.start_certify(options, &error), qPrintable(error));
  QCOMPARE(second.certify.resumed_steps(), 3);
  QCOMPARE(second.certify.state(0), QString("passed"));  // kept, not run again
  QCOMPARE(second.certify.state(3), QString("waiting"));
  QVERIFY(done.wait(120000));
  QCOMPARE(second.certify.state(3), QString("passed"));
  QVERIFY2(second.certify.verdict_text().contains("resumed: 3 step(s) kept"),
           qPrintable(second.certify.verdict_text()));
  // Run to its end: the next one starts afresh.
  QVERIFY2(second.start_certify(options, &error), qPrintable(error));
  QCOMPARE(second.certify.resumed_steps(), 0);
  QVERIFY(done.wait(120000));
}

void ConsoleRunsTest::preflightOverLocalAgents() {
  Console console;
  QAbstractItemModelTester tester(&console.preflight, QAbstractItemModelTester::FailureReportingMode::QtTest);
  PreflightPanel panel(console);
  QString error;
  QVERIFY(!console.start_preflight({}, &error));
  QVERIFY2(error.contains("at least two"), qPrintable(error));
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  panel.resize(1200, 800);
  panel.show();
  QSignalSpy done(&console, &Console::preflight_finished);
  auto* run = panel.findChild<QPushButton*>("preflightRun");
  QVERIFY(run != nullptr);
  QTest::mouseClick(run, Qt::LeftButton);
  QVERIFY(!run->isEnabled());
  QVERIFY(done.wait(30000));
  QVERIFY(run->isEnabled());
  const PreflightModel& m = console.preflight;
  QCOMPARE(m.rowCount(), 2);
  QVERIFY(panel.port_classes()->count() >= 3);
  for (int c = 0; c < panel.port_classes()->count(); ++c) {
    panel.port_classes()->setCurrentIndex(c);
    QCOMPARE(m.port_class(), c);
    QCOMPARE(m.index(0, 0).data().toString(), QString("-"));
    QCOMPARE(m.index(0, 1).data().toString(), QString("ok"));
    QCOMPARE(m.index(1, 0).data().toString(), QString("ok"));
    QVERIFY2(m.index(0, 1).data(Qt::ToolTipRole).toString().contains(" ok"),
             qPrintable(m.index(0, 1).data(Qt::ToolTipRole).toString()));
  }
  QVERIFY(panel.findings()->count() >= 1);
  for (int i = 0; i < panel.findings()->count(); ++i)
    QVERIFY2(!panel.findings()->item(i)->text().startsWith("problem"), qPrintable(panel.findings()->item(i)->text()));
  QVERIFY2(m.summary().contains("2 node(s)") && m.summary().contains("no problem found"), qPrintable(m.summary()));
}

// The Links tab: a link check over three local agents fills a 3 x 3
// heatmap (every link measured or ahead of its reader, each coloured by its
// share of the median); a run's links events, when it ends, replace it
// rank by rank; a link the model holds at a hundredth of the others is
// painted red and named.
void ConsoleRunsTest::linksHeatmapFromACheckAndFromARun() {
  Console console;
  QAbstractItemModelTester tester(&console.links, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QAbstractItemModelTester rails(&console.nics, QAbstractItemModelTester::FailureReportingMode::QtTest);
  LinksPanel panel(console);
  QString error;
  QVERIFY(!console.start_linkcheck({}, &error));
  QVERIFY2(error.contains("at least two"), qPrintable(error));
  QVERIFY2(console.start_local_agents(3, RINGMASTER_AGENT, &error), qPrintable(error));
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 3, 20000);
  panel.resize(1200, 700);
  panel.show();
  QSignalSpy done(&console, &Console::linkcheck_finished);
  QSignalSpy failed(&console, &Console::linkcheck_failed);
  auto* check = panel.findChild<QPushButton*>("linksCheck");
  QVERIFY(check != nullptr);
  panel.set_environment("NCCL_SHM_DISABLE");
  QVERIFY(!panel.start());
  panel.set_environment("NCCL_SHM_DISABLE=1");  // sockets, as between nodes
  QTest::mouseClick(check, Qt::LeftButton);
  QVERIFY(!check->isEnabled());
  QVERIFY2(done.wait(120000), failed.isEmpty() ? "no end" : qPrintable(failed.at(0).at(0).toString()));
  QVERIFY(check->isEnabled());
  // The rails: the three agents' network devices (loopback is none), live.
  QVERIFY(panel.rails() && panel.rails()->model() == &console.nics);
  QTRY_VERIFY_WITH_TIMEOUT(console.nics.rowCount() >= 3, 5000);
  QTRY_VERIFY_WITH_TIMEOUT(
      console.nics
              .rate(console.nics.index(0, NicRatesModel::agent_column).data().toString(),
                    console.nics.index(0, NicRatesModel::device_column).data().toString().section(' ', 0, 0))
              .first >= 0,
      5000);
  const LinksModel& m = console.links;
  QCOMPARE(m.rowCount(), 3);
  QCOMPARE(m.kind(), QString("node"));
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) {
      if (from == to) continue;
      QVERIFY2(m.cell(from, to).measured, qPrintable(m.index(from, to).data(Qt::ToolTipRole).toString()));
      QCOMPARE(m.cell(from, to).transport, QString("SOCKET"));
      QVERIFY(m.index(from, to).data(Qt::BackgroundRole).value<QColor>().isValid());
      // A number, also for a link ahead of its reader (what it carried at least).
      QVERIFY2(m.index(from, to).data().toString().contains(QRegularExpression("[0-9]")),
               qPrintable(m.index(from, to).data().toString()));
    }
  }
  QVERIFY2(m.summary().contains("3 nodes") && m.summary().contains("6 of 6 links measured"), qPrintable(m.summary()));
  QVERIFY(panel.findings()->count() >= 1);

  // A run's links, replayed: ranks as rows and columns.
  RunState replayed;
  QVERIFY(Console::replay(RINGMASTER_TEST_DATA_DIR "/console/run-2-agents-4-ranks.jsonl", replayed) > 0);
  QVERIFY(!replayed.links().empty());
  std::vector<std::pair<int, ringmaster::agent::events::Links>> links = replayed.links();
  console.links.set_run(replayed.run_id(), replayed.world_size(), links, replayed.slow_links(),
                        replayed.results.best_busbw());
  for (int from = 0; from < 4; ++from) {
    for (int to = 0; to < 4; ++to) {
      if (from == to || !m.cell(from, to).measured) continue;
      QVERIFY2(m.index(from, to).data().toString().contains(QRegularExpression("[0-9]")),
               qPrintable(m.index(from, to).data().toString()));
    }
  }
  QCOMPARE(m.rowCount(), 4);
  QCOMPARE(m.kind(), QString("rank"));
  QVERIFY2(m.summary().startsWith("Run " + replayed.run_id() + ": 4 ranks"), qPrintable(m.summary()));
  // One link a hundredth of the others: red, and named as the findings.
  ringmaster::agent::events::Links crawl;
  crawl.links.push_back({0, 8 << 20, 1000, 0, 0.001, "SOCKET"});
  links = {{1, crawl}};
  for (int to : {0, 2, 3}) {
    ringmaster::agent::events::Links fast;
    fast.links.push_back({(to + 3) % 4, 8 << 20, 1000, 0, 1.0, "SOCKET"});
    links.emplace_back(to, fast);
  }
  console.links.set_run("r", 4, links, {"rank 0 -> rank 1 at 1.0 MB/s"});
  const QColor slow = m.index(0, 1).data(Qt::BackgroundRole).value<QColor>();
  const QColor fine = m.index(3, 0).data(Qt::BackgroundRole).value<QColor>();
  QVERIFY2(slow.red() > 200 && slow.green() < 130, qPrintable(slow.name()));
  QVERIFY2(fine.green() > 200 && fine.red() < 170, qPrintable(fine.name()));
  QCOMPARE(m.index(0, 1).data().toString(), QString("1 MB/s"));
  QVERIFY(m.index(0, 1).data(Qt::ToolTipRole).toString().contains("0.00 of the median SOCKET link"));
  QCOMPARE(panel.findings()->count(), 1);
  QCOMPARE(panel.findings()->item(0)->text(), QString("rank 0 -> rank 1 at 1.0 MB/s"));
}

// --replay shows a recorded run without agents: the Results tab of the
// recording's run, saved; a recording cut before the run's end is shown as
// it is, saying so; one that cannot be read exits 2.
namespace {
int stages_last_column(QTableView* view) {
  const int ready = view->model()->columnCount() - 1;
  return view->columnViewportPosition(ready) + view->columnWidth(ready);
}
}  // namespace

// The field's first failure: a rank's store connect that never succeeds,
// recorded from the real CLI (probe --json, rank 1 of 2, nothing on
// MASTER_PORT) as a console records a run of two agents. Replayed at
// 1366x768, the Live tab opens on the cause: stage, rank, agent, address
// and the whole hint in the detail pane without a click or a scroll, the
// empty chart folded away; the status bar says it is a replay and where
// it failed, with no "0 of 0 agents" or "avg busbw 0.00". The timeline's
// legend names every stage and the total, clear of each other.
void ConsoleRunsTest::failedInitOpensOnItsCause() {
  const int port = 1;  // tcpmux: nothing listens there
  const QByteArray probed = probe_unreachable_store(port);
  QVERIFY2(!probed.isEmpty(), "probe did not finish");
  using nlohmann::json;
  QTemporaryDir dir;
  QFile recording(dir.filePath("seed.jsonl"));
  QVERIFY(recording.open(QIODevice::WriteOnly));
  const std::string run = "console-seed";
  const std::vector<std::string> agents = {"10.0.0.1:29600", "10.0.0.2:29600"};
  auto write = [&](const json& line) { recording.write(QByteArray::fromStdString(line.dump() + "\n")); };
  write({{"run_begin", run}, {"world_size", 2}, {"agents", 2}, {"placement", {0, 1}}, {"agent_addresses", agents}});
  std::string hint;
  for (const QByteArray& line : probed.split('\n')) {
    if (!line.startsWith('{')) continue;
    const json e = json::parse(line.toStdString());
    const std::string type = e.value("type", "");
    if (type != "stage" && type != "stage_progress" && type != "failure") continue;
    if (type == "failure") hint = e.value("hint", "");
    write({{"agent", agents[1]}, {"message", {{"type", "event"}, {"run_id", run}, {"rank", 1}, {"event", e}}}});
  }
  QVERIFY2(hint.size() > 40, "probe printed no failure with a hint");
  for (int a = 0; a < 2; ++a) {
    write({{"agent", agents[static_cast<std::size_t>(a)]},
           {"message",
            {{"type", "event"}, {"run_id", run}, {"rank", -1}, {"event", {{"type", "run_done"}, {"ok", false}}}}}});
  }
  recording.close();

  Console console;
  MainWindow window(console);
  window.resize(1366, 768);
  window.tabs()->setCurrentIndex(2);  // elsewhere: the failure brings the Live tab
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  window.set_source("replay of seed.jsonl");
  QVERIFY(Console::replay(recording.fileName(), console.run) > 0);
  QVERIFY(!console.run.running());
  QApplication::processEvents();
  QCOMPARE(window.tabs()->currentIndex(), 0);
  QPlainTextEdit* detail = window.stage_detail();
  const QString text = detail->toPlainText();
  QVERIFY2(text.startsWith("STORE_CONNECT FAILED on rank 1 on agent 1 (10.0.0.2:29600)"), qPrintable(text));
  QVERIFY2(text.contains(QString("127.0.0.1:%1").arg(port)), qPrintable(text));
  QVERIFY2(text.contains("Hint: " + QString::fromStdString(hint)), qPrintable(text));
  // All of it in view: no scrolling, and the chart folded away.
  QVERIFY2(detail->verticalScrollBar()->maximum() == 0,
           qPrintable(QString("the detail pane scrolls: %1 px tall").arg(detail->height())));
  QCOMPARE(window.bandwidth()->height(), 0);
  QVERIFY(window.timeline()->height() >= window.timeline()->minimumHeight() - 1 ||
          window.timeline()->parentWidget()->height() >= 100);
  // The screenshot, by region: the detail pane has the text drawn (its
  // lines down to the hint's), not just its background.
  const QImage shot = window.grab().toImage();
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SHOTS"))
    shot.save(qEnvironmentVariable("RINGMASTER_TEST_SHOTS") + "/seed.png");
  const QRect pane(detail->viewport()->mapTo(&window, QPoint(0, 0)), detail->viewport()->size());
  const int text_height = static_cast<int>(detail->document()->size().height() * detail->fontMetrics().lineSpacing());
  QImage lower = shot.copy(QRect(pane.left(), pane.top() + text_height / 2, pane.width(), text_height / 2));
  int ink = 0;
  for (int y = 0; y < lower.height(); ++y)
    for (int x = 0; x < lower.width(); ++x)
      ink += qGray(lower.pixel(x, y)) < 128 ? 1 : 0;
  QVERIFY2(ink > 200, qPrintable(QString("%1 dark pixels in the lower half of the detail's text").arg(ink)));
  QStringList status;
  for (auto* label : window.statusBar()->findChildren<QLabel*>())
    status << label->text();
  const QString bar = status.join(" | ");
  QVERIFY2(bar.contains("replay of seed.jsonl"), qPrintable(bar));
  QVERIFY2(bar.contains("FAILED at STORE_CONNECT on rank 1 (127.0.0.1:"), qPrintable(bar));
  QVERIFY2(!bar.contains("0 of 0 agents") && !bar.contains("avg busbw"), qPrintable(bar));
  // The legend: the total and every stage, none cut, none over another,
  // at this width and at half of it (wrapped onto more lines).
  for (const int width : {window.timeline()->width(), 600}) {
    TimelineView view(console.run.timeline);
    view.resize(width, 300);
    const auto legend = view.legend();
    QCOMPARE(static_cast<int>(legend.size()), stage_names().size() + 1);
    QVERIFY(legend.front().text.startsWith("init "));
    for (std::size_t i = 0; i < legend.size(); ++i) {
      QVERIFY2(QRectF(view.rect()).contains(legend[i].rect), qPrintable(legend[i].text));
      for (std::size_t j = i + 1; j < legend.size(); ++j)
        QVERIFY2(!legend[i].rect.intersects(legend[j].rect), qPrintable(legend[i].text + " / " + legend[j].text));
    }
    QVERIFY(view.plot_area().bottom() <= legend.front().rect.top());
  }
  // Tables at this size. Agents: told apart by their whole address, their
  // state and round trip in view without scrolling.
  console.agents.add("127.0.0.1:41467");
  console.agents.add("127.0.0.1:41468");
  QApplication::processEvents();
  auto* agents_view = window.findChild<QTableView*>("agentsView");
  QVERIFY(agents_view);
  for (const int column : {AgentsModel::address_column, AgentsModel::state_column, AgentsModel::rtt_column}) {
    const int right = agents_view->columnViewportPosition(column) + agents_view->columnWidth(column);
    QVERIFY2(
        right <= agents_view->viewport()->width(),
        qPrintable(
            QString("column %1 ends at %2 of %3 px").arg(column).arg(right).arg(agents_view->viewport()->width())));
  }
  QVERIFY(agents_view->columnWidth(AgentsModel::address_column) >=
          agents_view->fontMetrics().horizontalAdvance("127.0.0.1:41467"));
  QCOMPARE(console.agents.index(0, AgentsModel::address_column).data(Qt::ToolTipRole).toString(),
           QString("127.0.0.1:41467"));
  // Stages: every stage's column in view, READY included.
  window.tabs()->setCurrentIndex(1);
  QApplication::processEvents();
  auto* stages = window.findChild<QTableView*>("timelineTable");
  QVERIFY(stages);
  QTest::qWait(300);  // its columns are fitted a moment after the rows come
  const int last = stages_last_column(stages);
  QVERIFY2(last <= stages->viewport()->width(),
           qPrintable(QString("READY ends at %1 of %2 px").arg(last).arg(stages->viewport()->width())));
}

// A node file the local agents refuse: the console says which file and
// the agent's own reason, not "Unknown error".
void ConsoleRunsTest::localAgentRefusingItsTopologySaysWhy() {
  QTemporaryDir dir;
  QFile bad(dir.filePath("bad-node.xml"));
  QVERIFY(bad.open(QIODevice::WriteOnly));
  bad.write("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"></cpu>\n");
  bad.close();
  QProcess console;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("QT_QPA_PLATFORM", "offscreen");
  console.setProcessEnvironment(env);
  console.start(RINGMASTER_CONSOLE,
                {"--local", "1", "--local-topology", bad.fileName(), "--screenshot", dir.filePath("x.png")});
  QVERIFY(console.waitForFinished(60000));
  const QString err = QString::fromUtf8(console.readAllStandardError());
  QCOMPARE(console.exitCode(), 1);
  QVERIFY2(err.contains("the local agent refused the topology file " + bad.fileName() + ": "), qPrintable(err));
  QVERIFY2(err.contains("malformed XML"), qPrintable(err));
  QVERIFY2(!err.contains("Unknown error"), qPrintable(err));
}

// "Attach to job" on a job the console did not launch: rank 0 a real store
// (ringmaster-cli store serve) and rank 1 a client waiting on it, both
// with torchrun's variables. Through both local agents the Watch tab
// shows rank 0 hosting and rank 1 connected, each agent's answer, the
// words that it is watched and never signalled; Stop ends the watchers
// and the job goes on.
void ConsoleRunsTest::attachToAJobTheConsoleDidNotLaunch() {
  Console console;
  QAbstractItemModelTester watched_tester(&console.watched);
  QString error;
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  MainWindow window(console);
  window.resize(1360, 760);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  const std::string port = std::to_string(ringmaster::testing_support::free_port());
  const std::string job = "console-attach-" + std::to_string(::getpid());
  const std::map<std::string, std::string> env = {
      {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"TORCHELASTIC_RUN_ID", job}};
  auto with_rank = [&](const char* rank) {
    auto e = env;
    e["RANK"] = rank;
    return e;
  };
  auto store =
      ringmaster::testing_support::spawn({RINGMASTER_CLI, "store", "serve", "--port", port}, with_rank("0"), true);
  QTest::qWait(500);
  auto client = ringmaster::testing_support::spawn(
      {RINGMASTER_CLI, "store", "wait", "--host", "127.0.0.1", "--port", port, "--timeout", "60", "never-set"},
      with_rank("1"), true);
  auto* panel = window.findChild<WatchPanel*>();
  QVERIFY(panel);
  window.findChild<QTabWidget*>()->setCurrentWidget(panel);
  panel->set_job("run id", QString::fromStdString(job));
  QVERIFY2(panel->attach(), qPrintable(panel->summary()->text()));
  QVERIFY(panel->summary()->text().contains("never kills or signals it"));
  auto outcome_of = [&](int pid, const QString& agent) {
    for (int row = 0; row < console.watched.rowCount(); ++row) {
      const auto& r = console.watched.rank_at(row);
      if (r.pid == pid && console.watched.data(console.watched.index(row, JobWatchModel::kAgent)).toString() == agent)
        return QString::fromStdString(r.outcome);
    }
    return QString();
  };
  const QString first =
      console.agents.data(console.agents.index(0, AgentsModel::address_column), Qt::DisplayRole).toString();
  QTRY_COMPARE_WITH_TIMEOUT(outcome_of(store.pid, first), QString("hosting"), 20000);
  QTRY_COMPARE_WITH_TIMEOUT(outcome_of(client.pid, first), QString("connected"), 20000);
  QTRY_COMPARE_WITH_TIMEOUT(console.watched.rowCount(), 4, 20000);  // each agent sees both processes
  // The rendezvous timeline: a row a rank of the job, each in its stage now.
  QCOMPARE(console.watched.timeline.ranks(), 2);
  const auto& hosting = console.watched.timeline.cell(0, static_cast<int>(ringmaster::Stage::store_barrier));
  QVERIFY(hosting.seen && hosting.live);
  QVERIFY2(hosting.live_text.startsWith("watched: hosting: hosts the store on"), qPrintable(hosting.live_text));
  QVERIFY(console.watched.timeline.cell(1, static_cast<int>(ringmaster::Stage::store_handshake)).live);
  QTRY_VERIFY_WITH_TIMEOUT(console.watched.notes().filter("watching processes [").size() == 2, 20000);
  QVERIFY2(panel->notes()->toPlainText().contains("watching processes ["), qPrintable(panel->notes()->toPlainText()));
  QCOMPARE(console.watched.data(console.watched.index(0, JobWatchModel::kStage)).toString().isEmpty(), false);
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE"))
    window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-watch.png");
  QTest::mouseClick(window.findChild<QPushButton*>("watchStop"), Qt::LeftButton);
  QTRY_COMPARE_WITH_TIMEOUT(console.watched.watchers_ended(), 2, 20000);
  QVERIFY(console.watched.notes().filter("the watcher ended (stopped)").size() == 2);
  // Watched, never signalled: the job is still there.
  QCOMPARE(::kill(store.pid, 0), 0);
  QCOMPARE(::kill(client.pid, 0), 0);
  ::kill(client.pid, SIGKILL);
  ::kill(store.pid, SIGKILL);
  client.finish();
  store.finish();
  // A job named nowhere: said, nothing asked.
  panel->set_job("master port", "not-a-port");
  QVERIFY(!panel->attach());
  QVERIFY2(panel->summary()->text().contains("Not a master port"), qPrintable(panel->summary()->text()));
}

// A real torch job's two hangs, attached to from the Watch tab through a
// local agent: ranks 1-3 of a job whose MASTER_PORT a rule drops (in a
// network namespace) shown at STORE_CONNECT, unanswered, with the hint;
// then a 4-rank Gloo job under torchrun (Flight Recorder and torch's
// debug server on) whose rank 2 stops before its fifth all_reduce, named
// in the notes with that call. The pictures of docs/watch.md.
void ConsoleRunsTest::watchShowsATorchJobsStoreHangAndCollectiveHang() {
  const std::string python = RINGMASTER_PYTHON_ENV "/bin/python";
  const std::string torchrun = RINGMASTER_PYTHON_ENV "/bin/torchrun";
  if (::access(torchrun.c_str(), X_OK) != 0) QSKIP("no torch in " RINGMASTER_PYTHON_ENV " (scripts/setup-deps)");
  if (::geteuid() != 0) QSKIP("needs root: a network namespace and an nftables rule");
  Console console;
  QString error;
  QVERIFY2(console.start_local_agents(1, RINGMASTER_AGENT, &error), qPrintable(error));
  MainWindow window(console);
  window.resize(1360, 760);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 1, 20000);
  auto* panel = window.findChild<WatchPanel*>();
  QVERIFY(panel);
  window.findChild<QTabWidget*>()->setCurrentWidget(panel);
  auto run = [](std::vector<std::string> argv) {
    auto p = ringmaster::testing_support::spawn(argv, {}, true);
    p.finish();
    return p.exit_code();
  };
  // The store hang.
  const std::string ns = "rmuiwatch" + std::to_string(::getpid());
  QCOMPARE(run({"/usr/sbin/ip", "netns", "add", ns}), 0);
  const std::vector<std::string> in_ns = {"/usr/sbin/ip", "netns", "exec", ns};
  auto ns_cmd = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), in_ns.begin(), in_ns.end());
    return run(argv);
  };
  ns_cmd({"/usr/sbin/ip", "link", "set", "lo", "up"});
  const std::string port = std::to_string(ringmaster::testing_support::free_port());
  ns_cmd({"/usr/sbin/nft", "add", "table", "inet", "rmuiwatch"});
  ns_cmd({"/usr/sbin/nft", "add", "chain", "inet", "rmuiwatch", "in", "{ type filter hook input priority 0; }"});
  QCOMPARE(ns_cmd({"/usr/sbin/nft", "add", "rule", "inet", "rmuiwatch", "in", "tcp", "dport", port, "drop"}), 0);
  const std::string rank_script =
      "import os, time\n"
      "from datetime import timedelta\n"
      "import torch.distributed as d\n"
      "s = d.TCPStore('127.0.0.1', int(os.environ['MASTER_PORT']), 4, False, timeout=timedelta(seconds=60),\n"
      "               wait_for_workers=False)\n"
      "time.sleep(60)\n";
  const std::string job = "ui-store-hang-" + std::to_string(::getpid());
  std::vector<ringmaster::testing_support::ChildProcess> ranks;
  for (int r = 1; r <= 3; ++r) {
    std::vector<std::string> argv = in_ns;
    argv.insert(argv.end(), {python, "-c", rank_script});
    ranks.push_back(ringmaster::testing_support::spawn(
        argv, {{"RANK", std::to_string(r)}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", port}, {"TORCHELASTIC_RUN_ID", job}},
        true));
  }
  panel->set_job("run id", QString::fromStdString(job));
  QVERIFY2(panel->attach(), qPrintable(panel->summary()->text()));
  auto named_unanswered = [&] {
    int named = 0;
    for (int row = 0; row < console.watched.rowCount(); ++row) {
      const auto& r = console.watched.rank_at(row);
      named += r.outcome == "unanswered" && r.syn_retransmits > 0 && !r.hint.empty() ? 1 : 0;
    }
    return named;
  };
  QTRY_COMPARE_WITH_TIMEOUT(named_unanswered(), 3, 60000);
  for (int r = 1; r <= 3; ++r) {
    const auto& connect = console.watched.timeline.cell(r, static_cast<int>(ringmaster::Stage::store_connect));
    QVERIFY2(connect.live &&
                 connect.live_text.startsWith("watched: unanswered: SYN to 127.0.0.1:" + QString::fromStdString(port)),
             qPrintable(connect.live_text));
  }
  panel->table()->selectRow(0);
  emit panel->table()->clicked(console.watched.index(0, 0));
  QVERIFY2(panel->detail()->toPlainText().contains("got no answer at all"), qPrintable(panel->detail()->toPlainText()));
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE"))
    window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-watch-store-hang.png");
  QTest::mouseClick(window.findChild<QPushButton*>("watchStop"), Qt::LeftButton);
  for (auto& r : ranks) {
    ::kill(r.pid, SIGKILL);
    r.finish();
  }
  run({"/usr/sbin/ip", "netns", "del", ns});

  // The collective hang.
  QTemporaryDir dir;
  QFile script(dir.filePath("job.py"));
  QVERIFY(script.open(QIODevice::WriteOnly));
  script.write(
      "import os, time, torch, torch.distributed as dist\n"
      "from torch.distributed.debug import start_debug_server\n"
      "dist.init_process_group('gloo')\n"
      "r = dist.get_rank()\n"
      "try:\n"
      "    start_debug_server(port=int(os.environ['DEBUG_PORT']))\n"
      "except Exception as e:\n"
      "    print('front end:', e, flush=True)\n"
      "t = torch.ones(4)\n"
      "for i in range(6):\n"
      "    if r == 2 and i == 4:\n"
      "        time.sleep(60)\n"
      "    dist.all_reduce(t)\n");
  script.close();
  const std::string job_port = std::to_string(ringmaster::testing_support::free_port());
  auto torch_job = ringmaster::testing_support::spawn(
      {torchrun, "--nnodes", "1", "--nproc-per-node", "4", "--master-port", job_port, script.fileName().toStdString()},
      {{"TORCH_FR_BUFFER_SIZE", "2000"}, {"DEBUG_PORT", std::to_string(ringmaster::testing_support::free_port())}},
      true);
  window.findChild<QCheckBox*>("watchFlightRecorder")->setChecked(true);
  // The workers come up after torch's import: attach once they are there
  // (the agent answers "no process of the job" before).
  bool attached = false;
  for (int i = 0; i < 120 && !attached; ++i) {
    QTest::qWait(500);
    panel->set_job("master port", QString::fromStdString(job_port));
    QVERIFY2(panel->attach(), qPrintable(panel->summary()->text()));
    auto answered = [&] {
      return !console.watched.notes().filter("watching processes").isEmpty() ||
             !console.watched.notes().filter("no process of the job").isEmpty();
    };
    QTRY_VERIFY_WITH_TIMEOUT(answered(), 20000);
    attached = !console.watched.notes().filter("watching processes").isEmpty();
  }
  QVERIFY(attached);
  const QString expected = "rank 2 has not called gloo:all_reduce #5 (ranks 0, 1, 3 have)";
  QTRY_VERIFY_WITH_TIMEOUT(panel->notes()->toPlainText().contains(expected), 90000);
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE"))
    window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-watch-collective-hang.png");
  QTest::mouseClick(window.findChild<QPushButton*>("watchStop"), Qt::LeftButton);
  ::kill(torch_job.pid, SIGTERM);
  torch_job.finish();
}

QTEST_MAIN(ConsoleRunsTest)
#include "console_runs_test.moc"
