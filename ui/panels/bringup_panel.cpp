#include "panels/bringup_panel.h"

#include <QColor>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

#include "models/console.h"
#include "models/text.h"
#include "ringmaster/agent/certify.h"
#include "ringmaster/tools/simulate.h"

namespace ringmaster::ui {

namespace {

using nlohmann::json;

// The instance list's last entry: asks for a node's topology file.
const QString kAskForFile = "Topology file...";

QColor verdict_color(const QString& verdict) {
  if (verdict == "ISOLATE") return QColor(255, 235, 233);
  if (verdict == "MONITOR") return QColor(255, 248, 197);
  return QColor(218, 251, 225);
}

QString reasons_text(const json& reasons) {
  QStringList out;
  for (const auto& r : reasons)
    out << QString("%1 (%2): %3")
               .arg(QString::fromStdString(r.value("verdict", "")), QString::fromStdString(r.value("step", "")),
                    QString::fromStdString(r.value("text", "")));
  return out.join("\n");
}

}  // namespace

BringupPanel::BringupPanel(Console& console, QWidget* parent) : QWidget(parent), console_(console) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  run_ = new QPushButton("Certify");
  run_->setObjectName("certifyRun");
  run_->setToolTip("Nodes alike, preflight, every link both ways, collective sweeps, and the expected envelope");
  instance_ = new QComboBox;
  instance_->setObjectName("certifyInstance");
  instance_->setAccessibleName("The nodes' instance type, for the expected envelope");
  instance_->addItem("(not declared)");
  for (const auto& p : tune::instance_profiles())
    instance_->addItem(QString::fromUtf8(p.name.data(), static_cast<int>(p.name.size())));
  instance_->addItem(kAskForFile);
  max_bytes_ = new QLineEdit("16M");
  max_bytes_->setAccessibleName("The sweeps' largest size");
  env_ = new QLineEdit;
  env_->setPlaceholderText("NAME=VALUE ... for the ranks");
  env_->setAccessibleName("The ranks' environment");
  export_ = new QPushButton("Export report...");
  export_->setObjectName("certifyExport");
  export_->setEnabled(false);
  row->addWidget(run_);
  row->addWidget(new QLabel("Instance type or topology"));
  row->addWidget(instance_);
  row->addWidget(new QLabel("Largest size"));
  row->addWidget(max_bytes_);
  row->addWidget(new QLabel("Environment"));
  row->addWidget(env_, 1);
  row->addWidget(export_);
  layout->addLayout(row);

  verdict_ = new QLabel(
      "Connect to every node's agent, then certify: each step runs in order, and every node and "
      "link gets PASS, MONITOR or ISOLATE.");
  verdict_->setObjectName("certifyVerdict");
  verdict_->setWordWrap(true);
  layout->addWidget(verdict_);

  auto* split = new QSplitter(Qt::Vertical);
  steps_ = new QTableView;
  steps_->setObjectName("certifySteps");
  steps_->setModel(&console_.certify);
  steps_->setSelectionBehavior(QAbstractItemView::SelectRows);
  steps_->setSelectionMode(QAbstractItemView::SingleSelection);
  steps_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  steps_->horizontalHeader()->setStretchLastSection(true);
  steps_->setAccessibleName("The certification's steps, in order");
  split->addWidget(steps_);
  findings_ = new QListWidget;
  findings_->setObjectName("certifyFindings");
  findings_->setWordWrap(true);
  findings_->setAccessibleName("What the selected step found");
  split->addWidget(findings_);
  nodes_ = new QTableWidget(0, 5);
  nodes_->setObjectName("certifyNodes");
  nodes_->setHorizontalHeaderLabels({"Node or link", "Address", "Host", "Verdict", "Why"});
  nodes_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  nodes_->horizontalHeader()->setStretchLastSection(true);
  nodes_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  nodes_->setWordWrap(true);
  nodes_->setAccessibleName("Every node's verdict, then the links found wanting");
  split->addWidget(nodes_);
  layout->addWidget(split, 1);

  connect(run_, &QPushButton::clicked, this, [this] { start(); });
  connect(instance_, &QComboBox::activated, this, [this](int index) {
    if (instance_->itemText(index) != kAskForFile) return;
    const QString path = QFileDialog::getOpenFileName(this, "A node's topology file", QString(),
                                                      "Topology XML, NCCL's or hwloc's (*.xml);;Any file (*)");
    if (path.isEmpty()) {
      instance_->setCurrentIndex(0);
      return;
    }
    set_topology_file(path);
  });
  connect(export_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, "Export the certification", "certification.html",
                                                      "HTML page (*.html);;JSON (*.json)");
    QString error;
    if (!path.isEmpty() && !export_report(path, &error)) verdict_->setText("Cannot export: " + error);
  });
  connect(steps_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) { show_findings(current.row()); });
  connect(steps_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) { open_step(index.row()); });
  connect(&console_.certify, &QAbstractItemModel::dataChanged, this, [this] {
    const QString text = console_.certify.verdict_text();
    if (!text.isEmpty() && console_.certify_running()) verdict_->setText(text + " ...");
    if (steps_->currentIndex().isValid()) show_findings(steps_->currentIndex().row());
  });
  connect(&console_, &Console::certify_finished, this, [this] {
    run_->setEnabled(true);
    export_->setEnabled(true);
    show_report();
  });
  connect(&console_, &Console::certify_failed, this, [this](const QString& why) {
    run_->setEnabled(true);
    verdict_->setText("The certification could not run: " + why);
  });
}

