// Live per-channel bandwidth of one rank: one series per channel plus the
// rank's total (or one per peer it receives from), a rolling 60 s window, redrawn at 10 Hz with one replace()
// per series, decimated to the plot's width.
#pragma once

#include <QComboBox>
#include <QTimer>
#include <QWidget>

#include "models/run_state.h"

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace ringmaster::ui {

class BandwidthChart : public QWidget {
  Q_OBJECT
 public:
  BandwidthChart(const BandwidthSeries& series, QWidget* parent = nullptr);
  // One redraw (the 10 Hz timer calls it); returns the points drawn.
  int refresh();
  int shown_rank() const;
  // Series per peer this rank receives from, instead of per channel.
  bool per_peer() const;
  void set_per_peer(bool on);

 protected:
  // Follows the palette: QApplication::setPalette reaches every widget.
  void changeEvent(QEvent* event) override;

 private:
  const BandwidthSeries& series_;
  QComboBox* rank_ = nullptr;
  QComboBox* mode_ = nullptr;
  QChart* chart_ = nullptr;
  QChartView* view_ = nullptr;
  QValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
  std::vector<QLineSeries*> lines_;  // channels, then the total last
  QLineSeries* total_ = nullptr;
  QTimer timer_;
};

}  // namespace ringmaster::ui
