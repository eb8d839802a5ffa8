#include "topology_view.h"

#include "topology_drawing.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTableView>
#include <QTreeView>
#include <QVBoxLayout>
#include <algorithm>
#include <functional>

#include "models/run_state.h"

namespace ringmaster::ui {

namespace {

QColor class_color(const QString& cls) {
  if (cls.startsWith("NV")) return QColor(0x66, 0xbb, 0x6a);
  if (cls == "PIX") return QColor(0xa5, 0xd6, 0xa7);
  if (cls == "PXB") return QColor(0xdc, 0xed, 0xc8);
  if (cls == "PHB") return QColor(0xff, 0xf5, 0x9d);
  if (cls == "NODE") return QColor(0xff, 0xcc, 0x80);
  if (cls == "SYS") return QColor(0xef, 0x9a, 0x9a);
  return QColor(0xe0, 0xe0, 0xe0);
}

}  // namespace

void fill_topology_tree(QStandardItemModel& model, const agent::TopologyInfo& topology) {
  model.clear();
  model.setHorizontalHeaderLabels({"Object", "Kind", "Details", "Origin"});
  std::function<void(int, QStandardItem*)> add = [&](int id, QStandardItem* parent) {
    const agent::TopologyNode& n = topology.node(id);
    QStringList details;
    for (const auto& [k, v] : n.attributes) {
      if (k == "busid" || k == "class" || k == "vendor" || k == "device" || k == "speed" || k == "link_speed" ||
          k == "link_width" || k == "numaid" || k == "sm" || k == "local_memory" || k == "pus") {
        details << QString("%1=%2").arg(QString::fromStdString(k), QString::fromStdString(v));
      }
    }
    QList<QStandardItem*> row = {
        new QStandardItem(QString::fromStdString(n.name)), new QStandardItem(QString::fromStdString(n.kind)),
        new QStandardItem(details.join("  ")), new QStandardItem(QString::fromStdString(n.origin))};
    for (auto* item : row)
      item->setEditable(false);
    row[0]->setData(id, kNodeRole);
    if (n.origin == "declared") row[3]->setForeground(QColor(0xe6, 0x51, 0x00));
    parent->appendRow(row);
    for (int child : n.children)
      add(child, row[0]);
  };
  for (const auto& n : topology.nodes) {
    if (n.parent < 0) add(n.id, model.invisibleRootItem());
  }
}

void fill_topology_matrix(QStandardItemModel& model, const agent::TopologyInfo& topology) {
  model.clear();
  QStringList names;
  for (const auto& d : topology.devices)
    names << QString::fromStdString(d.name);
  model.setRowCount(static_cast<int>(names.size()));
  model.setColumnCount(static_cast<int>(names.size()));
  model.setHorizontalHeaderLabels(names);
  model.setVerticalHeaderLabels(names);
  for (std::size_t r = 0; r < topology.paths.size(); ++r) {
    for (std::size_t c = 0; c < topology.paths[r].size(); ++c) {
      const agent::TopologyPath& p = topology.paths[r][c];
      const QString cls = QString::fromStdString(p.label);
      auto* item = new QStandardItem(cls);
      item->setEditable(false);
      item->setTextAlignment(Qt::AlignCenter);
      item->setBackground(class_color(cls));
      item->setForeground(QColor(Qt::black));
      item->setToolTip(QString("%1 hops, %2 GB/s").arg(p.hops).arg(p.bandwidth_gbps));
      model.setItem(static_cast<int>(r), static_cast<int>(c), item);
    }
  }
}

TopologyView::TopologyView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* header = new QHBoxLayout;
  title_ = new QLabel("Connect an agent to see its node.");
  // A summary as long as a p5's (32 NIC names) wraps instead of widening
  // the window; the whole of it is the tooltip.
  title_->setWordWrap(true);
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  badge_ = new QLabel;
  badge_->setObjectName("declaredBadge");
  badge_->setStyleSheet("QLabel { background: #e65100; color: white; padding: 2px 8px; border-radius: 4px; }");
  badge_->hide();
  header->addWidget(title_, 1);
  header->addWidget(badge_);
  path_choice_ = new QComboBox;
  path_choice_->setObjectName("topologyPath");
  path_choice_->setAccessibleName("Drawn over the node");
  path_choice_->setToolTip("A ring or tree of the run, drawn through the GPUs and NICs it uses on this node");
  path_choice_->addItem("no ring", QString());
  path_choice_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  header->addWidget(path_choice_);
  connect(path_choice_, &QComboBox::currentIndexChanged, this, [this] { draw_path(); });
  layout->addLayout(header);
  warnings_ = new QLabel;
  warnings_->setObjectName("topologyWarnings");
  warnings_->setWordWrap(true);
  warnings_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  warnings_->setStyleSheet("QLabel { background: #fff3e0; color: #6d3a00; padding: 4px; border-radius: 4px; }");
  warnings_->hide();
  layout->addWidget(warnings_);
  auto* split = new QSplitter(Qt::Vertical);
  tree_view_ = new QTreeView;
  tree_view_->setObjectName("topologyTree");
  tree_view_->setModel(&tree_);
  matrix_view_ = new QTableView;
  matrix_view_->setObjectName("topologyMatrix");
  matrix_view_->setModel(&matrix_);
  matrix_view_->horizontalHeader()->setDefaultSectionSize(56);
  drawing_ = new TopologyDrawing;
  auto* lower = new QSplitter(Qt::Horizontal);
  lower->addWidget(tree_view_);
  lower->addWidget(matrix_view_);
  split->addWidget(drawing_);
  split->addWidget(lower);
  split->setSizes({560, 240});
  layout->addWidget(split, 1);
  tree_view_->setAccessibleName("Topology tree");
  matrix_view_->setAccessibleName("GPU and NIC path matrix");
  // A device opened in the drawing: its row in the tree, with the focus.
  connect(drawing_, &TopologyDrawing::device_activated, this, [this](int node) {
    const auto found =
        tree_.match(tree_.index(0, 0), kNodeRole, node, 1, Qt::MatchExactly | Qt::MatchRecursive | Qt::MatchWrap);
    if (found.isEmpty()) return;
    tree_view_->setCurrentIndex(found.front());
    tree_view_->scrollTo(found.front());
    tree_view_->setFocus(Qt::OtherFocusReason);
  });
}

