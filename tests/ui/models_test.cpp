// The console's models without a window or agents: a run recorded from
// real agents (two agents, two ranks each, all_reduce 8 B .. 1 MiB, made
// with `ringmaster --local 2 --np-per-agent 2 --max-bytes 1M --iters 5
// --record FILE --screenshot X.png`) replayed into a RunState under
// QAbstractItemModelTester. This target links ringmaster_ui_models only:
// the models need Qt Core, Gui and Sql, never Widgets.
#include <QAbstractItemModelTester>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>

#include "models/agents_model.h"
#include "models/bandwidth_series.h"
#include "models/box_router.h"
#include "models/console.h"
#include "models/nic_rates_model.h"
#include "models/run_state.h"
#include "models/simulation_model.h"
#include "models/topology_layout.h"
#include "placement.h"
#include "ringmaster/stage.h"
#include "ringmaster/tools/topology.h"
#include "stage_event.h"

using namespace ringmaster::ui;

namespace {

const QString kRecording = RINGMASTER_TEST_DATA_DIR "/console/run-2-agents-4-ranks.jsonl";

// Every model of a run under the tester, for as long as the run lives.
struct Testers {
  explicit Testers(RunState& run)
      : timeline(&run.timeline, QAbstractItemModelTester::FailureReportingMode::QtTest),
        results(&run.results, QAbstractItemModelTester::FailureReportingMode::QtTest),
        decisions(&run.decisions, QAbstractItemModelTester::FailureReportingMode::QtTest),
        tuner(&run.tuner, QAbstractItemModelTester::FailureReportingMode::QtTest),
        wavefront(&run.wavefront, QAbstractItemModelTester::FailureReportingMode::QtTest) {}
  QAbstractItemModelTester timeline, results, decisions, tuner, wavefront;
};

}  // namespace

class ModelsTest : public QObject {
  Q_OBJECT

 private slots:
  void stagesAreTheEnginesStages();
  void topologyLayoutAndRoutesWithoutAWindow();
  void recordedRunReplaysIntoEveryModel();
  void anEventThatDoesNotReadIsNamed();
  void agentsFollowTheirFaultEvents();
  void railsFromNicSamples();
  void perNicSeriesAddUpTheChannelsThroughEachNic();
  void thousandsOfRanksKeepAFewSamplesEachForTheHistory();
  void aTimelineOfThousandsOfRanksGroupsThemByNode();
  void theRunsTotalAndItsBusiestChannels();
  void aSampleCrossesAsTextItsTreeFreedWhereItArrived();
  void aChannelThatJoinsLateGetsRatesFromItsSecondSample();
  void aSimulatedClusterBesideTheRun();
  void whatARunKeepsIsBoundedWhateverItSends();
};

// The timeline's columns are the engine's Stage enum, in its order.
void ModelsTest::stagesAreTheEnginesStages() {
  QCOMPARE(stage_names().size(), static_cast<int>(ringmaster::Stage::ready) + 1);
  for (int s = 0; s < stage_names().size(); ++s)
    QCOMPARE(stage_names()[s], QString::fromUtf8(ringmaster::name_of(static_cast<ringmaster::Stage>(s)).data()));
  QCOMPARE(stage_names().front(), QString("RESOLVE_MASTER"));
  QCOMPARE(stage_names().back(), QString("READY"));
}

void ModelsTest::recordedRunReplaysIntoEveryModel() {
  RunState run;
  Testers testers(run);
  QSignalSpy finished(&run, &RunState::finished);
  QVERIFY(Console::replay(kRecording, run) > 200);
  QCOMPARE(run.world_size(), 4);
  QVERIFY2(run.problems().isEmpty(), qPrintable(run.problems().join("\n")));
  QVERIFY(run.ok());
  QCOMPARE(finished.count(), 1);  // once both agents said run_done
  // Rank 0's rows and decisions, one per size, 8 B to 1 MiB.
  QCOMPARE(run.results.rowCount(), 18);
  QCOMPARE(run.results.index(0, 0).data().toString(), QString("8"));
  QCOMPARE(run.results.index(17, 0).data().toString(), QString("1048576"));
  QCOMPARE(run.results.index(17, 2).data().toString(), QString("float"));
  QCOMPARE(run.results.index(17, 8).data().toLongLong(), 0LL);  // #wrong
  QVERIFY(run.results.index(17, 7).data().toDouble() > 0);      // busbw
  QVERIFY(run.results.average_busbw() > 0);
  QCOMPARE(run.decisions.rowCount(), 18);
  QCOMPARE(run.tuner.tables().size(), 18);
  QVERIFY(run.tuner.chosen_row() >= 0);
  // Every rank went through every stage, all ok (but CALIBRATE: the
  // recording is older than that stage; its calibration is in
  // TRANSPORT_CONNECT, and a recording still replays).
  const int calibrate = static_cast<int>(stage_names().indexOf("CALIBRATE"));
  QVERIFY(calibrate > 0);
  QVERIFY(!run.timeline.cell(0, calibrate).seen);
  for (int rank = 0; rank < 4; ++rank) {
    for (int s = 0; s < stage_names().size(); ++s) {
      if (s == calibrate) continue;
      QVERIFY2(run.timeline.cell(rank, s).seen && run.timeline.cell(rank, s).ok,
               qPrintable(QString("rank %1 %2").arg(rank).arg(stage_names()[s])));
    }
  }
  QCOMPARE(run.rings().size(), std::size_t(1));
  QCOMPARE(run.rings()[0], (std::vector<int>{0, 1, 2, 3}));
  QCOMPARE(run.trees().size(), std::size_t(2));
  QCOMPARE(run.transport(0, 1), QString("SHM"));
  QVERIFY(run.samples() > 0);
  QVERIFY(run.bandwidth().read()->ranks() > 0);
}

