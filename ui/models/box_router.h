// Routes between the boxes of a drawing that never cross what the drawing
// says: each route is a polyline of horizontal and vertical segments that
// keeps `clearance` away from every obstacle (the devices' boxes, the
// containers' header text), leaves and enters its boxes through ports on
// their sides, and prefers few bends and lanes no earlier route took, so
// that the hops of one path stay apart. A route may also run to or from
// a strip below the drawing, where a path leaves for another node.
//
// The search is Dijkstra over a sparse grid whose lines are the
// obstacles' edges pushed out by the clearance (the lanes between boxes)
// and the ports' coordinates; a grid segment is free when its middle lies
// outside every obstacle grown by the clearance, which is exact because
// every grown edge is itself a grid line.
#pragma once

#include <QPolygonF>
#include <QRectF>
#include <vector>

namespace ringmaster::ui {

class BoxRouter {
 public:
  // `obstacles` in drawing units; `bounds` the whole drawing; `ends` the
  // obstacles a route may start or end at (their ports become grid lines).
  BoxRouter(std::vector<QRectF> obstacles, const QRectF& bounds, const std::vector<int>& ends, double clearance);

  // From obstacle `from`'s border to obstacle `to`'s border; empty when no
  // route exists.
  QPolygonF route(int from, int to);
  // From obstacle `box` down to the strip below the drawing (or from the
  // strip up to it, when `inbound`); the strip end comes last (first).
  QPolygonF route_to_strip(int box, bool inbound);

  // The grid's size, for the record: lines across and down.
  std::size_t columns() const { return xs_.size(); }
  std::size_t rows() const { return ys_.size(); }

 private:
  struct Port {
    int node;        // grid index
    int outward;     // direction leaving the box: 0 right, 1 down, 2 left, 3 up
    QPointF border;  // where it touches the box
  };
  std::vector<Port> ports_of(int box) const;
  // Dijkstra from `sources` to the first state `is_target` accepts.
  QPolygonF search(const std::vector<Port>& sources, const std::vector<Port>& targets, bool to_strip);
  int node(std::size_t xi, std::size_t yi) const { return static_cast<int>(yi * xs_.size() + xi); }
  QPointF point(int n) const;
  // The grid neighbour of `n` in direction `dir`, -1 at the edge.
  int step(int n, int dir) const;
  // Whether the segment from `n` in direction `dir` is free, and its index.
  bool free_edge(int n, int dir) const;
  std::size_t edge_index(int n, int dir) const;

  std::vector<QRectF> obstacles_;
  double clearance_;
  std::vector<double> xs_, ys_;
  std::vector<char> blocked_node_;
  std::vector<char> blocked_right_;          // the segment from a node to its right neighbour
  std::vector<char> blocked_down_;           // ... to the node below
  std::vector<int> used_right_, used_down_;  // how many routes took each segment
  std::vector<int> used_port_;               // how many routes used each node as a port
  std::size_t strip_row_ = 0;
};

}  // namespace ringmaster::ui
