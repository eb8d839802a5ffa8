#include "box_router.h"

#include <QLineF>
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace ringmaster::ui {

namespace {

constexpr double kBend = 24;           // a bend costs as much as this much length
constexpr double kReuse = 0.6;         // a segment an earlier route took costs this much more per route
constexpr double kPortReuse = 80;      // so does a port
constexpr double kSame = 0.25;         // coordinates closer than this are one grid line
constexpr int kDx[4] = {1, 0, -1, 0};  // right, down, left, up
constexpr int kDy[4] = {0, 1, 0, -1};

void sort_unique(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  std::vector<double> out;
  for (double x : v) {
    if (out.empty() || x - out.back() > kSame) out.push_back(x);
  }
  v = std::move(out);
}

// Indices of the grid lines strictly inside (lo, hi).
std::pair<std::size_t, std::size_t> inside(const std::vector<double>& lines, double lo, double hi) {
  const auto first = std::upper_bound(lines.begin(), lines.end(), lo);
  const auto last = std::lower_bound(lines.begin(), lines.end(), hi);
  return {static_cast<std::size_t>(first - lines.begin()),
          static_cast<std::size_t>(std::max(first, last) - lines.begin())};
}

std::size_t nearest(const std::vector<double>& lines, double v) {
  const auto it = std::lower_bound(lines.begin(), lines.end(), v - kSame);
  return static_cast<std::size_t>(it - lines.begin());
}

}  // namespace

BoxRouter::BoxRouter(std::vector<QRectF> obstacles, const QRectF& bounds, const std::vector<int>& ends,
                     double clearance)
    : obstacles_(std::move(obstacles)), clearance_(clearance) {
  const double c = clearance_;
  xs_ = {bounds.left() - c, bounds.right() + c};
  ys_ = {bounds.top() - c, bounds.bottom() + c};
  for (const QRectF& o : obstacles_) {
    xs_.insert(xs_.end(), {o.left() - c, o.right() + c});
    ys_.insert(ys_.end(), {o.top() - c, o.bottom() + c});
  }
  for (int e : ends) {
    if (e < 0 || e >= static_cast<int>(obstacles_.size())) continue;
    const QRectF& o = obstacles_[static_cast<std::size_t>(e)];
    for (double f : {0.25, 0.5, 0.75}) {
      xs_.push_back(o.left() + o.width() * f);
      ys_.push_back(o.top() + o.height() * f);
    }
  }
  sort_unique(xs_);
  sort_unique(ys_);
  strip_row_ = nearest(ys_, bounds.bottom() + c);
  const std::size_t n = xs_.size() * ys_.size();
  blocked_node_.assign(n, 0);
  blocked_right_.assign(n, 0);
  blocked_down_.assign(n, 0);
  used_right_.assign(n, 0);
  used_down_.assign(n, 0);
  used_port_.assign(n, 0);
  // An obstacle grown by a little less than the clearance: the lanes at
  // exactly the clearance stay open.
  const double grow = c - kSame;
  for (const QRectF& o : obstacles_) {
    const double l = o.left() - grow, r = o.right() + grow, t = o.top() - grow, b = o.bottom() + grow;
    const auto [x0, x1] = inside(xs_, l, r);
    const auto [y0, y1] = inside(ys_, t, b);
    for (std::size_t yi = y0; yi < y1; ++yi) {
      for (std::size_t xi = x0; xi < x1; ++xi)
        blocked_node_[static_cast<std::size_t>(node(xi, yi))] = 1;
    }
    // A segment is blocked when its middle is inside: every grown edge
    // is a grid line, so no segment is partly inside.
    for (std::size_t yi = y0; yi < y1; ++yi) {
      for (std::size_t xi = (x0 > 0 ? x0 - 1 : 0); xi + 1 < xs_.size() && xi < x1; ++xi) {
        const double mid = (xs_[xi] + xs_[xi + 1]) / 2;
        if (mid > l && mid < r) blocked_right_[static_cast<std::size_t>(node(xi, yi))] = 1;
      }
    }
    for (std::size_t xi = x0; xi < x1; ++xi) {
      for (std::size_t yi = (y0 > 0 ? y0 - 1 : 0); yi + 1 < ys_.size() && yi < y1; ++yi) {
        const double mid = (ys_[yi] + ys_[yi + 1]) / 2;
        if (mid > t && mid < b) blocked_down_[static_cast<std::size_t>(node(xi, yi))] = 1;
      }
    }
  }
}

QPointF BoxRouter::point(int n) const {
  const auto un = static_cast<std::size_t>(n);
  return {xs_[un % xs_.size()], ys_[un / xs_.size()]};
}

int BoxRouter::step(int n, int dir) const {
  const auto un = static_cast<std::size_t>(n);
  const auto xi = static_cast<long>(un % xs_.size()) + kDx[dir];
  const auto yi = static_cast<long>(un / xs_.size()) + kDy[dir];
  if (xi < 0 || yi < 0 || xi >= static_cast<long>(xs_.size()) || yi >= static_cast<long>(ys_.size())) return -1;
  return node(static_cast<std::size_t>(xi), static_cast<std::size_t>(yi));
}

std::size_t BoxRouter::edge_index(int n, int dir) const {
  // Left and up are the right and down segments of the neighbour.
  return static_cast<std::size_t>(dir >= 2 ? step(n, dir) : n);
}

bool BoxRouter::free_edge(int n, int dir) const {
  const int m = step(n, dir);
  if (m < 0 || blocked_node_[static_cast<std::size_t>(m)]) return false;
  const std::size_t e = edge_index(n, dir);
  return !(dir % 2 == 0 ? blocked_right_[e] : blocked_down_[e]);
}

std::vector<BoxRouter::Port> BoxRouter::ports_of(int box) const {
  std::vector<Port> out;
  if (box < 0 || box >= static_cast<int>(obstacles_.size())) return out;
  const QRectF& o = obstacles_[static_cast<std::size_t>(box)];
  const double c = clearance_;
  auto add = [&](double x, double y, int outward, QPointF border) {
    const std::size_t xi = nearest(xs_, x), yi = nearest(ys_, y);
    if (xi >= xs_.size() || yi >= ys_.size()) return;
    if (std::abs(xs_[xi] - x) > kSame || std::abs(ys_[yi] - y) > kSame) return;
    const int n = node(xi, yi);
    if (blocked_node_[static_cast<std::size_t>(n)]) return;  // another box too close
    out.push_back({n, outward, border});
  };
  for (double f : {0.5, 0.25, 0.75}) {
    const double x = o.left() + o.width() * f, y = o.top() + o.height() * f;
    add(x, o.bottom() + c, 1, {x, o.bottom()});
    add(x, o.top() - c, 3, {x, o.top()});
    add(o.right() + c, y, 0, {o.right(), y});
    add(o.left() - c, y, 2, {o.left(), y});
  }
  return out;
}

QPolygonF BoxRouter::search(const std::vector<Port>& sources, const std::vector<Port>& targets, bool to_strip) {
  const std::size_t states = xs_.size() * ys_.size() * 4;
  std::vector<double> dist(states, std::numeric_limits<double>::infinity());
  std::vector<int> parent(states, -1);
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  std::vector<int> source_of(xs_.size() * ys_.size(), -1);  // node -> index in sources
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const auto& s = sources[i];
    const int st = s.node * 4 + s.outward;
    const double cost = clearance_ + kPortReuse * used_port_[static_cast<std::size_t>(s.node)];
    if (cost < dist[static_cast<std::size_t>(st)]) {
      dist[static_cast<std::size_t>(st)] = cost;
      queue.push({cost, st});
      source_of[static_cast<std::size_t>(s.node)] = static_cast<int>(i);
    }
  }
  std::vector<int> target_of(xs_.size() * ys_.size(), -1);
  for (std::size_t i = 0; i < targets.size(); ++i)
    target_of[static_cast<std::size_t>(targets[i].node)] = static_cast<int>(i);
  double best = std::numeric_limits<double>::infinity();
  int best_state = -1;
  while (!queue.empty()) {
    const auto [d, st] = queue.top();
    queue.pop();
    if (d > dist[static_cast<std::size_t>(st)]) continue;
    if (d >= best) break;
    const int n = st / 4, dir = st % 4;
    const auto un = static_cast<std::size_t>(n);
    if (to_strip && un / xs_.size() == strip_row_) {
      best = d;
      best_state = st;
      break;
    }
    if (!to_strip && target_of[un] >= 0) {
      const Port& t = targets[static_cast<std::size_t>(target_of[un])];
      const double end = d + clearance_ + (dir != (t.outward + 2) % 4 ? kBend : 0) + kPortReuse * used_port_[un];
      if (end < best) {
        best = end;
        best_state = st;
      }
    }
    for (int nd = 0; nd < 4; ++nd) {
      if (nd == (dir + 2) % 4 || !free_edge(n, nd)) continue;
      const int m = step(n, nd);
      const double length = QLineF(point(n), point(m)).length();
      const std::size_t e = edge_index(n, nd);
      const int used = nd % 2 == 0 ? used_right_[e] : used_down_[e];
      const double cost = d + length * (1 + kReuse * used) + (nd != dir ? kBend : 0);
      const int next = m * 4 + nd;
      if (cost < dist[static_cast<std::size_t>(next)]) {
        dist[static_cast<std::size_t>(next)] = cost;
        parent[static_cast<std::size_t>(next)] = st;
        queue.push({cost, next});
      }
    }
  }
  if (best_state < 0) return {};
  // Back to the source, counting what this route took.
  std::vector<int> nodes;
  for (int st = best_state; st >= 0; st = parent[static_cast<std::size_t>(st)]) {
    const int p = parent[static_cast<std::size_t>(st)];
    if (p >= 0) {
      const int dir = st % 4;
      const std::size_t e = edge_index(p / 4, dir);
      ++(dir % 2 == 0 ? used_right_[e] : used_down_[e]);
    }
    nodes.push_back(st / 4);
  }
  std::reverse(nodes.begin(), nodes.end());
  QPolygonF out;
  const int first = source_of[static_cast<std::size_t>(nodes.front())];
  out << sources[static_cast<std::size_t>(first)].border;
  ++used_port_[static_cast<std::size_t>(nodes.front())];
  for (int n : nodes)
    out << point(n);
  if (!to_strip) {
    out << targets[static_cast<std::size_t>(target_of[static_cast<std::size_t>(nodes.back())])].border;
    ++used_port_[static_cast<std::size_t>(nodes.back())];
  }
  // Points in line with their neighbours say nothing.
  QPolygonF simple;
  for (int i = 0; i < out.size(); ++i) {
    if (i > 0 && i + 1 < out.size()) {
      const QPointF a = simple.back(), b = out[i], c = out[i + 1];
      const bool straight = (std::abs(a.x() - b.x()) < kSame && std::abs(b.x() - c.x()) < kSame) ||
                            (std::abs(a.y() - b.y()) < kSame && std::abs(b.y() - c.y()) < kSame);
      if (straight || QLineF(a, b).length() < kSame) continue;
    }
    simple << out[i];
  }
  return simple;
}

QPolygonF BoxRouter::route(int from, int to) {
  if (from == to) {
    // A hop within one box (devices collapsed into it): out of its right
    // side and back in at its bottom.
    const auto ports = ports_of(from);
    std::vector<Port> right, bottom;
    for (const auto& p : ports) {
      if (p.outward == 0) right.push_back(p);
      if (p.outward == 1) bottom.push_back(p);
    }
    return search(right, bottom, false);
  }
  return search(ports_of(from), ports_of(to), false);
}

QPolygonF BoxRouter::route_to_strip(int box, bool inbound) {
  QPolygonF out = search(ports_of(box), {}, true);
  if (inbound) std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace ringmaster::ui