// One result whose bytes are a string: the run names the agent and the
// field, and keeps every other event.
void ModelsTest::anEventThatDoesNotReadIsNamed() {
  QFile in(kRecording);
  QVERIFY(in.open(QIODevice::ReadOnly));
  QTemporaryDir dir;
  QFile out(dir.filePath("bad.jsonl"));
  QVERIFY(out.open(QIODevice::WriteOnly));
  bool changed = false;
  while (!in.atEnd()) {
    auto line = nlohmann::json::parse(in.readLine().toStdString());
    auto& m = line["message"];  // null on the run_begin line
    if (!changed && m.is_object() && m.value("rank", -1) == 0 && m["event"].value("type", "") == "result") {
      m["event"]["bytes"] = "8";
      changed = true;
    }
    if (m.is_null()) line.erase("message");
    out.write(QByteArray::fromStdString(line.dump() + "\n"));
  }
  out.close();
  QVERIFY(changed);
  RunState run;
  Testers testers(run);
  Console::replay(out.fileName(), run);
  QCOMPARE(run.problems().size(), 1);
  QVERIFY2(run.problems()[0].contains("127.0.0.1:") &&
               run.problems()[0].contains("event 'result': 'bytes' is a string, not an integer"),
           qPrintable(run.problems()[0]));
  QCOMPARE(run.results.rowCount(), 17);
  QCOMPARE(run.decisions.rowCount(), 18);
}

// The Faults column starts from the inventory and follows the agent's
// fault_applied and fault_reverted events; its tooltip says what each does.
void ModelsTest::agentsFollowTheirFaultEvents() {
  AgentsModel agents;
  QAbstractItemModelTester tester(&agents, QAbstractItemModelTester::FailureReportingMode::QtTest);
  agents.add("10.0.0.2:29600");
  agents.set_inventory(
      "10.0.0.2:29600",
      ringmaster::agent::Inventory::parse({{"hostname", "node2"},
                                           {"faults",
                                            {{{"fault_id", 1},
                                              {"fault", {{"kind", "rate"}, {"interface", "eth0"}, {"mbit", 40}}},
                                              {"mechanism", "htb"}},
                                             {{"fault_id", 3}, {"fault", {{"kind", "a kind from a newer agent"}}}}}}}));
  const QModelIndex faults = agents.index(0, AgentsModel::faults_column);
  QCOMPARE(agents.data(faults, Qt::DisplayRole).toInt(), 2);
  namespace ag = ringmaster::agent;
  agents.fault_applied("10.0.0.2:29600", {2, ag::DropPorts{1025, 65535, ag::Direction::in, {}, false}, "nftables", ""});
  QCOMPARE(agents.data(faults, Qt::DisplayRole).toInt(), 3);
  const QString tip = agents.data(faults, Qt::ToolTipRole).toString();
  QVERIFY2(tip.contains("fault 1: limit eth0 to 40 Mbit/s") &&
               tip.contains("fault 2: drop TCP to ports 1025-65535 arriving (nftables)") &&
               tip.contains("fault 3: a fault this console cannot read (unknown fault kind"),
           qPrintable(tip));
  agents.fault_reverted("10.0.0.2:29600", 1);
  QCOMPARE(agents.data(faults, Qt::DisplayRole).toInt(), 2);
  agents.fault_reverted("10.0.0.9:29600", 2);  // another agent's: nothing here changes
  QCOMPARE(agents.data(faults, Qt::DisplayRole).toInt(), 2);
}

