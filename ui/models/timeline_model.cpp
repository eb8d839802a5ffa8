// timeline_model
#include "models/timeline_model.h"

#include <QBrush>
#include <QColor>
#include <algorithm>
#include <map>

namespace ringmaster::ui {

const QStringList& stage_names() {
  static const QStringList names = [] {
    QStringList out;
    for (int s = 0; s <= static_cast<int>(Stage::ready); ++s)
      out << QString::fromUtf8(name_of(static_cast<Stage>(s)).data());
    return out;
  }();
  return names;
}

int TimelineModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(cells_.size());
}
int TimelineModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(stage_names().size());
}

QVariant TimelineModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const Cell& c = cells_[static_cast<std::size_t>(index.row())][static_cast<std::size_t>(index.column())];
  switch (role) {
    case Qt::DisplayRole:
      if (!c.seen) return QString();
      if (c.live) return QString("retrying");
      // Three significant digits past the point at most: "0.042", "812.3", "61530".
      return c.ok ? QString::number(c.duration_ms, 'f',
                                    c.duration_ms < 10     ? 3
                                    : c.duration_ms < 1000 ? 1
                                                           : 0)
                  : QString("FAILED");
    case Qt::ToolTipRole:
      return c.live ? c.live_text : c.detail;
    case Qt::BackgroundRole:
      if (!c.seen) return {};
      if (c.live) return QBrush(QColor(0xff, 0xc1, 0x07));  // amber: not failed yet, not well either
      return QBrush(c.ok ? QColor(0xc8, 0xe6, 0xc9) : QColor(0xef, 0x9a, 0x9a));
    default:
      return {};
  }
}

QVariant TimelineModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Horizontal && section >= 0 && section < stage_names().size()) {
    // Two lines ("TRANSPORT" over "CONNECT"): on one, eleven stage names
    // need 1,400 px and a laptop's table showed eight of them.
    if (role == Qt::DisplayRole) return QString(stage_names()[section]).replace('_', '\n');
    if (role == Qt::ToolTipRole) return stage_names()[section] + " (ms)";
    return {};
  }
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Horizontal) return {};
  return QString("rank %1").arg(section);
}

void TimelineModel::reset(int world_size, std::vector<int> placement) {
  beginResetModel();
  const auto n = static_cast<std::size_t>(std::max(world_size, 0));
  cells_.assign(n, std::vector<Cell>(static_cast<std::size_t>(stage_names().size())));
  origin_us_ = 0;
  groups_.clear();
  group_of_.assign(n, -1);
  agent_addresses_.clear();
  std::map<int, int> group_of_agent;  // agent (or -1 - block) -> group
  for (std::size_t r = 0; r < n; ++r) {
    const bool placed_run = !placement.empty();
    const int agent = !placed_run ? -1 : r < placement.size() ? placement[r] : -1;
    const int key = placed_run ? agent : -2 - static_cast<int>(r / kBlockRanks);
    auto [at, added] = group_of_agent.try_emplace(key, static_cast<int>(groups_.size()));
    if (added) groups_.push_back(Group{agent, !placed_run || agent >= 0, {}});
    groups_[static_cast<std::size_t>(at->second)].ranks.push_back(static_cast<int>(r));
    group_of_[r] = at->second;
  }
  endResetModel();
}

int TimelineModel::node_of(int rank) const {
  return rank >= 0 && rank < static_cast<int>(group_of_.size()) ? group_of_[static_cast<std::size_t>(rank)] : -1;
}

const std::vector<int>& TimelineModel::ranks_of(int node) const {
  static const std::vector<int> none;
  return node >= 0 && node < nodes() ? groups_[static_cast<std::size_t>(node)].ranks : none;
}

QString TimelineModel::node_name(int node) const {
  if (node < 0 || node >= nodes()) return {};
  const Group& g = groups_[static_cast<std::size_t>(node)];
  if (!g.placed) return "not placed";
  if (g.agent >= 0) return QString("agent %1").arg(g.agent);
  return QString("ranks %1-%2").arg(g.ranks.front()).arg(g.ranks.back());
}

void TimelineModel::set_agent_addresses(std::vector<QString> addresses) {
  agent_addresses_ = std::move(addresses);
}

QString TimelineModel::node_title(int node) const {
  QString title = node_name(node);
  if (node < 0 || node >= nodes()) return title;
  const Group& g = groups_[static_cast<std::size_t>(node)];
  if (g.agent >= 0 && g.agent < static_cast<int>(agent_addresses_.size()))
    title += QString(" (%1)").arg(agent_addresses_[static_cast<std::size_t>(g.agent)]);
  if (g.agent >= 0 || !g.placed)
    title += QString(", %1 rank%2").arg(g.ranks.size()).arg(g.ranks.size() == 1 ? "" : "s");
  return title;
}

