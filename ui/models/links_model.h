// The Links tab's heatmap: the bandwidth of every link, rows sending,
// columns receiving, each cell coloured by its share of the median link
// of its transport. From a link check over the connected agents' nodes
// (docs/bringup.md), or from a run's `links` events (each rank's receiving
// side, ranks as rows and columns).
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>
#include <map>
#include <utility>
#include <vector>

#include "ringmaster/agent/events.h"
#include "ringmaster/agent/linkcheck.h"

namespace ringmaster::ui {

class LinksModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  struct Cell {
    bool measured = false;  // a figure, or ahead
    double gbs = 0;         // 0 when not measured or ahead
    bool ahead = false;     // data was always there before its reader: too fast to time here
    // For a link ahead of its reader: a rate it carried at least (the
    // check's end-to-end pair rate, the run's best busbw); 0: not known.
    double floor_gbs = 0;
    QString transport;
    QString error;           // why not measured (a link check's)
    double nominal_gbs = 0;  // what the two ends' NICs carry, when known (a link check's)
  };
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void set_linkcheck(const agent::LinkcheckReport& report, const std::vector<std::string>& findings);
  // A run's links events (receiving rank, its event) over `world` ranks,
  // with the links the run found slow; `floor_gbs`, the run's best busbw,
  // is what a link ahead of its reader carried at least.
  void set_run(const QString& run_id, int world, const std::vector<std::pair<int, agent::events::Links>>& links,
               const QStringList& slow, double floor_gbs = 0);
  void clear();

  const Cell& cell(int from, int to) const;
  // The median of the measured links of `transport` (all when empty).
  double median_gbs(const QString& transport = {}) const;
  // median_gbs of the transport, computed once a report (a cell's colour
  // asks for it: n^2 cells each scanning n^2 would not do for 64 nodes).
  double median_of(const QString& transport) const;
  // "link check over 3 nodes in 7.4 s: 1 finding" / "run X: 4 ranks, ..."
  QString summary() const { return summary_; }
  const QStringList& findings() const { return findings_; }
  // Nodes (a link check) or ranks (a run).
  QString kind() const { return kind_; }

 private:
  void reset(int n, QStringList names);
  QString median_text() const;  // "median 1.94 GB/s"
  std::vector<std::vector<Cell>> cells_;
  QStringList names_;
  QString kind_;
  QString summary_;
  QStringList findings_;
  void compute_medians();
  std::map<QString, double> medians_;
};

}  // namespace ringmaster::ui
