// What the console draws, in a real (offscreen) Qt window: nodes, GPUs,
// NICs and rings of real topology files, paths clear of labels, layouts
// for small and large screens, timelines and charts of thousands of
// ranks, and tables that keep their columns while data streams in.

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

class ConsoleDrawingTest : public QObject {
  Q_OBJECT

 private slots:
  void p4dDrawing();
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

void ConsoleDrawingTest::p4dDrawing() {
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

// 2,048 ranks on 256 nodes: the timeline scrolls over a row per node;
// Enter on a node opens its ranks under it and names the node's stage;
// Down walks into its ranks; Backspace closes it; clicking a node's name
// opens it; the cursor's row scrolls into view.
void ConsoleDrawingTest::timelineOfThousandsOfRanksDrillsIntoANode() {
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
void ConsoleDrawingTest::bandwidthOfThousandsOfRanksOpensOnTheRunsTotal() {
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
void ConsoleDrawingTest::chartKeepsItsAxesAndLegendWhileRanksStream() {
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
void ConsoleDrawingTest::tunerTabSimulatesAClusterBesideTheRun() {
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

// GPU nodes as people bring them up, in the Topology tab of a 1600×1000
// window: the window keeps its width (a p5 drawn as one row of switches
// made it 4,078 px wide), every GPU has a box that names it and every NIC
// is named in a box of its own or in its group's, and the devices are
// drawn large enough to read. A group expands on Enter and shows each NIC.
void ConsoleDrawingTest::gpuNodesFitAndNameEveryDevice() {
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

void ConsoleDrawingTest::ringsDrawnThroughGpusAndNicsOfDeclaredNodes() {
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
void ConsoleDrawingTest::pathsRouteAroundEveryLabel() {
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
void ConsoleDrawingTest::layoutFitsALaptopAndUsesA4kScreen() {
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

// An agent's I/O thread applies the samples of the run shown where they
// arrive and frees them there; every other message reaches the GUI thread
// (all that is queued, in one call), and every message is recorded in the
// order it came. Before, 2,048 ranks' samples were applied and freed on
// the GUI thread, 5 to 8 ms of its 100 ms.
void ConsoleDrawingTest::samplesAreTakenOnTheThreadThatReceivedThem() {
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
void ConsoleDrawingTest::railsTableKeepsItsColumnsWhileNicsStream() {
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
void ConsoleDrawingTest::stagesTableKeepsItsColumnsWhileRanksComeUp() {
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

QTEST_MAIN(ConsoleDrawingTest)
#include "console_drawing_test.moc"
