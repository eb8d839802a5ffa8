#include "panels/tuner_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTableView>
#include <QVBoxLayout>

namespace ringmaster::ui {

TunerPanel::TunerPanel(TunerModel& model, const ResultsModel* results, QWidget* parent)
    : QWidget(parent), model_(model), results_(results) {
  setObjectName("tunerPanel");
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel("Collective and size:"));
  sizes_ = new QComboBox;
  sizes_->setObjectName("tunerSizes");
  sizes_->setAccessibleName("Message size");
  sizes_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  row->addWidget(sizes_);
  summary_ = new QLabel;
  summary_->setObjectName("tunerSummary");
  row->addWidget(summary_, 1);
  layout->addLayout(row);
  table_ = new QTableView;
  table_->setObjectName("tunerTable");
  table_->setAccessibleName("Tuner candidates");
  table_->setModel(&model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->setVisible(false);
  layout->addWidget(table_, 1);
  if (results_) {
    // A simulated cluster beside the run.
    auto* sim = new QHBoxLayout;
    sim->addWidget(new QLabel("Simulate beside the run:"));
    instance_ = new QComboBox;
    instance_->setObjectName("simulatedInstance");
    instance_->setAccessibleName("Simulated instance");
    instance_->addItems(SimulationModel::instances());
    instance_->setCurrentText("p5.48xlarge");
    sim->addWidget(instance_);
    sim->addWidget(new QLabel("x"));
    nodes_ = new QSpinBox;
    nodes_->setObjectName("simulatedNodes");
    nodes_->setAccessibleName("Simulated nodes");
    nodes_->setRange(1, 4096);
    nodes_->setValue(2);
    nodes_->setSuffix(" node(s)");
    sim->addWidget(nodes_);
    auto* go = new QPushButton("Simulate");
    go->setObjectName("simulate");
    sim->addWidget(go);
    simulated_ = new QLabel(
        "What the simulator predicts for that cluster at each size the run measured "
        "(ringmaster-cli simulate; docs/tuner.md).");
    simulated_->setObjectName("simulatedSummary");
    simulated_->setWordWrap(true);
    sim->addWidget(simulated_, 1);
    layout->addLayout(sim);
    auto* simulated_table = new QTableView;
    simulated_table->setObjectName("simulatedTable");
    simulated_table->setAccessibleName("Simulated cluster beside the run");
    simulated_table->setModel(&simulation_);
    simulated_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    simulated_table->horizontalHeader()->setStretchLastSection(true);
    simulated_table->verticalHeader()->setVisible(false);
    layout->addWidget(simulated_table, 1);
    connect(go, &QPushButton::clicked, this, [this] { simulate(instance_->currentText(), nodes_->value()); });
    // The run's rows as they come, and a new run, against the same cluster.
    auto again = [this] {
      if (simulation_.active()) simulate(instance_->currentText(), nodes_->value());
    };
    connect(results_, &QAbstractItemModel::rowsInserted, this, again);
    connect(results_, &QAbstractItemModel::modelReset, this, again);
  }

  connect(&model_, &TunerModel::tables_changed, this, &TunerPanel::refresh_tables);
  connect(sizes_, &QComboBox::currentIndexChanged, this, [this](int i) { model_.select(i); });
  auto update_summary = [this] {
    const int chosen = model_.chosen_row();
    if (chosen < 0) {
      summary_->setText("No collective has run yet: start a run to see the tuner's candidates.");
      return;
    }
    auto cell = [&](int column) { return model_.data(model_.index(chosen, column), Qt::DisplayRole).toString(); };
    QString text = QString("Chosen: %1/%2 on %3 channel(s), predicted %4 us")
                       .arg(cell(0).remove(QChar(0x25B6)).trimmed(), cell(1), cell(2), cell(3));
    if (!cell(4).isEmpty()) text += QString(", measured %1 us").arg(cell(4));
    summary_->setText(text);
    table_->scrollTo(model_.index(chosen, 0));
  };
  connect(&model_, &QAbstractItemModel::modelReset, this, update_summary);
  connect(&model_, &QAbstractItemModel::dataChanged, this, update_summary);
  refresh_tables();
  update_summary();
}

bool TunerPanel::simulate(const QString& instance, int nodes) {
  if (!results_) return false;
  QString error;
  if (!simulation_.simulate(instance, nodes, *results_, &error)) {
    simulated_->setText("Not simulated: " + error);
    return false;
  }
  simulated_->setText(simulation_.title() + (results_->rowCount() == 0 ? " (no run yet: 8 B to 1 GiB)" : ""));
  return true;
}

void TunerPanel::refresh_tables() {
  const QSignalBlocker block(sizes_);
  sizes_->clear();
  sizes_->addItems(model_.tables());
  sizes_->setCurrentIndex(model_.selected());
}

}  // namespace ringmaster::ui