int TopologyView::current_tree_node() const {
  const QModelIndex i = tree_view_->currentIndex();
  return i.isValid() ? i.siblingAtColumn(0).data(kNodeRole).toInt() : -1;
}

void TopologyView::follow_run(const RunState* run) {
  run_ = run;
  if (!run_) return;
  connect(run_, &RunState::started, this, [this] { fill_path_choice(); });
  connect(run_, &RunState::rings_changed, this, [this] { fill_path_choice(); });
  fill_path_choice();
}

void TopologyView::fill_path_choice() {
  const QString was = path_choice_->currentData().toString();
  const bool placed_before = path_choice_->property("placed").toBool();
  QSignalBlocker quiet(path_choice_);
  path_choice_->clear();
  path_choice_->addItem("no ring", QString());
  const int rings = run_ ? static_cast<int>(run_->rings().size()) : 0;
  const int trees = run_ ? static_cast<int>(run_->trees().size()) : 0;
  for (int c = 0; c < rings; ++c)
    path_choice_->addItem(QString("ring of channel %1").arg(c), QString("ring:%1").arg(c));
  for (int t = 0; t < trees; ++t)
    path_choice_->addItem(QString("all_reduce tree %1").arg(t), QString("tree:%1").arg(t));
  // Channel 0's ring once the engine says where the ranks are; else what
  // was picked, when it is still there.
  const bool placed = run_ && !run_->gpus().empty();
  path_choice_->setProperty("placed", placed);
  const QString want = placed && !placed_before && rings > 0 ? QString("ring:0") : was;
  const int at = path_choice_->findData(want);
  path_choice_->setCurrentIndex(at < 0 ? 0 : at);
  draw_path();
}

void TopologyView::show_path(int channel, int tree) {
  const QString want = channel >= 0 ? QString("ring:%1").arg(channel)
                       : tree >= 0  ? QString("tree:%1").arg(tree)
                                    : QString();
  const int at = path_choice_->findData(want);
  path_choice_->setCurrentIndex(at < 0 ? 0 : at);
  draw_path();
}

void TopologyView::draw_path() {
  const QString what = path_choice_->currentData().toString();
  if (!run_ || what.isEmpty()) {
    drawing_->set_path({});
    return;
  }
  const auto& agents = run_->agent_addresses();
  const int agent = static_cast<int>(std::find(agents.begin(), agents.end(), agent_) - agents.begin());
  const int number = what.section(':', 1).toInt();
  if (agent >= static_cast<int>(agents.size())) {
    DevicePath none;
    none.title =
        what.startsWith("ring") ? QString("channel %1's ring").arg(number) : QString("all_reduce tree %1").arg(number);
    none.why_empty = QString("%1 has no rank in this run").arg(agent_);
    drawing_->set_path(none);
    return;
  }
  drawing_->set_path(what.startsWith("ring") ? ring_path(*run_, agent, number) : tree_path(*run_, agent, number));
}

void TopologyView::show_topology(const QString& agent, const agent::TopologyInfo& topology) {
  agent_ = agent;
  const QString summary = QString::fromStdString(topology.summary);
  const auto names = summary.indexOf(" (");  // the network devices' names, listed in the tree
  title_->setText(QString("%1 — %2").arg(agent, names > 0 ? summary.left(names) : summary));
  title_->setToolTip(summary);
  const bool declared = topology.origin == "declared";
  const QString source = QString::fromStdString(topology.source);
  badge_->setText(declared ? "DECLARED by " + source.section('/', -1) : QString());
  badge_->setToolTip(source);
  badge_->setVisible(declared);
  QStringList warnings;
  for (const auto& w : topology.warnings)
    warnings << "⚠ " + QString::fromStdString(w);
  warnings_->setText(warnings.join("\n"));
  warnings_->setVisible(!warnings.isEmpty());
  drawing_->set_topology(topology);
  fill_topology_tree(tree_, topology);
  fill_topology_matrix(matrix_, topology);
  tree_view_->expandAll();
  for (int c = 0; c < tree_.columnCount(); ++c)
    tree_view_->resizeColumnToContents(c);
  draw_path();
}

}  // namespace ringmaster::ui
