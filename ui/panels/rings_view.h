// The rings of a run's channels drawn over its nodes: one box per agent
// with its ranks, one coloured closed path per channel through the ranks
// in ring order. Geometry apart from painting (layout_rings).
#pragma once

#include <QPointF>
#include <QRectF>
#include <QWidget>
#include <vector>

#include "models/console.h"

namespace ringmaster::ui {

struct RingsLayout {
  std::vector<QRectF> nodes;                        // per agent
  std::vector<QPointF> ranks;                       // per rank (centre of its dot)
  std::vector<std::vector<QPointF>> channel_paths;  // per channel: closed path through the ranks
};
RingsLayout layout_rings(const std::vector<int>& placement, const std::vector<std::vector<int>>& rings,
                         const QRectF& area);

class RingsView : public QWidget {
  Q_OBJECT
 public:
  explicit RingsView(const RunState& run, QWidget* parent = nullptr);

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  const RunState& run_;
};

}  // namespace ringmaster::ui
