// Live bandwidth: of one rank, one series per channel plus the rank's
// total (or one per peer it receives from); of the run, its total send
// rate (on its own axis) with the kTopChannels busiest channels of all
// ranks, one series per NIC its channels went through (the kTopNics
// busiest), or the rails as bars (one per NIC of every node, idle ones
// too). A rolling 60 s window, redrawn at 10 Hz with one replace() per
// series, decimated to the plot's width. A run of more than kFlatRanks
// ranks opens on its total, and draws its lines without antialiasing.
#pragma once

#include <QComboBox>
#include <QTimer>
#include <QWidget>

#include "models/bandwidth_series.h"
#include "models/run_state.h"

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QStackedWidget;
class QLineSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace ringmaster::ui {

class RailsView;

class BandwidthChart : public QWidget {
  Q_OBJECT
 public:
  // What the chart shows.
  enum class Mode { per_channel, per_peer, per_nic, rails, run_total };
  static constexpr int kTopChannels = 8;
  static constexpr int kTopNics = 16;
  // `run` (may be null) gives the rails view its nodes and their NICs.
  explicit BandwidthChart(const RunSamples& samples, const RunState* run = nullptr, QWidget* parent = nullptr);
  // One redraw (the 10 Hz timer calls it); returns the points drawn.
  int refresh();
  int shown_rank() const;
  // Series per peer this rank receives from, instead of per channel.
  bool per_peer() const;
  void set_per_peer(bool on);
  Mode mode() const;
  void set_mode(Mode mode);
  // The names of the series drawn now (the legend).
  QStringList series_names() const;
  RailsView* rails() const { return rails_; }

 protected:
  // Follows the palette: QApplication::setPalette reaches every widget.
  void changeEvent(QEvent* event) override;

 private:
  // The kTopNics busiest NICs of the run (all when there are no more), in order.
  std::vector<NicKey> busiest_nics(const BandwidthSeries& series) const;
  // shown_top_: the run's busiest channels, one line each.
  void choose_top_channels(const BandwidthSeries& series);
  // Line series until there are `count` (they are reused, never removed).
  void add_lines(int count);
  void add_total();

  const RunSamples& samples_;
  QComboBox* rank_ = nullptr;
  QComboBox* mode_ = nullptr;
  QChart* chart_ = nullptr;
  QChartView* view_ = nullptr;
  RailsView* rails_ = nullptr;
  QStackedWidget* stack_ = nullptr;
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
  QValueAxis* y_run_ = nullptr;      // the run's total, right
  std::vector<QLineSeries*> lines_;  // channels, then the total last
  QLineSeries* total_ = nullptr;
  std::vector<std::pair<int, int>> shown_top_;  // (rank, channel) of each line, in run_total
  double top_chosen_s_ = 0;                     // when shown_top_ was chosen (the series' clock)
  QTimer timer_;
};

}  // namespace ringmaster::ui