// Two samples a second apart give each device's rates; loopback is no rail;
// a counter that went back (a device reset) counts from zero.
void ModelsTest::railsFromNicSamples() {
  NicRatesModel rails;
  QAbstractItemModelTester tester(&rails, QAbstractItemModelTester::FailureReportingMode::QtTest);
  using Sample = ringmaster::agent::events::NicSample;
  rails.add("node2:29600",
            Sample{1'000'000,
                   {{"lo", 0, 0, 0, false}, {"rdmap79s0:1", 0, 0, 100000, true}, {"eth0", 1000, 1000, 100000, false}}});
  QCOMPARE(rails.rowCount(), 2);
  QCOMPARE(rails.rate("node2:29600", "eth0").first, -1.0);
  rails.add("node2:29600", Sample{2'000'000,
                                  {{"rdmap79s0:1", 12'500'000'000, 0, 100000, true},
                                   {"eth0", 500, 1000 + 125'000'000, 100000, false}}});
  QCOMPARE(rails.rate("node2:29600", "rdmap79s0:1").first, 100.0);  // 12.5 GB in 1 s: the rail full
  QCOMPARE(rails.rate("node2:29600", "rdmap79s0:1").second, 0.0);
  QCOMPARE(rails.rate("node2:29600", "eth0").first, 500 * 8 / 1e9);  // reset: from zero
  QCOMPARE(rails.rate("node2:29600", "eth0").second, 1.0);
  // Rows by agent, then device: eth0, then the RDMA port.
  QCOMPARE(rails.index(1, NicRatesModel::device_column).data().toString(), QString("rdmap79s0:1 (RDMA)"));
  QCOMPARE(rails.index(1, NicRatesModel::share_column).data().toString(), QString("100.0 %"));
  rails.add("node1:29600", Sample{1'000'000, {{"eth0", 0, 0, 25000, false}}});
  QCOMPARE(rails.rowCount(), 3);
  QCOMPARE(rails.index(0, NicRatesModel::agent_column).data().toString(), QString("node1:29600"));  // sorted
  rails.remove("node2:29600");
  QCOMPARE(rails.rowCount(), 1);
}

// Per NIC: what the channels through it sent out of and received into the
// node, over the node's ranks (rank 0 leaves by eth0, rank 1 enters by
// it; rank 2, on another node, by its own eth0), held in the 60 s window
// however long the stream: 5 minutes of samples keep at most a window of
// points.
void ModelsTest::perNicSeriesAddUpTheChannelsThroughEachNic() {
  BandwidthSeries series;
  using Sample = ringmaster::agent::events::Sample;
  std::uint64_t bytes = 0;
  for (int tick = 0; tick <= 3000; ++tick) {
    const long long t_us = 1'000'000 + 100'000LL * tick;
    bytes += 100'000'000;  // 1 GB/s each way
    series.add_sample(0, Sample{t_us, {{0, bytes, bytes, 0, 0, "eth0", ""}, {1, bytes, bytes, 0, 0, "", ""}}, {}, 0, 0},
                      0);
    series.add_sample(1, Sample{t_us, {{0, bytes, bytes, 0, 0, "", "eth0"}, {1, bytes, bytes, 0, 0, "", ""}}, {}, 0, 0},
                      0);
    series.add_sample(2, Sample{t_us, {{0, bytes, bytes, 0, 0, "eth0", "eth0"}}, {}, 0, 0}, 1);
  }
  const std::vector<NicKey> nics = series.nics();
  QCOMPARE(nics.size(), std::size_t{2});
  QCOMPARE(nics[0].device, QString("eth0"));
  QCOMPARE(nics[0].node, 0);
  QCOMPARE(nics[1].node, 1);
  // Node 0's eth0: rank 0's sends and rank 1's receives, 2 GB/s; node 1's:
  // rank 2's both ways, 2 GB/s. Channel 1 stays on the node: not counted.
  QVERIFY2(std::abs(series.nic_recent_gbs(nics[0]) - 2.0) < 0.01,
           qPrintable(QString::number(series.nic_recent_gbs(nics[0]))));
  QVERIFY(std::abs(series.nic_recent_gbs(nics[1]) - 2.0) < 0.01);
  const auto points = series.nic_points(nics[0], 1'000'000);
  QVERIFY2(points.size() <= 602, qPrintable(QString("%1 points kept").arg(points.size())));
  QVERIFY(points.size() >= 590);
  QCOMPARE(series.nic_recent_gbs(NicKey{0, "eth1"}), 0.0);
}

// A run of 2,048 ranks sampling at 10 Hz for 3 s: the messages kept for
// the history are thinned per rank (a sample about every second, so the
// window's 61 s stay within 120,000 samples), where every sample was kept
// whole before (61,440 here; 1.25 million a minute, 4.4 GB). A run
// rebuilt from what was kept reads the same rates.
void ModelsTest::thousandsOfRanksKeepAFewSamplesEachForTheHistory() {
  constexpr int kRanks = 2048;
  RunState run;
  run.begin("big", kRanks, 256);
  std::uint64_t bytes = 0;
  for (int tick = 0; tick <= 30; ++tick) {
    const long long t_us = 1'000'000 + 100'000LL * tick;
    bytes += 100'000'000;  // 1 GB/s a channel
    for (int r = 0; r < kRanks; ++r) {
      nlohmann::json channels = nlohmann::json::array();
      for (int c = 0; c < 4; ++c)
        channels.push_back({{"channel", c}, {"bytes_sent", bytes}, {"bytes_received", bytes}});
      run.apply(agent_message("a", {{"type", "event"},
                                    {"run_id", "big"},
                                    {"rank", r},
                                    {"event", {{"type", "sample"}, {"t_us", t_us}, {"channels", channels}}}}));
    }
  }
  QCOMPARE(run.samples(), std::size_t{kRanks * 31});
  const auto kept = run.messages();
  QVERIFY2(kept.size() <= std::size_t{kRanks * 4}, qPrintable(QString("%1 samples kept").arg(kept.size())));
  QVERIFY(kept.size() >= std::size_t{kRanks * 2});
  RunState again;
  again.begin("big", kRanks, 256);
  for (const auto& m : kept)
    again.apply(m);
  const auto points = again.bandwidth().read()->points(kRanks - 1, 3, 100);
  QVERIFY(!points.isEmpty());
  for (const auto& p : points)
    QVERIFY2(std::abs(p.y() - 1.0) < 0.01, qPrintable(QString::number(p.y())));
}

// 2,048 ranks on 256 agents of 8: the timeline shows a row per node, each
// stage spanning its ranks; the node of a failed rank is red, a node some
// of whose ranks have not reached a stage is marked partial; opening a
// node adds its ranks' rows under it. Up to kFlatRanks ranks, a row each.
void ModelsTest::aTimelineOfThousandsOfRanksGroupsThemByNode() {
  namespace ev = ringmaster::agent::events;
  const int world = 2048;
  const std::vector<int> placement = ranks_in_nodes(world, 8);
  RunState run;
  // No model tester here: it would walk 20,480 cells on each of 14,000 changes.
  run.begin("big", world, 256, placement);
  std::vector<QString> addresses;
  for (int a = 0; a < 256; ++a)
    addresses.push_back(QString("10.0.%1.%2:7070").arg(a / 250).arg(a % 250 + 1));
  run.set_agents(addresses, {});
  const int ring = static_cast<int>(stage_names().indexOf("BOOTSTRAP_RING"));
  for (int r = 0; r < world; ++r) {
    for (int s = 0; s <= ring; ++s) {
      if (s == ring && r == 100) continue;  // rank 100 never got there
      ev::StageEnded e;
      e.stage = static_cast<ringmaster::Stage>(s);
      e.begin_us = 1'000'000 + s * 10'000 + r;
      e.duration_ms = r == 45 && s == ring ? 30.0 : 5.0;  // rank 45 ends the ring last on its node
      e.ok = true;
      run.timeline.add_stage(r, e);
    }
  }
  ev::StageFailed failed;
  failed.stage = static_cast<ringmaster::Stage>(ring);
  failed.summary = "connect to rank 44 refused";
  run.timeline.add_failure(43, failed);

  QCOMPARE(run.timeline.nodes(), 256);
  QCOMPARE(run.timeline.node_of(43), 5);
  QCOMPARE(run.timeline.ranks_of(5), (std::vector<int>{40, 41, 42, 43, 44, 45, 46, 47}));
  QCOMPARE(run.timeline.node_name(5), QString("agent 5"));
  QCOMPARE(run.timeline.node_title(5), QString("agent 5 (10.0.0.6:7070), 8 ranks"));
  const auto five = run.timeline.node_cell(5, ring);
  QVERIFY(five.seen && !five.ok);
  QCOMPARE(five.failed_rank, 43);
  QCOMPARE(five.last_rank, 45);
  QCOMPARE(five.reached, 8);
  const auto twelve = run.timeline.node_cell(12, ring);
  QCOMPARE(twelve.reached, 7);
  QCOMPARE(twelve.ranks, 8);
  QVERIFY(twelve.ok);
  const QString summary = run.timeline.node_summary(5, ring);
  QVERIFY2(summary.contains("FAILED on rank(s) 43") && summary.contains("last to end: rank 45") &&
               summary.contains("connect to rank 44 refused"),
           qPrintable(summary));
  QVERIFY2(run.timeline.node_summary(12, ring).contains("not reached by rank(s) 100"),
           qPrintable(run.timeline.node_summary(12, ring)));

  // A row per node; the failed and the partial stage marked as such.
  const auto rows = timeline_rows(run.timeline);
  QCOMPARE(rows.size(), std::size_t(256));
  QVERIFY(std::all_of(rows.begin(), rows.end(), [](const TimelineRow& r) { return r.summary(); }));
  const auto segments = layout_timeline(run.timeline, QRectF(0, 0, 1000, 256 * 16));
  QCOMPARE(segments.size(), std::size_t(256 * (ring + 1)));
  for (const auto& s : segments) {
    if (s.stage != ring) continue;
    QCOMPARE(s.failed, s.node == 5);
    QCOMPARE(s.partial, s.node == 12);
    QCOMPARE(s.rank, -1);
  }
  // Node 5 opened: its eight ranks follow it.
  std::vector<bool> open(256, false);
  open[5] = true;
  const auto drilled = timeline_rows(run.timeline, open);
  QCOMPARE(drilled.size(), std::size_t(264));
  QCOMPARE(drilled[5], (TimelineRow{5, -1}));
  for (int i = 0; i < 8; ++i)
    QCOMPARE(drilled[static_cast<std::size_t>(6 + i)], (TimelineRow{5, 40 + i}));
  QCOMPARE(drilled[14], (TimelineRow{6, -1}));
  int failed_rows = 0;
  for (const auto& s : layout_timeline(run.timeline, QRectF(0, 0, 1000, 264 * 16), drilled))
    failed_rows += s.failed ? 1 : 0;
  QCOMPARE(failed_rows, 2);  // node 5's row and rank 43's

  // No placement: blocks of eight ranks; few ranks: a row each.
  TimelineModel unplaced;
  unplaced.reset(100);
  QCOMPARE(unplaced.nodes(), 13);
  QCOMPARE(unplaced.node_name(12), QString("ranks 96-99"));
  TimelineModel small;
  small.reset(kFlatRanks, std::vector<int>(kFlatRanks, 0));
  const auto flat = timeline_rows(small);
  QCOMPARE(flat.size(), std::size_t(kFlatRanks));
  QCOMPARE(flat.back(), (TimelineRow{0, kFlatRanks - 1}));
}

// 2,048 ranks x 4 channels at 1 GB/s a channel, two faster, one that
// stopped: the run's total adds every channel up (8,198 GB/s), and the
// busiest are the two fast ones, then the slowest-numbered of the rest;
// the one that stopped is not among them.
void ModelsTest::theRunsTotalAndItsBusiestChannels() {
  namespace ev = ringmaster::agent::events;
  const int world = 2048, channels = 4;
  BandwidthSeries series;
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(world * channels), 0);
  auto gbs = [](int rank, int channel) {
    if (rank == 1500 && channel == 2) return 5.0;
    if (rank == 7 && channel == 0) return 3.0;
    if (rank == 9 && channel == 1) return 10.0;  // until it stops
    return 1.0;
  };
  for (int tick = 0; tick <= 50; ++tick) {  // 5 s at 10 Hz
    for (int r = 0; r < world; ++r) {
      ev::Sample sample;
      sample.t_us = 1'000'000 + tick * 100'000 + r % 7;  // the ranks' clocks differ by a few us
      for (int c = 0; c < channels; ++c) {
        auto& b = bytes[static_cast<std::size_t>(r * channels + c)];
        if (tick > 0 && !(r == 9 && c == 1 && tick > 20)) b += static_cast<std::uint64_t>(gbs(r, c) * 1e8);
        sample.channels.push_back({c, b, 0, 0, 0, {}, {}});
      }
      series.add_sample(r, sample);
    }
  }
  QCOMPARE(series.channels_seen(), world * channels);
  const auto top = series.top_channels(8);
  QCOMPARE(top.size(), std::size_t(8));
  QCOMPARE(std::make_pair(top[0].rank, top[0].channel), std::make_pair(1500, 2));
  QCOMPARE(std::make_pair(top[1].rank, top[1].channel), std::make_pair(7, 0));
  QVERIFY(std::abs(top[0].gbs - 5.0) < 0.01);
  QCOMPARE(std::make_pair(top[2].rank, top[2].channel), std::make_pair(0, 0));
  for (const auto& t : top)
    QVERIFY2(!(t.rank == 9 && t.channel == 1), "a channel that stopped sending is among the busiest");
  // Whole buckets after rank 9's channel 1 stopped (2 s): every other
  // channel's rate, summed.
  const auto total = series.run_total();
  QVERIFY(total.size() >= 8);
  const double expected = (world * channels - 3) * 1.0 + 5.0 + 3.0;
  int checked = 0;
  for (const auto& p : total) {
    if (p.x() <= 2.5 || p.x() > 4.5) continue;
    QVERIFY2(std::abs(p.y() - expected) < 0.01 * expected,
             qPrintable(QString("%1 GB/s at %2 s, expected %3").arg(p.y()).arg(p.x()).arg(expected)));
    ++checked;
  }
  QVERIFY(checked >= 3);
  QVERIFY2(total.back().x() <= series.latest_s(), "the bucket still filling is drawn");
}

