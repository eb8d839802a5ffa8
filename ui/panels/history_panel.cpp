#include "panels/history_panel.h"
#include "panels/table_columns.h"


#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

#include "models/console.h"

namespace ringmaster::ui {

HistoryPanel::HistoryPanel(Console& console, QWidget* parent) : QWidget(parent), console_(console) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  auto* open = new QPushButton("Open");
  open->setToolTip("Show the selected run again in every tab");
  auto* compare = new QPushButton("Compare");
  compare->setToolTip("Select two runs: busbw per size side by side, and their ratio");
  note_ = new QLabel;
  note_->setObjectName("historyNote");
  note_->setWordWrap(true);
  row->addWidget(open);
  row->addWidget(compare);
  row->addWidget(note_, 1);
  layout->addLayout(row);
  auto* split = new QSplitter(Qt::Vertical);
  runs_ = new QTableView;
  runs_->setObjectName("historyRuns");
  runs_->setAccessibleName("Kept runs");
  runs_->setModel(&console_.history);
  runs_->setSelectionBehavior(QAbstractItemView::SelectRows);
  runs_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  runs_->verticalHeader()->setVisible(false);
  // At 1366 px the decisive columns first (when, what, the verdict and
  // its busbw); the run id and "What", which can be long, capped and
  // elided in the middle, their whole text in the row's tooltip.
  {
    auto* header = runs_->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::Interactive);
    header->setStretchLastSection(true);
    put_columns_first(runs_, {RunHistory::started_column, RunHistory::what_column, RunHistory::result_column,
                              RunHistory::busbw_column, RunHistory::rows_column, RunHistory::ranks_column,
                              RunHistory::kind_column, RunHistory::run_column});
    auto fit = [this] {
      runs_->resizeColumnsToContents();
      auto* h = runs_->horizontalHeader();
      h->resizeSection(RunHistory::what_column, std::min(h->sectionSize(RunHistory::what_column), 320));
      h->resizeSection(RunHistory::run_column, std::min(h->sectionSize(RunHistory::run_column), 180));
    };
    connect(&console_.history, &QAbstractItemModel::modelReset, this, fit);
    connect(&console_.history, &QAbstractItemModel::rowsInserted, this, fit);
    fit();
  }
  comparison_ = new QTableWidget(0, 4);
  comparison_->setObjectName("historyComparison");
  comparison_->setAccessibleName("Comparison of the selected runs");
  comparison_->setHorizontalHeaderLabels({"Size (B)", "busbw A (GB/s)", "busbw B (GB/s)", "B / A"});
  comparison_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  comparison_->verticalHeader()->setVisible(false);
  comparison_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  split->addWidget(runs_);
  split->addWidget(comparison_);
  layout->addWidget(split, 1);
  note_->setText(console_.history.is_open() ? "Kept in " + console_.history.path()
                                            : "The history is not available (see the console's output).");

  auto selected = [this] {
    std::vector<int> rows;
    for (const auto& i : runs_->selectionModel()->selectedRows())
      rows.push_back(i.row());
    std::sort(rows.begin(), rows.end());
    return rows;
  };
  connect(runs_, &QTableView::doubleClicked, this, [this](const QModelIndex& i) { open_row(i.row()); });
  connect(open, &QPushButton::clicked, this, [this, selected] {
    const auto rows = selected();
    if (rows.size() == 1) open_row(rows.front());
  });
  connect(compare, &QPushButton::clicked, this, [this, selected] {
    const auto rows = selected();
    if (rows.size() != 2) {
      note_->setText("Select two runs to compare (Ctrl+click).");
      return;
    }
    // The older run is A.
    compare_rows(rows[1], rows[0]);
  });
}

bool HistoryPanel::open_row(int row) {
  const QString id = console_.history.run_id_at(row);
  if (id.isEmpty() || console_.run.running()) return false;
  const int n = console_.history.load(id, console_.run);
  note_->setText(n < 0 ? "Cannot read run " + id : QString("Opened %1 (%2 messages)").arg(id).arg(n));
  if (n >= 0) emit opened(id);
  return n >= 0;
}

bool HistoryPanel::compare_rows(int row_a, int row_b) {
  return compare_runs(console_.history.run_id_at(row_a), console_.history.run_id_at(row_b));
}

bool HistoryPanel::compare_runs(const QString& a, const QString& b, const QString& name_a, const QString& name_b,
                                const QString& remark) {
  if (a.isEmpty() || b.isEmpty()) return false;
  const auto rows = console_.history.compare(a, b);
  comparison_->setHorizontalHeaderLabels({"Size (B)", QString("busbw %1 (GB/s)").arg(name_a),
                                          QString("busbw %1 (GB/s)").arg(name_b),
                                          QString("%1 / %2").arg(name_b, name_a)});
  comparison_->setRowCount(static_cast<int>(rows.size()));
  auto cell = [](double v) { return new QTableWidgetItem(v < 0 ? QString("—") : QString::number(v, 'g', 4)); };
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    const auto& c = rows[static_cast<std::size_t>(r)];
    comparison_->setItem(r, 0, new QTableWidgetItem(QString::number(static_cast<qulonglong>(c.bytes))));
    comparison_->setItem(r, 1, cell(c.busbw_a));
    comparison_->setItem(r, 2, cell(c.busbw_b));
    comparison_->setItem(r, 3, cell(c.busbw_a > 0 && c.busbw_b >= 0 ? c.busbw_b / c.busbw_a : -1));
  }
  note_->setText(QString("%1: %2   %3: %4").arg(name_a, a, name_b, b) + (remark.isEmpty() ? "" : "   " + remark));
  return true;
}

}  // namespace ringmaster::ui
