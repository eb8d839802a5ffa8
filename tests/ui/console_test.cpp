// The console with real agents and a real (offscreen) Qt window: a 4-rank
// sweep over two local agents, a run that cannot complete its barrier,
// models under QAbstractItemModelTester, recording and replay, and the
// --screenshot command.
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
#include <QStatusBar>
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
#include "main_window.h"
#include "models/console.h"
#include "panels/bandwidth_chart.h"
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
#include "placement.h"
#include "process.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/tools/topology.h"
#include "ringmaster/tools/topology_search.h"
#include "ringmaster/version.h"
#include "stage_event.h"

using namespace ringmaster::ui;

namespace {

// Distinct colours in a region: a blank area has one or two.
int colours(const QImage& image, const QRect& region) {
  std::set<QRgb> seen;
  for (int y = region.top(); y <= region.bottom(); y += 2) {
    for (int x = region.left(); x <= region.right(); x += 2)
      seen.insert(image.pixel(x, y));
  }
  return static_cast<int>(seen.size());
}

// Distinct stage colours painted in a region (every column, every other row):
// each stage seen is a segment at least two pixels wide, however long the
// slowest stage took.
int stage_colours(const QImage& image, const QRect& region) {
  std::set<QRgb> palette, seen;
  for (int s = 0; s < stage_names().size(); ++s)
    palette.insert(stage_color(s).rgb());
  for (int y = region.top(); y <= region.bottom(); y += 2) {
    for (int x = region.left(); x <= region.right(); ++x) {
      if (palette.count(image.pixel(x, y))) seen.insert(image.pixel(x, y));
    }
  }
  return static_cast<int>(seen.size());
}

// A model as another model shows it, counting the reads of its text.
struct CountingReads : QIdentityProxyModel {
  mutable int reads = 0;
  QVariant data(const QModelIndex& index, int role) const override {
    if (role == Qt::DisplayRole) ++reads;
    return QIdentityProxyModel::data(index, role);
  }
};

}  // namespace

class ConsoleTest : public QObject {
  Q_OBJECT

 private slots:
  void sweepOverTwoLocalAgents();
  void missingRankShowsAtTheBarrier();
  void ncclEngineRunSaysWhyItDidNotRun();
  void bothEnginesCompareSizeBySize();
  void screenshotCommand();
  void p4dDrawing();
  void scenarioFromTheConsole();
  void historyKeepsOpensAndCompares();
  void nodeGateRefusesAgentsThatDiffer();
  void agentAskingForClientCertificates();
  void versionAndUsageErrors();
  void noTokenLeftBehindAfterSignals();
  void keyboardAccessibilityAndPalette();
  void aboutIconAndGuide();
  void agentsFoundThroughOneName();
  void retryingStageIsDrawnLive();
  void historyKeepsTheChartsWindowOfSamples();
  void stallShowsEveryRanksCalls();
  void preflightOverLocalAgents();
  void linksHeatmapFromACheckAndFromARun();
  void replayCommand();
  void failedInitOpensOnItsCause();
  void scenariosReadAsText();
  void localAgentRefusingItsTopologySaysWhy();
  void localAgentsEndWithTheConsole();
  void gpuNodesFitAndNameEveryDevice();
  void ringsDrawnThroughGpusAndNicsOfDeclaredNodes();
  void pathsRouteAroundEveryLabel();
  void layoutFitsALaptopAndUsesA4kScreen();
  void timelineOfThousandsOfRanksDrillsIntoANode();
  void bandwidthOfThousandsOfRanksOpensOnTheRunsTotal();
  void chartKeepsItsAxesAndLegendWhileRanksStream();
  void tunerTabSimulatesAClusterBesideTheRun();
  void samplesAreTakenOnTheThreadThatReceivedThem();
  void railsTableKeepsItsColumnsWhileNicsStream();
  void stagesTableKeepsItsColumnsWhileRanksComeUp();
};

// The console's --version is the project's, with no display needed, and
// a usage error exits 2 as ringmaster-cli's do.
void ConsoleTest::versionAndUsageErrors() {
  QProcess version;
  version.start(RINGMASTER_CONSOLE, {"--version"});
  QVERIFY(version.waitForFinished(20000));
  QCOMPARE(version.exitCode(), 0);
  QVERIFY2(version.readAllStandardOutput().contains(RINGMASTER_VERSION_STRING), "no version");
  // --help with no display at all, and no platform asked for: Qt would
  // abort loading its default platform plugin.
  for (const char* flag : {"--help", "-h"}) {
    QProcess help;
    QProcessEnvironment bare = QProcessEnvironment::systemEnvironment();
    for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"})
      bare.remove(name);
    help.setProcessEnvironment(bare);
    help.start(RINGMASTER_CONSOLE, {flag});
    QVERIFY(help.waitForFinished(20000));
    const QByteArray out = help.readAllStandardOutput();
    QCOMPARE(help.exitStatus(), QProcess::NormalExit);
    QCOMPARE(help.exitCode(), 0);
    QVERIFY2(out.contains("--agents") && out.contains("--screenshot"), out.constData());
  }
  for (const QStringList& args :
       {QStringList{"--no-such-flag"}, QStringList{"--agents", "nohost"},
        QStringList{"--agents", "h:1", "--tls-cert", "c.pem"}, QStringList{"--engine", "gloo"}}) {
    QProcess bad;
    bad.start(RINGMASTER_CONSOLE, args);
    QVERIFY(bad.waitForFinished(20000));
    QCOMPARE(bad.exitCode(), 2);
  }
  // Review: without a display a plain start, an unknown option or an
  // unknown --tab aborted in Qt (exit 134) or silently showed Live. Each is
  // a usage error now: exit 2, the reason, then the usage text.
  QProcessEnvironment bare = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"})
    bare.remove(name);
  const std::pair<QStringList, const char*> cases[] = {
      {{}, "no display (DISPLAY and WAYLAND_DISPLAY are unset)"},
      {{"--no-such-flag"}, "Unknown option 'no-such-flag'"},
      {{"--screenshot", "x.png", "--tab", "Timeline"}, "--tab Timeline: no such tab (tabs: Live, Stages (ms)"},
      {{"stray"}, "unexpected argument 'stray'"}};
  for (const auto& [args, says] : cases) {
    QProcess bad;
    bad.setProcessEnvironment(bare);
    bad.start(RINGMASTER_CONSOLE, args);
    QVERIFY(bad.waitForFinished(20000));
    const QByteArray err = bad.readAllStandardError();
    QCOMPARE(bad.exitStatus(), QProcess::NormalExit);
    QCOMPARE(bad.exitCode(), 2);
    QVERIFY2(err.contains(says), err.constData());
    QVERIFY2(err.contains("Usage:"), err.constData());
  }
  // A tab by its first word, in any case.
  QCOMPARE(MainWindow::tab_named("stages"), 1);
  QCOMPARE(MainWindow::tab_named("Engine decisions"), 3);
  QCOMPARE(MainWindow::tab_named("timeline"), -1);
}

// Review: SIGTERM (or SIGKILL) left the console's ringmaster-console-XXXX
// directory, with the local agents' token, in the temporary directory.
// SIGTERM now closes the console as its window does; what a SIGKILL left
// is removed by the next console that starts local agents.
void ConsoleTest::noTokenLeftBehindAfterSignals() {
  QTemporaryDir tmp;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("TMPDIR", tmp.path());
  env.insert("QT_QPA_PLATFORM", "offscreen");
  auto left = [&] { return QDir(tmp.path()).entryList({"ringmaster-console-*"}, QDir::Dirs); };
  auto start = [&](QProcess& console) {
    console.setProcessEnvironment(env);
    console.start(RINGMASTER_CONSOLE, {"--local", "1"});
    QVERIFY(console.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(!left().isEmpty() && QFile::exists(tmp.path() + "/" + left().front() + "/token"), 20000);
  };
  {
    QProcess console;
    start(console);
    ::kill(static_cast<pid_t>(console.processId()), SIGTERM);
    QVERIFY(console.waitForFinished(20000));
    QCOMPARE(console.exitCode(), 128 + SIGTERM);
    QVERIFY2(left().isEmpty(), qPrintable(left().join(", ")));
  }
  QString killed;
  {
    QProcess console;
    start(console);
    killed = left().front();
    console.kill();  // SIGKILL: nothing of the console runs
    QVERIFY(console.waitForFinished(20000));
    QCOMPARE(left(), QStringList{killed});
  }
  QProcess next;
  start(next);
  QTRY_VERIFY_WITH_TIMEOUT(!left().contains(killed), 10000);
  QCOMPARE(left().size(), 1);
  ::kill(static_cast<pid_t>(next.processId()), SIGTERM);
  QVERIFY(next.waitForFinished(20000));
  QVERIFY2(left().isEmpty(), qPrintable(left().join(", ")));
}

// An agent started with TLS and --tls-client-ca, reached from the connect
// row: without a client certificate the handshake fails and the agent's
// row says so; with the certificate its CA signed, the console connects,
// and the entry it remembers brings the TLS files back.
void ConsoleTest::agentAskingForClientCertificates() {
  QTemporaryDir dir;
  const QString d = dir.path() + "/";
  const QString make = "openssl req -x509 -newkey rsa:2048 -nodes -days 1";
  const QStringList commands = {
      make + " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " + d + "agent.key -out " + d +
          "agent.crt",
      make + " -subj /CN=clients -keyout " + d + "ca.key -out " + d + "ca.crt",
      "openssl req -newkey rsa:2048 -nodes -subj /CN=console -keyout " + d + "console.key -out " + d + "console.csr",
      "openssl x509 -req -days 1 -CA " + d + "ca.crt -CAkey " + d + "ca.key -CAcreateserial -in " + d +
          "console.csr -out " + d + "console.crt"};
  for (const QString& c : commands) {
    if (QProcess::execute("sh", {"-c", c + " 2>/dev/null"}) != 0)
      QSKIP("openssl (Debian package openssl) cannot make the test certificates");
  }
  QFile token(d + "token");
  QVERIFY(token.open(QIODevice::WriteOnly));
  token.write("0123456789abcdef0123456789abcdef\n");
  token.close();
  QVERIFY(token.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner));

  QProcess agent;
  agent.setProcessChannelMode(QProcess::ForwardedErrorChannel);
  agent.start(RINGMASTER_AGENT,
              {"--listen", "127.0.0.1:0", "--print-port", "--token-file", d + "token", "--state-dir", d + "state",
               "--tls-cert", d + "agent.crt", "--tls-key", d + "agent.key", "--tls-client-ca", d + "ca.crt",
               "--rank-user", QString::fromStdString(ringmaster::agent::effective_user_name())});
  QVERIFY(agent.waitForStarted(5000));
  QByteArray line;
  while (!line.contains('\n') && agent.waitForReadyRead(10000))
    line += agent.readAllStandardOutput();
  const int port = line.trimmed().toInt();
  QVERIFY2(port > 0, line.constData());
  const QString address = QString("127.0.0.1:%1").arg(port);

  QSettings().remove("agents");
  Console console;
  MainWindow window(console);
  auto field = [&](const char* name) { return window.findChild<QLineEdit*>(name); };
  QVERIFY(field("agentAddress") && field("agentTokenFile") && field("agentTlsCa") && field("agentTlsCert") &&
          field("agentTlsKey"));
  field("agentAddress")->setText(address);
  field("agentTokenFile")->setText(d + "token");
  field("agentTlsCa")->setText(d + "agent.crt");
  auto state = [&] {
    const int row = console.agents.row_of(address);
    return row < 0 ? QString() : console.agents.index(row, AgentsModel::state_column).data().toString();
  };
  QTest::mouseClick(window.findChild<QPushButton*>("agentConnect"), Qt::LeftButton);
  QTRY_VERIFY_WITH_TIMEOUT(state().startsWith("failed"), 15000);
  QCOMPARE(console.connected_count(), 0);

  field("agentTlsCert")->setText(d + "console.crt");
  AgentAccess half;
  QString why;
  QVERIFY(!window.access_from_row(&half, &why));
  QVERIFY2(why.contains("together"), qPrintable(why));
  field("agentTlsKey")->setText(d + "console.key");
  QTest::mouseClick(window.findChild<QPushButton*>("agentConnect"), Qt::LeftButton);
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 1, 15000);
  QCOMPARE(state(), QString("connected"));

  // A new window fills the row from what the last one remembered.
  MainWindow again(console);
  QCOMPARE(again.findChild<QLineEdit*>("agentTlsCert")->text(), d + "console.crt");
  QVERIFY(again.findChild<QCheckBox*>("agentTls")->isChecked() ||
          !again.findChild<QLineEdit*>("agentTlsCa")->text().isEmpty());
  agent.terminate();
  agent.waitForFinished(5000);
}

