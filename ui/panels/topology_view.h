// One node's topology as the agent reported it: an lstopo-like tree, the
// GPU/NIC matrix with path classes coloured, and a visible badge when the
// topology was declared by a file rather than discovered.
#pragma once

#include <QLabel>
#include <QStandardItemModel>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QComboBox;
class QTreeView;
class QTableView;
QT_END_NAMESPACE

#include "ringmaster/agent/requests.h"

namespace ringmaster::ui {

class RunState;
class TopologyDrawing;

// Each tree row's index in the topology's nodes (column 0).
inline constexpr int kNodeRole = Qt::UserRole + 1;
// The tree of a topology's nodes, one row per object.
void fill_topology_tree(QStandardItemModel& model, const agent::TopologyInfo& topology);
// The topology's path matrix.
void fill_topology_matrix(QStandardItemModel& model, const agent::TopologyInfo& topology);

class TopologyView : public QWidget {
  Q_OBJECT
 public:
  explicit TopologyView(QWidget* parent = nullptr);
  void show_topology(const QString& agent, const agent::TopologyInfo& topology);
  QStandardItemModel& tree_model() { return tree_; }
  QStandardItemModel& matrix_model() { return matrix_; }
  TopologyDrawing* drawing() const { return drawing_; }
  // The node of the tree's current row, -1 when none.
  int current_tree_node() const;
  // Follows `run`: the ring of any channel or either all_reduce tree can
  // be drawn over the node shown (once the run says where its ranks are,
  // channel 0's ring is).
  void follow_run(const RunState* run);
  // What is drawn over the node: the ring of `channel`, tree `tree`, or
  // nothing (-1 for both).
  void show_path(int channel, int tree = -1);
  QComboBox* path_choice() const { return path_choice_; }

 private:
  void fill_path_choice();
  void draw_path();
  QLabel* title_ = nullptr;
  QLabel* badge_ = nullptr;
  QLabel* warnings_ = nullptr;  // what the node file's reader warned of
  QStandardItemModel tree_;
  QStandardItemModel matrix_;
  QTreeView* tree_view_ = nullptr;
  QTableView* matrix_view_ = nullptr;
  TopologyDrawing* drawing_ = nullptr;
  QComboBox* path_choice_ = nullptr;
  const RunState* run_ = nullptr;
  QString agent_;  // the address of the agent whose node is shown
};

}  // namespace ringmaster::ui
