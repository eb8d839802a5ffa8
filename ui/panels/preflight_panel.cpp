#include "panels/preflight_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

#include "models/console.h"

namespace ringmaster::ui {

namespace {

QString bytes_text(std::uint64_t b) {
  if (b >= (1ULL << 30)) return QString("%1 GiB").arg(static_cast<double>(b) / (1ULL << 30), 0, 'f', 1);
  if (b >= (1ULL << 20)) return QString("%1 MiB").arg(b >> 20);
  return QString("%1 KiB").arg(b >> 10);
}

QString limit_text(long long v) {
  return v < 0 ? QString("unlimited") : QString::number(v);
}

}  // namespace

PreflightPanel::PreflightPanel(Console& console, QWidget* parent) : QWidget(parent), console_(console) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  run_ = new QPushButton("Run preflight");
  run_->setObjectName("preflightRun");
  run_->setToolTip("Every connected agent listens on sample ports of each class and probes every other one");
  master_addr_ = new QLineEdit;
  master_addr_->setPlaceholderText("the first agent's address");
  master_addr_->setAccessibleName("MASTER_ADDR to resolve on every node");
  master_port_ = new QSpinBox;
  master_port_->setRange(1, 65535);
  master_port_->setValue(29500);
  master_port_->setAccessibleName("MASTER_PORT to listen on and probe");
  socket_ifname_ = new QLineEdit;
  socket_ifname_->setPlaceholderText("not checked");
  socket_ifname_->setAccessibleName("NCCL_SOCKET_IFNAME to check on every node");
  row->addWidget(run_);
  row->addWidget(new QLabel("MASTER_ADDR"));
  row->addWidget(master_addr_, 1);
  row->addWidget(new QLabel("MASTER_PORT"));
  row->addWidget(master_port_);
  row->addWidget(new QLabel("NCCL_SOCKET_IFNAME"));
  row->addWidget(socket_ifname_, 1);
  layout->addLayout(row);

  summary_ = new QLabel("Before a job: connect to every node's agent, then run a preflight.");
  summary_->setObjectName("preflightSummary");
  summary_->setWordWrap(true);
  layout->addWidget(summary_);

  auto* split = new QSplitter(Qt::Vertical);
  auto* top = new QWidget;
  auto* top_layout = new QVBoxLayout(top);
  top_layout->setContentsMargins(0, 0, 0, 0);
  classes_ = new QComboBox;
  classes_->setAccessibleName("Port class the matrix shows");
  top_layout->addWidget(classes_);
  matrix_ = new QTableView;
  matrix_->setObjectName("preflightMatrix");
  matrix_->setModel(&console_.preflight);
  matrix_->setAccessibleName("Reachability matrix: rows connect, columns answer");
  matrix_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  top_layout->addWidget(matrix_, 1);
  split->addWidget(top);
  findings_ = new QListWidget;
  findings_->setObjectName("preflightFindings");
  findings_->setWordWrap(true);
  findings_->setAccessibleName("Findings, problems first");
  split->addWidget(findings_);
  nodes_ = new QTableWidget(0, 9);
  nodes_->setObjectName("preflightNodes");
  nodes_->setHorizontalHeaderLabels(
      {"Node", "Host", "Ephemeral ports", "/dev/shm", "nofile", "memlock", "conntrack", "Clock", "Transports"});
  nodes_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  nodes_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  nodes_->verticalHeader()->hide();
  nodes_->setAccessibleName("Each node's facts");
  split->addWidget(nodes_);
  layout->addWidget(split, 1);

  connect(run_, &QPushButton::clicked, this, [this] { start(); });
  connect(classes_, &QComboBox::currentIndexChanged, &console_.preflight, &PreflightModel::set_port_class);
  connect(&console_, &Console::preflight_finished, this, [this] {
    run_->setEnabled(true);
    show_report();
  });
  connect(&console_, &Console::preflight_failed, this, [this](const QString& why) {
    run_->setEnabled(true);
    summary_->setText("The preflight failed: " + why);
  });
}

bool PreflightPanel::start() {
  agent::PreflightOptions options;
  options.master_addr = master_addr_->text().trimmed().toStdString();
  options.master_port = static_cast<std::uint16_t>(master_port_->value());
  options.socket_ifname = socket_ifname_->text().trimmed().toStdString();
  QString error;
  if (!console_.start_preflight(options, &error)) {
    summary_->setText("Cannot run a preflight: " + error);
    return false;
  }
  run_->setEnabled(false);
  summary_->setText(QString("Preflight under way over %1 agents...").arg(console_.connected_count()));
  return true;
}

void PreflightPanel::show_report() {
  const PreflightModel& m = console_.preflight;
  summary_->setText(m.summary());
  {
    const QSignalBlocker quiet(classes_);
    classes_->clear();
    classes_->addItems(m.port_class_labels());
    classes_->setCurrentIndex(m.port_class());
  }
  findings_->clear();
  for (const auto& f : m.findings()) {
    auto* item = new QListWidgetItem(QString("%1: %2").arg(name_of(f.severity), QString::fromStdString(f.text)));
    if (f.severity == PreflightFinding::Severity::problem) item->setForeground(QColor(0xb0, 0x20, 0x20));
    if (f.severity == PreflightFinding::Severity::warning) item->setForeground(QColor(0x9a, 0x60, 0x00));
    findings_->addItem(item);
  }
  if (m.findings().empty()) findings_->addItem("No problem found.");
  nodes_->setRowCount(0);
  if (!m.report()) return;
  int row = 0;
  for (const auto& node : m.report()->nodes) {
    nodes_->insertRow(row);
    const NodeFacts& f = node.facts;
    const QStringList cells = {
        QString("node %1 (%2)").arg(row).arg(QString::fromStdString(node.address)),
        QString::fromStdString(node.error.empty() ? node.name : "no part: " + node.error),
        QString("%1-%2").arg(f.ephemeral_lo).arg(f.ephemeral_hi),
        bytes_text(f.shm_bytes),
        limit_text(f.nofile_soft),
        limit_text(f.memlock_soft),
        f.conntrack_max > 0 ? QString("%1/%2").arg(f.conntrack_count).arg(f.conntrack_max) : QString("-"),
        QString("%1 ms").arg(node.clock_offset_ms, 0, 'f', 1),
        QString::fromStdString([&] {
          std::string t;
          for (const auto& x : f.transports)
            t += (t.empty() ? "" : ",") + x;
          return t;
        }())};
    for (int c = 0; c < cells.size(); ++c)
      nodes_->setItem(row, c, new QTableWidgetItem(cells[c]));
    ++row;
  }
}

}  // namespace ringmaster::ui