void ConsoleTest::historyKeepsOpensAndCompares() {
  QTemporaryDir dir;
  Console console;
  QString error;
  QVERIFY2(console.history.open(dir.filePath("history.sqlite"), &error), qPrintable(error));
  QAbstractItemModelTester history_tester(&console.history);
  QCOMPARE(console.history.rowCount(), 0);
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  MainWindow window(console);
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  RunSpec spec;
  spec.min_bytes = "256K";
  spec.max_bytes = "1M";
  spec.iters = 2;
  spec.warmup = 1;
  QStringList ids;
  for (int i = 0; i < 2; ++i) {
    if (i == 1) {  // the launcher's overrides reach the engine
      spec.algo = "Tree";
      spec.proto = "Simple";
      spec.dtype = "int32";
      spec.op = "max";
    }
    QSignalSpy finished(&console.run, &RunState::finished);
    ids << console.start_run(spec);
    QVERIFY(finished.wait(120000));
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(console.run.problems().join("; ")));
    QTRY_COMPARE(console.history.rowCount(), i + 1);  // kept when it finished
  }
  QCOMPARE(console.run.decisions.data(console.run.decisions.index(0, 2), Qt::DisplayRole).toString(), QString("Tree"));
  QCOMPARE(console.run.decisions.data(console.run.decisions.index(0, 3), Qt::DisplayRole).toString(),
           QString("Simple"));
  QCOMPARE(console.run.results.data(console.run.results.index(0, 2), Qt::DisplayRole).toString(), QString("int32"));
  // Newest first; what was asked and how it ended.
  QCOMPARE(console.history.run_id_at(0), ids[1]);
  QCOMPARE(console.history.data(console.history.index(0, RunHistory::kind_column), Qt::DisplayRole).toString(),
           QString("run"));
  QVERIFY(console.history.data(console.history.index(0, RunHistory::what_column), Qt::DisplayRole)
              .toString()
              .startsWith("all_reduce 256K..1M int32 max"));
  QCOMPARE(console.history.data(console.history.index(0, RunHistory::rows_column), Qt::DisplayRole).toInt(), 3);
  const int rows_before = console.run.results.rowCount();
  // At 1366x768 the History tab shows when, what, the verdict and its
  // busbw without scrolling; the run id is in the row's tooltip.
  window.resize(1366, 768);
  window.tabs()->setCurrentIndex(MainWindow::tab_named("History"));
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  auto* runs = window.findChild<QTableView*>("historyRuns");
  QVERIFY(runs);
  for (const int column :
       {RunHistory::started_column, RunHistory::what_column, RunHistory::result_column, RunHistory::busbw_column}) {
    const int right = runs->columnViewportPosition(column) + runs->columnWidth(column);
    QVERIFY2(
        right <= runs->viewport()->width(),
        qPrintable(QString("column %1 ends at %2 of %3 px").arg(column).arg(right).arg(runs->viewport()->width())));
  }
  QVERIFY(console.history.index(0, RunHistory::busbw_column).data(Qt::ToolTipRole).toString().contains(ids[1]));

  // Reopening the older run replays it into every panel.
  auto* panel = window.findChild<HistoryPanel*>();
  QVERIFY(panel);
  QVERIFY(panel->open_row(1));
  QCOMPARE(console.run.run_id(), ids[0]);
  QCOMPARE(console.run.results.rowCount(), rows_before);
  QVERIFY(!console.run.tuner.tables().isEmpty());
  QCOMPARE(console.run.trees().size(), std::size_t{2});
  // Opening is not a new run: the history still holds two.
  QCOMPARE(console.history.rowCount(), 2);

  // Export: CSV as shown, JSON as sent; the busbw plot has both series.
  QVERIFY(window.export_results(dir.filePath("r.csv")));
  QVERIFY(window.export_results(dir.filePath("r.json")));
  QFile csv(dir.filePath("r.csv"));
  QVERIFY(csv.open(QIODevice::ReadOnly));
  const QStringList lines = QString::fromUtf8(csv.readAll()).trimmed().split('\n');
  QCOMPARE(lines.size(), 1 + console.run.results.rowCount());
  QVERIFY(lines[1].startsWith("262144,"));
  QFile js(dir.filePath("r.json"));
  QVERIFY(js.open(QIODevice::ReadOnly));
  const auto rows = nlohmann::json::parse(js.readAll().toStdString());
  QCOMPARE(static_cast<int>(rows.size()), console.run.results.rowCount());
  QCOMPARE(rows[0].value("bytes", 0), 262144);
  QCOMPARE(window.busbw_plot()->refresh(), 2 * console.run.results.rowCount());

  // Side by side: every size of both, busbw of each, the ratio.
  QVERIFY(panel->compare_rows(1, 0));
  QCOMPARE(panel->comparison()->rowCount(), 3);
  // The last column is the second run's busbw over the first's, as its
  // header says (each cell shows 4 significant digits); the two sweeps
  // differ by more than that at some size, so the inverse would not pass.
  QVERIFY(panel->comparison()->horizontalHeaderItem(3)->text().contains(" / "));
  int told_apart = 0;
  for (int r = 0; r < 3; ++r) {
    const double a = panel->comparison()->item(r, 1)->text().toDouble();
    const double b = panel->comparison()->item(r, 2)->text().toDouble();
    const double ratio = panel->comparison()->item(r, 3)->text().toDouble();
    QVERIFY(a > 0 && b > 0);
    QVERIFY2(std::abs(ratio - b / a) <= 0.002 * (b / a),
             qPrintable(QString("row %1: %2 / %3 shown as %4").arg(r).arg(b).arg(a).arg(ratio)));
    if (std::abs(a / b - b / a) > 0.004 * (b / a)) ++told_apart;
  }
  QVERIFY2(told_apart > 0, "the two sweeps ran at the same busbw at every size: the ratio's direction is untested");
  // A second console on the same file sees the same runs (it is on disk).
  RunHistory again;
  QVERIFY(again.open(dir.filePath("history.sqlite")));
  QCOMPARE(again.rowCount(), 2);
}

