#include "panels/tuner_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

namespace ringmaster::ui {

TunerPanel::TunerPanel(TunerModel& model, QWidget* parent) : QWidget(parent), model_(model) {
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

void TunerPanel::refresh_tables() {
  const QSignalBlocker block(sizes_);
  sizes_->clear();
  sizes_->addItems(model_.tables());
  sizes_->setCurrentIndex(model_.selected());
}

}  // namespace ringmaster::ui
