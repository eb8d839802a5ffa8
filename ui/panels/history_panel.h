// The run history: every kept run, newest first. Open one to see it again
// in every tab; select two and compare their busbw size by size. Below,
// the certifications kept beside the runs (the console's and
// `ringmaster-cli certify`'s, everyone's where the history is a team's
// PostgreSQL server); open one to see it in the Bring-up tab.
#pragma once

#include <QWidget>
#include <vector>

#include "history/history_database.h"

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

  // Reads the runs and certifications again (another engineer's, on a
  // shared server).
  void refresh();
  QTableWidget* certifications() const { return certifications_; }
  // The certification at `row` (newest first) opened: certification_opened.
  bool open_certification(int row);

 signals:
  void opened(const QString& run_id);
  // `report` is certify's JSON; `about` whose and when.
  void certification_opened(const QString& report, const QString& about);

 private:
  Console& console_;
  QTableView* runs_ = nullptr;
  QTableWidget* comparison_ = nullptr;
  QTableWidget* certifications_ = nullptr;
  std::vector<CertificationRecord> kept_;
  QLabel* note_ = nullptr;
};

}  // namespace ringmaster::ui