void ConsoleTest::sweepOverTwoLocalAgents() {
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

void ConsoleTest::missingRankShowsAtTheBarrier() {
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
void ConsoleTest::nodeGateRefusesAgentsThatDiffer() {
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
void ConsoleTest::ncclEngineRunSaysWhyItDidNotRun() {
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
void ConsoleTest::bothEnginesCompareSizeBySize() {
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

void ConsoleTest::screenshotCommand() {
  QTemporaryDir dir;
  const QString png = dir.filePath("console.png");
  QProcess console;
  console.setProcessChannelMode(QProcess::ForwardedErrorChannel);
  console.start(RINGMASTER_CONSOLE,
                {"--local", "2", "--np-per-agent", "2", "--max-bytes", "4M", "--iters", "3", "--screenshot", png});
  QVERIFY(console.waitForFinished(180000));
  QCOMPARE(console.exitCode(), 0);
  QImage image(png);
  QVERIFY(!image.isNull());
  QVERIFY(image.width() >= 1000 && image.height() >= 600);
  // The live tab: chart in the upper right, timeline rows below it (above
  // their legend). The rows show the stages of every rank, the fast ones
  // squeezed to a few pixels when one stage took long.
  const QRect chart(image.width() * 45 / 100, image.height() * 15 / 100, image.width() / 2, image.height() / 4);
  const QRect timeline(image.width() * 34 / 100, image.height() * 60 / 100, image.width() * 65 / 100,
                       image.height() * 23 / 100);
  QVERIFY2(colours(image, chart) > 8, "the bandwidth area is blank");
  QVERIFY2(stage_colours(image, timeline) >= 5, "the timeline shows fewer than five stages");
}

void ConsoleTest::p4dDrawing() {
  const auto p4d = ringmaster::topo::Topology::load_file(RINGMASTER_TOPOLOGY_DIR "/p4d-24xl-topo.xml");
  const auto topology = ringmaster::agent::TopologyInfo::parse(nlohmann::json::parse(p4d.to_json()));
  QSizeF size;
  const auto boxes = layout_topology(topology, &size);
  std::vector<TopologyBox> gpus, nics, switches;
  for (const auto& b : boxes) {
    QVERIFY(b.declared);
    if (b.kind == "gpu") gpus.push_back(b);
    if (b.kind == "nic") nics.push_back(b);
    if (b.kind == "pci_switch") switches.push_back(b);
  }
  QCOMPARE(gpus.size(), std::size_t{8});
  QCOMPARE(nics.size(), std::size_t{4});
  QCOMPARE(switches.size(), std::size_t{4});
  // Each switch box holds two GPUs and one NIC, as the file says.
  for (const auto& sw : switches) {
    int g = 0, n = 0;
    for (const auto& b : gpus)
      g += sw.rect.contains(b.rect) ? 1 : 0;
    for (const auto& b : nics)
      n += sw.rect.contains(b.rect) ? 1 : 0;
    QCOMPARE(g, 2);
    QCOMPARE(n, 1);
  }
  for (const auto& b : boxes)
    QVERIFY(QRectF(QPointF(0, 0), size).adjusted(-1, -1, 1, 1).contains(b.rect));
  // Drawn, it is not blank, and the declared badge shows in the panel.
  TopologyView view;
  view.resize(1200, 800);
  view.show_topology("p4d", topology);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  const QImage image = view.drawing()->grab().toImage();
  QVERIFY(colours(image, image.rect()) > 6);
  auto* badge = view.findChild<QLabel*>("declaredBadge");
  QVERIFY(badge && badge->isVisible());
  QVERIFY(badge->text().contains("p4d-24xl-topo.xml"));
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE")) view.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE"));
}

// One click on a scenario: the runner (root in CI) builds the hosts, and its
// events land in the timeline with the failing stage.
void ConsoleTest::scenarioFromTheConsole() {
  Console console;
  MainWindow window(console);
  // Agents connected by hand are remembered, newest first, without repeats.
  QSettings().remove("agents/recent");
  window.remember_agent("10.0.0.5:29600", {});
  window.remember_agent("10.0.0.6:29600", {"/etc/ringmaster/token"});
  window.remember_agent("10.0.0.5:29600", {"", "tls", "/etc/ringmaster/ca.pem"});
  QCOMPARE(window.remembered_agents(), (QStringList{"10.0.0.5:29600", "10.0.0.6:29600"}));
  auto* panel = window.scenarios();
  QVERIFY(panel);
  QVERIFY(panel->scenario_count() >= 10);
  auto* list = panel->findChild<QListWidget*>("scenarioList");
  QVERIFY(list);
  for (int i = 0; i < list->count(); ++i) {
    if (list->item(i)->text().contains("WORLD_SIZE")) list->setCurrentRow(i);
  }
  panel->set_agent(RINGMASTER_AGENT);
  QSignalSpy finished(panel, &ScenariosPanel::finished);
  panel->run_selected();
  QVERIFY(finished.wait(120000));
  auto* verdict = panel->findChild<QLabel*>("scenarioVerdict");
  if (::geteuid() != 0) {
    QVERIFY(verdict->text().startsWith("Skipped"));
    QSKIP("scenarios need root");
  }
  QVERIFY2(finished.at(0).at(0).toBool(),
           qPrintable(panel->findChild<QPlainTextEdit*>("scenarioOutput")->toPlainText()));
  QVERIFY(verdict->text().startsWith("PASS"));
  // The console checked the recorded events itself, with repro's library.
  const QString output = panel->findChild<QPlainTextEdit*>("scenarioOutput")->toPlainText();
  QVERIFY2(output.contains("Checked here from the recorded events: every expectation about the run is met."),
           qPrintable(output));
  // The timeline shows the barrier failing with the missing rank.
  const int barrier = static_cast<int>(stage_names().indexOf("STORE_BARRIER"));
  QCOMPARE(console.run.world_size(), 3);
  QVERIFY(!console.run.timeline.cell(0, barrier).ok);
  QVERIFY(console.run.timeline.cell(0, barrier).detail.contains("missing ranks: 2"));
}

// Help > About names what the console runs on, as loaded; the window has
// the icon the desktop file names (drawn through Qt's SVG plugin), and the
// guide is found.
void ConsoleTest::aboutIconAndGuide() {
  const QString about = about_text();
  QVERIFY2(about.contains(RINGMASTER_VERSION_STRING), qPrintable(about));
  QVERIFY2(about.contains(QString("Qt</td><td>%1").arg(qVersion())), qPrintable(about));
  QVERIFY2(about.contains(QRegularExpression(R"(hwloc</td><td>\d+\.\d+\.\d+<)")), qPrintable(about));
  QVERIFY2(about.contains(QRegularExpression(R"(libfabric</td><td>(\d+\.\d+|not loaded: .+)<)")), qPrintable(about));
  QVERIFY(guide_path().endsWith("console.md"));
  Console console;
  MainWindow window(console);
  QAction* about_action = window.findChild<QAction*>("aboutAction");
  QVERIFY(about_action);
  QCOMPARE(about_action->text(), QString("&About Ringmaster"));
  const QImage icon = window.windowIcon().pixmap(48, 48).toImage();
  QVERIFY2(!icon.isNull() && colours(icon, icon.rect()) > 4, "the window icon is missing or blank");
}

// Keyboard and screen readers: every control that takes the focus has a
// name; the timeline, rings and topology drawing move with the arrows and
// open the detail with Enter; the charts follow the dark palette.
void ConsoleTest::keyboardAccessibilityAndPalette() {
  Console console;
  QString error;
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  MainWindow window(console);
  window.resize(1300, 800);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);

  QStringList unnamed;
  for (QWidget* w : window.findChildren<QWidget*>()) {
    if (!(w->focusPolicy() & Qt::TabFocus)) continue;
    // Parts of a composite control, named through it.
    auto* area = qobject_cast<QAbstractScrollArea*>(w->parentWidget());
    bool part = qobject_cast<QScrollBar*>(w) != nullptr || (area != nullptr && area->viewport() == w);
    for (QWidget* up = w->parentWidget(); up != nullptr && !part; up = up->parentWidget())
      part = qobject_cast<QAbstractSpinBox*>(up) || qobject_cast<QComboBox*>(up);
    if (part) continue;
    QAccessibleInterface* a = QAccessible::queryAccessibleInterface(w);
    if (a == nullptr || a->text(QAccessible::Name).trimmed().isEmpty())
      unnamed << QString("%1 %2 (in %3 %4)")
                     .arg(w->metaObject()->className(), w->objectName(),
                          w->parentWidget() ? w->parentWidget()->metaObject()->className() : "",
                          w->parentWidget() ? w->parentWidget()->objectName() : "");
  }
  QVERIFY2(unnamed.isEmpty(), qPrintable("no accessible name: " + unnamed.join(", ")));

  RunSpec spec;
  spec.min_bytes = spec.max_bytes = "64K";
  spec.iters = 2;
  spec.warmup = 1;
  spec.ranks_per_agent = 2;
  QSignalSpy finished(&console.run, &RunState::finished);
  window.set_run_spec(spec);
  window.start_run();
  QVERIFY(finished.wait(120000));
  QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(console.run.problems().join("; ")));

  // Timeline: Home to the first stage of the first rank, Right to the next,
  // Down to rank 1, Enter opens the detail.
  TimelineView* timeline = window.timeline();
  QVERIFY(timeline->focusPolicy() & Qt::TabFocus);
  QTest::keyClick(timeline, Qt::Key_Home);
  QCOMPARE(timeline->current_rank(), 0);
  const int first = timeline->current_stage();
  QTest::keyClick(timeline, Qt::Key_Right);
  QVERIFY(timeline->current_stage() > first);
  QTest::keyClick(timeline, Qt::Key_Down);
  QCOMPARE(timeline->current_rank(), 1);
  QTest::keyClick(timeline, Qt::Key_End);
  const int last = timeline->current_stage();
  QTest::keyClick(timeline, Qt::Key_Return);
  auto* detail = window.findChild<QPlainTextEdit*>("stageDetail");
  QVERIFY2(detail->toPlainText().startsWith(QString("rank 1, %1: ok").arg(stage_names()[last])),
           qPrintable(detail->toPlainText()));
  QVERIFY(QAccessible::queryAccessibleInterface(timeline)->text(QAccessible::Description).startsWith("rank 1, "));

  // Rings: Right picks channel 0 (the others fade), Enter shows its ring
  // through all four ranks, Escape hides it.
  auto* rings = window.findChild<RingsView*>("ringsView");
  QVERIFY(rings);
  QCOMPARE(rings->selected_channel(), -1);
  QSignalSpy activated(rings, &RingsView::channel_activated);
  QTest::keyClick(rings, Qt::Key_Right);
  QCOMPARE(rings->selected_channel(), 0);
  QTest::keyClick(rings, Qt::Key_Return);
  QCOMPARE(activated.count(), 1);
  const QString ring = rings->shown_detail();
  QVERIFY2(ring.startsWith("channel 0: "), qPrintable(ring));
  for (int r = 0; r < 4; ++r)
    QVERIFY2(ring.contains(QRegularExpression(QString(R"(\b%1\b)").arg(r))), qPrintable(ring));
  QTest::keyClick(rings, Qt::Key_Escape);
  QVERIFY(rings->shown_detail().isEmpty());
  QTest::keyClick(rings, Qt::Key_Left);
  QCOMPARE(rings->selected_channel(), -1);
  // The two trees told apart on screen: each edge ends in an arrowhead at
  // the child, filled in its tree's colour; the trees' curves bend to
  // either side, so on an edge both trees share their heads lie apart.
  for (int t = 0; t < window.tabs()->count(); ++t) {
    if (window.tabs()->widget(t)->isAncestorOf(rings)) window.tabs()->setCurrentIndex(t);
  }
  QApplication::processEvents();
  {
    const QImage shot = rings->grab().toImage();
    const auto drawn = rings->current_layout();
    QCOMPARE(drawn.tree_edges.size(), std::size_t{2});
    for (int t = 0; t < 2; ++t) {
      QCOMPARE(drawn.tree_edges[static_cast<std::size_t>(t)].size(), std::size_t{3});
      for (const auto& e : drawn.tree_edges[static_cast<std::size_t>(t)]) {
        QCOMPARE(e.head.size(), 3);
        const QPointF centre = (e.head[0] + e.head[1] + e.head[2]) / 3;
        const QColor seen = shot.pixelColor(centre.toPoint());
        const QColor want = RingsView::tree_colour(t);
        QVERIFY2(std::abs(seen.red() - want.red()) + std::abs(seen.green() - want.green()) +
                         std::abs(seen.blue() - want.blue()) <
                     60,
                 qPrintable(QString("tree %1's arrowhead at (%2, %3) is %4, not %5")
                                .arg(t)
                                .arg(centre.x())
                                .arg(centre.y())
                                .arg(seen.name(), want.name())));
        // The head points at the child's dot (its tip on the dot's rim).
        double nearest = 1e9;
        for (const auto& r : drawn.tree_ranks)
          nearest = std::min(nearest, QLineF(r, e.to).length());
        QVERIFY2(nearest < 14, qPrintable(QString::number(nearest)));
      }
    }
    const auto& a = drawn.tree_edges[0];
    const auto& b = drawn.tree_edges[1];
    for (const auto& ea : a) {
      for (const auto& eb : b) {
        const QPointF ca = (ea.head[0] + ea.head[1] + ea.head[2]) / 3, cb = (eb.head[0] + eb.head[1] + eb.head[2]) / 3;
        QVERIFY2(QLineF(ca, cb).length() >= 8, "two trees' arrowheads apart");
      }
    }
  }

  // Topology: a declared p4d drawing; the arrows walk its devices and
  // Enter opens the device's row in the tree.
  const auto p4d = ringmaster::topo::Topology::load_file(RINGMASTER_TOPOLOGY_DIR "/p4d-24xl-topo.xml");
  TopologyView view;
  view.resize(1200, 800);
  view.show_topology("p4d", ringmaster::agent::TopologyInfo::parse(nlohmann::json::parse(p4d.to_json())));
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  TopologyDrawing* drawing = view.drawing();
  QTest::keyClick(drawing, Qt::Key_Home);
  const int home = drawing->selected_box();
  QVERIFY(home >= 0);
  // To the first GPU.
  for (int i = 0; i < 64 && drawing->boxes()[static_cast<std::size_t>(drawing->selected_box())].kind != "gpu"; ++i)
    QTest::keyClick(drawing, Qt::Key_Right);
  const auto& gpu = drawing->boxes()[static_cast<std::size_t>(drawing->selected_box())];
  QCOMPARE(gpu.kind, QString("gpu"));
  QTest::keyClick(drawing, Qt::Key_Return);
  QCOMPARE(view.current_tree_node(), gpu.node);
  QTest::keyClick(drawing, Qt::Key_Left);
  QVERIFY(drawing->selected_box() != -1);

  // The dark palette reaches the charts (Qt Charts keep their own white
  // otherwise) and the custom views.
  // A point of background: the middle of the top edge (the chart's title
  // band), or the top-left corner (left of the timeline's rank labels).
  auto lightness_at = [](QWidget* w, bool corner = false) {
    const QImage image = w->grab().toImage();
    return QColor(image.pixel(corner ? 3 : image.width() / 2, corner ? 3 : 6)).lightness();
  };
  window.tabs()->setCurrentIndex(0);
  QWidget* chart = window.findChild<QWidget*>("bandwidthChart");
  QVERIFY(chart);
  QVERIFY2(lightness_at(chart) > 180, "the light chart is not light");
  window.set_dark(true);
  QCoreApplication::processEvents();
  QVERIFY2(lightness_at(chart) < 90, "the chart stays light in the dark palette");
  QVERIFY2(lightness_at(timeline, true) < 90, "the timeline stays light in the dark palette");
  QVERIFY2(lightness_at(window.busbw_plot()) < 90, "the busbw plot stays light in the dark palette");
  window.set_dark(false);
  QCoreApplication::processEvents();
  QVERIFY(lightness_at(chart) > 180);
}

// --agents NAME:PORT where the name resolves to two addresses (a network
// namespace's own /etc/hosts, as a headless Service gives them): the
// console connects to both agents and runs over them.
void ConsoleTest::agentsFoundThroughOneName() {
  if (::geteuid() != 0) QSKIP("needs root: a network namespace with its own /etc/hosts");
  const QString ns = QString("rm-console-test-%1").arg(::getpid());
  const QString etc = "/etc/netns/" + ns;
  QProcess::execute("/usr/sbin/ip", {"netns", "del", ns});
  QCOMPARE(QProcess::execute("/usr/sbin/ip", {"netns", "add", ns}), 0);
  QDir().mkpath(etc);
  struct Cleanup {
    QString ns, etc;
    std::vector<QProcess*> agents;
    ~Cleanup() {
      for (auto* a : agents) {
        a->terminate();
        a->waitForFinished(5000);
        delete a;
      }
      QDir(etc).removeRecursively();
      QProcess::execute("/usr/sbin/ip", {"netns", "del", ns});
    }
  } cleanup{ns, etc, {}};
  QProcess::execute("/usr/sbin/ip", {"netns", "exec", ns, "ip", "link", "set", "lo", "up"});
  QFile hosts(etc + "/hosts");
  QVERIFY(hosts.open(QIODevice::WriteOnly));
  hosts.write("127.0.0.1 localhost\n127.0.0.2 agents.test\n127.0.0.3 agents.test\n");
  hosts.close();
  QFile conf(etc + "/host.conf");
  QVERIFY(conf.open(QIODevice::WriteOnly));
  conf.write("multi on\n");
  conf.close();
  QTemporaryDir dir;
  const QString token = dir.filePath("token");
  QFile t(token);
  QVERIFY(t.open(QIODevice::WriteOnly));
  t.write("console-discovery-token-0123456789\n");
  t.close();
  t.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner);
  for (const char* address : {"127.0.0.2", "127.0.0.3"}) {
    auto* agent = new QProcess;
    cleanup.agents.push_back(agent);
    agent->start("/usr/sbin/ip",
                 {"netns", "exec", ns, RINGMASTER_AGENT, "--listen", QString(address) + ":29600", "--print-port",
                  "--token-file", token, "--state-dir", dir.filePath(QString("state-") + address), "--rank-user",
                  QString::fromStdString(ringmaster::agent::effective_user_name())});
    QVERIFY2(agent->waitForReadyRead(10000), agent->readAllStandardError().constData());
    QCOMPARE(agent->readLine().trimmed(), QByteArray("29600"));
  }
  // The console in the namespace with AGENTS_ARGS; exits 0, names both
  // agents behind the one name, and runs over them.
  auto run_console = [&](const QStringList& agents_args, const QString& shot) {
    QProcess console;
    console.start("/usr/sbin/ip", QStringList{"netns", "exec", ns, RINGMASTER_CONSOLE} + agents_args +
                                      QStringList{"--token-file", token, "--max-bytes", "1K", "--iters", "1",
                                                  "--screenshot", dir.filePath(shot)});
    QVERIFY(console.waitForFinished(120000));
    const QString out = QString::fromUtf8(console.readAllStandardOutput());
    const QString err = QString::fromUtf8(console.readAllStandardError());
    QVERIFY2(console.exitCode() == 0, qPrintable(out + err));
    QVERIFY2(err.contains("agents.test is 2 agents: 127.0.0.2, 127.0.0.3 (port 29600)"), qPrintable(err));
    QVERIFY2(out.contains("(run ok)"), qPrintable(out + err));
  };
  run_console({"--agents", "agents.test:29600"}, "discovered.png");

  // The same agents from --agents-file (comments and blank lines allowed).
  QFile list(dir.filePath("agents.txt"));
  QVERIFY(list.open(QIODevice::WriteOnly));
  list.write("# the agents' headless Service\n\n  agents.test:29600   # both nodes\n");
  list.close();
  run_console({"--agents-file", list.fileName()}, "from-file.png");
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
void ConsoleTest::retryingStageIsDrawnLive() {
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

// Ten minutes of 10 Hz samples from 2 ranks: the run keeps, for the
// history, every other message and the samples of the chart's window (and
// a little more), not all 12,000; the run reopened from the history draws
// the same last minute. Before, every sample was kept: 16 ranks of 32
// channels took 1.8 GB after ten minutes (console_bench).
void ConsoleTest::historyKeepsTheChartsWindowOfSamples() {
  using nlohmann::json;
  RunState run;
  run.begin("long", 2, 1);
  auto message = [](json event, int rank) {
    json body = {{"type", "event"}, {"run_id", "long"}, {"rank", rank}, {"event", std::move(event)}};
    return agent_message("a", std::move(body));
  };
  for (int rank = 0; rank < 2; ++rank) {
    run.apply(message({{"type", "stage"},
                       {"stage", "RESOLVE_MASTER"},
                       {"ok", true},
                       {"begin_us", 1000000},
                       {"duration_ms", 1.0},
                       {"detail", "kept"}},
                      rank));
  }
  constexpr int kTicks = 6000;  // ten minutes at 10 Hz
  const long long first_us = 2'000'000;
  for (int i = 0; i < kTicks; ++i) {
    for (int rank = 0; rank < 2; ++rank) {
      const auto bytes = static_cast<std::uint64_t>(i) * 100'000'000ULL;
      run.apply(message({{"type", "sample"},
                         {"t_us", first_us + i * 100'000LL},
                         {"channels", json::array({{{"channel", 0}, {"bytes_sent", bytes}},
                                                   {{"channel", 1}, {"bytes_sent", bytes / 2}}})}},
                        rank));
    }
  }
  const long long last_us = first_us + (kTicks - 1) * 100'000LL;
  int samples = 0, stages = 0;
  long long oldest_sample_us = last_us;
  for (const auto& m : run.messages()) {
    const json& e = (*m.body)["event"];
    if (e["type"] == "stage") ++stages;
    if (e["type"] == "sample") {
      ++samples;
      oldest_sample_us = std::min(oldest_sample_us, e["t_us"].get<long long>());
    }
  }
  QCOMPARE(stages, 2);
  QVERIFY2(samples < 4000, qPrintable(QString("%1 samples kept of %2").arg(samples).arg(2 * kTicks)));
  // Every sample of the window is still there.
  QVERIFY(oldest_sample_us <= last_us - static_cast<long long>(run.bandwidth().read()->window_s() * 1e6));

  QTemporaryDir dir;
  RunHistory history;
  QVERIFY(history.open(dir.filePath("history.sqlite")));
  QString error;
  QVERIFY2(history.save(run, "run", "all_reduce", &error), qPrintable(error));
  RunState reopened;
  QCOMPARE(history.load("long", reopened), static_cast<int>(run.messages().size()));
  QCOMPARE(reopened.timeline.cell(0, 0).detail, QString("kept"));
  const auto live = run.bandwidth().read()->points(0, 0, 100000);
  const auto again = reopened.bandwidth().read()->points(0, 0, 100000);
  QVERIFY(live.size() >= 590);
  // The point exactly 60 s before the last may fall either side of the
  // window's edge: x counts from each run's first sample, and the two
  // differ.
  QVERIFY2(std::abs(again.size() - live.size()) <= 1,
           qPrintable(QString("%1 points reopened, %2 live").arg(again.size()).arg(live.size())));
  QCOMPARE(again.back().y(), live.back().y());
}

// Three real ranks (ringmaster-cli perf --json), one held before its
// collective #5 (RINGMASTER_FAULT_HOLD_AT_CALL): the stall event the
// others send shows in the Wavefront tab's grid, a row per rank, with the
// held rank's cell at #5 "not called" and the diagnosis above.
void ConsoleTest::stallShowsEveryRanksCalls() {
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
void ConsoleTest::preflightOverLocalAgents() {
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
void ConsoleTest::linksHeatmapFromACheckAndFromARun() {
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
void ConsoleTest::failedInitOpensOnItsCause() {
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

// The Scenarios tab at 1366x768: every title whole (wrapped, never
// elided), and each story ends with what Ringmaster must report in
// sentences, not the catalog's JSON.
void ConsoleTest::scenariosReadAsText() {
  Console console;
  MainWindow window(console);
  window.resize(1366, 768);
  window.tabs()->setCurrentIndex(MainWindow::tab_named("Scenarios"));
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  auto* list = window.scenarios()->findChild<QListWidget*>("scenarioList");
  auto* story = window.scenarios()->findChild<QPlainTextEdit*>("scenarioStory");
  QVERIFY(list && story);
  QVERIFY(list->count() >= 14);
  QCOMPARE(list->textElideMode(), Qt::ElideNone);
  QVERIFY(list->wordWrap());
  for (int i = 0; i < list->count(); ++i) {
    list->setCurrentRow(i);
    const QString text = story->toPlainText();
    const QString expected = text.section("What Ringmaster must report:\n", 1);
    QVERIFY2(!expected.isEmpty(), qPrintable(list->item(i)->text() + ": " + text));
    QVERIFY2(!expected.contains('{') && !expected.contains("\":"), qPrintable(expected));
    // The whole title in the list, on as many lines as it needs.
    const QRect item = list->visualItemRect(list->item(i));
    QVERIFY2(item.width() <= list->viewport()->width(), qPrintable(list->item(i)->text()));
    const int one_line = list->fontMetrics().horizontalAdvance(list->item(i)->text());
    QVERIFY2(one_line <= item.width() || item.height() > list->fontMetrics().height() * 3 / 2,
             qPrintable(list->item(i)->text() + " is cut"));
  }
  QCOMPARE(expectation_text(nlohmann::json::parse(R"({"outcome": "fail", "ranks": "nonzero", "stage": "STORE_CONNECT",
      "keywords": ["timeout"], "preflight": {"cells": [{"class": "master", "from": 1, "to": 0, "reach": "dropped"}]}})")),
           QString("The run fails at STORE_CONNECT on every rank but rank 0.\nThe failure says \u201ctimeout\u201d.\n"
                   "Preflight finds the master port from node 1 to node 0 dropped."));
  QCOMPARE(
      expectation_text(nlohmann::json::parse(
          R"({"outcome": "complete", "slow_link": {"from": 1, "to": 2, "lossy": true}, "notes": {"keywords": ["x"]}})")),
      QString("The run completes.\nA stage that ends well says \u201cx\u201d.\nThe run names the link rank 1 \u2192 "
              "rank 2 as lossy."));
  QCOMPARE(expectation_text(nlohmann::json::parse(R"({"outcome": "refused", "keywords": ["NCCL_PROTO"]})")),
           QString("The run is refused before launch: no rank starts.\nThe refusal says \u201cNCCL_PROTO\u201d."));
}

// A node file the local agents refuse: the console says which file and
// the agent's own reason, not "Unknown error".
void ConsoleTest::localAgentRefusingItsTopologySaysWhy() {
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

void ConsoleTest::replayCommand() {
  QTemporaryDir dir;
  auto console_run = [](const QStringList& args, QString* err = nullptr) {
    QProcess console;
    console.start(RINGMASTER_CONSOLE, args);
    if (!console.waitForFinished(60000)) return -1;
    if (err) *err = QString::fromUtf8(console.readAllStandardError());
    return console.exitCode();
  };
  const QString recording = RINGMASTER_TEST_DATA_DIR "/console/run-2-agents-4-ranks.jsonl";
  const QString png = dir.filePath("replayed.png");
  QCOMPARE(console_run({"--replay", recording, "--tab", "Results", "--size", "1200x700", "--screenshot", png}), 0);
  const QImage image(png);
  QCOMPARE(image.size(), QSize(1200, 700));
  QVERIFY2(colours(image, QRect(image.width() / 2, image.height() / 5, image.width() / 3, image.height() / 3)) > 3,
           "the results table is blank");
  QFile in(recording);
  QVERIFY(in.open(QIODevice::ReadOnly));
  QFile cut(dir.filePath("cut.jsonl"));
  QVERIFY(cut.open(QIODevice::WriteOnly));
  for (int i = 0; i < 40; ++i)
    cut.write(in.readLine());
  cut.close();
  QString err;
  QCOMPARE(console_run({"--replay", cut.fileName(), "--screenshot", dir.filePath("cut.png")}, &err), 0);
  QVERIFY2(err.contains("the recorded run does not end"), qPrintable(err));
  QVERIFY(QFile::exists(dir.filePath("cut.png")));
  QCOMPARE(console_run({"--replay", dir.filePath("missing.jsonl"), "--screenshot", dir.filePath("x.png")}, &err), 2);
  QVERIFY2(err.contains("cannot read"), qPrintable(err));
}

// 2,048 ranks on 256 nodes: the timeline scrolls over a row per node;
// Enter on a node opens its ranks under it and names the node's stage;
// Down walks into its ranks; Backspace closes it; clicking a node's name
// opens it; the cursor's row scrolls into view.
void ConsoleTest::timelineOfThousandsOfRanksDrillsIntoANode() {
  namespace ev = ringmaster::agent::events;
  const int world = 2048;
  const std::vector<int> placement = ranks_in_nodes(world, 8);
  TimelineModel model;
  model.reset(world, placement);
  for (int r = 0; r < world; ++r) {
    for (int s = 0; s < 4; ++s) {
      ev::StageEnded e;
      e.stage = static_cast<ringmaster::Stage>(s);
      e.begin_us = 1'000'000 + s * 10'000 + r;
      e.duration_ms = 5.0;
      e.ok = true;
      model.add_stage(r, e);
    }
  }
  QScrollArea scroll;
  scroll.setWidgetResizable(true);
  auto* view = new TimelineView(model);
  scroll.setWidget(view);
  scroll.resize(900, 300);
  scroll.show();
  QVERIFY(QTest::qWaitForWindowExposed(&scroll));
  QVERIFY2(view->height() >= 256 * 16, qPrintable(QString("%1 px for 256 nodes").arg(view->height())));
  QCOMPARE(view->rows().size(), std::size_t(256));
  // What shows is the first nodes' stages, drawn.
  const QImage shown = scroll.viewport()->grab().toImage();
  int coloured = 0;
  for (int y = 0; y < shown.height(); y += 2)
    for (int x = 0; x < shown.width(); x += 2)
      coloured += shown.pixelColor(x, y) == stage_color(0) ? 1 : 0;
  QVERIFY2(coloured > 50, "no stage drawn in the visible rows");

  QSignalSpy nodes(view, &TimelineView::node_segment_clicked);
  view->setFocus();
  QTest::keyClick(view, Qt::Key_Home);
  QCOMPARE(view->current_node(), 0);
  QCOMPARE(view->current_rank(), -1);
  QCOMPARE(view->current_stage(), 0);
  QTest::keyClick(view, Qt::Key_Return);
  QVERIFY(view->expanded(0));
  QCOMPARE(nodes.count(), 1);
  QCOMPARE(view->rows().size(), std::size_t(264));
  QVERIFY(QAccessible::queryAccessibleInterface(view)->text(QAccessible::Description).startsWith("agent 0, "));
  QTest::keyClick(view, Qt::Key_Down);
  QCOMPARE(view->current_rank(), 0);
  for (int i = 0; i < 8; ++i)
    QTest::keyClick(view, Qt::Key_Down);
  QCOMPARE(view->current_node(), 1);
  QCOMPARE(view->current_rank(), -1);
  QTest::keyClick(view, Qt::Key_Up);
  QCOMPARE(view->current_rank(), 7);
  QTest::keyClick(view, Qt::Key_Backspace);
  QVERIFY(!view->expanded(0));
  QCOMPARE(view->current_node(), 0);
  QCOMPARE(view->current_rank(), -1);
  QCOMPARE(view->rows().size(), std::size_t(256));
  // Far down: the scroll area follows the cursor.
  for (int i = 0; i < 200; ++i)
    QTest::keyClick(view, Qt::Key_Down);
  QCOMPARE(view->current_node(), 200);
  QVERIFY2(scroll.verticalScrollBar()->value() > 150 * 16,
           qPrintable(QString("scrolled to %1").arg(scroll.verticalScrollBar()->value())));
  // A node's name opens it; a rank's segment then names that rank.
  const QRectF area = view->plot_area();
  const double row_h = area.height() / static_cast<double>(view->rows().size());
  QTest::mouseClick(view, Qt::LeftButton, {}, QPoint(10, static_cast<int>(area.top() + 3.5 * row_h)));
  QVERIFY(view->expanded(3));
  QSignalSpy ranks(view, &TimelineView::segment_clicked);
  for (const auto& s : view->segments()) {
    if (s.rank == 26 && s.stage == 2) {
      QTest::mouseClick(view, Qt::LeftButton, {}, s.rect.center().toPoint());
      break;
    }
  }
  QCOMPARE(ranks.count(), 1);
  QCOMPARE(ranks.front().at(0).toInt(), 26);
}

// A run of 2,048 ranks opens the chart on its total (right axis) and its
// eight busiest channels; per NIC, the 16 busiest of its 256 NICs. A run
// of 4 ranks keeps a rank's channels.
void ConsoleTest::bandwidthOfThousandsOfRanksOpensOnTheRunsTotal() {
  namespace ev = ringmaster::agent::events;
  const int world = 2048;
  const std::vector<int> placement = ranks_in_nodes(world, 8);
  RunState run;
  BandwidthChart chart(run.bandwidth(), &run);
  chart.resize(1000, 500);
  chart.show();
  QCOMPARE(chart.mode(), BandwidthChart::Mode::per_channel);
  run.begin("big", world, 256, placement);
  QCOMPARE(chart.mode(), BandwidthChart::Mode::run_total);
  for (int tick = 0; tick <= 20; ++tick) {
    for (int r = 0; r < world; ++r) {
      ev::Sample sample;
      sample.t_us = 1'000'000 + tick * 100'000;
      for (int c = 0; c < 2; ++c) {
        const double gbs = r == 1500 && c == 1 ? 4.0 : 1.0 + r * 1e-4;
        const auto b = static_cast<std::uint64_t>(tick * gbs * 1e8);
        // Each node's last rank leaves it by one of its NICs; every NIC busy.
        sample.channels.push_back(
            {c, b, b, 0, 0, r % 8 == 7 ? "efa" + std::to_string(c) : std::string{}, std::string{}});
      }
      run.bandwidth().add(r, sample, r / 8);
    }
  }
  QVERIFY(chart.refresh() > 0);
  // Plain lines at this size: antialiased, they took 2 to 5 ms a frame.
  QVERIFY(!chart.findChild<QChartView*>("bandwidthChart")->renderHints().testFlag(QPainter::Antialiasing));
  const QStringList names = chart.series_names();
  QCOMPARE(names.size(), BandwidthChart::kTopChannels + 1);
  QCOMPARE(names.front(), QString("rank 1500 channel 1"));
  QCOMPARE(names[1], QString("rank 2047 channel 0"));  // then the fastest of the rest
  QVERIFY(names.contains("run total (right axis)"));
  chart.set_mode(BandwidthChart::Mode::per_nic);
  chart.refresh();
  QCOMPARE(chart.series_names().size(), BandwidthChart::kTopNics);
  QVERIFY2(chart.series_names().contains("agent 255 efa0"), qPrintable(chart.series_names().join(", ")));
  chart.set_mode(BandwidthChart::Mode::per_channel);
  run.begin("small", 4, 2, {0, 0, 1, 1});
  QCOMPARE(chart.mode(), BandwidthChart::Mode::per_channel);
  chart.refresh();
  QVERIFY(chart.findChild<QChartView*>("bandwidthChart")->renderHints().testFlag(QPainter::Antialiasing));
}

// 2,048 ranks streaming nearly equal rates: ticks redraw the lines but
// leave the x axis where it is (seconds before the latest sample), the y
// axis on its round number, and the legend's names for at least a second:
// each change lays the whole chart out again (before, the x axis moved
// every tick and the busiest channels were renamed nearly every tick).
void ConsoleTest::chartKeepsItsAxesAndLegendWhileRanksStream() {
  namespace ev = ringmaster::agent::events;
  const int world = 2048, channels = 4;
  const std::vector<int> placement = ranks_in_nodes(world, 8);
  RunState run;
  BandwidthChart chart(run.bandwidth(), &run);
  chart.resize(1000, 500);
  chart.show();
  run.begin("big", world, 256, placement);
  auto* view = chart.findChild<QChartView*>("bandwidthChart");
  QVERIFY(view);
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(world * channels), 0);
  std::uint32_t noise = 12345;
  int renamed = 0, x_moved = 0, y_moved = 0;
  QStringList names;
  std::pair<double, double> x_range{0, 0}, y_range{0, 0};
  for (int tick = 0; tick < 40; ++tick) {  // 4 s at 10 Hz
    for (int r = 0; r < world; ++r) {
      ev::Sample sample;
      sample.t_us = 1'000'000 + tick * 100'000;
      for (int c = 0; c < channels; ++c) {
        noise = noise * 1664525u + 1013904223u;
        auto& b = bytes[static_cast<std::size_t>(r * channels + c)];
        b += 100'000'000ULL + noise % 5'000'000;  // 1 GB/s, give or take 5%
        sample.channels.push_back({c, b, b, 0, 0, {}, {}});
      }
      run.bandwidth().add(r, sample, r / 8);
    }
    chart.refresh();
    const auto* x = qobject_cast<QValueAxis*>(view->chart()->axes(Qt::Horizontal).front());
    const auto* y = qobject_cast<QValueAxis*>(view->chart()->axes(Qt::Vertical).front());
    if (tick < 12) {  // the first second of rates
      names = chart.series_names();
      x_range = {x->min(), x->max()};
      y_range = {y->min(), y->max()};
      continue;
    }
    renamed += chart.series_names() != names ? 1 : 0;
    x_moved += std::make_pair(x->min(), x->max()) != x_range ? 1 : 0;
    y_moved += std::make_pair(y->min(), y->max()) != y_range ? 1 : 0;
    names = chart.series_names();
    x_range = {x->min(), x->max()};
    y_range = {y->min(), y->max()};
  }
  QCOMPARE(x_moved, 0);
  QCOMPARE(x_range, std::make_pair(-60.0, 0.0));
  QCOMPARE(y_moved, 0);
  QVERIFY2(renamed <= 3, qPrintable(QString("the legend changed on %1 of 28 ticks").arg(renamed)));
  QCOMPARE(chart.series_names().size(), BandwidthChart::kTopChannels + 1);
}

// The Tuner tab: Simulate shows 2 x p5.48xlarge at 8 B .. 1 GiB before
// any run; once the run's rows come, the same cluster at its sizes with
// the measured busbw beside.
void ConsoleTest::tunerTabSimulatesAClusterBesideTheRun() {
  TunerModel tuner;
  ResultsModel results;
  TunerPanel panel(tuner, &results);
  auto* go = panel.findChild<QPushButton*>("simulate");
  auto* table = panel.findChild<QTableView*>("simulatedTable");
  QVERIFY(go && table);
  QCOMPARE(panel.findChild<QComboBox*>("simulatedInstance")->currentText(), QString("p5.48xlarge"));
  go->click();
  QCOMPARE(table->model()->rowCount(), 14);
  QVERIFY2(panel.findChild<QLabel*>("simulatedSummary")->text().startsWith("2 x p5.48xlarge (16 ranks"),
           qPrintable(panel.findChild<QLabel*>("simulatedSummary")->text()));
  ringmaster::agent::events::Result r;
  r.collective = "all_reduce";
  r.dtype = "float";
  r.bytes = 64 << 20;
  r.out_of_place.busbw = 12.5;
  results.add(r);
  QCOMPARE(table->model()->rowCount(), 1);
  QCOMPARE(table->model()->index(0, 1).data().toString(), QString("12.50"));
  QVERIFY(!panel.simulate("nonesuch", 2));
  QVERIFY(panel.findChild<QLabel*>("simulatedSummary")->text().startsWith("Not simulated: "));
}

QTEST_MAIN(ConsoleTest)
// GPU nodes as people bring them up, in the Topology tab of a 1600×1000
// window: the window keeps its width (a p5 drawn as one row of switches
// made it 4,078 px wide), every GPU has a box that names it and every NIC
// is named in a box of its own or in its group's, and the devices are
// drawn large enough to read. A group expands on Enter and shows each NIC.
void ConsoleTest::gpuNodesFitAndNameEveryDevice() {
  Console console;
  MainWindow window(console);
  window.resize(1600, 1000);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  auto* view = window.findChild<TopologyView*>();
  QVERIFY(view);
  window.tabs()->setCurrentWidget(view);
  struct Node {
    const char* file;
    int gpus, nics;
  };
  for (const Node& n :
       {Node{"p5.48xl-topo.xml", 8, 32}, Node{"p4d-24xl-topo.xml", 8, 4}, Node{"hwloc-nvidiaDGX2.xml", 16, 0}}) {
    const auto topology = ringmaster::agent::TopologyInfo::parse(nlohmann::json::parse(
        ringmaster::topo::Topology::load_file(RINGMASTER_TOPOLOGY_DIR "/" + std::string(n.file)).to_json()));
    view->show_topology("node", topology);
    QApplication::processEvents();
    QTest::qWait(50);
    QCOMPARE(window.width(), 1600);
    auto* drawing = view->drawing();
    QVERIFY2(drawing->width() <= 1600, n.file);
    std::set<int> gpus, nics;
    for (const auto& node : topology.nodes) {
      if (node.kind == "gpu") gpus.insert(node.id);
      if (node.kind == "nic") nics.insert(node.id);
    }
    QCOMPARE(static_cast<int>(gpus.size()), n.gpus);
    QCOMPARE(static_cast<int>(nics.size()), n.nics);
    int group = -1;
    const auto& boxes = drawing->boxes();
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      const auto& b = boxes[i];
      const QString name = QString::fromStdString(topology.node(std::max(b.node, 0)).name);
      if (b.kind == "gpu") {
        QVERIFY2(b.label.startsWith(name + "\n"), qPrintable(b.label));
        gpus.erase(b.node);
        // Legible: a device is drawn at least 100 px wide at the fit.
        QVERIFY2(drawing->on_screen(static_cast<int>(i)).width() >= 100,
                 qPrintable(QString("%1: %2 drawn %3 px wide")
                                .arg(n.file, b.label)
                                .arg(drawing->on_screen(static_cast<int>(i)).width())));
      }
      if (b.kind == "nic") {
        QVERIFY2(b.label.startsWith(name + " "), qPrintable(b.label));
        nics.erase(b.node);
      }
      if (b.kind == "group" && b.member_kind == "nic") {
        if (group < 0) group = static_cast<int>(i);
        for (int m : b.members)
          nics.erase(m);
        QVERIFY2(b.label.startsWith(QString("%1 × NIC\n").arg(b.members.size())), qPrintable(b.label));
      }
    }
    QVERIFY2(gpus.empty(), n.file);
    QVERIFY2(nics.empty(), n.file);
    if (std::string(n.file) == "p5.48xl-topo.xml") {
      QVERIFY2(group >= 0, "a p5's NICs are drawn four to a box");
      QCOMPARE(boxes[static_cast<std::size_t>(group)].label, QString("4 × NIC\nrdmap79s0…82s0\n100 Gb/s each"));
      const std::vector<int> members = boxes[static_cast<std::size_t>(group)].members;
      drawing->setFocus();
      for (int steps = 0; drawing->selected_box() != group && steps < 200; ++steps)
        QTest::keyClick(drawing, Qt::Key_Right);
      QCOMPARE(drawing->selected_box(), group);
      QTest::keyClick(drawing, Qt::Key_Return);
      int shown = 0;
      for (const auto& b : drawing->boxes())
        shown += b.kind == "nic" && std::find(members.begin(), members.end(), b.node) != members.end() ? 1 : 0;
      QCOMPARE(shown, 4);
      QCOMPARE(window.width(), 1600);
    }
    if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE"))
      window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-" + n.file + ".png");
  }
}

// Two local agents that each declare a p5 node, two ranks each: the
// engine reports where it placed the ranks (GPU0 and GPU1 of each node),
// the Topology tab draws channel c's ring through the NIC the search gave
// it (NIC c of 32, the p5's rdmap79s0, rdmap80s0, ...), entering and
// leaving the node there, and the Live tab has a series per NIC the run's
// channels went through; the rails view shows all 64 NICs, the rest idle.
namespace {

// The pixels of every label the drawing shows are the same with its path
// drawn and without it (the same layout): no route, arrowhead, number or
// name covers a label. Every hop between drawn devices is routed, and the
// path is drawn somewhere.
void verify_path_clear_of_labels(TopologyDrawing* drawing, const QString& what) {
  const DevicePath path = drawing->path();
  QApplication::processEvents();
  const QImage with = drawing->grab().toImage();
  DevicePath none;
  none.title = path.title;
  drawing->set_path(none);
  const QImage without = drawing->grab().toImage();
  drawing->set_path(path);
  QCOMPARE(with.size(), without.size());
  QVERIFY2(with != without, qPrintable(what + ": the path is drawn"));
  int labels = 0;
  for (int b = 0; b < static_cast<int>(drawing->boxes().size()); ++b) {
    const QRect r = drawing->label_on_screen(b).toAlignedRect() & drawing->drawing_area().toAlignedRect();
    if (r.isEmpty()) continue;
    ++labels;
    for (int y = r.top(); y <= r.bottom(); ++y) {
      for (int x = r.left(); x <= r.right(); ++x) {
        if (with.pixel(x, y) == without.pixel(x, y)) continue;
        if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE")) {
          with.save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-covered.png");
          without.save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-uncovered.png");
          qDebug() << "label" << drawing->label_on_screen(b);
          for (const auto& route : drawing->routes())
            qDebug() << "route" << route;
        }
        QFAIL(qPrintable(QString("%1: the path covers the label \"%2\" at (%3, %4)")
                             .arg(what, QString(drawing->boxes()[static_cast<std::size_t>(b)].label).replace('\n', ' '))
                             .arg(x)
                             .arg(y)));
      }
    }
  }
  QVERIFY(labels > 0);
  QCOMPARE(drawing->routes().size(), path.hops.size());
  for (std::size_t i = 0; i < path.hops.size(); ++i) {
    const auto& hop = path.hops[i];
    const bool drawn = (drawing->box_of(hop.from) >= 0 || hop.from.kind == DevicePath::End::Kind::away) &&
                       (drawing->box_of(hop.to) >= 0 || hop.to.kind == DevicePath::End::Kind::away);
    if (drawn)
      QVERIFY2(drawing->routes()[i].size() >= 2, qPrintable(QString("%1: hop %2 routed").arg(what).arg(i + 1)));
  }
}

}  // namespace

void ConsoleTest::ringsDrawnThroughGpusAndNicsOfDeclaredNodes() {
  const QString file = RINGMASTER_TOPOLOGY_DIR "/p5.48xl-topo.xml";
  const auto p5 = ringmaster::topo::Topology::load_file(file.toStdString());
  Console console;
  QString error;
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error, file), qPrintable(error));
  MainWindow window(console);
  window.resize(1600, 1000);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  auto* view = window.findChild<TopologyView*>();
  QVERIFY(view);
  window.tabs()->setCurrentWidget(view);
  QTRY_VERIFY(!view->drawing()->boxes().empty());
  RunSpec spec;
  spec.min_bytes = "4M";
  spec.max_bytes = "16M";
  spec.iters = 20;
  spec.warmup = 1;
  spec.ranks_per_agent = 2;
  spec.channels = 2;
  QSignalSpy finished(&console.run, &RunState::finished);
  QVERIFY(!console.start_run(spec).isEmpty());
  QVERIFY(finished.wait(180000));
  QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(console.run.problems().join("; ")));
  QCOMPARE(console.run.gpus(), (std::vector<int>{0, 1, 0, 1}));
  const int channels = static_cast<int>(console.run.rings().size());
  QVERIFY(channels >= 1);
  const std::vector<ringmaster::topo::NodeRanks> nodes(2, ringmaster::topo::NodeRanks{&p5, 2});
  const auto plan = ringmaster::topo::search_channels(nodes, channels);
  auto device = [&](int nic) {
    for (int child : p5.node(p5.nics()[static_cast<std::size_t>(nic)]).children) {
      if (p5.node(child).kind == ringmaster::topo::NodeKind::net) return QString::fromStdString(p5.node(child).name);
    }
    return QString();
  };
  auto* drawing = view->drawing();
  std::set<std::pair<int, QString>> used;  // (agent, device)
  for (int c = 0; c < channels; ++c) {
    const int nic = plan.rings[static_cast<std::size_t>(c)].nic[0];
    QCOMPARE(console.run.rings()[static_cast<std::size_t>(c)], plan.rings[static_cast<std::size_t>(c)].ranks);
    view->show_path(c);
    const auto& path = drawing->path();
    QVERIFY2(!path.hops.empty(), qPrintable(path.why_empty));
    // In by the NIC, to a GPU; out from a GPU, by the same NIC: each end
    // drawn on the box of that very NIC, which names its device.
    int in = 0, out = 0;
    for (const auto& hop : path.hops) {
      using Kind = DevicePath::End::Kind;
      if (hop.from.kind == Kind::away) {
        QCOMPARE(hop.to.kind, Kind::nic);
        QCOMPARE(hop.to.index, nic);
        ++in;
      }
      if (hop.to.kind == Kind::away) {
        QCOMPARE(hop.from.kind, Kind::nic);
        QCOMPARE(hop.from.index, nic);
        ++out;
      }
      for (const auto* end : {&hop.from, &hop.to}) {
        if (end->kind == Kind::away) continue;
        const int b = drawing->box_of(*end);
        QVERIFY2(b >= 0, "every device of the path is drawn");
        const auto& box = drawing->boxes()[static_cast<std::size_t>(b)];
        QCOMPARE(box.kind, QString(end->kind == Kind::gpu ? "gpu" : "nic"));
        if (end->kind == Kind::nic) QVERIFY2(box.label.contains(device(nic)), qPrintable(box.label));
      }
    }
    QCOMPARE(in, 1);
    QCOMPARE(out, 1);
    used.insert({0, device(nic)});
    used.insert({1, device(plan.rings[static_cast<std::size_t>(c)].nic[1])});
  }
  view->show_path(0);
  verify_path_clear_of_labels(drawing, "channel 0's ring");
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE"))
    window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-ring.png");
  // The trees too: tree 0 reaches this node's GPUs.
  view->show_path(-1, 0);
  QVERIFY2(!drawing->path().hops.empty(), qPrintable(drawing->path().why_empty));
  verify_path_clear_of_labels(drawing, "tree 0");
  QCOMPARE(window.width(), 1600);
  // Per NIC: a series for each NIC a channel went through, and no other.
  std::set<std::pair<int, QString>> series;
  {
    const auto reading = console.run.bandwidth().read();
    for (const auto& key : reading->nics()) {
      series.insert({key.node, key.device});
      QVERIFY2(reading->nic_points(key, 100).size() >= 2, qPrintable(key.device));
    }
  }
  QCOMPARE(series, used);
  window.bandwidth()->set_mode(BandwidthChart::Mode::per_nic);
  QVERIFY(window.bandwidth()->refresh() > 0);
  QVERIFY2(window.bandwidth()->series_names().contains(QString("agent 0 %1").arg(device(plan.rings[0].nic[0]))),
           qPrintable(window.bandwidth()->series_names().join(", ")));
  window.bandwidth()->set_mode(BandwidthChart::Mode::rails);
  QCOMPARE(window.bandwidth()->refresh(), 64);
  int with_traffic = 0;
  for (const auto& bar : window.bandwidth()->rails()->bars())
    with_traffic += bar.used ? 1 : 0;
  QCOMPARE(with_traffic, static_cast<int>(used.size()));
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE")) {
    window.tabs()->setCurrentIndex(0);
    QApplication::processEvents();
    window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-rails.png");
  }
  window.bandwidth()->set_mode(BandwidthChart::Mode::per_channel);
}

// Paths through every GPU and a NIC of real nodes (declared AWS files and
// hwloc's own exports), at a laptop's size and larger: routed around
// every box and header, no label covered (compared pixel by pixel with
// the drawing without the path), the hops' numbers clear of labels.
void ConsoleTest::pathsRouteAroundEveryLabel() {
  const std::vector<QString> files = {RINGMASTER_TOPOLOGY_DIR "/p4d-24xl-topo.xml",
                                      RINGMASTER_TOPOLOGY_DIR "/p5.48xl-topo.xml",
                                      RINGMASTER_TEST_DATA_DIR "/node-files/hwloc-power8gpudistances.xml",
                                      RINGMASTER_TEST_DATA_DIR "/node-files/hwloc-nvidiaDGX2.xml"};
  for (const QString& file : files) {
    const auto topology = ringmaster::topo::Topology::load_file(file.toStdString());
    const auto typed = ringmaster::agent::TopologyInfo::parse(nlohmann::json::parse(topology.to_json()));
    int gpus = 0, nics = 0;
    for (const auto& n : typed.nodes) {
      if (n.kind == "gpu") gpus = std::max(gpus, n.index + 1);
      if (n.kind == "nic") nics = std::max(nics, n.index + 1);
    }
    QVERIFY2(gpus >= 2, qPrintable(file));
    using End = DevicePath::End;
    DevicePath ring;
    ring.title = "a ring through every GPU";
    if (nics > 0) {  // in from another node by the first NIC
      ring.hops.push_back({End{End::Kind::away, 1, "agent 1 · rank 15"}, End{End::Kind::nic, 0, {}}, "NET"});
      ring.hops.push_back({End{End::Kind::nic, 0, {}}, End{End::Kind::gpu, 0, {}}, "rank 0"});
    }
    for (int g = 0; g + 1 < gpus; ++g)
      ring.hops.push_back({End{End::Kind::gpu, g, {}}, End{End::Kind::gpu, g + 1, {}}, "P2P"});
    if (nics > 0) {  // out by the last
      ring.hops.push_back({End{End::Kind::gpu, gpus - 1, {}}, End{End::Kind::nic, nics - 1, {}}, "NET"});
      ring.hops.push_back({End{End::Kind::nic, nics - 1, {}}, End{End::Kind::away, 1, "agent 1 · rank 8"}, "NET"});
    }
    for (const QSize size : {QSize(900, 560), QSize(1366, 768), QSize(1600, 1000)}) {
      TopologyView view;
      view.resize(size);
      view.show_topology(QFileInfo(file).fileName(), typed);
      view.show();
      QVERIFY(QTest::qWaitForWindowExposed(&view));
      TopologyDrawing* drawing = view.drawing();
      drawing->set_path(ring);
      const QString what = QString("%1 at %2x%3").arg(QFileInfo(file).fileName()).arg(size.width()).arg(size.height());
      verify_path_clear_of_labels(drawing, what);
      if (QTest::currentTestFailed()) return;
      // Zoomed in about a GPU, the labels in view stay clear too.
      const int first_gpu = drawing->box_of(End{End::Kind::gpu, 0, {}});
      QVERIFY(first_gpu >= 0);
      drawing->set_zoom(3, drawing->on_screen(first_gpu).center());
      verify_path_clear_of_labels(drawing, what + ", zoomed");
      if (QTest::currentTestFailed()) return;
      if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE") && size.width() == 1366) {
        drawing->set_zoom(1, {});
        view.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-path-" + QFileInfo(file).baseName() + ".png");
      }
    }
  }
}

