// The agents the console talks to.
#pragma once

#include <QAbstractTableModel>
#include <QHash>
#include <QString>
#include <map>
#include <optional>
#include <vector>

#include "ringmaster/agent/events.h"
#include "ringmaster/agent/requests.h"

namespace ringmaster::ui {

// Agents: address, state, host, version, topology, round trip, faults.
class AgentsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    address_column,
    origin_column,  // the name the agent was found through, if any (beside the address it gave)
    state_column,
    host_column,
    version_column,
    topology_column,
    rtt_column,
    faults_column,
    column_count
  };
  using QAbstractTableModel::QAbstractTableModel;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void add(const QString& address, const QString& origin = {});
  void set_state(const QString& address, const QString& state);
  void set_inventory(const QString& address, const agent::Inventory& inventory);
  void set_rtt(const QString& address, double ms);
  // The agent's `fault_applied` and `fault_reverted` events: the Faults
  // column follows them between inventories.
  void fault_applied(const QString& address, const agent::events::FaultApplied& f);
  void fault_reverted(const QString& address, int fault_id);
  int row_of(const QString& address) const;
  QString address(int row) const;
  // Null until the agent's inventory came.
  const agent::Inventory* inventory(int row) const;

 private:
  struct Row {
    QString address, state, host, version, topology;
    double rtt_ms = -1;
    std::map<int, QString> faults;  // id → what it does
    std::optional<agent::Inventory> inventory;
    QString origin;
  };
  std::vector<Row> rows_;
  QHash<QString, int> row_by_address_;  // each row's index: 256 agents' round trips a second looked each up
};

}  // namespace ringmaster::ui
