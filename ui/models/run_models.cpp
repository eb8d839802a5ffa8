// The console's models.
#include "run_models.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <algorithm>
#include <cmath>

namespace ringmaster::ui {

using nlohmann::json;

namespace {

QString qs(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? QString::fromStdString(it->get<std::string>()) : QString();
}

QString size_text(std::uint64_t bytes) {
  return QString::number(static_cast<qulonglong>(bytes));
}

// "8 B", "64 KiB", "1.5 MiB".
QString human_size(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return (v == static_cast<double>(static_cast<qulonglong>(v)) ? QString::number(static_cast<qulonglong>(v))
                                                               : QString::number(v, 'f', 1)) +
         " " + units[u];
}

}  // namespace

const QStringList& stage_names() {
  static const QStringList names = {"RESOLVE_MASTER",    "STORE_CONNECT",  "STORE_HANDSHAKE",  "STORE_BARRIER",
                                    "BOOTSTRAP_LISTEN",  "BOOTSTRAP_RING", "ADDRESS_EXCHANGE", "TOPOLOGY",
                                    "TRANSPORT_CONNECT", "READY"};
  return names;
}

// ---- AgentsModel ----

int AgentsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int AgentsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : column_count;
}

QVariant AgentsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case address_column:
        return r.address;
      case state_column:
        return r.state;
      case host_column:
        return r.host;
      case version_column:
        return r.version;
      case topology_column:
        return r.topology;
      case rtt_column:
        return r.rtt_ms < 0 ? QString() : QString::number(r.rtt_ms, 'f', 2) + " ms";
      case faults_column:
        return r.faults;
      case origin_column:
        return r.origin;
      default:
        return {};
    }
  }
  if (role == Qt::ForegroundRole && index.column() == state_column) {
    return QBrush(r.state == "connected" ? QColor(0x2e, 0x7d, 0x32) : QColor(0xc6, 0x28, 0x28));
  }
  if (role == Qt::ToolTipRole && index.column() == origin_column && !r.origin.isEmpty()) {
    return QString("found through %1, which resolves to every agent's address").arg(r.origin);
  }
  if (role == Qt::ToolTipRole && index.column() == topology_column) {
    return QString::fromStdString(r.inventory.value("topology_summary", std::string()));
  }
  return {};
}

QVariant AgentsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Agent", "From", "State", "Host", "Version", "Topology", "Round trip", "Faults"};
  return section >= 0 && section < column_count ? QString(names[section]) : QVariant();
}

void AgentsModel::add(const QString& a, const QString& origin) {
  if (row_of(a) >= 0) return;
  const int n = rowCount();
  beginInsertRows({}, n, n);
  rows_.push_back(Row{a, "connecting", {}, {}, {}, -1, 0, {}, origin});
  endInsertRows();
}

int AgentsModel::row_of(const QString& a) const {
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].address == a) return static_cast<int>(i);
  }
  return -1;
}

QString AgentsModel::address(int row) const {
  return rows_.at(static_cast<std::size_t>(row)).address;
}
const json& AgentsModel::inventory(int row) const {
  return rows_.at(static_cast<std::size_t>(row)).inventory;
}

void AgentsModel::set_state(const QString& a, const QString& s) {
  const int row = row_of(a);
  if (row < 0) return;
  rows_[static_cast<std::size_t>(row)].state = s;
  emit dataChanged(index(row, state_column), index(row, state_column));
}

void AgentsModel::set_inventory(const QString& a, const json& inv) {
  const int row = row_of(a);
  if (row < 0) return;
  Row& r = rows_[static_cast<std::size_t>(row)];
  r.inventory = inv;
  r.host = qs(inv, "hostname");
  r.version = qs(inv, "agent_version");
  const json topo = inv.value("topology", json::object());
  r.topology = qs(topo, "origin");
  r.faults = static_cast<int>(inv.value("faults", json::array()).size());
  emit dataChanged(index(row, 0), index(row, column_count - 1));
}

void AgentsModel::set_rtt(const QString& a, double ms) {
  const int row = row_of(a);
  if (row < 0) return;
  rows_[static_cast<std::size_t>(row)].rtt_ms = ms;
  emit dataChanged(index(row, rtt_column), index(row, rtt_column));
}

// ---- TimelineModel ----

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
      return c.ok ? QString::number(c.duration_ms, 'f', 2) : QString("FAILED");
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
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Horizontal) return section < stage_names().size() ? stage_names()[section] : QVariant();
  return QString("rank %1").arg(section);
}

