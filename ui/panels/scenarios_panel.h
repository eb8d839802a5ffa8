// The repro catalog in the console: pick a scenario, read its story, run
// it (the scenario runner's library, as `ringmaster-cli repro run`; needs
// root), see the verdict, and the run's events replayed into the timeline
// and the other panels. The catalog is read, run, and the recorded events
// checked against the scenario's expectations, by the same library as
// `ringmaster-cli repro`'s.
#pragma once

#include <QWidget>
#include <atomic>
#include <thread>
#include <vector>

#include "models/console.h"
#include "ringmaster/agent/scenario.h"
#include "ringmaster/agent/scenario_runner.h"

QT_BEGIN_NAMESPACE
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
QT_END_NAMESPACE

namespace ringmaster::ui {

// A scenario's expectations in words, one sentence a line ("The run
// fails at STORE_CONNECT on every rank but rank 0.", "Preflight says:
// “dropped”, …"), for the story pane; a key this console does not know is
// given as it is written.
QString expectation_text(const nlohmann::json& expect);

class ScenariosPanel : public QWidget {
  Q_OBJECT
 public:
  // `agent`: the ringmaster-agent the scenario's hosts run.
  ScenariosPanel(RunState& run, QString catalog, QString agent, QWidget* parent = nullptr);
  ~ScenariosPanel() override;
  int scenario_count() const { return static_cast<int>(scenarios_.size()); }
  // The scenario picked in the list (its name), empty when none.
  QString selected_name() const;
  void run_selected();
  // The ringmaster-agent the scenarios' hosts run (default: next to the
  // console).
  void set_agent(const QString& path) { agent_ = path; }

 signals:
  void finished(bool passed);

 private:
  RunState& run_;
  QString agent_;
  QString events_file_;
  // The recorded events of the scenario's run checked here; the lines to
  // show.
  QStringList check_recorded(const agent::Scenario& s) const;
  std::vector<agent::Scenario> scenarios_;
  QListWidget* list_ = nullptr;
  QPlainTextEdit* story_ = nullptr;
  QPlainTextEdit* output_ = nullptr;
  QLabel* verdict_ = nullptr;
  QPushButton* run_button_ = nullptr;
  void show_verdict(const agent::ScenarioVerdict& v);
  // The scenario in progress, on a thread of its own; stop_ ends it early.
  std::thread worker_;
  std::atomic<bool> stop_{false};
  bool worker_running_ = false;
};

}  // namespace ringmaster::ui