// A sample is read where it arrives and crosses to the GUI thread as its
// event and its compact text, not as a JSON tree that thread would free
// (2,048 of them a tick cost it more than applying them); every other
// message keeps its body. The run keeps the text for its history.
void ModelsTest::aSampleCrossesAsTextItsTreeFreedWhereItArrived() {
  using nlohmann::json;
  const json sample = {
      {"type", "event"},
      {"run_id", "r"},
      {"rank", 1},
      {"event",
       {{"type", "sample"}, {"t_us", 5'000'000}, {"channels", json::array({{{"channel", 0}, {"bytes_sent", 100}}})}}}};
  const AgentMessage m = agent_message("a:1", sample);
  QVERIFY(m.event);
  QVERIFY(!m.body);
  QVERIFY(m.text);
  QCOMPARE(m.json(), sample);
  QVERIFY(!m.empty());
  const json stage = stage_event("r", 1, "STORE_CONNECT");
  const AgentMessage s = agent_message("a:1", stage);
  QVERIFY(s.body && !s.text);
  QCOMPARE(s.json(), stage);
  RunState run;
  run.begin("r", 2, 1, {0, 0});
  run.apply(m);
  run.apply(s);
  QCOMPARE(run.samples(), std::size_t(1));
  QVERIFY(run.timeline.cell(1, 1).seen);
  int samples = 0;
  for (const auto& kept : run.messages())
    samples += kept.json()["event"]["type"] == "sample" ? 1 : 0;
  QCOMPARE(samples, 1);
}

