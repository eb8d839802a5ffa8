// The rendezvous timeline: rows are ranks, segments are stages, a failed
// stage red; clicking a segment shows everything known about it. From the
// keyboard: the arrows move a cursor over the segments (left and right
// within a rank, up and down across ranks), Enter opens the detail.
#pragma once

#include <QWidget>

#include "models/run_state.h"

namespace ringmaster::ui {

// The fill of a stage's segments and legend entry.
QColor stage_color(int stage);

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(const TimelineModel& model, QWidget* parent = nullptr);
  QSize sizeHint() const override { return {800, 300}; }
  QRectF plot_area() const;
  // The segment under the keyboard cursor (-1, -1 before any run).
  int current_rank() const { return current_rank_; }
  int current_stage() const { return current_stage_; }

 signals:
  void segment_clicked(int rank, int stage);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void focusInEvent(QFocusEvent* event) override;

 private:
  // Puts the cursor on (rank, stage) and says so to assistive technology.
  void set_current(int rank, int stage);

  const TimelineModel& model_;
  int current_rank_ = -1;
  int current_stage_ = -1;
};

}  // namespace ringmaster::ui