TimelineModel::NodeCell TimelineModel::node_cell(int node, int stage) const {
  NodeCell out;
  if (stage < 0 || stage >= columnCount()) return out;
  double end = 0;
  double last_end = -1;
  for (int r : ranks_of(node)) {
    ++out.ranks;
    const Cell& c = cells_[static_cast<std::size_t>(r)][static_cast<std::size_t>(stage)];
    if (!c.seen) continue;
    ++out.reached;
    out.begin_ms = out.seen ? std::min(out.begin_ms, c.begin_ms) : c.begin_ms;
    end = std::max(end, c.begin_ms + c.duration_ms);
    if (c.begin_ms + c.duration_ms > last_end) {
      last_end = c.begin_ms + c.duration_ms;
      out.last_rank = r;
    }
    out.seen = true;
    out.live = out.live || c.live;
    if (!c.ok && out.ok) {
      out.ok = false;
      out.failed_rank = r;
    }
  }
  if (out.seen) out.duration_ms = end - out.begin_ms;
  return out;
}

QString TimelineModel::node_summary(int node, int stage) const {
  if (node < 0 || node >= nodes() || stage < 0 || stage >= columnCount()) return {};
  const NodeCell n = node_cell(node, stage);
  QString text =
      QString("%1, %2: %3/%4 ranks reached it").arg(node_title(node), stage_names()[stage]).arg(n.reached).arg(n.ranks);
  if (!n.seen) return text;
  text += QString(", from %1 ms for %2 ms").arg(n.begin_ms, 0, 'f', 3).arg(n.duration_ms, 0, 'f', 3);
  QStringList failed, live, missing;
  for (int r : ranks_of(node)) {
    const Cell& c = cell(r, stage);
    if (!c.seen)
      missing << QString::number(r);
    else if (c.live)
      live << QString::number(r);
    else if (!c.ok)
      failed << QString::number(r);
  }
  text += n.ok && live.isEmpty() ? "; ok" : "";
  if (n.last_rank >= 0)
    text +=
        QString("\nlast to end: rank %1 (%2 ms)").arg(n.last_rank).arg(cell(n.last_rank, stage).duration_ms, 0, 'f', 3);
  if (!failed.isEmpty()) text += "\nFAILED on rank(s) " + failed.join(", ");
  if (!live.isEmpty()) text += "\nstill retrying: rank(s) " + live.join(", ");
  if (!missing.isEmpty()) text += "\nnot reached by rank(s) " + missing.join(", ");
  if (n.failed_rank >= 0)
    text += "\n\nrank " + QString::number(n.failed_rank) + ": " + cell(n.failed_rank, stage).detail;
  return text;
}

const TimelineModel::Cell& TimelineModel::cell(int rank, int stage) const {
  return cells_.at(static_cast<std::size_t>(rank)).at(static_cast<std::size_t>(stage));
}

void TimelineModel::rebase() {
  for (auto& row : cells_) {
    for (auto& c : row) {
      if (c.seen) c.begin_ms = static_cast<double>(c.begin_us - origin_us_) / 1000.0;
    }
  }
}

void TimelineModel::add_stage(int rank, const agent::events::StageEnded& e) {
  const int stage = static_cast<int>(e.stage);
  if (rank < 0 || rank >= ranks() || stage >= columnCount()) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  c.live = false;  // the stage's final event (add_progress sets it again for its own)
  const long long begin = e.begin_us;
  const double duration = e.duration_ms;
  if (!c.seen) {
    c.seen = true;
    c.begin_us = begin;
    c.duration_ms = duration;
  } else {  // TRANSPORT_CONNECT comes once per connection: span them all
    const double end_ms = std::max(static_cast<double>(c.begin_us) / 1000.0 + c.duration_ms,
                                   static_cast<double>(begin) / 1000.0 + duration);
    c.begin_us = std::min(c.begin_us, begin);
    c.duration_ms = end_ms - static_cast<double>(c.begin_us) / 1000.0;
  }
  c.ok = c.ok && e.ok;
  if (!e.detail.empty()) {
    // TRANSPORT_CONNECT reports each connection: a rank of a big run
    // would hold thousands of lines.
    if (c.detail_lines < kDetailLines) {
      c.detail += (c.detail.isEmpty() ? "" : "\n") + QString::fromStdString(e.detail);
    } else {
      const QString more = QString("(and %1 more)").arg(c.detail_lines - kDetailLines + 1);
      if (c.detail_lines == kDetailLines) {
        c.detail += "\n" + more;
      } else {
        c.detail.truncate(c.detail.lastIndexOf('\n') + 1);
        c.detail += more;
      }
    }
    ++c.detail_lines;
  }
  if (origin_us_ == 0 || begin < origin_us_) {
    origin_us_ = begin;
    rebase();
    emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
  } else {
    c.begin_ms = static_cast<double>(c.begin_us - origin_us_) / 1000.0;
    emit dataChanged(index(rank, stage), index(rank, stage));
  }
}