// A rank's samples are kept as rows of every channel's bytes: a channel
// that first shows in the fourth sample widens the rows and gets a rate
// from its second sample on; a sample that leaves a channel out counts
// it idle; the window keeps 60 s of rates.
void ModelsTest::aChannelThatJoinsLateGetsRatesFromItsSecondSample() {
  namespace ev = ringmaster::agent::events;
  BandwidthSeries series;
  for (int i = 0; i < 700; ++i) {  // 70 s at 10 Hz
    ev::Sample s;
    s.t_us = 1'000'000 + i * 100'000LL;
    s.channels.push_back({0, static_cast<std::uint64_t>(i) * 100'000'000ULL, 0, 0, 0, {}, {}});  // 1 GB/s
    if (i >= 3 && i != 10)
      s.channels.push_back({1, static_cast<std::uint64_t>(i - 3) * 50'000'000ULL, 0, 0, 0, {}, {}});  // 0.5 GB/s
    series.add_sample(0, s);
  }
  QCOMPARE(series.channels(0), 2);
  QCOMPARE(series.channels_seen(), 2);
  QCOMPARE(series.points_received(0, 0), std::size_t(699));
  QCOMPARE(series.points_received(0, 1), std::size_t(695));  // from the fifth sample, less the one left out
  const auto zero = series.points(0, 0, 100000);
  QCOMPARE(zero.size(), 601);  // the last 60 s, both ends in
  for (const auto& p : zero)
    QVERIFY(std::abs(p.y() - 1.0) < 1e-9);
  const auto one = series.points(0, 1, 100000);
  QCOMPARE(one.size(), 601);
  for (const auto& p : one)
    QVERIFY(std::abs(p.y() - 0.5) < 1e-9);
  QVERIFY(std::abs(series.recent_gbs(0, 1) - 0.5) < 1e-9);
  const auto total = series.total(0, 100000);
  QCOMPARE(total.size(), 601);
  QVERIFY(std::abs(total.back().y() - 1.5) < 1e-9);

  // Early on: channel 1 left out of the eleventh sample is idle there.
  BandwidthSeries early;
  for (int i = 0; i < 20; ++i) {
    ev::Sample s;
    s.t_us = 1'000'000 + i * 100'000LL;
    if (i != 10) s.channels.push_back({1, static_cast<std::uint64_t>(i) * 50'000'000ULL, 0, 0, 0, {}, {}});
    s.channels.push_back({0, static_cast<std::uint64_t>(i) * 100'000'000ULL, 0, 0, 0, {}, {}});
    early.add_sample(0, s);
  }
  const auto gap = early.points(0, 1, 1000);
  QCOMPARE(gap.size(), 19);
  QCOMPARE(gap[9].y(), 0.0);                    // 0.9 s -> 1.0 s: no bytes counted
  QVERIFY(std::abs(gap[10].y() - 1.0) < 1e-9);  // 1.0 s -> 1.1 s: both intervals' bytes
}

