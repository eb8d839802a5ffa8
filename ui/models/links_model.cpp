// LinksModel: the heatmap of link bandwidth.
#include "models/links_model.h"

#include <QColor>
#include <algorithm>

namespace ringmaster::ui {

namespace {

QString rate_text(double gbs) {
  return gbs >= 1 ? QString("%1 GB/s").arg(gbs, 0, 'f', 2) : QString("%1 MB/s").arg(gbs * 1e3, 0, 'f', 0);
}

// Green at the median or above, through amber at half of it, to red at a
// fifth (where the link checks call a link slow) and below.
QColor heat(double share) {
  if (share >= 1) return QColor(0x9c, 0xd6, 0x8f);
  if (share <= 0.2) return QColor(0xe5, 0x73, 0x73);
  const double t = (share - 0.2) / 0.8;  // 0 red .. 1 green
  const QColor red(0xe5, 0x73, 0x73), amber(0xf6, 0xc3, 0x5b), green(0x9c, 0xd6, 0x8f);
  const QColor& a = t < 0.5 ? red : amber;
  const QColor& b = t < 0.5 ? amber : green;
  const double u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
  return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * u),
                          static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * u),
                          static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * u));
}

}  // namespace

int LinksModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(cells_.size());
}

int LinksModel::columnCount(const QModelIndex& parent) const {
  return rowCount(parent);
}

const LinksModel::Cell& LinksModel::cell(int from, int to) const {
  return cells_.at(static_cast<std::size_t>(from)).at(static_cast<std::size_t>(to));
}

double LinksModel::median_gbs(const QString& transport) const {
  std::vector<double> rates;
  double fastest = 0;
  for (const auto& row : cells_) {
    for (const auto& c : row) {
      if (!transport.isEmpty() && c.transport != transport) continue;
      if (c.gbs > 0) rates.push_back(c.gbs);
      fastest = std::max(fastest, c.gbs);
    }
  }
  // A link ahead of its reader counts as fast, as the slow-link checks
  // count it.
  for (const auto& row : cells_) {
    for (const auto& c : row) {
      if (c.ahead && (transport.isEmpty() || c.transport == transport) && fastest > 0) rates.push_back(fastest);
    }
  }
  if (rates.empty()) return 0;
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

void LinksModel::compute_medians() {
  medians_.clear();
  for (const auto& row : cells_) {
    for (const auto& c : row) {
      if (!medians_.count(c.transport)) medians_[c.transport] = median_gbs(c.transport);
    }
  }
}

double LinksModel::median_of(const QString& transport) const {
  const auto it = medians_.find(transport);
  return it == medians_.end() ? 0 : it->second;
}

QVariant LinksModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const int from = index.row(), to = index.column();
  const Cell& c = cell(from, to);
  if (role == Qt::TextAlignmentRole) return Qt::AlignCenter;
  if (from == to) return {};
  switch (role) {
    case Qt::DisplayRole:
      // A number always: a link ahead of its reader shows what it carried
      // at least, marked "≥".
      if (c.ahead) return c.floor_gbs > 0 ? QString("\u2265") + rate_text(c.floor_gbs) : QString("ahead");
      if (c.gbs > 0) return rate_text(c.gbs);
      return c.error.isEmpty() ? QString() : QString("failed");
    case Qt::BackgroundRole: {
      if (c.ahead) return heat(1);
      if (c.gbs > 0) {
        const double median = median_of(c.transport);
        return heat(median > 0 ? c.gbs / median : 1);
      }
      return c.error.isEmpty() ? QVariant() : QVariant(QColor(0xd9, 0xa6, 0xd9));
    }
    case Qt::ForegroundRole:
      return (c.measured || !c.error.isEmpty()) ? QVariant(QColor(Qt::black)) : QVariant();
    case Qt::ToolTipRole: {
      QString text = QString("%1 %2 -> %1 %3").arg(kind_).arg(from).arg(to);
      if (!c.transport.isEmpty()) text += " over " + c.transport;
      if (c.gbs > 0) {
        const double median = median_of(c.transport);
        text += QString(": %1, %2 of the median %3 link (%4)")
                    .arg(rate_text(c.gbs))
                    .arg(median > 0 ? c.gbs / median : 1, 0, 'f', 2)
                    .arg(c.transport)
                    .arg(rate_text(median));
        if (c.nominal_gbs > 0) {
          text += QString("; %1 of what its NICs carry (%2 Gb/s)")
                      .arg(c.gbs / c.nominal_gbs, 0, 'f', 2)
                      .arg(c.nominal_gbs * 8, 0, 'g', 4);
        }
      } else if (c.ahead) {
        text += ": every transfer was there before its reader asked (faster than it can be timed here)";
        if (c.floor_gbs > 0) {
          text += QString("; it carried at least %1 (%2)")
                      .arg(rate_text(c.floor_gbs))
                      .arg(kind_ == "node" ? "the pair's end-to-end rate" : "the run's best busbw");
        }
      } else if (!c.error.isEmpty()) {
        text += ": " + c.error;
      }
      return text;
    }
    default:
      return {};
  }
}