// A stage still retrying: drawn from its begin to now, amber, with the
// live line as its detail until the stage's final event replaces it.
void TimelineModel::add_progress(int rank, const agent::events::StageProgress& e) {
  const int stage = static_cast<int>(e.stage);
  if (rank < 0 || rank >= ranks() || stage >= columnCount()) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  if (c.seen && !c.live) return;  // the final event came first
  agent::events::StageEnded so_far;
  so_far.stage = e.stage;
  so_far.begin_us = e.begin_us;
  so_far.duration_ms = e.elapsed_ms;
  add_stage(rank, so_far);
  c.live = true;
  c.live_text = QString::fromStdString(e.detail);
  emit dataChanged(index(rank, stage), index(rank, stage));
}

void TimelineModel::add_failure(int rank, const agent::events::StageFailed& f) {
  const int stage = static_cast<int>(f.stage);
  if (rank < 0 || rank >= ranks() || stage >= columnCount()) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  c.ok = false;
  if (!c.seen) {
    c.seen = true;
    c.begin_us = origin_us_;
  }
  QString text = "FAILED: " + QString::fromStdString(f.summary);
  if (!f.missing.empty()) {
    QStringList m;
    for (int r : f.missing)
      m << QString::number(r);
    text += QString("\n%1/%2 joined; missing ranks: %3").arg(f.joined).arg(f.world_size).arg(m.join(", "));
  }
  auto add_line = [&](const char* key, const std::string& value) {
    if (!value.empty()) text += QString("\n%1: %2").arg(key, QString::fromStdString(value));
  };
  add_line("local", f.local);
  add_line("remote", f.remote);
  add_line("errno", f.errno_text);
  if (!f.hint.empty()) text += "\nhint: " + QString::fromStdString(f.hint);
  c.detail += (c.detail.isEmpty() ? "" : "\n") + text;
  emit dataChanged(index(rank, stage), index(rank, stage));
}

double TimelineModel::span_ms() const {
  double end = 0;
  for (const auto& row : cells_) {
    for (const auto& c : row) {
      if (c.seen) end = std::max(end, c.begin_ms + c.duration_ms);
    }
  }
  return end;
}

std::vector<TimelineRow> timeline_rows(const TimelineModel& model, const std::vector<bool>& expanded) {
  std::vector<TimelineRow> rows;
  if (model.ranks() <= kFlatRanks) {
    for (int r = 0; r < model.ranks(); ++r)
      rows.push_back({model.node_of(r), r});
    return rows;
  }
  for (int n = 0; n < model.nodes(); ++n) {
    rows.push_back({n, -1});
    if (n < static_cast<int>(expanded.size()) && expanded[static_cast<std::size_t>(n)]) {
      for (int r : model.ranks_of(n))
        rows.push_back({n, r});
    }
  }
  return rows;
}

std::vector<TimelineSegment> layout_timeline(const TimelineModel& model, const QRectF& area,
                                             const std::vector<TimelineRow>& rows) {
  std::vector<TimelineSegment> out;
  if (rows.empty() || area.width() <= 0 || area.height() <= 0) return out;
  const double span = std::max(model.span_ms(), 1e-3);
  const double row_h = area.height() / static_cast<double>(rows.size());
  const double scale = area.width() / span;
  auto place = [&](int row, double begin_ms, double duration_ms) {
    const double x = std::min(area.left() + begin_ms * scale, area.right() - 2.0);
    const double w = std::max(2.0, duration_ms * scale);  // a 10 us stage stays visible
    return QRectF(x, area.top() + row * row_h + 1, std::min(w, area.right() - x), std::max(1.0, row_h - 2));
  };
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const TimelineRow& row = rows[static_cast<std::size_t>(i)];
    for (int s = 0; s < stage_names().size(); ++s) {
      if (row.summary()) {
        const auto n = model.node_cell(row.node, s);
        if (!n.seen) continue;
        out.push_back(TimelineSegment{-1, s, place(i, n.begin_ms, n.duration_ms), !n.ok, n.live, row.node, i,
                                      n.reached < n.ranks});
        continue;
      }
      const auto& c = model.cell(row.rank, s);
      if (!c.seen) continue;
      out.push_back(TimelineSegment{row.rank, s, place(i, c.begin_ms, c.duration_ms), !c.ok, c.live, row.node, i});
    }
  }
  return out;
}

std::vector<TimelineSegment> layout_timeline(const TimelineModel& model, const QRectF& area) {
  return layout_timeline(model, area, timeline_rows(model));
}

}  // namespace ringmaster::ui