// The Tuner tab's simulated cluster: at each size the run measured, what
// the simulator predicts on 2 x p4d.24xlarge (as ringmaster-cli simulate
// does; 57.2 GB/s published at 1 GiB, docs/tuner.md), beside the busbw
// measured; before any run, 8 B to 1 GiB; an unknown instance named.
void ModelsTest::aSimulatedClusterBesideTheRun() {
  namespace ev = ringmaster::agent::events;
  ResultsModel results;
  SimulationModel simulation;
  QAbstractItemModelTester tester(&simulation, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QString error;
  QVERIFY2(simulation.simulate("p4d.24xlarge", 2, results, &error), qPrintable(error));
  QCOMPARE(simulation.rowCount(), 14);  // 8 B .. 1 GiB by 4
  QCOMPARE(simulation.index(0, 0).data().toString(), QString("8"));
  QVERIFY(simulation.index(0, 1).data().toString().isEmpty());  // nothing measured
  for (const std::uint64_t bytes : {std::uint64_t{1} << 20, std::uint64_t{1} << 30}) {
    ev::Result r;
    r.collective = "all_reduce";
    r.dtype = "float";
    r.bytes = bytes;
    r.out_of_place.busbw = bytes == (1u << 20) ? 10.0 : 40.0;
    results.add(r);
  }
  QVERIFY2(simulation.simulate("p4d.24xlarge", 2, results, &error), qPrintable(error));
  QCOMPARE(simulation.rowCount(), 2);
  QCOMPARE(simulation.index(1, 0).data().toString(), QString("1073741824"));
  QCOMPARE(simulation.index(1, 1).data().toString(), QString("40.00"));
  const double busbw = simulation.index(1, 3).data().toString().toDouble();
  QVERIFY2(std::abs(busbw - 57.2) < 0.25 * 57.2, qPrintable(QString("%1 GB/s simulated").arg(busbw)));
  QCOMPARE(simulation.index(1, 4).data().toString(), QString("%1x").arg(busbw / 40.0, 0, 'f', 1));
  QVERIFY(!simulation.index(1, 5).data().toString().isEmpty());
  QVERIFY2(simulation.title().startsWith("2 x p4d.24xlarge (16 ranks"), qPrintable(simulation.title()));
  QVERIFY(simulation.title().endsWith("all_reduce float"));
  QVERIFY(!simulation.simulate("p9.huge", 2, results, &error));
  QVERIFY2(error.contains("p5.48xlarge"), qPrintable(error));
  QCOMPARE(simulation.rowCount(), 2);  // the last one stays
  QVERIFY(!simulation.simulate("p5.48xlarge", 0, results, &error));
  QVERIFY(SimulationModel::instances().contains("p5en.48xlarge"));
}

// Retries, repeated decisions, result rows, connection details and
// failures, each sent far more often than a run can show: every model and
// the history's log stay bounded, and what repeats is counted.
void ModelsTest::whatARunKeepsIsBoundedWhateverItSends() {
  namespace ev = ringmaster::agent::events;
  RunState run;
  // Only the small model under the tester: it checks the whole model at
  // every change, too slow for 20,000 rows.
  QAbstractItemModelTester decisions(&run.decisions, QAbstractItemModelTester::FailureReportingMode::QtTest);
  run.begin("flood", 4, 1);
  auto send = [&](int rank, ev::Event e) {
    ev::EventMessage m{"flood", rank, std::move(e), {}};
    nlohmann::json body = ev::to_json(m);
    body["type"] = "event";
    run.apply(agent_message("10.0.0.1:29600", std::move(body)));
  };
  // 2,000 progress lines of STORE_CONNECT from each of 4 ranks: one kept
  // per rank, the timeline shows the latest.
  for (int i = 0; i < 2'000; ++i) {
    ev::StageProgress p;
    p.stage = ringmaster::Stage::store_connect;
    p.rank = i % 4;
    p.outcome = "unanswered";
    p.attempts = i / 4 + 1;
    p.begin_us = 1'000;
    p.elapsed_ms = i;
    p.detail = "attempt " + std::to_string(p.attempts);
    send(i % 4, p);
  }
  QCOMPARE(run.log().size(), std::size_t(4));
  QCOMPARE(run.log().folded(), std::size_t(2'000 - 4));
  QCOMPARE(run.timeline.cell(3, 1).live_text, QString("attempt 500"));
  // 300 TRANSPORT_CONNECT events of rank 0: the first few and the one
  // that ends last kept; the cell's detail a bounded list with a count.
  for (int i = 0; i < 300; ++i) {
    ev::StageEnded s;
    s.stage = ringmaster::Stage::transport_connect;
    s.rank = 0;
    s.begin_us = 2'000 + i;
    s.duration_ms = 1 + i;
    s.detail = "connection " + std::to_string(i);
    send(0, s);
  }
  QCOMPARE(run.log().size(), std::size_t(4 + RunLog::kStagesKept + 1));
  const auto& cell = run.timeline.cell(0, static_cast<int>(ringmaster::Stage::transport_connect));
  QCOMPARE(cell.detail.count('\n'), TimelineModel::kDetailLines);
  QVERIFY2(cell.detail.endsWith(QString("(and %1 more)").arg(300 - TimelineModel::kDetailLines)),
           qPrintable(cell.detail.right(40)));
  QCOMPARE(cell.duration_ms, 300.299);  // from the first begin to the last end
  // The same decision reported 1,000 times for each of 3 sizes: 3 rows;
  // its Measured is Results' time for the size, not the first call's.
  for (int i = 0; i < 3'000; ++i)
    send(0, ev::Decision{"all_reduce", std::uint64_t{1024} << (i % 3), "Ring", "LL", 2, 43.0});
  QCOMPARE(run.decisions.rowCount(), 3);
  QCOMPARE(run.decisions.index(0, 5).data().toString(), QString("—"));
  QCOMPARE(run.decisions.index(0, 6).data().toString(), QString("43.0"));
  // More result rows than a table keeps: the latest shown, the average
  // over all of them.
  for (int i = 0; i < ResultsModel::kRows + 500; ++i) {
    ev::Result r;
    r.collective = "all_reduce";
    r.dtype = "float";
    r.redop = "sum";
    r.bytes = std::uint64_t{1024} << (i % 3);
    r.count = r.bytes / 4;
    r.out_of_place = {0.75, 1, i < ResultsModel::kRows ? 1.0 : 3.0, 0};
    send(0, r);
  }
  QVERIFY(run.results.rowCount() <= ResultsModel::kRows);
  QVERIFY(run.results.rowCount() >= ResultsModel::kRows * 9 / 10);
  QCOMPARE(run.results.rows_seen(), ResultsModel::kRows + 500LL);
  QCOMPARE(run.results.row(run.results.rowCount() - 1).out_of_place.busbw, 3.0);
  QCOMPARE(run.results.average_busbw(), (ResultsModel::kRows * 1.0 + 500 * 3.0) / (ResultsModel::kRows + 500));
  QCOMPARE(run.decisions.index(0, 5).data().toString(), QString("0.75"));
  QVERIFY(run.log().size() <= 4 + RunLog::kStagesKept + 1 + 3 + RunLog::kResultsKept);
  // Failures past the first kProblemsKept: counted in one line.
  for (int i = 0; i < 1'000; ++i) {
    ev::CollectiveError e;
    e.message = "peer lost " + std::to_string(i);
    send(i % 4, e);
  }
  QCOMPARE(run.problems().size(), RunState::kProblemsKept + 1);
  QVERIFY2(run.problems().last().startsWith("... and 800 more"), qPrintable(run.problems().last()));
  // What the history keeps reads back into a run that shows the same.
  RunState again;
  again.begin("flood", 4, 1);
  for (const auto& m : run.messages())
    again.apply(m);
  QCOMPARE(again.decisions.rowCount(), 3);
  QCOMPARE(again.timeline.cell(3, 1).live_text, QString("attempt 500"));
  QCOMPARE(again.timeline.cell(0, static_cast<int>(ringmaster::Stage::transport_connect)).duration_ms, 300.299);
}

namespace {

// Whether the axis-parallel segment a-b passes through the inside of r.
bool crosses(QPointF a, QPointF b, const QRectF& r) {
  if (std::abs(a.y() - b.y()) < 1e-9) {
    return a.y() > r.top() && a.y() < r.bottom() && std::max(a.x(), b.x()) > r.left() &&
           std::min(a.x(), b.x()) < r.right();
  }
  return a.x() > r.left() && a.x() < r.right() && std::max(a.y(), b.y()) > r.top() &&
         std::min(a.y(), b.y()) < r.bottom();
}

bool on_border(QPointF p, const QRectF& r) {
  return r.adjusted(-0.5, -0.5, 0.5, 0.5).contains(p) && !r.adjusted(0.5, 0.5, -0.5, -0.5).contains(p);
}

}  // namespace

// A node's drawing and the routes of a path over it, without a window: a
// p5's 8 GPUs and its PCIe switches laid out inside their parents; routes
// from GPU to GPU and down to the strip below the drawing run in straight
// segments across and down, from border to border, through no other
// device and no header, keeping the lane's distance.
void ModelsTest::topologyLayoutAndRoutesWithoutAWindow() {
  const auto p5 = ringmaster::topo::Topology::load_file(RINGMASTER_TOPOLOGY_DIR "/p5.48xl-topo.xml");
  QSizeF size;
  const auto boxes =
      layout_topology(ringmaster::agent::TopologyInfo::parse(nlohmann::json::parse(p5.to_json())), &size, {}, 1.6);
  const QRectF bounds(QPointF(0, 0), size);
  std::vector<int> gpus;
  std::vector<QRectF> obstacles;
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const auto& b = boxes[i];
    QVERIFY(bounds.adjusted(-0.5, -0.5, 0.5, 0.5).contains(b.rect));
    if (b.kind == "gpu") gpus.push_back(static_cast<int>(i));
    const QRectF label = label_rect(b, QFont());
    obstacles.push_back(is_container(b.kind) ? label : b.rect.united(label));
  }
  QCOMPARE(gpus.size(), std::size_t{8});
  const double lane = kTopologyGap / 2;
  BoxRouter router(obstacles, bounds, gpus, lane);
  auto check = [&](const QPolygonF& route, int from, int to) {
    QVERIFY(route.size() >= 2);
    QVERIFY(on_border(route.front(), obstacles[static_cast<std::size_t>(from)]));
    if (to >= 0) QVERIFY(on_border(route.back(), obstacles[static_cast<std::size_t>(to)]));
    for (int k = 0; k + 1 < route.size(); ++k) {
      const QPointF a = route[k], b = route[k + 1];
      QVERIFY2(std::abs(a.x() - b.x()) < 1e-9 || std::abs(a.y() - b.y()) < 1e-9, "across or down only");
      for (std::size_t o = 0; o < obstacles.size(); ++o) {
        if (static_cast<int>(o) == from || static_cast<int>(o) == to) continue;
        const QRectF keep_off = obstacles[o].adjusted(-lane + 0.5, -lane + 0.5, lane - 0.5, lane - 0.5);
        QVERIFY2(!crosses(a, b, keep_off),
                 qPrintable(QString("segment %1 of a route crosses %2").arg(k).arg(boxes[o].label)));
      }
    }
  };
  for (std::size_t g = 0; g + 1 < gpus.size(); ++g) {
    check(router.route(gpus[g], gpus[g + 1]), gpus[g], gpus[g + 1]);
    if (QTest::currentTestFailed()) return;
  }
  const QPolygonF out = router.route_to_strip(gpus.back(), false);
  check(out, gpus.back(), -1);
  QVERIFY(out.back().y() > size.height());
  const QPolygonF in = router.route_to_strip(gpus.front(), true);
  QVERIFY(in.front().y() > size.height());
  QVERIFY(on_border(in.back(), obstacles[static_cast<std::size_t>(gpus.front())]));
}

QTEST_MAIN(ModelsTest)
#include "models_test.moc"
