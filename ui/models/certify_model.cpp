#include "models/certify_model.h"

#include <QColor>

namespace ringmaster::ui {

CertifyModel::CertifyModel(QObject* parent) : QAbstractTableModel(parent) {
  for (const auto& s : agent::certify_steps()) {
    Row row;
    row.name = QString::fromUtf8(s.name.data(), static_cast<int>(s.name.size()));
    row.title = QString::fromUtf8(s.title.data(), static_cast<int>(s.title.size()));
    rows_.push_back(std::move(row));
  }
}

int CertifyModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CertifyModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : column_count;
}

QVariant CertifyModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) return section + 1;
  switch (section) {
    case step_column:
      return QString("Step");
    case result_column:
      return QString("Result");
    case summary_column:
      return QString("What it checked and found");
    default:
      return {};
  }
}

QVariant CertifyModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case step_column:
        return r.title;
      case result_column:
        return r.state;
      case summary_column:
        return r.summary;
      default:
        return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    return r.findings.isEmpty() ? r.summary : r.summary + "\n- " + r.findings.join("\n- ");
  }
  if (role == Qt::BackgroundRole && index.column() == result_column) {
    if (r.state == "passed") return QColor(218, 251, 225);
    if (r.state == "found") return QColor(255, 248, 197);
    if (r.state == "failed") return QColor(255, 235, 233);
    if (r.state == "running") return QColor(221, 244, 255);
  }
  return {};
}

void CertifyModel::begin(int resumed) {
  resumed_ = resumed;
  for (auto& r : rows_) {
    r.state = "waiting";
    r.summary.clear();
    r.findings.clear();
    r.seconds = 0;
  }
  report_ = nlohmann::json();
  emit dataChanged(index(0, 0), index(rowCount() - 1, column_count - 1));
}

void CertifyModel::set_step(const agent::CertifyStep& step, bool ended) {
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    Row& r = rows_[i];
    if (r.name != QString::fromStdString(step.name)) continue;
    r.state = ended ? QString(agent::name_of(step.state)) : QString("running");
    r.summary = ended ? QString::fromStdString(step.summary)
                      : QString("over %1 node(s) ...").arg(static_cast<int>(step.nodes.size()));
    r.findings.clear();
    for (const auto& f : step.findings)
      r.findings << QString::fromStdString(f);
    r.seconds = step.seconds;
    const int row = static_cast<int>(i);
    emit dataChanged(index(row, 0), index(row, column_count - 1));
  }
}

void CertifyModel::finish(nlohmann::json report) {
  report_ = std::move(report);
  // Steps that never began (the checks stopped early) say why.
  for (const auto& s : report_.value("steps", nlohmann::json::array())) {
    for (auto& r : rows_) {
      if (r.name != QString::fromStdString(s.value("name", "")) || r.state != "waiting") continue;
      r.state = QString::fromStdString(s.value("state", "skipped"));
      r.summary = QString::fromStdString(s.value("summary", ""));
    }
  }
  emit dataChanged(index(0, 0), index(rowCount() - 1, column_count - 1));
}

void CertifyModel::show_report(nlohmann::json report) {
  begin();
  for (const auto& s : report.value("steps", nlohmann::json::array())) {
    for (auto& r : rows_) {
      if (r.name != QString::fromStdString(s.value("name", ""))) continue;
      r.state = QString::fromStdString(s.value("state", "skipped"));
      r.summary = QString::fromStdString(s.value("summary", ""));
      for (const auto& f : s.value("findings", nlohmann::json::array()))
        if (f.is_string()) r.findings << QString::fromStdString(f.get<std::string>());
      r.seconds = s.value("seconds", 0.0);
    }
  }
  finish(std::move(report));
}

QString CertifyModel::step_name(int row) const {
  return row >= 0 && row < rowCount() ? rows_[static_cast<std::size_t>(row)].name : QString();
}

QStringList CertifyModel::findings(int row) const {
  return row >= 0 && row < rowCount() ? rows_[static_cast<std::size_t>(row)].findings : QStringList();
}

QString CertifyModel::state(int row) const {
  return row >= 0 && row < rowCount() ? rows_[static_cast<std::size_t>(row)].state : QString();
}

QString CertifyModel::verdict_text() const {
  if (report_.is_object()) {
    QString text = QString("%1: %2 node(s) in %3 s")
                       .arg(QString::fromStdString(report_.value("verdict", "")))
                       .arg(report_.value("nodes", nlohmann::json::array()).size())
                       .arg(report_.value("seconds", 0.0), 0, 'f', 1);
    if (report_.value("short_of_envelope", false)) text += "; a sweep fell short of what these nodes should reach";
    if (resumed_ > 0)
      text += QString(" (resumed: %1 step(s) kept from a certification stopped half way)").arg(resumed_);
    return text;
  }
  for (const auto& r : rows_) {
    if (r.state == "running") return "running: " + r.title;
  }
  return {};
}

}  // namespace ringmaster::ui