void TimelineModel::reset(int world_size) {
  beginResetModel();
  cells_.assign(static_cast<std::size_t>(std::max(world_size, 0)),
                std::vector<Cell>(static_cast<std::size_t>(stage_names().size())));
  origin_us_ = 0;
  endResetModel();
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

void TimelineModel::add_stage(int rank, const json& e) {
  if (rank < 0 || rank >= ranks()) return;
  const int stage = static_cast<int>(stage_names().indexOf(qs(e, "stage")));
  if (stage < 0) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  c.live = false;  // the stage's final event (add_progress sets it again for its own)
  const long long begin = e.value("begin_us", 0LL);
  const double duration = e.value("duration_ms", 0.0);
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
  c.ok = c.ok && e.value("ok", true);
  const QString detail = qs(e, "detail");
  if (!detail.isEmpty()) c.detail += (c.detail.isEmpty() ? "" : "\n") + detail;
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
void TimelineModel::add_progress(int rank, const json& e) {
  if (rank < 0 || rank >= ranks()) return;
  const int stage = static_cast<int>(stage_names().indexOf(qs(e, "stage")));
  if (stage < 0) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  if (c.seen && !c.live) return;  // the final event came first
  add_stage(rank, json{{"stage", e.value("stage", "")},
                       {"begin_us", e.value("begin_us", 0LL)},
                       {"duration_ms", e.value("elapsed_ms", 0.0)},
                       {"ok", true}});
  c.live = true;
  c.live_text = qs(e, "detail");
  emit dataChanged(index(rank, stage), index(rank, stage));
}

void TimelineModel::add_failure(int rank, const json& f) {
  if (rank < 0 || rank >= ranks()) return;
  const int stage = static_cast<int>(stage_names().indexOf(qs(f, "stage")));
  if (stage < 0) return;
  Cell& c = cells_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(stage)];
  c.ok = false;
  if (!c.seen) {
    c.seen = true;
    c.begin_us = origin_us_;
  }
  QString text = "FAILED: " + qs(f, "summary");
  if (const auto missing = f.value("missing", json::array()); !missing.empty()) {
    QStringList m;
    for (const auto& r : missing)
      m << QString::number(r.get<int>());
    text += QString("\n%1/%2 joined; missing ranks: %3")
                .arg(f.value("joined", -1))
                .arg(f.value("world_size", 0))
                .arg(m.join(", "));
  }
  for (const char* key : {"local", "remote", "errno"}) {
    if (!qs(f, key).isEmpty()) text += QString("\n%1: %2").arg(key, qs(f, key));
  }
  if (!qs(f, "hint").isEmpty()) text += "\nhint: " + qs(f, "hint");
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

std::vector<TimelineSegment> layout_timeline(const TimelineModel& model, const QRectF& area) {
  std::vector<TimelineSegment> out;
  const int ranks = model.ranks();
  if (ranks == 0 || area.width() <= 0 || area.height() <= 0) return out;
  const double span = std::max(model.span_ms(), 1e-3);
  const double row_h = area.height() / ranks;
  const double scale = area.width() / span;
  for (int r = 0; r < ranks; ++r) {
    for (int s = 0; s < stage_names().size(); ++s) {
      const auto& c = model.cell(r, s);
      if (!c.seen) continue;
      const double x = area.left() + c.begin_ms * scale;
      const double w = std::max(2.0, c.duration_ms * scale);  // a 10 us stage stays visible
      out.push_back(
          TimelineSegment{r, s,
                          QRectF(std::min(x, area.right() - 2.0), area.top() + r * row_h + 1,
                                 std::min(w, area.right() - std::min(x, area.right() - 2.0)), std::max(1.0, row_h - 2)),
                          !c.ok, c.live});
    }
  }
  return out;
}

// ---- ResultsModel ----

namespace {
const char* kResultColumns[] = {"size (B)",     "count",  "type",          "redop", "root",  "time (us)", "algbw",
                                "busbw (GB/s)", "#wrong", "in-place time", "algbw", "busbw", "#wrong"};
constexpr int kResultColumnCount = 13;
}  // namespace

int ResultsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int ResultsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kResultColumnCount;
}

QVariant ResultsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kResultColumnCount) return {};
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  const json& r = rows_[static_cast<std::size_t>(index.row())];
  auto part = [&](const char* which, const char* key, int precision) -> QVariant {
    if (!r.contains(which)) return QString("N/A");
    const json& p = r[which];
    if (std::string_view(key) == "wrong") return static_cast<qlonglong>(p.value("wrong", 0LL));
    return QString::number(p.value(key, 0.0), 'f', precision);
  };
  switch (index.column()) {
    case 0:
      return size_text(r.value("bytes", std::uint64_t{0}));
    case 1:
      return size_text(r.value("count", std::uint64_t{0}));
    case 2:
      return qs(r, "dtype");
    case 3:
      return qs(r, "redop");
    case 4:
      return r.value("root", -1);
    case 5:
      return part("out_of_place", "time_us", 2);
    case 6:
      return part("out_of_place", "algbw", 2);
    case 7:
      return part("out_of_place", "busbw", 2);
    case 8:
      return part("out_of_place", "wrong", 0);
    case 9:
      return part("in_place", "time_us", 2);
    case 10:
      return part("in_place", "algbw", 2);
    case 11:
      return part("in_place", "busbw", 2);
    case 12:
      return part("in_place", "wrong", 0);
    default:
      return {};
  }
}

