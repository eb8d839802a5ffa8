#include "panels/busbw_plot.h"

#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "panels/chart_palette.h"

namespace ringmaster::ui {

BusbwPlot::BusbwPlot(const ResultsModel& results, QWidget* parent) : QWidget(parent), results_(results) {
  setObjectName("busbwPlot");
  chart_ = new QChart;
  chart_->legend()->setAlignment(Qt::AlignRight);
  chart_->setMargins(QMargins(4, 4, 4, 4));
  out_of_place_ = new QLineSeries;
  out_of_place_->setName("out of place");
  in_place_ = new QLineSeries;
  in_place_->setName("in place");
  chart_->addSeries(out_of_place_);
  chart_->addSeries(in_place_);
  x_ = new QLogValueAxis;
  x_->setBase(16);  // a label every 16x: readable from 8 B to 64 MiB on a laptop screen
  x_->setLabelFormat("%.0f");
  x_->setTitleText("size (bytes)");
  y_ = new QValueAxis;
  y_->setTitleText("busbw GB/s");
  chart_->addAxis(x_, Qt::AlignBottom);
  chart_->addAxis(y_, Qt::AlignLeft);
  for (auto* s : {out_of_place_, in_place_}) {
    s->setPointsVisible(true);
    s->attachAxis(x_);
    s->attachAxis(y_);
  }
  auto* view = new QChartView(chart_);
  view->setAccessibleName("Bus bandwidth by size");
  view->setRenderHint(QPainter::Antialiasing);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view);
  connect(&results_, &QAbstractItemModel::rowsInserted, this,
          [this](const QModelIndex&, int first, int last) { take_rows(first, last); });
  connect(&results_, &QAbstractItemModel::modelReset, this, [this] { retake(); });
  follow_palette(chart_, palette());
  retake();
}

void BusbwPlot::take_rows(int first, int last) {
  for (int r = first; r <= last && r < results_.rowCount(); ++r) {
    const auto& row = results_.row(r);
    if (row.bytes == 0) continue;
    const auto bytes = static_cast<double>(row.bytes);
    out_points_[bytes] = row.out_of_place.busbw;
    if (row.in_place) in_points_[bytes] = row.in_place->busbw;
  }
  if (redraw_queued_) return;
  redraw_queued_ = true;
  QMetaObject::invokeMethod(
      this, [this] { refresh(); }, Qt::QueuedConnection);
}

void BusbwPlot::retake() {
  out_points_.clear();
  in_points_.clear();
  take_rows(0, results_.rowCount() - 1);
  refresh();
}

int BusbwPlot::refresh() {
  redraw_queued_ = false;
  int drawn = 0;
  double lo = 8, hi = 1024, top = 0.01;
  bool any = false;
  for (auto [series, taken] : {std::pair{out_of_place_, &out_points_}, std::pair{in_place_, &in_points_}}) {
    QList<QPointF> points;
    points.reserve(static_cast<qsizetype>(taken->size()));
    for (const auto& [bytes, busbw] : *taken) {
      points.append(QPointF(bytes, busbw));
      lo = any ? std::min(lo, bytes) : bytes;
      hi = any ? std::max(hi, bytes) : bytes;
      top = std::max(top, busbw);
      any = true;
    }
    series->replace(points);
    drawn += static_cast<int>(points.size());
  }
  x_->setRange(lo, std::max(hi, lo * 2));
  y_->setRange(0, top * 1.1);
  return drawn;
}

void BusbwPlot::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) follow_palette(chart_, palette());
  QWidget::changeEvent(event);
}

}  // namespace ringmaster::ui
