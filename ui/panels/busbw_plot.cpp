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
  connect(&results_, &QAbstractItemModel::rowsInserted, this, [this] { refresh(); });
  connect(&results_, &QAbstractItemModel::modelReset, this, [this] { refresh(); });
  follow_palette(chart_, palette());
  refresh();
}

int BusbwPlot::refresh() {
  int drawn = 0;
  double lo = 8, hi = 1024, top = 0.01;
  bool any = false;
  for (auto [series, in_place] : {std::pair{out_of_place_, false}, std::pair{in_place_, true}}) {
    QList<QPointF> points;
    for (const auto& [bytes, busbw] : results_.busbw_points(in_place)) {
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
