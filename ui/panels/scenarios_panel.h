// The repro catalog in the console: pick a scenario, read its story, run
// it (ringmaster-cli repro run, which needs root), see the verdict, and
// the run's events replayed into the timeline and the other panels. The
// catalog is read, and the recorded events checked against the scenario's
// expectations, by the same library as `ringmaster-cli repro`'s.
#pragma once

#include <QProcess>
#include <QWidget>
#include <vector>

#include "models/console.h"
#include "ringmaster/agent/scenario.h"

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
  ScenariosPanel(RunState& run, QString catalog, QString cli, QWidget* parent = nullptr);
  int scenario_count() const { return static_cast<int>(scenarios_.size()); }
  // The scenario picked in the list (its name), empty when none.
  QString selected_name() const;
  void run_selected();
  // The ringmaster-cli that runs scenarios (default: next to the console).
  void set_cli(const QString& path) { cli_ = path; }

 signals:
  void finished(bool passed);

 private:
  RunState& run_;
  QString cli_;
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
  QProcess process_;
};

}  // namespace ringmaster::ui
