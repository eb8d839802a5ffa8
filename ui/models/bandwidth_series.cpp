// bandwidth_series
#include "models/bandwidth_series.h"

#include <algorithm>
#include <tuple>

namespace ringmaster::ui {

void BandwidthSeries::clear() {
  ranks_.clear();
  peer_tracks_.clear();
  nic_tracks_.clear();
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
  if (static_cast<int>(ranks_.size()) <= rank) ranks_.resize(static_cast<std::size_t>(rank) + 1);
  Rows& rows = ranks_[static_cast<std::size_t>(rank)];
  const double x = static_cast<double>(t_us - origin_us_) / 1e6;
  latest_s_ = std::max(latest_s_, x);
  bool any = false;
  double sent = 0;  // since this rank's previous sample
  // A later sample: a row (a channel it does not carry keeps its bytes).
  const bool later = rows.t_us.empty() || t_us > rows.t_us.back();
  int widest = rows.stride;
  for (const auto& c : sample.channels) {
    if (c.channel >= 0 && c.channel < kMaxChannels) widest = std::max(widest, c.channel + 1);
  }
  if (widest > rows.stride) {  // a channel not seen before: every row widens
    std::deque<std::uint64_t> wider;
    for (std::size_t r = 0; r < rows.t_us.size(); ++r) {
      for (int c = 0; c < widest; ++c)
        wider.push_back(
            c < rows.stride ? rows.bytes[r * static_cast<std::size_t>(rows.stride) + static_cast<std::size_t>(c)] : 0);
    }
    rows.bytes = std::move(wider);
    rows.stride = widest;
    rows.since_us.resize(static_cast<std::size_t>(widest), -1);
    rows.received.resize(static_cast<std::size_t>(widest), 0);
  }
  const auto stride = static_cast<std::size_t>(rows.stride);
  if (later) {
    const std::size_t previous = rows.t_us.size();
    rows.t_us.push_back(t_us);
    for (std::size_t c = 0; c < stride; ++c)
      rows.bytes.push_back(previous == 0 ? 0 : rows.bytes[(previous - 1) * stride + c]);
  }
  const std::size_t last = rows.t_us.size() - 1;
  for (const auto& c : sample.channels) {
    if (c.channel < 0 || c.channel >= kMaxChannels) continue;
    const auto channel = static_cast<std::size_t>(c.channel);
    std::uint64_t& bytes = rows.bytes[last * stride + channel];
    if (rows.since_us[channel] < 0) {
      rows.since_us[channel] = t_us;
      ++channels_seen_;
    } else if (later) {
      sent += static_cast<double>(c.bytes_sent - std::min(c.bytes_sent, bytes));
      ++rows.received[channel];
      any = true;
    }
    bytes = c.bytes_sent;
  }
  // The window, and the row before it.
  const auto cutoff = t_us - static_cast<long long>(window_s_ * 1e6);
  while (rows.t_us.size() >= 2 && rows.t_us[1] < cutoff) {
    rows.t_us.pop_front();
    rows.bytes.erase(rows.bytes.begin(), rows.bytes.begin() + static_cast<std::ptrdiff_t>(stride));
  }
  // Each channel's rate over this rank's last second.
  rows.recent.assign(stride, 0.0);
  std::vector<int> rates(stride, 0);
  const long long second_us = rows.t_us.back() - 1'000'000;
  for (std::size_t i = rows.t_us.size(); i-- > 1 && rows.t_us[i] >= second_us;) {
    for (std::size_t c = 0; c < stride; ++c) {
      if (double gbs = 0; rows.rate(i, static_cast<int>(c), gbs)) {
        rows.recent[c] += gbs;
        ++rates[c];
      }
    }
  }
  for (std::size_t c = 0; c < stride; ++c)
    rows.recent[c] = rates[c] == 0 ? 0 : rows.recent[c] / rates[c];
  add_peers(rank, sample, x);
  if (any) add_to_run(x, sent);
  add_to_nics(rank, node, sample, x);
}

void BandwidthSeries::add_peers(int rank, const agent::events::Sample& sample, double x) {
  const long long t_us = sample.t_us;
  if (!sample.peers.empty() && static_cast<int>(peer_tracks_.size()) <= rank)
    peer_tracks_.resize(static_cast<std::size_t>(rank) + 1);
  for (const auto& p : sample.peers) {
    const std::uint64_t bytes = p.bytes_received;
    PeerTracks& of_rank = peer_tracks_[static_cast<std::size_t>(rank)];
    auto at = std::lower_bound(of_rank.begin(), of_rank.end(), p.peer,
                               [](const std::pair<int, Track>& e, int peer) { return e.first < peer; });
    if (at == of_rank.end() || at->first != p.peer) at = of_rank.insert(at, {p.peer, Track{}});
    Track& t = at->second;
    if (t.last_us >= 0 && t_us > t.last_us) {
      push(t, x,
           static_cast<double>(bytes - std::min(bytes, t.last_bytes)) / (static_cast<double>(t_us - t.last_us) * 1e3));
    }
    t.last_us = t_us;
    t.last_bytes = bytes;
  }
}

// The whole run's bytes sent per bucket of kRunBucketS.
void BandwidthSeries::add_to_run(double x, double sent) {
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

void BandwidthSeries::add_to_nics(int rank, int node, const agent::events::Sample& sample, double x) {
  const long long t_us = sample.t_us;
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
template <class Points>
QList<QPointF> decimate(const Points& in, int max_points) {
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

const BandwidthSeries::Rows* BandwidthSeries::rows_of(int rank) const {
  return rank < 0 || rank >= static_cast<int>(ranks_.size()) || ranks_[static_cast<std::size_t>(rank)].t_us.empty()
             ? nullptr
             : &ranks_[static_cast<std::size_t>(rank)];
}

bool BandwidthSeries::Rows::rate(std::size_t i, int c, double& gbs) const {
  const auto channel = static_cast<std::size_t>(c);
  if (i == 0 || since_us[channel] < 0 || since_us[channel] > t_us[i - 1]) return false;
  const auto s = static_cast<std::size_t>(stride);
  const std::uint64_t now = bytes[i * s + channel], before = bytes[(i - 1) * s + channel];
  gbs = static_cast<double>(now - std::min(now, before)) / (static_cast<double>(t_us[i] - t_us[i - 1]) * 1e3);
  return true;  // bytes/us / 1e3 = GB/s
}

QList<QPointF> BandwidthSeries::points(int rank, int channel, int max_points) const {
  const Rows* rows = rows_of(rank);
  if (!rows || channel < 0 || channel >= rows->stride) return {};
  std::vector<QPointF> points;
  points.reserve(rows->t_us.size());
  for (std::size_t i = 1; i < rows->t_us.size(); ++i) {
    if (double gbs = 0; rows->rate(i, channel, gbs)) points.emplace_back(rows->x(i, origin_us_), gbs);
  }
  return decimate(points, max_points);
}

QList<QPointF> BandwidthSeries::total(int rank, int max_points) const {
  const Rows* rows = rows_of(rank);
  if (!rows) return {};
  std::vector<QPointF> points;
  points.reserve(rows->t_us.size());
  for (std::size_t i = 1; i < rows->t_us.size(); ++i) {
    double sum = 0;
    bool any = false;
    for (int c = 0; c < rows->stride; ++c) {
      if (double gbs = 0; rows->rate(i, c, gbs)) {
        sum += gbs;
        any = true;
      }
    }
    if (any) points.emplace_back(rows->x(i, origin_us_), sum);
  }
  return decimate(points, max_points);
}

const BandwidthSeries::Track* BandwidthSeries::peer_track(int rank, int peer) const {
  if (rank < 0 || rank >= static_cast<int>(peer_tracks_.size())) return nullptr;
  const PeerTracks& of_rank = peer_tracks_[static_cast<std::size_t>(rank)];
  const auto at = std::lower_bound(of_rank.begin(), of_rank.end(), peer,
                                   [](const std::pair<int, Track>& e, int p) { return e.first < p; });
  return at == of_rank.end() || at->first != peer ? nullptr : &at->second;
}

QList<QPointF> BandwidthSeries::peer_points(int rank, int peer, int max_points) const {
  const Track* t = peer_track(rank, peer);
  return t ? decimate(t->points, max_points) : QList<QPointF>{};
}

std::vector<int> BandwidthSeries::peers(int rank) const {
  std::vector<int> out;
  if (rank < 0 || rank >= static_cast<int>(peer_tracks_.size())) return out;
  for (const auto& [peer, track] : peer_tracks_[static_cast<std::size_t>(rank)])
    out.push_back(peer);
  return out;
}

int BandwidthSeries::ranks() const {
  return static_cast<int>(ranks_.size());
}

int BandwidthSeries::channels(int rank) const {
  const Rows* rows = rows_of(rank);
  return rows ? rows->stride : 0;
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
  const auto cutoff_us = origin_us_ + static_cast<long long>((latest_s_ - 1.0) * 1e6);
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const Rows& rows = ranks_[r];
    if (rows.t_us.empty() || rows.t_us.back() < cutoff_us) continue;
    for (std::size_t c = 0; c < rows.recent.size(); ++c) {
      if (rows.recent[c] > 0) all.push_back({static_cast<int>(r), static_cast<int>(c), rows.recent[c]});
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
  const Rows* rows = rows_of(rank);
  if (!rows || channel < 0 || channel >= static_cast<int>(rows->recent.size())) return 0;
  const auto cutoff_us = origin_us_ + static_cast<long long>((latest_s_ - 1.0) * 1e6);
  return rows->t_us.back() < cutoff_us ? 0 : rows->recent[static_cast<std::size_t>(channel)];
}

int BandwidthSeries::channels_seen() const {
  return channels_seen_;
}

std::size_t BandwidthSeries::points_received(int rank, int channel) const {
  const Rows* rows = rows_of(rank);
  return rows && channel >= 0 && channel < rows->stride ? rows->received[static_cast<std::size_t>(channel)] : 0;
}

}  // namespace ringmaster::ui
