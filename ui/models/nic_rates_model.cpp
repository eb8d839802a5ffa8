// nic_rates_model
#include "models/nic_rates_model.h"

#include <QBrush>
#include <QColor>
#include <algorithm>

namespace ringmaster::ui {

int NicRatesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int NicRatesModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : column_count;
}

QVariant NicRatesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Agent", "Device", "Speed", "Receive", "Send", "Busiest way, of speed"};
  return section >= 0 && section < column_count ? QString(names[section]) : QVariant();
}

namespace {

QString gbits(double v) {
  if (v < 0) return "…";
  return v >= 1 ? QString("%1 Gb/s").arg(v, 0, 'f', 2) : QString("%1 Mb/s").arg(v * 1000, 0, 'f', 1);
}

}  // namespace

QVariant NicRatesModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  const double busiest = std::max(r.rx_gbits, r.tx_gbits);
  const double share = r.speed_gbits > 0 && busiest >= 0 ? busiest / r.speed_gbits : -1;
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case agent_column:
        return r.agent;
      case device_column:
        return r.rdma ? r.device + " (RDMA)" : r.device;
      case speed_column:
        return r.speed_gbits > 0 ? QString("%1 Gb/s").arg(r.speed_gbits, 0, 'g', 4) : QString("unknown");
      case receive_column:
        return gbits(r.rx_gbits);
      case send_column:
        return gbits(r.tx_gbits);
      case share_column:
        return share < 0 ? QString() : QString("%1 %").arg(share * 100, 0, 'f', 1);
      default:
        return {};
    }
  }
  if (role == Qt::UserRole) return share;  // for the bars
  if (role == Qt::BackgroundRole && index.column() == share_column && share >= 0) {
    // Green as a rail fills; a busy node's idle rail stays white.
    const int g = static_cast<int>(255 - std::min(1.0, share) * 110);
    return QBrush(QColor(g, 255, g));
  }
  return {};
}

int NicRatesModel::row_of(const QString& agent, const QString& device) const {
  // Rows are sorted by agent, then device.
  const auto at = std::partition_point(
      rows_.begin(), rows_.end(), [&](const Row& r) { return r.agent != agent ? r.agent < agent : r.device < device; });
  return at != rows_.end() && at->agent == agent && at->device == device ? static_cast<int>(at - rows_.begin()) : -1;
}

void NicRatesModel::add(const QString& agent, const agent::events::NicSample& sample) {
  for (const auto& n : sample.nics) {
    const QString device = QString::fromStdString(n.name);
    if (device == "lo") continue;
    int row = row_of(agent, device);
    if (row < 0) {
      Row r{agent,       device, n.rdma, static_cast<double>(n.speed_mbps) / 1000, n.rx_bytes, n.tx_bytes,
            sample.t_us, -1,     -1};
      const auto at = std::lower_bound(rows_.begin(), rows_.end(), r, [](const Row& a, const Row& b) {
        return std::make_pair(a.agent, a.device) < std::make_pair(b.agent, b.device);
      });
      row = static_cast<int>(at - rows_.begin());
      beginInsertRows({}, row, row);
      rows_.insert(at, r);
      endInsertRows();
      continue;
    }
    Row& r = rows_[static_cast<std::size_t>(row)];
    const double seconds = static_cast<double>(sample.t_us - r.t_us) / 1e6;
    if (seconds > 0) {
      // Counters that went back (a device reset) count from zero.
      r.rx_gbits = static_cast<double>(n.rx_bytes >= r.rx ? n.rx_bytes - r.rx : n.rx_bytes) * 8 / seconds / 1e9;
      r.tx_gbits = static_cast<double>(n.tx_bytes >= r.tx ? n.tx_bytes - r.tx : n.tx_bytes) * 8 / seconds / 1e9;
    }
    r.rx = n.rx_bytes;
    r.tx = n.tx_bytes;
    r.t_us = sample.t_us;
    r.speed_gbits = static_cast<double>(n.speed_mbps) / 1000;
    emit dataChanged(index(row, 0), index(row, column_count - 1));
  }
}

void NicRatesModel::remove(const QString& agent) {
  for (int i = static_cast<int>(rows_.size()) - 1; i >= 0; --i) {
    if (rows_[static_cast<std::size_t>(i)].agent != agent) continue;
    beginRemoveRows({}, i, i);
    rows_.erase(rows_.begin() + i);
    endRemoveRows();
  }
}

std::pair<double, double> NicRatesModel::rate(const QString& agent, const QString& device) const {
  const int row = row_of(agent, device);
  if (row < 0) return {-1, -1};
  return {rows_[static_cast<std::size_t>(row)].rx_gbits, rows_[static_cast<std::size_t>(row)].tx_gbits};
}

}  // namespace ringmaster::ui
