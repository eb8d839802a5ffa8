// Table columns fitted when rows change.
#include "panels/table_columns.h"

#include <QAbstractItemModel>
#include <QHeaderView>
#include <QTableView>
#include <QTimer>

namespace ringmaster::ui {

void fit_columns_when_rows_change(QTableView* view, std::function<QString(int column)> widest) {
  view->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  view->horizontalHeader()->setResizeContentsPrecision(64);
  auto* fit = new QTimer(view);
  fit->setSingleShot(true);
  fit->setInterval(200);  // a burst of rows fitted once
  QObject::connect(fit, &QTimer::timeout, view, [view, widest = std::move(widest)] {
    view->resizeColumnsToContents();
    if (!widest || !view->model()) return;
    for (int c = 0; c < view->model()->columnCount(); ++c) {
      const QString text = widest(c);
      if (text.isEmpty()) continue;
      const int width = view->fontMetrics().horizontalAdvance(text) + 16;  // the cell's margins
      if (view->columnWidth(c) < width) view->setColumnWidth(c, width);
    }
  });
  QAbstractItemModel* model = view->model();
  auto start = [fit] { fit->start(); };
  QObject::connect(model, &QAbstractItemModel::rowsInserted, fit, start);
  QObject::connect(model, &QAbstractItemModel::rowsRemoved, fit, start);
  QObject::connect(model, &QAbstractItemModel::modelReset, fit, start);
  QObject::connect(model, &QAbstractItemModel::layoutChanged, fit, start);
  fit->start();
}

void put_columns_first(QTableView* view, std::initializer_list<int> order) {
  view->setTextElideMode(Qt::ElideMiddle);
  view->setWordWrap(false);
  auto* header = view->horizontalHeader();
  int to = 0;
  for (const int column : order)
    header->moveSection(header->visualIndex(column), to++);
}

}  // namespace ringmaster::ui