// The window at a laptop's 1366x768 and on a 4K screen with 16 agents of
// declared p5 nodes: no tab makes the window grow past the screen, and at
// 4K the drawing and the agents list take the room there is (every agent
// listed without scrolling).
void ConsoleTest::layoutFitsALaptopAndUsesA4kScreen() {
  Console console;
  QString error;
  QVERIFY2(console.start_local_agents(16, RINGMASTER_AGENT, &error, RINGMASTER_TOPOLOGY_DIR "/p5.48xl-topo.xml"),
           qPrintable(error));
  MainWindow window(console);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 16, 30000);
  auto* view = window.findChild<TopologyView*>();
  QTRY_VERIFY(!view->drawing()->boxes().empty());
  for (const QSize screen : {QSize(1366, 768), QSize(3840, 2160)}) {
    window.resize(screen);
    for (int t = 0; t < window.tabs()->count(); ++t) {
      window.tabs()->setCurrentIndex(t);
      QApplication::processEvents();
      QVERIFY2(window.width() <= screen.width() && window.height() <= screen.height(),
               qPrintable(QString("the %1 tab makes the window %2x%3 on a %4x%5 screen")
                              .arg(window.tabs()->tabText(t))
                              .arg(window.width())
                              .arg(window.height())
                              .arg(screen.width())
                              .arg(screen.height())));
    }
  }
  window.tabs()->setCurrentWidget(view);
  QApplication::processEvents();
  QVERIFY2(view->drawing()->width() >= 2000, qPrintable(QString::number(view->drawing()->width())));
  auto* agents = window.findChild<QTableView*>("agentsView");
  QVERIFY(agents);
  QCOMPARE(agents->model()->rowCount(), 16);
  QVERIFY2(!agents->verticalScrollBar()->isVisible(), "16 agents listed without scrolling on a 4K screen");
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE"))
    window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-4k.png");
}

