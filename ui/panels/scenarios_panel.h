// The repro catalog in the console: pick a scenario, read its story, run
// it (ringmaster-cli repro run, which needs root), see the verdict, and
// the run's events replayed into the timeline and the other panels.
#pragma once

#include <QProcess>
#include <QWidget>
#include <nlohmann/json.hpp>
#include <vector>

#include "models/console.h"

QT_BEGIN_NAMESPACE
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
QT_END_NAMESPACE

namespace ringmaster::ui {

// The scenarios of a catalog directory, sorted by file name.
std::vector<nlohmann::json> load_scenarios(const QString& dir);

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
  std::vector<nlohmann::json> scenarios_;
  QListWidget* list_ = nullptr;
  QPlainTextEdit* story_ = nullptr;
  QPlainTextEdit* output_ = nullptr;
  QLabel* verdict_ = nullptr;
  QPushButton* run_button_ = nullptr;
  QProcess process_;
};

}  // namespace ringmaster::ui
