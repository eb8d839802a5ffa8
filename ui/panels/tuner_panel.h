// The tuner's choice for the running collective: pick a collective and
// size, see every candidate (algorithm, protocol, channels) with its
// predicted time, the chosen one highlighted with the measured time beside
// it, and why the excluded ones could not run. Below, a simulated cluster
// (an instance profile times a number of nodes) beside the run: what the
// simulator predicts at each size the run measured.
#pragma once

#include <QWidget>

#include "models/run_state.h"
#include "models/simulation_model.h"

class QComboBox;
class QLabel;
class QSpinBox;
class QTableView;

namespace ringmaster::ui {

class TunerPanel : public QWidget {
  Q_OBJECT
 public:
  // `results` (may be null: no simulation) are the run's measured rows.
  explicit TunerPanel(TunerModel& model, const ResultsModel* results = nullptr, QWidget* parent = nullptr);
  SimulationModel& simulation() { return simulation_; }
  // Simulates `nodes` of `instance` beside the run (the button's work).
  bool simulate(const QString& instance, int nodes);

 private:
  void refresh_tables();

  TunerModel& model_;
  QComboBox* sizes_ = nullptr;
  QTableView* table_ = nullptr;
  QLabel* summary_ = nullptr;
  const ResultsModel* results_ = nullptr;
  SimulationModel simulation_;
  QComboBox* instance_ = nullptr;
  QSpinBox* nodes_ = nullptr;
  QLabel* simulated_ = nullptr;
};

}  // namespace ringmaster::ui
