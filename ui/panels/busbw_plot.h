// Bus bandwidth against size for the run's results, nccl-tests' busbw
// out of place and in place, size on a log axis (a label every 16x): a
// point per size, its latest row's. A row that arrives updates its point,
// and the series are redrawn at most once per event-loop pass: rebuilt
// over every row for each new one, 30,000 rows cost 75 s of GUI time.
#pragma once

#include <map>

#include <QWidget>

#include "models/run_state.h"

QT_BEGIN_NAMESPACE
class QChart;
class QLineSeries;
class QLogValueAxis;
class QValueAxis;
QT_END_NAMESPACE

namespace ringmaster::ui {

class BusbwPlot : public QWidget {
  Q_OBJECT
 public:
  explicit BusbwPlot(const ResultsModel& results, QWidget* parent = nullptr);
  // Redraws the points taken so far (the rows that arrived are taken as
  // they come); returns how many are drawn.
  int refresh();

 protected:
  // Follows the palette: QApplication::setPalette reaches every widget.
  void changeEvent(QEvent* event) override;

 private:
  void take_rows(int first, int last);
  void retake();  // every row again: the model was reset
  const ResultsModel& results_;
  std::map<double, double> out_points_, in_points_;  // size -> busbw
  bool redraw_queued_ = false;
  QChart* chart_ = nullptr;
  QLineSeries* out_of_place_ = nullptr;
  QLineSeries* in_place_ = nullptr;
  QLogValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
};

}  // namespace ringmaster::ui
