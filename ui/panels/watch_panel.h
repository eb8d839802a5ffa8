// The Watch tab: "Attach to job" on a job the console did not launch (a
// torchrun job, an mpirun job), named by its TORCHELASTIC_RUN_ID, its
// MASTER_PORT or its processes, through every connected agent
// (docs/watch.md). Its ranks' rendezvous as the agents' watchers read it,
// the hang wavefront from its Flight Recorders and its NCCL logs, marked
// as watched: the console never kills or signals the job.
#pragma once

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableView;

namespace ringmaster::ui {

class Console;
class TimelineView;

class WatchPanel : public QWidget {
  Q_OBJECT
 public:
  explicit WatchPanel(Console& console, QWidget* parent = nullptr);

  // What "Attach to job" does; false (the reason shown) when it cannot.
  bool attach();
  // The job to attach to: `by` is "run id", "master port" or "pids".
  void set_job(const QString& by, const QString& value);
  QTableView* table() const { return table_; }
  QPlainTextEdit* notes() const { return notes_; }
  // The selected process: what its sockets say and the bootstrap's hint.
  QPlainTextEdit* detail() const { return detail_; }
  QLabel* summary() const { return summary_; }
  TimelineView* timeline() const { return timeline_; }

 private:
  void show_notes();

  Console& console_;
  QComboBox* by_ = nullptr;
  QLineEdit* value_ = nullptr;
  QCheckBox* flight_recorder_ = nullptr;
  QCheckBox* nccl_log_ = nullptr;
  QCheckBox* nccl_ras_ = nullptr;
  QSpinBox* minutes_ = nullptr;
  QPushButton* attach_ = nullptr;
  QPushButton* stop_ = nullptr;
  QLabel* summary_ = nullptr;
  QTableView* table_ = nullptr;
  TimelineView* timeline_ = nullptr;
  QPlainTextEdit* notes_ = nullptr;
  QPlainTextEdit* detail_ = nullptr;
};

}  // namespace ringmaster::ui
