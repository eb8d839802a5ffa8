// Bandwidth over time from the ranks' samples.
#pragma once

#include <QList>
#include <QPointF>
#include <QString>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// A NIC of the run: the agent (index in the run) whose node it is on, and
// its network device.
struct NicKey {
  int node = -1;
  QString device;
  bool operator<(const NicKey& o) const { return node != o.node ? node < o.node : device < o.device; }
  bool operator==(const NicKey& o) const { return node == o.node && device == o.device; }
};

// Per-channel bandwidth from the ranks' cumulative counters: a rolling
// window of points per (rank, channel), and their sum per rank; per NIC
// the bytes the channels through it sent and received (each sample's
// nic_out and nic_in), summed over the node's ranks.
class BandwidthSeries {
 public:
  explicit BandwidthSeries(double window_s = 60) : window_s_(window_s) {}
  void clear();
  // A `sample` event of `rank`, on the node of agent `node` (-1 unknown):
  // cumulative bytes per channel at t_us.
  void add_sample(int rank, const agent::events::Sample& sample, int node = -1);
  // Points (seconds since the run's first sample, GB/s), at most
  // `max_points` of them (min and max of each bucket kept).
  QList<QPointF> points(int rank, int channel, int max_points) const;
  QList<QPointF> total(int rank, int max_points) const;
  // What `rank` received from each peer (all channels), from the sample's
  // "peers" counters.
  QList<QPointF> peer_points(int rank, int peer, int max_points) const;
  std::vector<int> peers(int rank) const;
  // The run's send rate, every rank's channels summed (GB/s), in buckets
  // of kRunBucketS: each sample's bytes count in the bucket it was taken
  // in, and the newest bucket, still filling, is left out.
  static constexpr double kRunBucketS = 0.5;
  QList<QPointF> run_total() const;
  // The `n` busiest (rank, channel) pairs: the highest send rates over
  // each rank's last second of samples, busiest first; idle ones, and
  // ranks with no sample in the run's last second, left out.
  struct ChannelRate {
    int rank = 0;
    int channel = 0;
    double gbs = 0;
  };
  std::vector<ChannelRate> top_channels(int n) const;
  int channels_seen() const;                       // (rank, channel) pairs with a sample
  double recent_gbs(int rank, int channel) const;  // as top_channels() rates it
  int ranks() const;
  int channels(int rank) const;
  std::size_t points_received(int rank, int channel) const;
  // The NICs some channel went through, in order; each one's bytes sent
  // and received per second (GB/s) over the window; the rate of its last
  // second (sent plus received, GB/s), 0 when it has been idle.
  std::vector<NicKey> nics() const;
  QList<QPointF> nic_points(const NicKey& nic, int max_points) const;
  double nic_recent_gbs(const NicKey& nic) const;
  double latest_s() const { return latest_s_; }
  double window_s() const { return window_s_; }

 private:
  struct Track {
    long long last_us = -1;
    std::uint64_t last_bytes = 0;
    std::size_t received = 0;
    std::deque<QPointF> points;
  };
  void push(Track& t, double x, double y);
  // add_sample's parts: each peer's receive rate, the run's bytes over
  // time, each NIC's rate from the channels through it.
  void add_peers(int rank, const agent::events::Sample& sample, double x);
  void add_to_run(double x, double sent);
  void add_to_nics(int rank, int node, const agent::events::Sample& sample, double x);
  double recent_gbs(const Track& t) const;  // its mean over the run's last second
  // A rank's samples over the window (and the one before it, which the
  // first rate needs): per row, the time and every channel's cumulative
  // bytes sent. A sample writes one row rather than a point to each of its
  // channels' lists: with 8,192 channels' lists, 2,048 samples took the
  // GUI thread about 6 ms a tick, mostly in cache misses. Rates are made
  // from the rows when they are drawn.
  struct Rows {
    int stride = 0;  // channels a row
    std::deque<long long> t_us;
    std::deque<std::uint64_t> bytes;    // stride values a row
    std::vector<long long> since_us;    // per channel: its first sample (-1: none yet)
    std::vector<std::size_t> received;  // per channel: rates made
    // Per channel: its mean rate over the rank's last second of samples
    // (GB/s), made as each sample comes rather than for every rank when
    // the busiest are asked for (2,048 ranks took a redraw 10 ms).
    std::vector<double> recent;
    double x(std::size_t row, long long origin_us) const { return static_cast<double>(t_us[row] - origin_us) / 1e6; }
    // Channel c's rate from row i - 1 to row i (GB/s); false where it
    // had no sample before row i.
    bool rate(std::size_t i, int c, double& gbs) const;
  };
  const Rows* rows_of(int rank) const;  // null when never sampled
  double window_s_;
  long long origin_us_ = -1;
  double latest_s_ = 0;
  // By rank; ranks and channels beyond kMaxRanks and kMaxChannels are not
  // charted.
  static constexpr int kMaxRanks = 1 << 17;
  static constexpr int kMaxChannels = 1 << 10;
  std::vector<Rows> ranks_;
  // Per rank, the peers it received from, sorted by peer: a map keyed by
  // (rank, peer) cost 2,048 samples a tick about 4 ms in tree walks.
  using PeerTracks = std::vector<std::pair<int, Track>>;
  std::vector<PeerTracks> peer_tracks_;
  const Track* peer_track(int rank, int peer) const;
  // The run's bytes sent per bucket of kRunBucketS: (bucket index, bytes).
  std::deque<std::pair<long long, double>> run_buckets_;
  int channels_seen_ = 0;
  // Per NIC: the cumulative bytes of every (rank, channel, direction)
  // through it, their sum, and the series made from that sum.
  struct NicTrack {
    std::map<std::tuple<int, int, bool>, std::uint64_t> through;  // (rank, channel, sent?) -> cumulative bytes
    std::uint64_t bytes = 0;
    Track track;
  };
  std::map<NicKey, NicTrack> nic_tracks_;
};

}  // namespace ringmaster::ui
