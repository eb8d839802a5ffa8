// The console's window: agents and the run launcher on the left; live
// bandwidth, the rendezvous timeline, results, the engine's decisions and
// the topology in tabs; connection and run state in the status bar.
#pragma once

#include <QMainWindow>

#include "models/console.h"

QT_BEGIN_NAMESPACE
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QCheckBox;
class QFormLayout;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSplitter;
class QSpinBox;
class QTabWidget;
class QTableView;
QT_END_NAMESPACE

namespace ringmaster::ui {

class BandwidthChart;
class BusbwPlot;
class HistoryPanel;
class ScenariosPanel;
class TimelineView;
class TopologyView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(Console& console, QWidget* parent = nullptr);

  RunSpec run_spec() const;
  void set_run_spec(const RunSpec& spec);
  void start_run();
  // Renders the window into a PNG.
  bool save_screenshot(const QString& path);
  // Rank 0's result rows: JSON when the name ends in .json, CSV otherwise.
  bool export_results(const QString& path) const;
  BusbwPlot* busbw_plot() const { return busbw_plot_; }
  void set_dark(bool dark);
  // Agents connected by hand, newest first.
  QStringList remembered_agents() const;
  // A remembered agent's entry: address|token file|tls|CA|certificate|key.
  void remember_agent(const QString& address, const QStringList& access_files);
  // The access the connect row describes (token read from its file);
  // false, with the reason, when a file cannot be read.
  bool access_from_row(AgentAccess* access, QString* error) const;
  // Puts a remembered agent's token file and TLS files in the connect row.
  void fill_row_from_memory(const QString& address);
  QTabWidget* tabs() const { return tabs_; }
  // The tabs' titles, in order: what --tab may name (checked before any
  // window exists, so without a display too).
  static const QStringList& tab_names();
  // The tab a --tab value names: its title or the title's first word, in
  // any case ("stages" is "Stages (ms)"); -1 when none.
  static int tab_named(const QString& name);
  BandwidthChart* bandwidth() const { return bandwidth_; }
  TimelineView* timeline() const { return timeline_; }
  ScenariosPanel* scenarios() const { return scenarios_; }
  QPlainTextEdit* stage_detail() const { return detail_; }
  // What the run shown was, when it was not run here: "replay of
  // seed.jsonl", "from the history". The status bar says it.
  void set_source(const QString& what);
  // A run whose init failed: the Live tab opens on its cause (the failed
  // stage, rank, addresses and whole hint in the detail pane, made tall
  // enough), with the empty bandwidth chart folded away.
  void show_cause();

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void build_menus();
  void add_history_watch_and_bring_up();
  void lay_out_agents_table();
  void update_status();
  QFormLayout* build_run_form();
  void show_stage_detail(int rank, int stage);
  void show_selected_topology();
  void refresh_completions();

  Console& console_;
  QTabWidget* tabs_ = nullptr;
  BandwidthChart* bandwidth_ = nullptr;
  TimelineView* timeline_ = nullptr;
  TopologyView* topology_ = nullptr;
  ScenariosPanel* scenarios_ = nullptr;
  HistoryPanel* history_ = nullptr;
  BusbwPlot* busbw_plot_ = nullptr;
  QPlainTextEdit* detail_ = nullptr;
  QSplitter* live_ = nullptr;
  bool live_folded_ = false;  // show_cause() folded the chart away
  QString source_;
  QTableView* agents_view_ = nullptr;
  QLineEdit* agent_address_ = nullptr;
  QLineEdit* token_file_ = nullptr;
  QCheckBox* tls_ = nullptr;
  QLineEdit* tls_ca_ = nullptr;
  QLineEdit* tls_cert_ = nullptr;
  QLineEdit* tls_key_ = nullptr;
  QComboBox* collective_ = nullptr;
  QLineEdit* min_bytes_ = nullptr;
  QLineEdit* max_bytes_ = nullptr;
  QDoubleSpinBox* factor_ = nullptr;
  QSpinBox* iters_ = nullptr;
  QSpinBox* per_agent_ = nullptr;
  QSpinBox* world_ = nullptr;
  QComboBox* dtype_ = nullptr;
  QComboBox* op_ = nullptr;
  QComboBox* algo_ = nullptr;
  QComboBox* proto_ = nullptr;
  QSpinBox* channels_ = nullptr;
  QComboBox* engine_ = nullptr;
  QCheckBox* allow_mixed_ = nullptr;
  QPushButton* run_button_ = nullptr;
  QLabel* status_agents_ = nullptr;
  QLabel* status_run_ = nullptr;
  QLabel* wavefront_summary_ = nullptr;
};

}  // namespace ringmaster::ui
