// The tuner's choice for the running collective: pick a collective and
// size, see every candidate (algorithm, protocol, channels) with its
// predicted time, the chosen one highlighted with the measured time beside
// it, and why the excluded ones could not run.
#pragma once

#include <QWidget>

#include "models/run_state.h"

class QComboBox;
class QLabel;
class QTableView;

namespace ringmaster::ui {

class TunerPanel : public QWidget {
  Q_OBJECT
 public:
  explicit TunerPanel(TunerModel& model, QWidget* parent = nullptr);

 private:
  void refresh_tables();

  TunerModel& model_;
  QComboBox* sizes_ = nullptr;
  QTableView* table_ = nullptr;
  QLabel* summary_ = nullptr;
};

}  // namespace ringmaster::ui
