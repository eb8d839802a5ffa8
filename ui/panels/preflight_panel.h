// The Preflight tab: before any job, whether the connected agents' nodes
// reach each other on every port class a job uses and what each node
// lacks (docs/bringup.md). A Run button with MASTER_ADDR, MASTER_PORT and
// NCCL_SOCKET_IFNAME to check, the matrix of one port class at a time, the
// findings (problems first) and each node's facts.
#pragma once

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QSpinBox;
class QTableView;
class QTableWidget;

namespace ringmaster::ui {

class Console;

class PreflightPanel : public QWidget {
  Q_OBJECT
 public:
  explicit PreflightPanel(Console& console, QWidget* parent = nullptr);

  // What the Run button does; false (the reason shown) when it cannot start.
  bool start();
  QTableView* matrix() const { return matrix_; }
  QListWidget* findings() const { return findings_; }
  QComboBox* port_classes() const { return classes_; }

 private:
  void show_report();

  Console& console_;
  QPushButton* run_ = nullptr;
  QLineEdit* master_addr_ = nullptr;
  QSpinBox* master_port_ = nullptr;
  QLineEdit* socket_ifname_ = nullptr;
  QLabel* summary_ = nullptr;
  QComboBox* classes_ = nullptr;
  QTableView* matrix_ = nullptr;
  QListWidget* findings_ = nullptr;
  QTableWidget* nodes_ = nullptr;
};

}  // namespace ringmaster::ui
