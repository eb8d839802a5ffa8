#include "bandwidth_chart.h"

#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "panels/chart_palette.h"

namespace ringmaster::ui {

BandwidthChart::BandwidthChart(const BandwidthSeries& series, QWidget* parent) : QWidget(parent), series_(series) {
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("Rank:"));
  rank_ = new QComboBox;
  rank_->setObjectName("bandwidthRank");
  top->addWidget(rank_);
  top->addWidget(new QLabel("Series:"));
  mode_ = new QComboBox;
  mode_->setObjectName("bandwidthMode");
  mode_->addItems({"per channel (sent)", "per peer (received)"});
  top->addWidget(mode_);
  top->addStretch();
  layout->addLayout(top);
  chart_ = new QChart;
  chart_->setTitle("Per-channel send bandwidth (GB/s), last 60 s");
  chart_->legend()->setAlignment(Qt::AlignBottom);
  x_ = new QValueAxis;
  x_->setTitleText("s since the run's first sample");
  y_ = new QValueAxis;
  y_->setTitleText("GB/s");
  chart_->addAxis(x_, Qt::AlignBottom);
  chart_->addAxis(y_, Qt::AlignLeft);
  view_ = new QChartView(chart_);
  view_->setObjectName("bandwidthChart");
  view_->setAccessibleName("Per-channel bandwidth chart");
  rank_->setAccessibleName("Rank shown");
  mode_->setAccessibleName("Series shown");
  view_->setRenderHint(QPainter::Antialiasing);
  layout->addWidget(view_, 1);
  follow_palette(chart_, palette());
  connect(&timer_, &QTimer::timeout, this, [this] { refresh(); });
  timer_.start(100);
}

bool BandwidthChart::per_peer() const {
  return mode_->currentIndex() == 1;
}

void BandwidthChart::set_per_peer(bool on) {
  mode_->setCurrentIndex(on ? 1 : 0);
}

int BandwidthChart::shown_rank() const {
  return rank_->currentIndex() < 0 ? 0 : rank_->currentIndex();
}

int BandwidthChart::refresh() {
  // Rank choices follow what has arrived.
  while (rank_->count() < series_.ranks())
    rank_->addItem(QString("rank %1").arg(rank_->count()));
  const int rank = shown_rank();
  const bool by_peer = per_peer();
  // One line per channel, or per peer this rank receives from.
  std::vector<int> keys;
  if (by_peer) {
    keys = series_.peers(rank);
  } else {
    for (int c = 0; c < series_.channels(rank); ++c)
      keys.push_back(c);
  }
  const int channels = static_cast<int>(keys.size());
  while (static_cast<int>(lines_.size()) < channels) {
    auto* line = new QLineSeries;
    chart_->addSeries(line);
    line->attachAxis(x_);
    line->attachAxis(y_);
    lines_.push_back(line);
  }
  for (int i = 0; i < static_cast<int>(lines_.size()); ++i) {
    const QString name = i >= channels ? QString()
                         : by_peer     ? QString("from rank %1").arg(keys[static_cast<std::size_t>(i)])
                                       : QString("channel %1").arg(keys[static_cast<std::size_t>(i)]);
    if (lines_[static_cast<std::size_t>(i)]->name() != name) lines_[static_cast<std::size_t>(i)]->setName(name);
  }
  if (!total_) {
    total_ = new QLineSeries;
    total_->setName("total");
    QPen pen = total_->pen();
    pen.setWidth(3);
    total_->setPen(pen);
    chart_->addSeries(total_);
    total_->attachAxis(x_);
    total_->attachAxis(y_);
  }
  // A point per 3 pixels reads as a continuous line and keeps a redraw of
  // 33 series cheap.
  const int width = std::max(50, view_->width() / 3);
  int drawn = 0;
  double top = 0.1;
  for (int c = 0; c < static_cast<int>(lines_.size()); ++c) {
    const int key = c < channels ? keys[static_cast<std::size_t>(c)] : -1;
    const auto points = c >= channels ? QList<QPointF>{}
                        : by_peer     ? series_.peer_points(rank, key, width)
                                      : series_.points(rank, key, width);
    for (const auto& p : points)
      top = std::max(top, p.y());
    lines_[static_cast<std::size_t>(c)]->replace(points);
    drawn += static_cast<int>(points.size());
  }
  const auto total = by_peer ? QList<QPointF>{} : series_.total(rank, width);
  total_->setVisible(!by_peer);
  chart_->setTitle(by_peer ? "Bandwidth received from each peer (GB/s), last 60 s"
                           : "Per-channel send bandwidth (GB/s), last 60 s");
  for (const auto& p : total)
    top = std::max(top, p.y());
  total_->replace(total);
  drawn += static_cast<int>(total.size());
  const double right = std::max(1.0, series_.latest_s());
  x_->setRange(std::max(0.0, right - 60.0), right);
  y_->setRange(0, top * 1.1);
  return drawn;
}

void BandwidthChart::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) follow_palette(chart_, palette());
  QWidget::changeEvent(event);
}

}  // namespace ringmaster::ui