QVariant LinksModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || section < 0 || section >= names_.size()) return {};
  return orientation == Qt::Vertical ? names_[section] + " sends" : names_[section];
}

QString LinksModel::median_text() const {
  const double median = median_gbs();
  return median > 0 ? "median " + rate_text(median)
                    : QString("every link ahead of its reader (faster than it can be timed here)");
}

// Between beginResetModel() and endResetModel().
void LinksModel::reset(int n, QStringList names) {
  cells_.assign(static_cast<std::size_t>(std::max(n, 0)), std::vector<Cell>(static_cast<std::size_t>(std::max(n, 0))));
  medians_.clear();
  names_ = std::move(names);
  findings_.clear();
}

void LinksModel::clear() {
  beginResetModel();
  reset(0, {});
  kind_.clear();
  summary_.clear();
  endResetModel();
}

void LinksModel::set_linkcheck(const agent::LinkcheckReport& report, const std::vector<std::string>& findings) {
  QStringList names;
  for (std::size_t i = 0; i < report.nodes.size(); ++i)
    names << QString("node %1 (%2)").arg(i).arg(QString::fromStdString(report.nodes[i]));
  beginResetModel();
  kind_ = "node";
  reset(static_cast<int>(report.nodes.size()), names);
  int measured = 0;
  for (const auto& l : report.links) {
    if (l.from < 0 || l.to < 0 || l.from >= rowCount() || l.to >= rowCount()) continue;
    Cell& c = cells_[static_cast<std::size_t>(l.from)][static_cast<std::size_t>(l.to)];
    c.gbs = l.gbs;
    c.ahead = l.ahead;
    c.floor_gbs = l.floor_gbs;
    c.measured = l.gbs > 0 || l.ahead;
    c.transport = QString::fromStdString(l.transport);
    c.error = QString::fromStdString(l.error);
    c.nominal_gbs = l.nominal_gbs;
    measured += c.measured ? 1 : 0;
  }
  compute_medians();
  for (const auto& f : findings)
    findings_ << QString::fromStdString(f);
  summary_ =
      QString("Link check over %1 nodes in %2 s: %3 of %4 links measured, %5; %6")
          .arg(report.nodes.size())
          .arg(report.seconds, 0, 'f', 1)
          .arg(measured)
          .arg(report.links.size())
          .arg(median_text())
          .arg(findings.empty() ? QString("no slow or failed link") : QString("%1 finding(s)").arg(findings.size()));
  endResetModel();
}

void LinksModel::set_run(const QString& run_id, int world,
                         const std::vector<std::pair<int, agent::events::Links>>& links, const QStringList& slow,
                         double floor_gbs) {
  QStringList names;
  for (int r = 0; r < world; ++r)
    names << QString("rank %1").arg(r);
  beginResetModel();
  kind_ = "rank";
  reset(world, names);
  int measured = 0;
  for (const auto& [to, event] : links) {
    for (const auto& l : event.links) {
      if (to < 0 || to >= world || l.from < 0 || l.from >= world) continue;
      Cell& c = cells_[static_cast<std::size_t>(l.from)][static_cast<std::size_t>(to)];
      c.gbs = l.gbs.value_or(0);
      c.ahead = !l.gbs && l.ahead > 0;
      c.floor_gbs = c.ahead ? floor_gbs : 0;
      c.measured = c.gbs > 0 || c.ahead;
      c.transport = QString::fromStdString(l.transport);
      measured += c.measured ? 1 : 0;
    }
  }
  compute_medians();
  findings_ = slow;
  summary_ = QString("Run %1: %2 ranks, %3 links measured at their receivers during large transfers, %4; %5")
                 .arg(run_id)
                 .arg(world)
                 .arg(measured)
                 .arg(median_text())
                 .arg(slow.isEmpty() ? QString("no slow link") : QString("%1 slow link(s)").arg(slow.size()));
  endResetModel();
}

}  // namespace ringmaster::ui
