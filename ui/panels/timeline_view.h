// The rendezvous timeline: rows are ranks, segments are stages, a failed
// stage red; clicking a segment shows everything known about it.
#pragma once

#include <QWidget>

#include "models/run_models.h"

namespace ringmaster::ui {

// The fill of a stage's segments and legend entry.
QColor stage_color(int stage);

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(const TimelineModel& model, QWidget* parent = nullptr);
  QSize sizeHint() const override { return {800, 300}; }
  QRectF plot_area() const;

 signals:
  void segment_clicked(int rank, int stage);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  const TimelineModel& model_;
};

}  // namespace ringmaster::ui
