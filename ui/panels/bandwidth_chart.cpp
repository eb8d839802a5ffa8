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
#include <cmath>
#include <optional>

#include "panels/chart_palette.h"
#include "panels/rails_view.h"

namespace ringmaster::ui {

namespace {

// The round number (1, 2 or 5 times a power of ten) at or above `v`.
double round_up(double v) {
  if (v <= 0) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(v)));
  for (const double step : {1.0, 2.0, 5.0, 10.0}) {
    if (step * power >= v) return step * power;
  }
  return 10 * power;
}

}  // namespace

BandwidthChart::BandwidthChart(const RunSamples& samples, const RunState* run, QWidget* parent)
    : QWidget(parent), samples_(samples) {
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel("Rank:"));
  rank_ = new QComboBox;
  rank_->setObjectName("bandwidthRank");
  top->addWidget(rank_);
  top->addWidget(new QLabel("Series:"));
  mode_ = new QComboBox;
  mode_->setObjectName("bandwidthMode");
  mode_->addItem("per channel (sent)", static_cast<int>(Mode::per_channel));
  mode_->addItem("per peer (received)", static_cast<int>(Mode::per_peer));
  mode_->addItem("run total and busiest channels", static_cast<int>(Mode::run_total));
  mode_->addItem("per NIC (sent + received, all ranks)", static_cast<int>(Mode::per_nic));
  if (run) mode_->addItem("rails (per NIC, last second)", static_cast<int>(Mode::rails));
  top->addWidget(mode_);
  top->addStretch();
  layout->addLayout(top);
  chart_ = new QChart;
  chart_->setTitle("Per-channel send bandwidth (GB/s), last 60 s");
  chart_->legend()->setAlignment(Qt::AlignBottom);
  x_ = new QValueAxis;
  // Seconds before the latest sample: an axis that never moves (a range
  // changed every tick laid the whole chart out again each time).
  x_->setTitleText("s before the latest sample");
  x_->setRange(-60, 0);
  y_ = new QValueAxis;
  y_->setTitleText("GB/s");
  y_run_ = new QValueAxis;
  y_run_->setTitleText("run total, GB/s");
  y_run_->setVisible(false);
  chart_->addAxis(x_, Qt::AlignBottom);
  chart_->addAxis(y_, Qt::AlignLeft);
  chart_->addAxis(y_run_, Qt::AlignRight);
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
  // Thousands of ranks: one rank's channels say little, the run's total
  // and its busiest channels more.
  if (run) {
    connect(run, &RunState::started, this, [this, run] {
      if (run->world_size() > kFlatRanks && mode() == Mode::per_channel) set_mode(Mode::run_total);
    });
  }
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
  return static_cast<Mode>(mode_->currentData().toInt());
}

