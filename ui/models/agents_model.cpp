// agents_model
#include "models/agents_model.h"

#include <QBrush>
#include <QColor>

namespace ringmaster::ui {

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
        return static_cast<int>(r.faults.size());
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
  if (role == Qt::ToolTipRole && index.column() == faults_column && !r.faults.empty()) {
    QStringList lines;
    for (const auto& [id, what] : r.faults)
      lines << QString("fault %1: %2").arg(id).arg(what);
    return lines.join('\n');
  }
  if (role == Qt::ToolTipRole && index.column() == topology_column) {
    return r.inventory ? QString::fromStdString(r.inventory->topology_summary) : QString();
  }
  // Any other cell: its whole text, for a column too narrow to show it.
  if (role == Qt::ToolTipRole) return data(index, Qt::DisplayRole);
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
  rows_.push_back(Row{a, "connecting", {}, {}, {}, -1, {}, {}, origin});
  row_by_address_.insert(a, n);
  endInsertRows();
}

int AgentsModel::row_of(const QString& a) const {
  return row_by_address_.value(a, -1);
}

QString AgentsModel::address(int row) const {
  return rows_.at(static_cast<std::size_t>(row)).address;
}
const agent::Inventory* AgentsModel::inventory(int row) const {
  const auto& inventory = rows_.at(static_cast<std::size_t>(row)).inventory;
  return inventory ? &*inventory : nullptr;
}

void AgentsModel::set_state(const QString& a, const QString& s) {
  const int row = row_of(a);
  if (row < 0) return;
  rows_[static_cast<std::size_t>(row)].state = s;
  emit dataChanged(index(row, state_column), index(row, state_column));
}

void AgentsModel::set_inventory(const QString& a, const agent::Inventory& inv) {
  const int row = row_of(a);
  if (row < 0) return;
  Row& r = rows_[static_cast<std::size_t>(row)];
  r.inventory = inv;
  r.host = QString::fromStdString(inv.hostname);
  r.version = QString::fromStdString(inv.agent_version);
  r.topology = QString::fromStdString(inv.topology.origin);
  r.faults.clear();
  for (const auto& f : inv.faults) {
    r.faults[f.fault_id] = f.fault ? QString::fromStdString(agent::describe(*f.fault))
                                   : "a fault this console cannot read (" + QString::fromStdString(f.why_unread) + ")";
  }
  emit dataChanged(index(row, 0), index(row, column_count - 1));
}

void AgentsModel::fault_applied(const QString& a, const agent::events::FaultApplied& f) {
  const int row = row_of(a);
  if (row < 0) return;
  rows_[static_cast<std::size_t>(row)].faults[f.fault_id] =
      QString::fromStdString(agent::describe(f.fault) + " (" + f.mechanism + ")");
  emit dataChanged(index(row, faults_column), index(row, faults_column));
}

void AgentsModel::fault_reverted(const QString& a, int fault_id) {
  const int row = row_of(a);
  if (row < 0) return;
  rows_[static_cast<std::size_t>(row)].faults.erase(fault_id);
  emit dataChanged(index(row, faults_column), index(row, faults_column));
}

void AgentsModel::set_rtt(const QString& a, double ms) {
  const int row = row_of(a);
  if (row < 0) return;
  rows_[static_cast<std::size_t>(row)].rtt_ms = ms;
  emit dataChanged(index(row, rtt_column), index(row, rtt_column));
}

}  // namespace ringmaster::ui