QVariant ResultsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  return section >= 0 && section < kResultColumnCount ? QString(kResultColumns[section]) : QVariant();
}

QString ResultsModel::to_csv() const {
  auto quoted = [](QString v) { return v.contains(',') || v.contains('"') ? '"' + v.replace('"', "\"\"") + '"' : v; };
  QStringList lines;
  QStringList header;
  for (int c = 0; c < columnCount(); ++c)
    header << quoted(headerData(c, Qt::Horizontal, Qt::DisplayRole).toString());
  lines << header.join(',');
  for (int r = 0; r < rowCount(); ++r) {
    QStringList cells;
    for (int c = 0; c < columnCount(); ++c)
      cells << quoted(data(index(r, c), Qt::DisplayRole).toString());
    lines << cells.join(',');
  }
  return lines.join('\n') + '\n';
}

std::string ResultsModel::to_json() const {
  return json(rows_).dump(2) + "\n";
}

std::vector<std::pair<double, double>> ResultsModel::busbw_points(bool in_place) const {
  std::vector<std::pair<double, double>> out;
  for (const auto& r : rows_) {
    const char* which = in_place ? "in_place" : "out_of_place";
    if (!r.contains(which)) continue;
    const double bytes = static_cast<double>(r.value("bytes", std::uint64_t{0}));
    if (bytes <= 0) continue;
    out.emplace_back(bytes, r[which].value("busbw", 0.0));
  }
  return out;
}

void ResultsModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

void ResultsModel::add(const json& result) {
  const int n = rowCount();
  beginInsertRows({}, n, n);
  rows_.push_back(result);
  endInsertRows();
}

double ResultsModel::average_busbw() const {
  if (rows_.empty()) return 0;
  double sum = 0;
  int n = 0;
  for (const auto& r : rows_) {
    for (const char* which : {"out_of_place", "in_place"}) {
      if (r.contains(which)) {
        sum += r[which].value("busbw", 0.0);
        ++n;
      }
    }
  }
  return n ? sum / n : 0;
}

// ---- DecisionsModel ----

int DecisionsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int DecisionsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 6;
}

QVariant DecisionsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= 6 || role != Qt::DisplayRole) return {};
  const json& d = rows_[static_cast<std::size_t>(index.row())];
  switch (index.column()) {
    case 0:
      return qs(d, "collective");
    case 1:
      return size_text(d.value("bytes", std::uint64_t{0}));
    case 2:
      return qs(d, "algorithm");
    case 3:
      return qs(d, "protocol");
    case 4:
      return d.value("nchannels", 0);
    case 5:
      return QString::number(d.value("time_us", 0.0), 'f', 1);
    default:
      return {};
  }
}

QVariant DecisionsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Collective", "Bytes", "Algorithm", "Protocol", "Channels", "Measured (us)"};
  return section >= 0 && section < 6 ? QString(names[section]) : QVariant();
}

void DecisionsModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

void DecisionsModel::add(const json& decision) {
  const int n = rowCount();
  beginInsertRows({}, n, n);
  rows_.push_back(decision);
  endInsertRows();
}

// ---- TunerModel ----

int TunerModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() || selected_ < 0) return 0;
  return static_cast<int>(tables_[static_cast<std::size_t>(selected_)].candidates.size());
}
int TunerModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 7;
}

int TunerModel::chosen_row() const {
  return selected_ < 0 ? -1 : tables_[static_cast<std::size_t>(selected_)].chosen;
}

