// A preflight's report (docs/bringup.md) for the console's Preflight tab:
// one N x N matrix per port class (rows connect, columns answer; each cell
// ok, dropped, refused, rejected, no route, or "1/2 ok"), the class shown
// chosen with set_port_class, the findings beside it.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

#include "ringmaster/agent/preflight.h"

namespace ringmaster::ui {

class PreflightModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  void set(PreflightReport report);
  void clear();
  const std::optional<PreflightReport>& report() const { return report_; }
  const std::vector<PreflightFinding>& findings() const { return findings_; }

  // The port classes, as labels ("MASTER_PORT 29500", ...), and the one
  // the matrix shows.
  QStringList port_class_labels() const;
  void set_port_class(int index);
  int port_class() const { return class_; }

  // "3 nodes in 3.4 s: 2 problems, 1 warning" or "... no problem found".
  QString summary() const;

 private:
  std::optional<PreflightReport> report_;
  std::vector<PreflightFinding> findings_;
  int class_ = 0;
};

}  // namespace ringmaster::ui