namespace {

// The pids of PID's children (every thread's).
std::set<int> children_of(qint64 pid) {
  std::set<int> out;
  const QDir tasks(QString("/proc/%1/task").arg(pid));
  for (const QString& task : tasks.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    QFile f(tasks.filePath(task) + "/children");
    if (!f.open(QIODevice::ReadOnly)) continue;
    for (const QByteArray& p : f.readAll().split(' '))
      if (p.trimmed().toInt() > 0) out.insert(p.trimmed().toInt());
  }
  return out;
}

// Whether PID runs (a zombie has ended).
bool running(int pid) {
  QFile stat(QString("/proc/%1/stat").arg(pid));
  if (!stat.open(QIODevice::ReadOnly)) return false;
  const QByteArray text = stat.readAll();
  const auto close = text.lastIndexOf(')');
  return close > 0 && text.size() > close + 2 && text[close + 2] != 'Z' && text[close + 2] != 'X';
}

}  // namespace

// The console's local agents end with it, however it ends (SIGTERM as at a
// logout, SIGHUP, SIGINT, SIGKILL as a crash): the kernel sends each agent
// its parent-death signal, SIGTERM, on which it stops its runs. Before,
// the agents of a console ended with SIGTERM ran on, orphaned.
void ConsoleTest::localAgentsEndWithTheConsole() {
  for (const int sig : {SIGTERM, SIGHUP, SIGINT, SIGKILL}) {
    QProcess console;
    console.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    console.start(RINGMASTER_CONSOLE, {"--local", "2"});
    QVERIFY(console.waitForStarted(10000));
    std::set<int> agents;
    QTRY_VERIFY_WITH_TIMEOUT((agents = children_of(console.processId())).size() == 2, 20000);
    QTest::qWait(300);  // connected, past start-up
    ::kill(static_cast<pid_t>(console.processId()), sig);
    QVERIFY(console.waitForFinished(10000));
    for (const int agent : agents) {
      QTRY_VERIFY2_WITH_TIMEOUT(
          !running(agent), qPrintable(QString("agent %1 outlived the console ended by signal %2").arg(agent).arg(sig)),
          10000);
    }
  }
}

