// An lstopo-like drawing of one node that fits its view at any node size:
// nested boxes for the machine, packages, host bridges and PCIe switches,
// with GPUs and NICs labelled by what they are (GPU index and model, NIC
// and network device with its speed), coloured by kind, and the NUMA node
// and CPUs of each package on its header. Large nodes stay legible the
// way lstopo keeps wide machines legible: children wrap into rows, a chain
// of PCIe switches with one branch is one box, a switch holding a single
// device is drawn as that device, and three or more alike neighbours (the
// NICs of one switch, NVSwitches) collapse into one box ("4 × NIC
// rdmap79s0…rdmap82s0") that a click or Enter expands.
//
// The view fits the drawing by default and never asks the window for more
// room; the wheel or +/- zoom about the pointer, a drag pans, 0 fits again.
// From the keyboard the arrows move between devices and Enter opens the
// device's row in the tree beside the drawing; a click does the same.
// Geometry is computed apart from painting, in ui/models (layout_topology,
// BoxRouter).
#pragma once

#include <QPolygonF>
#include <QRectF>
#include <QString>
#include <QWidget>
#include <map>
#include <set>
#include <vector>

#include "models/device_paths.h"
#include "models/topology_layout.h"

QT_BEGIN_NAMESPACE
class QPainter;
QT_END_NAMESPACE

namespace ringmaster::ui {

class TopologyDrawing : public QWidget {
  Q_OBJECT
 public:
  explicit TopologyDrawing(QWidget* parent = nullptr);
  void set_topology(const agent::TopologyInfo& topology);
  const std::vector<TopologyBox>& boxes() const { return boxes_; }
  // The device under the keyboard cursor: an index into boxes(), -1 none.
  int selected_box() const { return selected_; }
  // Where box `index` is drawn, in the widget's pixels.
  QRectF on_screen(int index) const { return to_widget().mapRect(boxes_.at(static_cast<std::size_t>(index)).rect); }
  // 1 fits the drawing to the view; more magnifies.
  double zoom() const { return zoom_; }
  void set_zoom(double zoom, QPointF about);
  // Collapses or expands the group of box `index`.
  void toggle_group(int index);
  // A ring's or tree's way through the node, drawn over it: numbered
  // arrows between the GPUs and NICs it goes through, and to and from a
  // strip below the drawing where it goes to or comes from another node.
  // The arrows are routed around every box and header (BoxRouter), so no
  // label is ever covered, and the numbers sit where no label is. An
  // empty path draws nothing (its why_empty, if any, is said in the strip).
  void set_path(DevicePath path);
  const DevicePath& path() const { return path_; }
  // Per hop of the path, its route in drawing units (empty: not drawn).
  const std::vector<QPolygonF>& routes() const { return routes_; }
  // Where the drawing is shown, in the widget's pixels: above the strip
  // where paths meet other nodes and the legend.
  QRectF drawing_area() const;
  // Where box `index`'s label is drawn, in the widget's pixels.
  QRectF label_on_screen(int index) const {
    return to_widget().mapRect(label_rects_.at(static_cast<std::size_t>(index)));
  }
  // The box a path's end is drawn at (an index into boxes()), -1 for an
  // end on another node or a device the drawing does not have.
  int box_of(const DevicePath::End& end) const;
  QSize sizeHint() const override { return {480, 320}; }
  QSize minimumSizeHint() const override { return {160, 120}; }

 signals:
  // A device was opened (Enter or a click): its index in the topology's nodes.
  void device_activated(int node);

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void keyPressEvent(QKeyEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  bool event(QEvent* event) override;  // tooltips

 private:
  // Where the drawing's units land in the widget.
  QTransform to_widget() const;
  int box_at(QPointF widget_point) const;
  void select(int box);
  void relayout();
  void paint_path(QPainter& p);
  // Routes the path's hops around the boxes (routes_).
  void route_path();
  // Rebuilds device_boxes_ from the boxes.
  void index_devices();

  agent::TopologyInfo topology_;
  DevicePath path_;
  // (is a GPU, its number) -> the box it is drawn in.
  std::map<std::pair<bool, int>, int> device_boxes_;
  std::set<int> expanded_;
  int selected_ = -1;
  std::vector<TopologyBox> boxes_;
  std::vector<QRectF> label_rects_;  // per box, in drawing units
  std::vector<QPolygonF> routes_;    // per hop of path_
  QSizeF size_;
  double laid_out_for_ = 0;  // the aspect of the last layout
  double zoom_ = 1;
  QPointF pan_;  // widget pixels the drawing is moved by
  QPointF pressed_at_;
  QPointF pan_at_press_;
  bool dragging_ = false;
};

}  // namespace ringmaster::ui