void BandwidthChart::set_mode(Mode mode) {
  if (const int i = mode_->findData(static_cast<int>(mode)); i >= 0) mode_->setCurrentIndex(i);
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

namespace {

// The per-NIC view's title: all NICs, or the busiest `shown` of `seen`.
QString nic_title(std::size_t shown, std::size_t seen) {
  if (seen <= shown) return "Each NIC's traffic, sent and received by the run's channels (GB/s), last 60 s";
  return QString("The %1 busiest of %2 NICs: sent and received by the run's channels (GB/s), last 60 s")
      .arg(shown)
      .arg(seen);
}

}  // namespace

std::vector<NicKey> BandwidthChart::busiest_nics(const BandwidthSeries& series) const {
  std::vector<NicKey> nics = series.nics();
  if (nics.size() <= static_cast<std::size_t>(kTopNics)) return nics;
  std::vector<std::pair<double, std::size_t>> rates;
  for (std::size_t i = 0; i < nics.size(); ++i)
    rates.emplace_back(-series.nic_recent_gbs(nics[i]), i);
  std::partial_sort(rates.begin(), rates.begin() + kTopNics, rates.end());
  std::vector<NicKey> busiest;
  for (int i = 0; i < kTopNics; ++i)
    busiest.push_back(nics[rates[static_cast<std::size_t>(i)].second]);
  std::sort(busiest.begin(), busiest.end());
  return busiest;
}

// A line keeps its channel while that sends at least 0.8 x the rate of
// the kTopChannels-th busiest, and the choice is made again at most
// once a second: renaming a line lays the legend and the chart out
// again, and channels of nearly equal rates trade places every tick.
void BandwidthChart::choose_top_channels(const BandwidthSeries& series) {
  if (!shown_top_.empty() && series.latest_s() < top_chosen_s_ + 1 && series.latest_s() >= top_chosen_s_) return;
  top_chosen_s_ = series.latest_s();
  const auto busiest = series.top_channels(kTopChannels);
  const double bar = busiest.size() < static_cast<std::size_t>(kTopChannels) ? 0 : 0.8 * busiest.back().gbs;
  std::vector<std::pair<int, int>> kept(static_cast<std::size_t>(kTopChannels), {-1, -1});
  for (std::size_t i = 0; i < shown_top_.size() && i < kept.size(); ++i) {
    const double gbs = series.recent_gbs(shown_top_[i].first, shown_top_[i].second);
    if (gbs > 0 && gbs >= bar) kept[i] = shown_top_[i];
  }
  for (const auto& b : busiest) {
    const std::pair<int, int> channel{b.rank, b.channel};
    if (std::find(kept.begin(), kept.end(), channel) != kept.end()) continue;
    const auto free = std::find(kept.begin(), kept.end(), std::pair<int, int>{-1, -1});
    if (free != kept.end()) *free = channel;
  }
  while (!kept.empty() && kept.back().first < 0)
    kept.pop_back();
  shown_top_ = kept;
}

void BandwidthChart::add_lines(int count) {
  while (static_cast<int>(lines_.size()) < count) {
    auto* line = new QLineSeries;
    chart_->addSeries(line);
    line->attachAxis(x_);
    line->attachAxis(y_);
    lines_.push_back(line);
  }
}

void BandwidthChart::add_total() {
  total_ = new QLineSeries;
  total_->setName("total");
  QPen pen = total_->pen();
  pen.setWidth(3);
  total_->setPen(pen);
  chart_->addSeries(total_);
  total_->attachAxis(x_);
  total_->attachAxis(y_);
}

int BandwidthChart::refresh() {
  // The samples wait while the series is read, not while it is drawn.
  std::optional<RunSamples::Reading> reading(samples_.read());
  const BandwidthSeries& series = **reading;
  // Rank choices follow what has arrived.
  while (rank_->count() < series.ranks())
    rank_->addItem(QString("rank %1").arg(rank_->count()));
  const int rank = shown_rank();
  const Mode shown = mode();
  if (shown == Mode::rails) {
    reading.reset();
    stack_->setCurrentWidget(rails_);
    rails_->refresh();
    return static_cast<int>(rails_->bars().size());
  }
  stack_->setCurrentWidget(view_);
  const bool by_peer = shown == Mode::per_peer;
  const bool by_nic = shown == Mode::per_nic;
  const bool by_run = shown == Mode::run_total;
  // One line per channel, per peer this rank receives from, per NIC (the
  // busiest), or per busiest channel of the run.
  std::vector<int> keys;
  std::vector<NicKey> nics;
  std::size_t nics_seen = 0;
  if (by_peer) {
    keys = series.peers(rank);
  } else if (by_nic) {
    nics = busiest_nics(series);
    nics_seen = series.nics().size();
    for (std::size_t i = 0; i < nics.size(); ++i)
      keys.push_back(static_cast<int>(i));
  } else if (by_run) {
    choose_top_channels(series);
    for (std::size_t i = 0; i < shown_top_.size(); ++i)
      keys.push_back(static_cast<int>(i));
  } else {
    for (int c = 0; c < series.channels(rank); ++c)
      keys.push_back(c);
  }
  const int channels = static_cast<int>(keys.size());
  add_lines(channels);
  auto name_of = [&](int key) {
    const auto k = static_cast<std::size_t>(key);
    if (by_peer) return QString("from rank %1").arg(key);
    if (by_nic) return QString("agent %1 %2").arg(nics[k].node).arg(nics[k].device);
    if (by_run) return QString("rank %1 channel %2").arg(shown_top_[k].first).arg(shown_top_[k].second);
    return QString("channel %1").arg(key);
  };
  for (int i = 0; i < static_cast<int>(lines_.size()); ++i) {
    const QString name = i >= channels ? QString() : name_of(keys[static_cast<std::size_t>(i)]);
    if (lines_[static_cast<std::size_t>(i)]->name() != name) lines_[static_cast<std::size_t>(i)]->setName(name);
  }
  if (!total_) add_total();
  // The run's total is thousands of times a channel's: its own axis.
  if (by_run != y_run_->isVisible()) {
    total_->detachAxis(by_run ? y_ : y_run_);
    total_->attachAxis(by_run ? y_run_ : y_);
    y_run_->setVisible(by_run);
    total_->setName(by_run ? "run total (right axis)" : "total");
  }
  // A point per 3 pixels reads as a continuous line and keeps a redraw of
  // 33 series cheap.
  const int width = std::max(50, view_->width() / 3);
  const double now = series.latest_s();
  std::vector<QList<QPointF>> lists(lines_.size());
  for (int c = 0; c < channels; ++c) {
    const int key = keys[static_cast<std::size_t>(c)];
    const auto k = static_cast<std::size_t>(key);
    lists[static_cast<std::size_t>(c)] = by_peer  ? series.peer_points(rank, key, width)
                                         : by_nic ? series.nic_points(nics[k], width)
                                         : by_run ? series.points(shown_top_[k].first, shown_top_[k].second, width)
                                                  : series.points(rank, key, width);
  }
  auto total = by_run ? series.run_total() : by_peer || by_nic ? QList<QPointF>{} : series.total(rank, width);
  const int channels_seen = series.channels_seen();
  // Smooth lines for runs of up to kFlatRanks ranks. Past that the GUI
  // thread has thousands of samples a tick to take in, and antialiasing
  // the 1,900 points of a run's total and its busiest channels took it
  // 2 to 5 ms a frame more.
  const bool smooth = series.ranks() <= kFlatRanks;
  reading.reset();
  int drawn = 0;
  double top_y = 0.1;
  for (int c = 0; c < static_cast<int>(lines_.size()); ++c) {
    auto& points = lists[static_cast<std::size_t>(c)];
    for (auto& p : points) {
      top_y = std::max(top_y, p.y());
      p.rx() -= now;
    }
    lines_[static_cast<std::size_t>(c)]->replace(points);
    drawn += static_cast<int>(points.size());
  }
  if (total_->isVisible() != (!by_peer && !by_nic)) total_->setVisible(!by_peer && !by_nic);
  const QString title = by_peer  ? QString("Bandwidth received from each peer (GB/s), last 60 s")
                        : by_nic ? nic_title(nics.size(), nics_seen)
                        : by_run ? QString("The run's send rate over %1 channels, and its %2 busiest (GB/s), last 60 s")
                                       .arg(channels_seen)
                                       .arg(shown_top_.size())
                                 : QString("Per-channel send bandwidth (GB/s), last 60 s");
  if (chart_->title() != title) chart_->setTitle(title);
  double total_top = 0.1;
  double& total_axis_top = by_run ? total_top : top_y;
  for (auto& p : total) {
    total_axis_top = std::max(total_axis_top, p.y());
    p.rx() -= now;
  }
  total_->replace(total);
  drawn += static_cast<int>(total.size());
  // The y axes move in steps: each ends on a round number, and changes
  // when the data passes it or falls below a third of it.
  auto fit = [](QValueAxis* axis, double top) {
    const double wanted = round_up(top * 1.1);
    if (top > axis->max() || top < axis->max() / 3 || axis->max() <= 0) axis->setRange(0, wanted);
  };
  fit(y_, top_y);
  if (by_run) fit(y_run_, total_top);
  if (view_->renderHints().testFlag(QPainter::Antialiasing) != smooth)
    view_->setRenderHint(QPainter::Antialiasing, smooth);
  return drawn;
}

void BandwidthChart::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) follow_palette(chart_, palette());
  QWidget::changeEvent(event);
}

}  // namespace ringmaster::ui