// An agent's I/O thread applies the samples of the run shown where they
// arrive and frees them there; every other message reaches the GUI thread
// (all that is queued, in one call), and every message is recorded in the
// order it came. Before, 2,048 ranks' samples were applied and freed on
// the GUI thread, 5 to 8 ms of its 100 ms.
void ConsoleTest::samplesAreTakenOnTheThreadThatReceivedThem() {
  using nlohmann::json;
  QTemporaryDir dir;
  const QString recording = dir.filePath("arrivals.jsonl");
  Console console;
  QVERIFY(console.record_to(recording));
  console.run.begin("arrive", 4, 2, {0, 0, 1, 1});
  auto sample = [](const std::string& run, int rank, int tick) {
    const std::uint64_t bytes = 1'000'000ULL * static_cast<std::uint64_t>(tick);
    return json{{"type", "event"},
                {"run_id", run},
                {"rank", rank},
                {"event",
                 {{"type", "sample"},
                  {"t_us", 1'000'000 + 100'000 * tick},
                  {"channels", json::array({{{"channel", 0}, {"bytes_sent", bytes}}})}}}};
  };
  std::thread io([&, arrived = console.arrival()] {
    for (int tick = 0; tick < 10; ++tick) {
      for (int r = 0; r < 4; ++r)
        arrived(agent_message(r < 2 ? "a:1" : "b:1", sample("arrive", r, tick)));
    }
    for (int r = 0; r < 4; ++r)
      arrived(agent_message(r < 2 ? "a:1" : "b:1", stage_event("arrive", r, "STORE_CONNECT")));
    arrived(agent_message("a:1", sample("another run", 0, 0)));
  });
  io.join();
  // Applied before the GUI thread ran at all: the samples, and no stage.
  QCOMPARE(console.run.samples(), std::size_t(40));
  QCOMPARE(console.run.bandwidth().read()->points_received(3, 0), std::size_t(9));
  QVERIFY(!console.run.timeline.cell(0, 1).seen);
  QCoreApplication::processEvents();
  for (int r = 0; r < 4; ++r)
    QVERIFY2(console.run.timeline.cell(r, 1).seen, qPrintable(QString("rank %1's stage").arg(r)));
  QCOMPARE(console.run.samples(), std::size_t(40));  // not the other run's
  // The history keeps the samples the I/O thread took.
  int kept = 0;
  for (const auto& m : console.run.messages())
    kept += m.json()["event"].value("type", "") == "sample" ? 1 : 0;
  QCOMPARE(kept, 40);
  QFile in(recording);
  QVERIFY(in.open(QIODevice::ReadOnly));
  QList<QByteArray> lines = in.readAll().split('\n');
  lines.removeAll(QByteArray());
  QCOMPARE(lines.size(), 45);
  QVERIFY(json::parse(lines.front().toStdString())["message"] == sample("arrive", 0, 0));
  QVERIFY(json::parse(lines.back().toStdString())["message"] == sample("another run", 0, 0));
}

// The Links tab's rails: 256 agents' NIC counters each second do not make
// the table measure every row's text again. Sized to contents, each
// agent's sample did (14 to 20 ms of the GUI thread once a second at 32
// agents, with the tab not even shown); columns now fit when rows come.
void ConsoleTest::railsTableKeepsItsColumnsWhileNicsStream() {
  Console console;
  MainWindow window(console);
  window.resize(1400, 900);
  window.show();
  auto* rails = window.findChild<QTableView*>("linksRails");
  QVERIFY(rails);
  CountingReads counting;
  counting.setSourceModel(&console.nics);
  rails->setModel(&counting);
  auto nic_sample = [](int second) {
    ringmaster::agent::events::NicSample s;
    s.t_us = 1'000'000LL * second;
    for (int n = 0; n < 4; ++n) {
      const auto bytes = static_cast<std::uint64_t>(second) * 1'000'000'000ULL * static_cast<std::uint64_t>(n + 1);
      s.nics.push_back({"rdmap" + std::to_string(n) + "s0:1", bytes, bytes, 100'000, true});
    }
    return s;
  };
  for (int a = 0; a < 256; ++a)
    console.nics.add(QString("10.0.%1.%2:29400").arg(a / 100).arg(a % 100), nic_sample(1));
  QCOMPARE(console.nics.rowCount(), 1024);
  QTRY_VERIFY(rails->columnWidth(NicRatesModel::agent_column) >=
              rails->fontMetrics().horizontalAdvance("10.0.0.10:29400"));
  QTest::qWait(300);
  counting.reads = 0;
  for (int second = 2; second <= 4; ++second) {
    for (int a = 0; a < 256; ++a)
      console.nics.add(QString("10.0.%1.%2:29400").arg(a / 100).arg(a % 100), nic_sample(second));
    QCoreApplication::processEvents();
  }
  QTest::qWait(300);
  // Painting the rows in view reads some; measuring all 1,024 rows' six
  // columns after each second read 6,144 or more.
  QVERIFY2(counting.reads < 3000, qPrintable(QString("%1 reads of the rails' text").arg(counting.reads)));
  // A rate fits its column whatever it grows to.
  const int rate = rails->fontMetrics().horizontalAdvance("888.88 Mb/s");
  QVERIFY(rails->columnWidth(NicRatesModel::receive_column) >= rate);
  QVERIFY(rails->columnWidth(NicRatesModel::send_column) >= rate);
}

// The Stages table while 2,048 ranks come up: their stage events do not
// make it measure its rows' text again at each batch (sized to contents,
// 40% of the GUI thread while a scaled run's ranks came up).
void ConsoleTest::stagesTableKeepsItsColumnsWhileRanksComeUp() {
  using nlohmann::json;
  Console console;
  MainWindow window(console);
  window.resize(1400, 900);
  window.show();
  auto* table = window.findChild<QTableView*>("timelineTable");
  QVERIFY(table);
  const int world = 2048;
  console.run.begin("up", world, 256, ranks_in_nodes(world, 8));
  CountingReads counting;
  counting.setSourceModel(&console.run.timeline);
  table->setModel(&counting);
  QTest::qWait(300);
  counting.reads = 0;
  for (int s = 0; s < 8; ++s) {
    for (int r = 0; r < world; ++r) {
      console.run.apply(
          agent_message("a:1", stage_event("up", r, ringmaster::name_of(static_cast<ringmaster::Stage>(s)),
                                           1'000 + s * 2'000 + r, 1.5 + r)));
    }
    QCoreApplication::processEvents();
  }
  QTest::qWait(300);
  QVERIFY(console.run.timeline.cell(world - 1, 7).seen);
  // Measuring 64 rows of every stage after each batch read 5,120.
  QVERIFY2(counting.reads < 2000, qPrintable(QString("%1 reads of the stages' text").arg(counting.reads)));
  // A stage's time fits its column (three significant digits past the
  // point at most: "88888" for 88 s).
  for (int c = 0; c < counting.columnCount(); ++c)
    QVERIFY(table->columnWidth(c) >= table->fontMetrics().horizontalAdvance("88888"));
}

#include "console_test.moc"
