#include "models/preflight_model.h"

#include <QColor>

#include <algorithm>

namespace ringmaster::ui {

namespace {

// The cell colours: green open, red dropped, orange rejected or refused,
// grey what could not be told.
QColor colour_of(Reach r, bool partly) {
  if (partly) return QColor(0xf6, 0xd5, 0x8e);
  switch (r) {
    case Reach::ok:
      return QColor(0xb7, 0xe4, 0xb0);
    case Reach::dropped:
      return QColor(0xf4, 0xa0, 0xa0);
    case Reach::rejected:
    case Reach::refused:
      return QColor(0xf7, 0xbe, 0x8a);
    case Reach::no_route:
    case Reach::unresolved:
    case Reach::error:
      return QColor(0xd9, 0xa6, 0xd9);
    case Reach::untested:
      break;
  }
  return QColor(0xdd, 0xdd, 0xdd);
}

}  // namespace

int PreflightModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !report_ ? 0 : static_cast<int>(report_->nodes.size());
}

int PreflightModel::columnCount(const QModelIndex& parent) const {
  return rowCount(parent);
}

QVariant PreflightModel::data(const QModelIndex& index, int role) const {
  if (!report_ || !index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  if (report_->classes.empty()) return {};
  const std::string& cls = report_->classes[static_cast<std::size_t>(class_)].name;
  const int from = index.row(), to = index.column();
  const std::string text = report_->cell_text(from, to, cls);
  switch (role) {
    case Qt::DisplayRole:
      return QString::fromStdString(text);
    case Qt::BackgroundRole:
      if (from == to) return {};
      return colour_of(report_->cell(from, to, cls), text.find("ok") != std::string::npos && text != "ok");
    case Qt::TextAlignmentRole:
      return Qt::AlignCenter;
    case Qt::ToolTipRole: {
      // Every port of the cell: "39825: dropped (no SYN-ACK in 3000 ms)".
      QStringList lines;
      for (const auto& p : report_->probes) {
        if (p.from != from || p.to != to || p.port_class != cls) continue;
        QString line = QString("%1:%2 %3").arg(QString::fromStdString(p.host)).arg(p.port).arg(name_of(p.result.reach));
        if (!p.result.detail.empty()) line += " (" + QString::fromStdString(p.result.detail) + ")";
        if (p.result.path_mtu > 0) line += QString(", path MTU %1").arg(p.result.path_mtu);
        lines << line;
      }
      return lines.join('\n');
    }
    default:
      return {};
  }
}

QVariant PreflightModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (!report_ || section < 0 || section >= rowCount()) return {};
  const PreflightNode& node = report_->nodes[static_cast<std::size_t>(section)];
  if (role == Qt::DisplayRole) {
    return orientation == Qt::Vertical ? QString("node %1 (%2)").arg(section).arg(QString::fromStdString(node.address))
                                       : QString("node %1").arg(section);
  }
  if (role == Qt::ToolTipRole) {
    return QString::fromStdString(node.name + " " + node.address + (node.error.empty() ? "" : ": " + node.error));
  }
  return {};
}

void PreflightModel::set(PreflightReport report) {
  beginResetModel();
  findings_ = diagnose_preflight(report);
  report_ = std::move(report);
  class_ = 0;
  endResetModel();
}

void PreflightModel::clear() {
  beginResetModel();
  report_.reset();
  findings_.clear();
  class_ = 0;
  endResetModel();
}

QStringList PreflightModel::port_class_labels() const {
  QStringList out;
  if (report_) {
    for (const auto& c : report_->classes)
      out << QString::fromStdString(c.label);
  }
  return out;
}

void PreflightModel::set_port_class(int index) {
  if (!report_ || index < 0 || index >= static_cast<int>(report_->classes.size()) || index == class_) return;
  class_ = index;
  emit dataChanged(this->index(0, 0), this->index(rowCount() - 1, columnCount() - 1));
}

QString PreflightModel::summary() const {
  if (!report_) return {};
  const auto count = [&](PreflightFinding::Severity s) {
    return std::count_if(findings_.begin(), findings_.end(), [&](const auto& f) { return f.severity == s; });
  };
  const auto problems = count(PreflightFinding::Severity::problem);
  const auto warnings = count(PreflightFinding::Severity::warning);
  QString verdict = problems == 0 ? QString("no problem found") : QString("%1 problem(s)").arg(problems);
  if (warnings > 0) verdict += QString(", %1 warning(s)").arg(warnings);
  return QString("%1 node(s) in %2 s: %3")
      .arg(report_->nodes.size())
      .arg(report_->seconds, 0, 'f', report_->seconds < 1 ? 2 : 1)
      .arg(verdict);
}

}  // namespace ringmaster::ui
