// The rings of a run's channels drawn over its nodes: one box per agent
// with its ranks, one coloured closed path per channel through the ranks
// in ring order; below them the double binary trees of all_reduce, one
// style per tree, parent to child with arrowheads. Geometry apart from painting (layout_rings). From the
// keyboard: the arrows pick a channel (the others fade), Enter shows its
// ring in order with what carries each hop.
#pragma once

#include <QPointF>
#include <QPolygonF>
#include <QRectF>
#include <QWidget>
#include <vector>

#include "models/console.h"

namespace ringmaster::ui {

struct RingsLayout {
  std::vector<QRectF> nodes;                        // per agent
  std::vector<QPointF> ranks;                       // per rank (centre of its dot)
  std::vector<std::vector<QPointF>> channel_paths;  // per channel: closed path through the ranks
  // A tree's edge, parent to child: a curve from the rim of the parent's
  // dot to an arrowhead at the rim of the child's. The two trees run on
  // either side of a shared edge (their curves bend apart).
  struct TreeEdge {
    QPointF from, control, to;  // a quadratic curve; `to` is the arrowhead's tip
    QPolygonF head;
  };
  // Per tree: its edges (trees are drawn in their own copy of the agents,
  // below the rings).
  std::vector<std::vector<TreeEdge>> tree_edges;
  std::vector<QPointF> tree_ranks;  // per rank, in the trees' copy
  std::vector<QRectF> tree_nodes;   // per agent, in the trees' copy
};
// With `trees` (per tree, each rank's parent), the rings take the top half
// of `area` and the trees the bottom half.
RingsLayout layout_rings(const std::vector<int>& placement, const std::vector<std::vector<int>>& rings,
                         const QRectF& area, const std::vector<std::vector<int>>& trees = {});

class RingsView : public QWidget {
  Q_OBJECT
 public:
  explicit RingsView(const RunState& run, QWidget* parent = nullptr);
  // The channel picked with the arrows; -1: all drawn alike.
  int selected_channel() const { return selected_; }
  // "channel 1: 0 → 2 (SHM) → 3 (TCP) → 1 (SHM) → 0 (TCP)".
  QString channel_detail(int channel) const;
  // The detail shown under the drawing (after Enter), empty when none.
  QString shown_detail() const { return shown_detail_; }
  // What is drawn now, in the widget's pixels.
  RingsLayout current_layout() const;
  // Tree `t`'s colour (tree 0 solid, tree 1 dashed).
  static QColor tree_colour(int t);

 signals:
  void channel_activated(int channel);

 protected:
  void paintEvent(QPaintEvent*) override;
  void keyPressEvent(QKeyEvent* event) override;

 private:
  void select(int channel);

  const RunState& run_;
  int selected_ = -1;
  QString shown_detail_;
};

}  // namespace ringmaster::ui
