// The rails: each network device of each connected agent's node, with
// what it receives and sends per second, from the agents' `nic_sample`
// events (cumulative bytes, a sample a second). A rail that carries
// nothing while its neighbours are busy, or far less than its speed,
// shows at a glance; traffic outside Ringmaster's runs counts too.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <map>
#include <utility>
#include <vector>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

class NicRatesModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { agent_column, device_column, speed_column, receive_column, send_column, share_column, column_count };
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  // One agent's sample: its devices' rates since its previous one. Loopback
  // is left out: it is no rail.
  void add(const QString& agent, const agent::events::NicSample& sample);
  // The agent went away: its rows go.
  void remove(const QString& agent);
  // Gb/s received and sent by `device` of `agent` at its last sample, -1
  // before its second.
  std::pair<double, double> rate(const QString& agent, const QString& device) const;

 private:
  struct Row {
    QString agent, device;
    bool rdma = false;
    double speed_gbits = 0;
    std::uint64_t rx = 0, tx = 0;
    long long t_us = -1;
    double rx_gbits = -1, tx_gbits = -1;
  };
  int row_of(const QString& agent, const QString& device) const;
  std::vector<Row> rows_;  // sorted by agent, then device
};

}  // namespace ringmaster::ui
