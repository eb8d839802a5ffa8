// The console as an application, with real agents and a real (offscreen)
// Qt window: its command line, signals and certificates, history,
// recording and replay, the --screenshot command, scenarios, keyboard and
// accessibility, and the local agents it starts and ends.

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
#include "console_test_support.h"
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
using namespace console_support;

class ConsoleTest : public QObject {
  Q_OBJECT

 private slots:
  void screenshotCommand();
  void scenarioFromTheConsole();
  void historyKeepsOpensAndCompares();
  void agentAskingForClientCertificates();
  void versionAndUsageErrors();
  void noTokenLeftBehindAfterSignals();
  void keyboardAccessibilityAndPalette();
  void aboutIconAndGuide();
  void agentsFoundThroughOneName();
  void historyKeepsTheChartsWindowOfSamples();
  void replayCommand();
  void scenariosReadAsText();
  void localAgentsEndWithTheConsole();
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
  QCOMPARE(expectation_text(nlohmann::json::parse(R"({"outcome": "complete", "bisect": {"node": 5}})")),
           QString("The run completes.\nAfter its sweep the job bisects its nodes inside itself and names node 5, "
                   "within log2(nodes) + 2 rounds."));
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

QTEST_MAIN(ConsoleTest)
#include "console_test.moc"
