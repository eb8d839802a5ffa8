// The Bring-up tab: certify (docs/certify.md) over the connected agents as
// a checklist. A Certify button with the nodes' instance type or a node's
// topology file (for the expected envelope), the sweeps' largest size and the ranks' environment;
// each step's progress and result as it runs; every node's verdict and
// the links found wanting with why; the selected step's findings; the
// report exported as HTML or JSON. Opening the preflight or link check
// step shows its own tab, which holds that step's report.
#pragma once

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QTableView;
class QTableWidget;

namespace ringmaster::ui {

class Console;

class BringupPanel : public QWidget {
  Q_OBJECT
 public:
  explicit BringupPanel(Console& console, QWidget* parent = nullptr);

  // What the Certify button does; false (the reason shown) when it cannot
  // start.
  bool start();
  // The ranks' environment ("NCCL_SHM_DISABLE=1 NCCL_NET=OFI") and the
  // instance type ("" for none) for the next certification.
  void set_environment(const QString& assignments);
  void set_instance(const QString& instance);
  // Declares the cluster by a node's topology file instead (the last
  // entry of the instance list, "Topology file..." asks for one).
  void set_topology_file(const QString& path);
  // Writes the last report: HTML for a .html or .htm name, else JSON.
  bool export_report(const QString& path, QString* error = nullptr) const;
  // Shows a certification kept in the history (its JSON report), `about`
  // saying whose and when; false while one runs or when it cannot be read.
  bool show_kept(const QString& report, const QString& about);
  // A step was opened that another tab shows in full ("Preflight",
  // "Links").
  void open_step(int row);

  QTableView* steps() const { return steps_; }
  QTableWidget* nodes() const { return nodes_; }
  QListWidget* findings() const { return findings_; }
  QLabel* verdict() const { return verdict_; }

 signals:
  void open_tab(QString name);

 private:
  void show_report();
  void show_findings(int row);

  Console& console_;
  QPushButton* run_ = nullptr;
  QPushButton* export_ = nullptr;
  QComboBox* instance_ = nullptr;
  QLineEdit* max_bytes_ = nullptr;
  QLineEdit* env_ = nullptr;
  QLabel* verdict_ = nullptr;
  QTableView* steps_ = nullptr;
  QListWidget* findings_ = nullptr;
  QTableWidget* nodes_ = nullptr;
};

}  // namespace ringmaster::ui
