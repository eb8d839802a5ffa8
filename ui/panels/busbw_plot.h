// Bus bandwidth against size for the run's results, nccl-tests' busbw
// out of place and in place, size on a log axis (a label every 16x). Redrawn when a row
// arrives.
#pragma once

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
  // Redraws from the model; returns the points drawn.
  int refresh();

 protected:
  // Follows the palette: QApplication::setPalette reaches every widget.
  void changeEvent(QEvent* event) override;

 private:
  const ResultsModel& results_;
  QChart* chart_ = nullptr;
  QLineSeries* out_of_place_ = nullptr;
  QLineSeries* in_place_ = nullptr;
  QLogValueAxis* x_ = nullptr;
  QValueAxis* y_ = nullptr;
};

}  // namespace ringmaster::ui