QVariant TunerModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= 7) return {};
  const Table& t = tables_[static_cast<std::size_t>(selected_)];
  const json& c = t.candidates[static_cast<std::size_t>(index.row())];
  const bool chosen = index.row() == t.chosen;
  const bool excluded = c.contains("excluded");
  if (role == Qt::FontRole && chosen) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::BackgroundRole && chosen) return QColor(255, 214, 102);
  if (role == Qt::ForegroundRole && chosen) return QColor(Qt::black);
  if (role == Qt::ForegroundRole && excluded) return QColor(Qt::gray);
  if (role == Qt::ToolTipRole && excluded) return qs(c, "excluded");
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case 0:
      return QString(chosen ? "\u25B6 " : "") + qs(c, "algorithm");
    case 1:
      return qs(c, "protocol");
    case 2:
      return c.value("channels", 0);
    case 3:
      return excluded ? QString() : QString::number(c.value("predicted_us", 0.0), 'f', 1);
    case 4:
      return chosen && t.measured_us >= 0 ? QString::number(t.measured_us, 'f', 1) : QString();
    case 5:
      return excluded || !chosen || t.measured_us <= 0
                 ? QString()
                 : QString::number(c.value("predicted_us", 0.0) / t.measured_us, 'f', 2);
    case 6:
      return excluded ? "excluded: " + qs(c, "excluded") : (chosen ? QString("chosen") : QString());
    default:
      return {};
  }
}

QVariant TunerModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Algorithm",     "Protocol",           "Channels", "Predicted (us)",
                                "Measured (us)", "Predicted/measured", "Note"};
  return section >= 0 && section < 7 ? QString(names[section]) : QVariant();
}

void TunerModel::clear() {
  beginResetModel();
  tables_.clear();
  selected_ = -1;
  endResetModel();
  emit tables_changed();
}

void TunerModel::add_table(const json& e) {
  Table t;
  t.collective = e.value("collective", "");
  t.bytes = e.value("bytes", std::uint64_t{0});
  t.candidates = e.value("candidates", json::array());
  if (!t.candidates.is_array()) t.candidates = json::array();
  t.chosen = e.value("chosen", -1);
  if (t.chosen >= static_cast<int>(t.candidates.size())) t.chosen = -1;
  for (auto& existing : tables_) {
    if (existing.collective == t.collective && existing.bytes == t.bytes) {
      t.measured_us = existing.measured_us;
      t.measured_from_result = existing.measured_from_result;
      beginResetModel();
      existing = std::move(t);
      endResetModel();
      return;
    }
  }
  tables_.push_back(std::move(t));
  select(static_cast<int>(tables_.size()) - 1);
  emit tables_changed();
}

void TunerModel::add_measurement(const json& e) {
  const std::string collective = e.value("collective", "");
  const auto bytes = e.value("bytes", std::uint64_t{0});
  const bool from_result = e.value("type", "") == "result";
  double us = -1;
  if (from_result) {
    us = e.value("out_of_place", json::object()).value("time_us", -1.0);
  } else {
    us = e.value("time_us", -1.0);
  }
  for (std::size_t i = 0; i < tables_.size(); ++i) {
    Table& t = tables_[i];
    if (t.collective != collective || t.bytes != bytes) continue;
    if (t.measured_from_result && !from_result) return;
    t.measured_us = us;
    t.measured_from_result = from_result;
    if (static_cast<int>(i) == selected_ && t.chosen >= 0) {
      emit dataChanged(index(t.chosen, 4), index(t.chosen, 5));
    }
    return;
  }
}

QStringList TunerModel::tables() const {
  QStringList out;
  for (const auto& t : tables_)
    out << QString::fromStdString(t.collective) + " " + human_size(t.bytes);
  return out;
}

void TunerModel::select(int table) {
  if (table < -1 || table >= static_cast<int>(tables_.size()) || table == selected_) return;
  beginResetModel();
  selected_ = table;
  endResetModel();
}

// ---- BandwidthSeries ----

void BandwidthSeries::clear() {
  tracks_.clear();
  peer_tracks_.clear();
  totals_.clear();
  origin_us_ = -1;
  latest_s_ = 0;
}

void BandwidthSeries::push(Track& t, double x, double y) {
  t.points.emplace_back(x, y);
  ++t.received;
  while (!t.points.empty() && t.points.front().x() < x - window_s_)
    t.points.pop_front();
}

