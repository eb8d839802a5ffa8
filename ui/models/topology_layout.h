// The geometry of an lstopo-like drawing of one node, apart from any
// widget (TopologyDrawing paints it): nested boxes for the machine,
// packages, host bridges and PCIe switches, with GPUs and NICs labelled by
// what they are, children wrapped into rows, a chain of PCIe switches with
// one branch as one box, and three or more alike neighbours collapsed
// into one group box. Also where each box's label goes, for painting and
// for keeping things off it.
#pragma once

#include <QFont>
#include <QFontMetricsF>
#include <QRectF>
#include <QSizeF>
#include <QString>
#include <set>
#include <vector>

#include "ringmaster/agent/requests.h"

namespace ringmaster::ui {

// The gap between neighbouring boxes, in layout units (one unit is one
// pixel at scale 1).
constexpr double kTopologyGap = 8;

struct TopologyBox {
  int node = -1;  // index in the topology's nodes; -1 for a summary box
  // machine, package, host_bridge, pci_switch, gpu, nic, nvswitch,
  // pci_device, cores, or group (alike devices collapsed into one box)
  QString kind;
  QString label;    // what the box says
  QString tooltip;  // the details: bus ids, links, the switches above
  QRectF rect;      // in layout units (one unit = one pixel at scale 1)
  int depth = 0;
  bool declared = false;
  // A group's devices (node indices), and the kind they share; for any
  // other box, empty.
  std::vector<int> members;
  QString member_kind;
};

// Boxes of a node's topology, parents before children. `size` gets
// the extent of the whole drawing; `expanded` holds the first member of
// each group to draw device by device; `aspect` is the width over height
// the drawing aims for (the view's).
std::vector<TopologyBox> layout_topology(const agent::TopologyInfo& topology, QSizeF* size = nullptr,
                                         const std::set<int>& expanded = {}, double aspect = 2.0);

// A container (machine, package, host bridge, PCIe switch, an opened
// group) says what it is on a header line at its top; a device in its
// middle.
bool is_container(const QString& kind);
// The font a box's label is drawn in, from the view's: bold for what
// matters most.
QFont label_font(const QFont& base, const QString& kind);
// Where, how and what a box's label says: a container on one line cut to
// its width, a device wrapped in its middle.
QRectF label_area(const TopologyBox& b);
int label_flags(const TopologyBox& b);
QString label_text(const TopologyBox& b, const QFontMetricsF& fm);
// Where the label's ink is, in layout units.
QRectF label_rect(const TopologyBox& b, const QFont& base);

}  // namespace ringmaster::ui
