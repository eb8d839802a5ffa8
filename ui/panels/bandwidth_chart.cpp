#include "bandwidth_chart.h"

#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QStackedWidget>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "panels/chart_palette.h"
#include "panels/rails_view.h"

namespace ringmaster::ui {

BandwidthChart::BandwidthChart(const BandwidthSeries& series, const RunState* run, QWidget* parent)
    : QWidget(parent), series_(series) {
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("Rank:"));
  rank_ = new QComboBox;
  rank_->setObjectName("bandwidthRank");
  top->addWidget(rank_);
  top->addWidget(new QLabel("Series:"));
  mode_ = new QComboBox;
  mode_->setObjectName("bandwidthMode");
  mode_->addItems({"per channel (sent)", "per peer (received)", "per NIC (sent + received, all ranks)"});
  if (run) mode_->addItem("rails (per NIC, last second)");
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
  stack_ = new QStackedWidget;
  stack_->addWidget(view_);
  if (run) {
    rails_ = new RailsView(*run);
    stack_->addWidget(rails_);
  }
  layout->addWidget(stack_, 1);
  connect(mode_, &QComboBox::currentIndexChanged, this, [this] {
    rank_->setEnabled(mode() == Mode::per_channel || mode() == Mode::per_peer);
    refresh();
  });
  follow_palette(chart_, palette());
  connect(&timer_, &QTimer::timeout, this, [this] { refresh(); });
  timer_.start(100);
}

bool BandwidthChart::per_peer() const {
  return mode() == Mode::per_peer;
}

void BandwidthChart::set_per_peer(bool on) {
  set_mode(on ? Mode::per_peer : Mode::per_channel);
}

BandwidthChart::Mode BandwidthChart::mode() const {
  return static_cast<Mode>(std::max(0, mode_->currentIndex()));
}

void BandwidthChart::set_mode(Mode mode) {
  if (mode == Mode::rails && !rails_) return;
  mode_->setCurrentIndex(static_cast<int>(mode));
}

QStringList BandwidthChart::series_names() const {
  QStringList out;
  for (auto* line : lines_) {
    if (!line->name().isEmpty()) out << line->name();
  }
  if (total_ && total_->isVisible()) out << total_->name();
  return out;
}

int BandwidthChart::shown_rank() const {
  return rank_->currentIndex() < 0 ? 0 : rank_->currentIndex();
}

int BandwidthChart::refresh() {
  // Rank choices follow what has arrived.
  while (rank_->count() < series_.ranks())
    rank_->addItem(QString("rank %1").arg(rank_->count()));
  const int rank = shown_rank();
  const Mode shown = mode();
  if (shown == Mode::rails) {
    stack_->setCurrentWidget(rails_);
    rails_->refresh();
    return static_cast<int>(rails_->bars().size());
  }
  stack_->setCurrentWidget(view_);
  const bool by_peer = shown == Mode::per_peer;
  const bool by_nic = shown == Mode::per_nic;
  // One line per channel, per peer this rank receives from, or per NIC.
  std::vector<int> keys;
  const std::vector<NicKey> nics = by_nic ? series_.nics() : std::vector<NicKey>{};
  if (by_peer) {
    keys = series_.peers(rank);
  } else if (by_nic) {
    for (std::size_t i = 0; i < nics.size(); ++i)
      keys.push_back(static_cast<int>(i));
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
    const auto key = i < channels ? keys[static_cast<std::size_t>(i)] : -1;
    const QString name = i >= channels ? QString()
                         : by_peer     ? QString("from rank %1").arg(key)
                         : by_nic      ? QString("agent %1 %2")
                                        .arg(nics[static_cast<std::size_t>(key)].node)
                                        .arg(nics[static_cast<std::size_t>(key)].device)
                                  : QString("channel %1").arg(key);
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
                        : by_nic      ? series_.nic_points(nics[static_cast<std::size_t>(key)], width)
                                      : series_.points(rank, key, width);
    for (const auto& p : points)
      top = std::max(top, p.y());
    lines_[static_cast<std::size_t>(c)]->replace(points);
    drawn += static_cast<int>(points.size());
  }
  const auto total = by_peer || by_nic ? QList<QPointF>{} : series_.total(rank, width);
  total_->setVisible(!by_peer && !by_nic);
  chart_->setTitle(by_peer  ? "Bandwidth received from each peer (GB/s), last 60 s"
                   : by_nic ? "Each NIC's traffic, sent and received by the run's channels (GB/s), last 60 s"
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
