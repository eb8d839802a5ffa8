// The Links tab: the bandwidth of every link as a heatmap (rows send,
// columns receive; green at the median of the links' transport, red at a
// fifth of it and below, where a link is called slow), with the findings
// beside it. A Check button runs a link check over the connected agents'
// nodes (docs/bringup.md); a run that measured its links shows them when
// it ends, rank by rank.
#pragma once

#include <QWidget>

class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QSpinBox;
class QTableView;

namespace ringmaster::ui {

class Console;

class LinksPanel : public QWidget {
  Q_OBJECT
 public:
  explicit LinksPanel(Console& console, QWidget* parent = nullptr);

  // What the Check button does; false (the reason shown) when it cannot start.
  bool start();
  // The ranks' environment for the next check ("NCCL_SHM_DISABLE=1 NCCL_NET=OFI").
  void set_environment(const QString& assignments);
  QTableView* heatmap() const { return heatmap_; }
  QTableView* rails() const { return rails_; }
  QListWidget* findings() const { return findings_; }

 private:
  void show_links();

  Console& console_;
  QPushButton* check_ = nullptr;
  QLineEdit* bytes_ = nullptr;
  QLineEdit* env_ = nullptr;
  QSpinBox* iters_ = nullptr;
  QLabel* summary_ = nullptr;
  QTableView* heatmap_ = nullptr;
  QTableView* rails_ = nullptr;
  QListWidget* findings_ = nullptr;
};

}  // namespace ringmaster::ui