void BringupPanel::set_environment(const QString& assignments) {
  env_->setText(assignments);
}

void BringupPanel::set_instance(const QString& instance) {
  const int i = instance_->findText(instance);
  instance_->setCurrentIndex(i < 0 || instance == kAskForFile ? 0 : i);
}

void BringupPanel::set_topology_file(const QString& path) {
  int at = instance_->findData(path);
  if (at < 0) {
    at = instance_->count() - 1;  // before "Topology file..."
    instance_->insertItem(at, QFileInfo(path).fileName() + " (topology)", path);
    instance_->setItemData(at, path, Qt::ToolTipRole);
  }
  instance_->setCurrentIndex(at);
}

bool BringupPanel::start() {
  agent::CertifyOptions options;
  options.max_bytes = max_bytes_->text().trimmed().toStdString();
  try {
    if (agent::parse_request_size(options.max_bytes) < agent::parse_request_size(options.min_bytes))
      options.min_bytes = options.max_bytes;
  } catch (const std::exception& e) {
    verdict_->setText(QString("Cannot certify: the largest size: ") + e.what());
    return false;
  }
  if (const QString file = instance_->currentData().toString(); !file.isEmpty())
    options.topology_file = file.toStdString();
  else if (instance_->currentIndex() > 0 && instance_->currentText() != kAskForFile)
    options.instance = instance_->currentText().toStdString();
  QString bad;
  if (!read_assignments(env_->text(), options.env, &bad)) {
    verdict_->setText("Cannot certify: the environment takes NAME=VALUE, got " + bad);
    return false;
  }
  QString error;
  if (!console_.start_certify(std::move(options), &error)) {
    verdict_->setText("Cannot certify: " + error);
    return false;
  }
  run_->setEnabled(false);
  export_->setEnabled(false);
  nodes_->setRowCount(0);
  findings_->clear();
  verdict_->setText(QString("Certifying %1 nodes ...").arg(console_.connected_count()));
  return true;
}

void BringupPanel::show_findings(int row) {
  findings_->clear();
  for (const QString& f : console_.certify.findings(row))
    findings_->addItem(f);
  if (findings_->count() == 0 && row >= 0) findings_->addItem("Nothing found in this step.");
}

void BringupPanel::open_step(int row) {
  const QString name = console_.certify.step_name(row);
  if (name == "preflight") emit open_tab("Preflight");
  if (name == "linkcheck") emit open_tab("Links");
}

void BringupPanel::show_report() {
  const json& report = console_.certify.report();
  verdict_->setText(console_.certify.verdict_text());
  nodes_->setRowCount(0);
  auto add_row = [this](const QStringList& cells, const QString& verdict) {
    const int r = nodes_->rowCount();
    nodes_->insertRow(r);
    for (int c = 0; c < cells.size(); ++c)
      nodes_->setItem(r, c, new QTableWidgetItem(cells[c]));
    nodes_->item(r, 3)->setBackground(verdict_color(verdict));
  };
  for (const auto& n : report.value("nodes", json::array())) {
    const QString verdict = QString::fromStdString(n.value("verdict", ""));
    add_row({QString("node %1").arg(n.value("node", 0)), QString::fromStdString(n.value("address", "")),
             QString::fromStdString(n.value("hostname", "")), verdict, reasons_text(n.value("reasons", json::array()))},
            verdict);
  }
  for (const auto& l : report.value("links", json::array())) {
    const QString verdict = QString::fromStdString(l.value("verdict", ""));
    add_row({QString("node %1 -> node %2").arg(l.value("from", 0)).arg(l.value("to", 0)), "", "", verdict,
             reasons_text(l.value("reasons", json::array()))},
            verdict);
  }
  nodes_->resizeRowsToContents();
  if (steps_->currentIndex().isValid()) show_findings(steps_->currentIndex().row());
}

bool BringupPanel::show_kept(const QString& report, const QString& about) {
  if (console_.certify_running()) return false;
  json parsed = json::parse(report.toStdString(), nullptr, false);
  if (!parsed.is_object()) {
    verdict_->setText("The kept certification cannot be read (" + about + ")");
    return false;
  }
  console_.certify.show_report(std::move(parsed));
  export_->setEnabled(true);
  show_report();
  verdict_->setText(verdict_->text() + " — " + about);
  return true;
}

bool BringupPanel::export_report(const QString& path, QString* error) const {
  const json& report = console_.certify.report();
  if (!report.is_object()) {
    if (error) *error = "no certification has finished yet";
    return false;
  }
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
    if (error) *error = path + ": " + file.errorString();
    return false;
  }
  const bool html = path.endsWith(".html", Qt::CaseInsensitive) || path.endsWith(".htm", Qt::CaseInsensitive);
  const std::string text = html ? agent::render_certify_html(report) : report.dump(2) + "\n";
  if (file.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size())) {
    if (error) *error = path + ": " + file.errorString();
    return false;
  }
  return true;
}

}  // namespace ringmaster::ui
