#include "panels/links_panel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "models/console.h"
#include "models/text.h"
#include "panels/table_columns.h"

namespace ringmaster::ui {

LinksPanel::LinksPanel(Console& console, QWidget* parent) : QWidget(parent), console_(console) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  check_ = new QPushButton("Check links");
  check_->setObjectName("linksCheck");
  check_->setToolTip("Every pair of connected agents' nodes sends to each other in turn, each direction timed alone");
  bytes_ = new QLineEdit("8M");
  bytes_->setAccessibleName("Bytes a transfer");
  bytes_->setMaximumWidth(80);
  iters_ = new QSpinBox;
  iters_->setRange(1, 100);
  iters_->setValue(5);
  iters_->setAccessibleName("Timed transfers a link");
  row->addWidget(check_);
  row->addWidget(new QLabel("Bytes a transfer"));
  row->addWidget(bytes_);
  row->addWidget(new QLabel("Transfers"));
  row->addWidget(iters_);
  env_ = new QLineEdit;
  env_->setPlaceholderText("e.g. NCCL_SHM_DISABLE=1 NCCL_NET=OFI");
  env_->setToolTip("The ranks' environment, NAME=VALUE separated by spaces: the transport a job would use");
  env_->setAccessibleName("The ranks' environment");
  row->addWidget(new QLabel("Environment"));
  row->addWidget(env_, 1);
  layout->addLayout(row);
  summary_ = new QLabel("Check the links between the connected agents' nodes, or make a run: its links show here.");
  summary_->setObjectName("linksSummary");
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
  auto* split = new QSplitter(Qt::Vertical);
  heatmap_ = new QTableView;
  heatmap_->setObjectName("linksHeatmap");
  heatmap_->setModel(&console_.links);
  heatmap_->setAccessibleName("Link bandwidth: rows send, columns receive");
  heatmap_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  split->addWidget(heatmap_);
  findings_ = new QListWidget;
  findings_->setObjectName("linksFindings");
  findings_->setWordWrap(true);
  findings_->setAccessibleName("Slow and failed links");
  split->addWidget(findings_);
  // The rails: every NIC of every connected node, live (nic_sample).
  rails_ = new QTableView;
  rails_->setObjectName("linksRails");
  rails_->setModel(&console_.nics);
  rails_->setAccessibleName("Each network device's traffic, received and sent per second");
  rails_->setToolTip(
      "Every network device of the connected agents' nodes, once a second: an idle or slow rail "
      "among busy ones shows here, Ringmaster's traffic or not");
  // Sized to contents, each agent's sample (one a second) measured every
  // row's text again: 10 to 20 ms of the GUI thread at 32 agents.
  fit_columns_when_rows_change(rails_, [](int column) {
    return column == NicRatesModel::receive_column || column == NicRatesModel::send_column ? QString("888.88 Mb/s")
                                                                                           : QString();
  });
  rails_->verticalHeader()->hide();
  split->addWidget(rails_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  split->setStretchFactor(2, 2);
  layout->addWidget(split, 1);

  connect(check_, &QPushButton::clicked, this, [this] { start(); });
  connect(&console_.links, &QAbstractItemModel::modelReset, this, &LinksPanel::show_links);
  connect(&console_, &Console::linkcheck_finished, this, [this] { check_->setEnabled(true); });
  connect(&console_, &Console::linkcheck_failed, this, [this](const QString& why) {
    check_->setEnabled(true);
    summary_->setText("The link check failed: " + why);
  });
}

void LinksPanel::set_environment(const QString& assignments) {
  env_->setText(assignments);
}

bool LinksPanel::start() {
  agent::LinkcheckOptions options;
  options.bytes = bytes_->text().trimmed().toStdString();
  options.iters = iters_->value();
  QString bad;
  if (!read_assignments(env_->text(), options.env, &bad)) {
    summary_->setText("Cannot check the links: the environment takes NAME=VALUE, got " + bad);
    return false;
  }
  QString error;
  if (!console_.start_linkcheck(options, &error)) {
    summary_->setText("Cannot check the links: " + error);
    return false;
  }
  check_->setEnabled(false);
  const int n = console_.connected_count();
  summary_->setText(QString("Link check under way over %1 nodes (%2 links)...").arg(n).arg(n * (n - 1)));
  return true;
}

void LinksPanel::show_links() {
  const LinksModel& m = console_.links;
  summary_->setText(m.summary());
  findings_->clear();
  for (const auto& f : m.findings()) {
    auto* item = new QListWidgetItem(f);
    item->setForeground(QColor(0xb0, 0x20, 0x20));
    findings_->addItem(item);
  }
  if (m.findings().isEmpty() && m.rowCount() > 0) findings_->addItem("No slow or failed link.");
}

}  // namespace ringmaster::ui
