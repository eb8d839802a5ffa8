#include "panels/history_panel.h"

#include <QDateTime>
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
#include "panels/table_columns.h"

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
  auto* refresh_button = new QPushButton("Refresh");
  refresh_button->setObjectName("historyRefresh");
  refresh_button->setToolTip("Read the history again: runs and certifications others kept on a shared server");
  row->addWidget(open);
  row->addWidget(compare);
  row->addWidget(refresh_button);
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
  certifications_ = new QTableWidget(0, 8);
  certifications_->setObjectName("historyCertifications");
  certifications_->setAccessibleName("Kept certifications");
  certifications_->setHorizontalHeaderLabels(
      {"Finished", "Verdict", "Nodes", "Isolated", "Instance", "By", "Agents", "Time (s)"});
  certifications_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  certifications_->horizontalHeader()->setStretchLastSection(true);
  certifications_->verticalHeader()->setVisible(false);
  certifications_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  certifications_->setSelectionBehavior(QAbstractItemView::SelectRows);
  certifications_->setToolTip("Double-click a certification to see it in the Bring-up tab");
  split->addWidget(runs_);
  split->addWidget(certifications_);
  split->addWidget(comparison_);
  layout->addWidget(split, 1);
  refresh();
  connect(refresh_button, &QPushButton::clicked, this, [this] {
    console_.history.reload();
    refresh();
  });
  connect(&console_, &Console::certification_kept, this, &HistoryPanel::refresh);
  connect(certifications_, &QTableWidget::cellDoubleClicked, this, [this](int r, int) { open_certification(r); });

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

void HistoryPanel::refresh() {
  note_->setText(console_.history.is_open() ? "Kept in " + console_.history.path()
                                            : "The history is not available (see the console's output).");
  kept_ = console_.history.database().certifications();
  certifications_->setRowCount(static_cast<int>(kept_.size()));
  for (int r = 0; r < static_cast<int>(kept_.size()); ++r) {
    const auto& c = kept_[static_cast<std::size_t>(r)];
    const QString verdict =
        c.short_of_envelope && c.verdict != "ISOLATE" ? c.verdict + ", short of the envelope" : c.verdict;
    const QStringList cells = {QDateTime::fromMSecsSinceEpoch(c.finished_ms).toString("yyyy-MM-dd hh:mm:ss"),
                               verdict,
                               QString("%1 (%2 pass, %3 monitor)").arg(c.nodes).arg(c.passed).arg(c.monitored),
                               QString("%1 node(s), %2 link(s)").arg(c.isolated).arg(c.links_isolated),
                               c.instance.isEmpty() ? QString("—") : c.instance,
                               c.who,
                               c.agents,
                               QString::number(c.seconds, 'f', 1)};
    for (int col = 0; col < cells.size(); ++col)
      certifications_->setItem(r, col, new QTableWidgetItem(cells[col]));
  }
}

bool HistoryPanel::open_certification(int row) {
  if (row < 0 || row >= static_cast<int>(kept_.size())) return false;
  const auto& c = kept_[static_cast<std::size_t>(row)];
  const QString about = QString("kept by %1 on %2")
                            .arg(c.who, QDateTime::fromMSecsSinceEpoch(c.finished_ms).toString("yyyy-MM-dd hh:mm"));
  emit certification_opened(c.report, about);
  return true;
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
