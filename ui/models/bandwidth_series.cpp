// bandwidth_series
#include "models/bandwidth_series.h"

#include <algorithm>
#include <tuple>

namespace ringmaster::ui {

void BandwidthSeries::clear() {
  tracks_.clear();
  peer_tracks_.clear();
  nic_tracks_.clear();
  totals_.clear();
  run_buckets_.clear();
  channels_seen_ = 0;
  origin_us_ = -1;
  latest_s_ = 0;
}

void BandwidthSeries::push(Track& t, double x, double y) {
  t.points.emplace_back(x, y);
  ++t.received;
  while (!t.points.empty() && t.points.front().x() < x - window_s_)
    t.points.pop_front();
}

void BandwidthSeries::add_sample(int rank, const agent::events::Sample& sample, int node) {
  if (rank < 0 || rank >= kMaxRanks) return;
  const long long t_us = sample.t_us;
  if (origin_us_ < 0) origin_us_ = t_us;
  if (static_cast<int>(totals_.size()) <= rank) {
    totals_.resize(static_cast<std::size_t>(rank) + 1);
    tracks_.resize(static_cast<std::size_t>(rank) + 1);
  }
  auto& channels = tracks_[static_cast<std::size_t>(rank)];
  const double x = static_cast<double>(t_us - origin_us_) / 1e6;
  latest_s_ = std::max(latest_s_, x);
  double total_rate = 0;
  bool any = false;
  std::uint64_t total_bytes = 0;
  double sent = 0;  // since this rank's previous sample
  for (const auto& c : sample.channels) {
    const int channel = c.channel;
    if (channel < 0 || channel >= kMaxChannels) continue;
    const std::uint64_t bytes = c.bytes_sent;
    total_bytes += bytes;
    if (static_cast<int>(channels.size()) <= channel) channels.resize(static_cast<std::size_t>(channel) + 1);
    Track& t = channels[static_cast<std::size_t>(channel)];
    if (t.last_us < 0) ++channels_seen_;
    if (t.last_us >= 0 && t_us > t.last_us) {
      const double moved = static_cast<double>(bytes - std::min(bytes, t.last_bytes));
      const double rate = moved / (static_cast<double>(t_us - t.last_us) * 1e3);  // bytes/us / 1e3 = GB/s
      sent += moved;
      push(t, x, rate);
      total_rate += rate;
      any = true;
    }
    t.last_us = t_us;
    t.last_bytes = bytes;
  }
  for (const auto& p : sample.peers) {
    const std::uint64_t bytes = p.bytes_received;
    Track& t = peer_tracks_[{rank, p.peer}];
    if (t.last_us >= 0 && t_us > t.last_us) {
      push(t, x,
           static_cast<double>(bytes - std::min(bytes, t.last_bytes)) / (static_cast<double>(t_us - t.last_us) * 1e3));
    }
    t.last_us = t_us;
    t.last_bytes = bytes;
  }
  Track& total = totals_[static_cast<std::size_t>(rank)];
  if (any) push(total, x, total_rate);
  if (any) {
    const auto bucket = static_cast<long long>(x / kRunBucketS);
    const auto span = static_cast<long long>(window_s_ / kRunBucketS) + 2;
    if (!run_buckets_.empty() && bucket - run_buckets_.back().first > span) run_buckets_.clear();  // a long gap
    for (long long b = run_buckets_.empty() ? bucket : run_buckets_.back().first + 1; b <= bucket; ++b)
      run_buckets_.emplace_back(b, 0.0);
    // Ranks' clocks differ a little: a late sample lands in its own bucket.
    const long long back = run_buckets_.back().first;
    if (bucket >= run_buckets_.front().first)
      run_buckets_[static_cast<std::size_t>(bucket - run_buckets_.front().first)].second += sent;
    while (run_buckets_.front().first < back - span)
      run_buckets_.pop_front();
  }
  total.last_us = t_us;
  total.last_bytes = total_bytes;
  // Per NIC: this rank's channels through it update their share of its
  // bytes; a point is made at most every 90 ms, however many ranks
  // sample it (the ranks of one node share its clock).
  std::vector<NicTrack*> touched;
  auto through = [&](const std::string& device, int channel, bool sent, std::uint64_t bytes) {
    if (device.empty()) return;
    NicTrack& n = nic_tracks_[NicKey{node, QString::fromStdString(device)}];
    std::uint64_t& had = n.through[{rank, channel, sent}];
    n.bytes += bytes - std::min(bytes, had);
    had = std::max(had, bytes);
    if (std::find(touched.begin(), touched.end(), &n) == touched.end()) touched.push_back(&n);
  };
  for (const auto& c : sample.channels) {
    through(c.nic_out, c.channel, true, c.bytes_sent);
    through(c.nic_in, c.channel, false, c.bytes_received);
  }
  for (NicTrack* n : touched) {
    Track& t = n->track;
    if (t.last_us < 0) {
      t.last_us = t_us;
      t.last_bytes = n->bytes;
    } else if (t_us - t.last_us >= 90'000) {
      push(t, x,
           static_cast<double>(n->bytes - std::min(n->bytes, t.last_bytes)) /
               (static_cast<double>(t_us - t.last_us) * 1e3));
      t.last_us = t_us;
      t.last_bytes = n->bytes;
    }
  }
}

namespace {

// At most `max_points`: the min and the max of each bucket, in order.
QList<QPointF> decimate(const std::deque<QPointF>& in, int max_points) {
  QList<QPointF> out;
  if (max_points <= 0 || in.empty()) return out;
  if (static_cast<int>(in.size()) <= max_points) {
    out.reserve(static_cast<qsizetype>(in.size()));
    for (const auto& p : in)
      out.append(p);
    return out;
  }
  const int buckets = std::max(1, max_points / 2);
  const double per = static_cast<double>(in.size()) / buckets;
  for (int b = 0; b < buckets; ++b) {
    const auto lo = static_cast<std::size_t>(b * per);
    const auto hi = std::min(in.size(), static_cast<std::size_t>((b + 1) * per));
    if (lo >= hi) continue;
    auto mn = in.begin() + static_cast<std::ptrdiff_t>(lo);
    auto mx = mn;
    for (auto it = mn; it != in.begin() + static_cast<std::ptrdiff_t>(hi); ++it) {
      if (it->y() < mn->y()) mn = it;
      if (it->y() > mx->y()) mx = it;
    }
    if (mn < mx) {
      out.append(*mn);
      out.append(*mx);
    } else if (mx < mn) {
      out.append(*mx);
      out.append(*mn);
    } else {
      out.append(*mn);
    }
  }
  return out;
}

}  // namespace

const BandwidthSeries::Track* BandwidthSeries::track(int rank, int channel) const {
  if (rank < 0 || rank >= static_cast<int>(tracks_.size())) return nullptr;
  const auto& channels = tracks_[static_cast<std::size_t>(rank)];
  return channel < 0 || channel >= static_cast<int>(channels.size()) ? nullptr
                                                                     : &channels[static_cast<std::size_t>(channel)];
}

QList<QPointF> BandwidthSeries::points(int rank, int channel, int max_points) const {
  const Track* t = track(rank, channel);
  return t ? decimate(t->points, max_points) : QList<QPointF>{};
}

QList<QPointF> BandwidthSeries::total(int rank, int max_points) const {
  if (rank < 0 || rank >= static_cast<int>(totals_.size())) return {};
  return decimate(totals_[static_cast<std::size_t>(rank)].points, max_points);
}

QList<QPointF> BandwidthSeries::peer_points(int rank, int peer, int max_points) const {
  const auto it = peer_tracks_.find({rank, peer});
  return it == peer_tracks_.end() ? QList<QPointF>{} : decimate(it->second.points, max_points);
}

std::vector<int> BandwidthSeries::peers(int rank) const {
  std::vector<int> out;
  for (auto it = peer_tracks_.lower_bound({rank, -1}); it != peer_tracks_.end() && it->first.first == rank; ++it)
    out.push_back(it->first.second);
  return out;
}

int BandwidthSeries::ranks() const {
  return static_cast<int>(totals_.size());
}

int BandwidthSeries::channels(int rank) const {
  return rank < 0 || rank >= static_cast<int>(tracks_.size())
             ? 0
             : static_cast<int>(tracks_[static_cast<std::size_t>(rank)].size());
}

std::vector<NicKey> BandwidthSeries::nics() const {
  std::vector<NicKey> out;
  for (const auto& [key, n] : nic_tracks_)
    out.push_back(key);
  return out;
}

QList<QPointF> BandwidthSeries::nic_points(const NicKey& nic, int max_points) const {
  const auto it = nic_tracks_.find(nic);
  return it == nic_tracks_.end() ? QList<QPointF>{} : decimate(it->second.track.points, max_points);
}

double BandwidthSeries::recent_gbs(const Track& t) const {
  // The points of the run's last second; none there: idle.
  double sum = 0;
  int n = 0;
  for (auto p = t.points.rbegin(); p != t.points.rend() && p->x() >= latest_s_ - 1.0; ++p) {
    sum += p->y();
    ++n;
  }
  return n == 0 ? 0 : sum / n;
}

double BandwidthSeries::nic_recent_gbs(const NicKey& nic) const {
  const auto it = nic_tracks_.find(nic);
  return it == nic_tracks_.end() ? 0 : recent_gbs(it->second.track);
}

QList<QPointF> BandwidthSeries::run_total() const {
  QList<QPointF> out;
  if (run_buckets_.size() < 2) return out;
  out.reserve(static_cast<qsizetype>(run_buckets_.size()) - 1);
  for (std::size_t i = 0; i + 1 < run_buckets_.size(); ++i) {
    const auto& [bucket, bytes] = run_buckets_[i];
    const double end_s = static_cast<double>(bucket + 1) * kRunBucketS;
    if (end_s < latest_s_ - window_s_) continue;
    out.append(QPointF(end_s, bytes / kRunBucketS / 1e9));
  }
  return out;
}

std::vector<BandwidthSeries::ChannelRate> BandwidthSeries::top_channels(int n) const {
  std::vector<ChannelRate> all;
  all.reserve(static_cast<std::size_t>(channels_seen_));
  for (std::size_t r = 0; r < tracks_.size(); ++r) {
    for (std::size_t c = 0; c < tracks_[r].size(); ++c) {
      const double gbs = recent_gbs(tracks_[r][c]);
      if (gbs > 0) all.push_back({static_cast<int>(r), static_cast<int>(c), gbs});
    }
  }
  const auto keep = std::min(all.size(), static_cast<std::size_t>(std::max(n, 0)));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                    [](const ChannelRate& a, const ChannelRate& b) {
                      return a.gbs != b.gbs ? a.gbs > b.gbs : std::tie(a.rank, a.channel) < std::tie(b.rank, b.channel);
                    });
  all.resize(keep);
  return all;
}

double BandwidthSeries::recent_gbs(int rank, int channel) const {
  const Track* t = track(rank, channel);
  return t ? recent_gbs(*t) : 0;
}

int BandwidthSeries::channels_seen() const {
  return channels_seen_;
}

std::size_t BandwidthSeries::points_received(int rank, int channel) const {
  const Track* t = track(rank, channel);
  return t ? t->received : 0;
}

}  // namespace ringmaster::ui
