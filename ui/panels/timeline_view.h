// The rendezvous timeline: rows are ranks, segments are stages, a failed
// stage red; clicking a segment shows everything known about it. Runs of
// more than kFlatRanks ranks show a row per node, each stage spanning its
// ranks (hatched while some have not reached it); clicking a node's name
// or pressing Enter on it drills into its ranks. From the keyboard: the
// arrows move a cursor over the segments (left and right within a row,
// up and down across rows), Enter opens the detail (and a node), Minus
// or Backspace closes the node again.
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
  // The legend under the plot: the run's total first ("init 812.3 ms"),
  // then a swatch and name per stage, wrapped onto as many lines as the
  // width needs, so none is cut.
  struct LegendItem {
    int stage = -1;  // -1: the total
    QString text;
    QRectF rect;  // swatch and text
  };
  std::vector<LegendItem> legend() const;
  int legend_height() const;
  // The rows drawn now, top to bottom, and the segments in them.
  std::vector<TimelineRow> rows() const;
  std::vector<TimelineSegment> segments() const;
  // The segment under the keyboard cursor (-1, -1 before any run); on a
  // node's row the rank is -1.
  int current_rank() const { return current_.rank; }
  int current_node() const { return current_.node; }
  int current_stage() const { return current_stage_; }
  bool expanded(int node) const;
  void set_expanded(int node, bool open);

 signals:
  void segment_clicked(int rank, int stage);
  void node_segment_clicked(int node, int stage);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void focusInEvent(QFocusEvent* event) override;

 private:
  // Puts the cursor on (row, stage), says so to assistive technology and
  // scrolls it into view.
  void set_current(const TimelineRow& row, int stage);
  // A node's rows take at least this many pixels each, in a taller widget
  // that a scroll area around it scrolls.
  void fit_height();
  bool grouped() const { return model_.ranks() > kFlatRanks; }
  int label_width() const;

  const TimelineModel& model_;
  std::vector<bool> expanded_;  // per node
  TimelineRow current_;
  int current_stage_ = -1;
};

}  // namespace ringmaster::ui
