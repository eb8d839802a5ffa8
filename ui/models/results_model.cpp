// results_model
#include "models/results_model.h"

#include <algorithm>

#include "models/text.h"

namespace ringmaster::ui {

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
  const agent::events::Result& r = rows_[static_cast<std::size_t>(index.row())];
  using Timing = agent::events::Result::Timing;
  auto part = [&](const Timing* t, double Timing::*field, int precision) -> QVariant {
    if (!t) return QString("N/A");
    return QString::number(t->*field, 'f', precision);
  };
  auto wrong = [&](const Timing* t) -> QVariant { return t ? QVariant(static_cast<qlonglong>(t->wrong)) : "N/A"; };
  const Timing* out = &r.out_of_place;
  const Timing* in = r.in_place ? &*r.in_place : nullptr;
  switch (index.column()) {
    case 0:
      return size_text(r.bytes);
    case 1:
      return size_text(r.count);
    case 2:
      return QString::fromStdString(r.dtype);
    case 3:
      return QString::fromStdString(r.redop);
    case 4:
      return r.root;
    case 5:
      return part(out, &Timing::time_us, 2);
    case 6:
      return part(out, &Timing::algbw, 2);
    case 7:
      return part(out, &Timing::busbw, 2);
    case 8:
      return wrong(out);
    case 9:
      return part(in, &Timing::time_us, 2);
    case 10:
      return part(in, &Timing::algbw, 2);
    case 11:
      return part(in, &Timing::busbw, 2);
    case 12:
      return wrong(in);
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
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : rows_)
    rows.push_back(agent::events::to_json(r));
  return rows.dump(2) + "\n";
}

std::vector<std::pair<double, double>> ResultsModel::busbw_points(bool in_place) const {
  std::vector<std::pair<double, double>> out;
  for (const auto& r : rows_) {
    if (r.bytes == 0 || (in_place && !r.in_place)) continue;
    out.emplace_back(static_cast<double>(r.bytes), in_place ? r.in_place->busbw : r.out_of_place.busbw);
  }
  return out;
}

void ResultsModel::clear() {
  beginResetModel();
  rows_.clear();
  busbw_sum_ = best_busbw_ = 0;
  busbw_n_ = seen_ = 0;
  endResetModel();
}

void ResultsModel::add(const agent::events::Result& result) {
  if (rowCount() >= kRows) {
    // The oldest tenth at once: a row at a time, the views' bookkeeping
    // of every row made each new one cost as much as all the rest.
    const int drop = kRows / 10;
    beginRemoveRows({}, 0, drop - 1);
    rows_.erase(rows_.begin(), rows_.begin() + drop);
    endRemoveRows();
  }
  const int n = rowCount();
  beginInsertRows({}, n, n);
  rows_.push_back(result);
  endInsertRows();
  ++seen_;
  busbw_sum_ += result.out_of_place.busbw;
  best_busbw_ = std::max(best_busbw_, result.out_of_place.busbw);
  ++busbw_n_;
  if (result.in_place) {
    busbw_sum_ += result.in_place->busbw;
    ++busbw_n_;
  }
}

}  // namespace ringmaster::ui
