// The rails: one bar per NIC of every node in the run, the bytes its
// channels sent and received over the last second, so an idle or slow
// rail stands out. A node's NICs come from its topology (or its
// interfaces); a NIC no channel went through shows "idle".
#pragma once

#include <QString>
#include <QWidget>
#include <vector>

#include "models/run_state.h"

namespace ringmaster::ui {

struct RailBar {
  int node = -1;  // agent index in the run
  QString device;
  double gbs = 0;     // sent + received, GB/s, over the last second
  bool used = false;  // some channel of the run went through it
};

// The bars in drawing order: node by node, the node's NICs in its
// topology's order, then any the samples named that it did not list.
std::vector<RailBar> rail_bars(const RunState& run);

class RailsView : public QWidget {
  Q_OBJECT
 public:
  explicit RailsView(const RunState& run, QWidget* parent = nullptr);
  const std::vector<RailBar>& bars() const { return bars_; }
  void refresh();
  QSize sizeHint() const override { return {480, 240}; }
  QSize minimumSizeHint() const override { return {160, 80}; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  const RunState& run_;
  std::vector<RailBar> bars_;
};

}  // namespace ringmaster::ui