void BandwidthSeries::add_sample(int rank, const json& sample) {
  const long long t_us = sample.value("t_us", 0LL);
  if (origin_us_ < 0) origin_us_ = t_us;
  const double x = static_cast<double>(t_us - origin_us_) / 1e6;
  latest_s_ = std::max(latest_s_, x);
  double total_rate = 0;
  bool any = false;
  std::uint64_t total_bytes = 0;
  for (const auto& c : sample.value("channels", json::array())) {
    const int channel = c.value("channel", 0);
    const std::uint64_t bytes = c.value("bytes_sent", std::uint64_t{0});
    total_bytes += bytes;
    Track& t = tracks_[{rank, channel}];
    if (t.last_us >= 0 && t_us > t.last_us) {
      const double rate = static_cast<double>(bytes - std::min(bytes, t.last_bytes)) /
                          (static_cast<double>(t_us - t.last_us) * 1e3);  // bytes/us / 1e3 = GB/s
      push(t, x, rate);
      total_rate += rate;
      any = true;
    }
    t.last_us = t_us;
    t.last_bytes = bytes;
  }
  for (const auto& p : sample.value("peers", json::array())) {
    const std::uint64_t bytes = p.value("bytes_received", std::uint64_t{0});
    Track& t = peer_tracks_[{rank, p.value("peer", -1)}];
    if (t.last_us >= 0 && t_us > t.last_us) {
      push(t, x,
           static_cast<double>(bytes - std::min(bytes, t.last_bytes)) / (static_cast<double>(t_us - t.last_us) * 1e3));
    }
    t.last_us = t_us;
    t.last_bytes = bytes;
  }
  Track& total = totals_[rank];
  if (any) push(total, x, total_rate);
  total.last_us = t_us;
  total.last_bytes = total_bytes;
}

namespace {

// At most `max_points`: the min and the max of each bucket, in order.
QList<QPointF> decimate(const std::deque<QPointF>& in, int max_points) {
  QList<QPointF> out;
  if (max_points <= 0 || in.empty()) return out;
  if (static_cast<int>(in.size()) <= max_points) {
    out.reserve(static_cast<qsizetype>(in.size()));
    for (const auto& p : in)
      out.append(p);
    return out;
  }
  const int buckets = std::max(1, max_points / 2);
  const double per = static_cast<double>(in.size()) / buckets;
  for (int b = 0; b < buckets; ++b) {
    const auto lo = static_cast<std::size_t>(b * per);
    const auto hi = std::min(in.size(), static_cast<std::size_t>((b + 1) * per));
    if (lo >= hi) continue;
    auto mn = in.begin() + static_cast<std::ptrdiff_t>(lo);
    auto mx = mn;
    for (auto it = mn; it != in.begin() + static_cast<std::ptrdiff_t>(hi); ++it) {
      if (it->y() < mn->y()) mn = it;
      if (it->y() > mx->y()) mx = it;
    }
    if (mn < mx) {
      out.append(*mn);
      out.append(*mx);
    } else if (mx < mn) {
      out.append(*mx);
      out.append(*mn);
    } else {
      out.append(*mn);
    }
  }
  return out;
}

}  // namespace

QList<QPointF> BandwidthSeries::points(int rank, int channel, int max_points) const {
  const auto it = tracks_.find({rank, channel});
  return it == tracks_.end() ? QList<QPointF>{} : decimate(it->second.points, max_points);
}

QList<QPointF> BandwidthSeries::total(int rank, int max_points) const {
  const auto it = totals_.find(rank);
  return it == totals_.end() ? QList<QPointF>{} : decimate(it->second.points, max_points);
}

QList<QPointF> BandwidthSeries::peer_points(int rank, int peer, int max_points) const {
  const auto it = peer_tracks_.find({rank, peer});
  return it == peer_tracks_.end() ? QList<QPointF>{} : decimate(it->second.points, max_points);
}

std::vector<int> BandwidthSeries::peers(int rank) const {
  std::vector<int> out;
  for (auto it = peer_tracks_.lower_bound({rank, -1}); it != peer_tracks_.end() && it->first.first == rank; ++it)
    out.push_back(it->first.second);
  return out;
}

int BandwidthSeries::ranks() const {
  return totals_.empty() ? 0 : totals_.rbegin()->first + 1;
}

int BandwidthSeries::channels(int rank) const {
  int n = 0;
  for (const auto& [key, t] : tracks_) {
    if (key.first == rank) n = std::max(n, key.second + 1);
  }
  return n;
}

std::size_t BandwidthSeries::points_received(int rank, int channel) const {
  const auto it = tracks_.find({rank, channel});
  return it == tracks_.end() ? 0 : it->second.received;
}

}  // namespace ringmaster::ui
