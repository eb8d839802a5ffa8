// The run history: every kept run, newest first. Open one to see it again
// in every tab; select two and compare their busbw size by size.
#pragma once

#include <QWidget>

class QLabel;
class QTableView;
class QTableWidget;

namespace ringmaster::ui {

class Console;

class HistoryPanel : public QWidget {
  Q_OBJECT
 public:
  explicit HistoryPanel(Console& console, QWidget* parent = nullptr);

  // Replays the run at `row` into the console's run state.
  bool open_row(int row);
  // Fills the comparison table from two rows; false unless both are runs.
  bool compare_rows(int row_a, int row_b);
  // The same for two kept runs by id, their columns named `name_a` and
  // `name_b` (e.g. the two engines of one sweep), `remark` after the ids.
  bool compare_runs(const QString& run_a, const QString& run_b, const QString& name_a = "A",
                    const QString& name_b = "B", const QString& remark = {});
  QTableWidget* comparison() const { return comparison_; }

 signals:
  void opened(const QString& run_id);

 private:
  Console& console_;
  QTableView* runs_ = nullptr;
  QTableWidget* comparison_ = nullptr;
  QLabel* note_ = nullptr;
};

}  // namespace ringmaster::ui
