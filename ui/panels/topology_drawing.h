// An lstopo-like drawing of one node: nested boxes for the machine,
// packages, host bridges and PCI switches, with GPUs, NICs (and their
// network devices) and other PCI devices as leaves, cores summarised per
// package. Geometry is computed apart from painting (layout_topology).
// From the keyboard the arrows move between devices and Enter opens the
// device's row in the tree beside the drawing; a click does the same.
#pragma once

#include <QRectF>
#include <QString>
#include <QWidget>
#include <nlohmann/json.hpp>
#include <vector>

namespace ringmaster::ui {

struct TopologyBox {
  int node = -1;  // index in the topology's nodes; -1 for a summary box
  QString kind;   // machine, package, host_bridge, pci_switch, gpu, nic, pci_device, cores, ...
  QString label;  // what the box says
  QRectF rect;    // in layout units (one unit = one pixel at scale 1)
  int depth = 0;
  bool declared = false;
};

// Boxes of Topology::to_json() output, parents before children. `size` gets
// the extent of the whole drawing.
std::vector<TopologyBox> layout_topology(const nlohmann::json& topology, QSizeF* size = nullptr);

class TopologyDrawing : public QWidget {
  Q_OBJECT
 public:
  explicit TopologyDrawing(QWidget* parent = nullptr);
  void set_topology(const nlohmann::json& topology);
  const std::vector<TopologyBox>& boxes() const { return boxes_; }
  // The device under the keyboard cursor: an index into boxes(), -1 none.
  int selected_box() const { return selected_; }

 signals:
  // A device was opened (Enter or a click): its index in the topology's nodes.
  void device_activated(int node);

 protected:
  void paintEvent(QPaintEvent*) override;
  void keyPressEvent(QKeyEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  // Where the drawing's units land in the widget.
  QTransform to_widget() const;
  void select(int box);

  int selected_ = -1;
  std::vector<TopologyBox> boxes_;
  QSizeF size_;
  bool declared_ = false;
};

}  // namespace ringmaster::ui
