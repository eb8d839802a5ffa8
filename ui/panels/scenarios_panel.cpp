#include "scenarios_panel.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QStandardPaths>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>

#include "ringmaster/agent/events.h"
#include "ringmaster/status.h"

namespace ringmaster::ui {

using nlohmann::json;

QStringList ScenariosPanel::check_recorded(const agent::Scenario& s) const {
  QFile file(events_file_);
  if (!file.open(QIODevice::ReadOnly)) return {"No events were recorded to check here."};
  agent::ScenarioRun said;
  QStringList lines;
  while (!file.atEnd()) {
    const QByteArray line = file.readLine();
    const json j = json::parse(line.constData(), line.constData() + line.size(), nullptr, false);
    if (j.is_discarded() || !j.contains("message")) continue;
    try {
      if (const auto m = agent::events::parse_event_message(j["message"])) said.add(*m);
    } catch (const Error& e) {
      lines << "skipped an event: " + QString::fromStdString(e.status().message());
    }
  }
  const agent::ScenarioCheck check = agent::check_run(s, said);
  lines
      << (check.passed()
              ? QString("Checked here from the recorded events: every expectation about the run is met.")
              : QString("Checked here from the recorded events: %1 expectation(s) not met:").arg(check.reasons.size()));
  for (const auto& r : check.reasons)
    lines << "  - " + QString::fromStdString(r);
  return lines;
}

ScenariosPanel::ScenariosPanel(RunState& run, QString catalog, QString cli, QWidget* parent)
    : QWidget(parent), run_(run), cli_(std::move(cli)) {
  setObjectName("scenariosPanel");
  QString catalog_error;
  try {
    scenarios_ = agent::load_catalog(catalog.toStdString());
  } catch (const Error& e) {
    catalog_error = QString::fromStdString(e.status().message());
  }
  events_file_ = QDir(QStandardPaths::writableLocation(QStandardPaths::TempLocation))
                     .filePath(QString("ringmaster-scenario-%1.jsonl").arg(QCoreApplication::applicationPid()));
  auto* layout = new QHBoxLayout(this);
  list_ = new QListWidget;
  list_->setObjectName("scenarioList");
  list_->setAccessibleName("Scenarios");
  for (const auto& s : scenarios_)
    list_->addItem(QString::fromStdString(s.title.empty() ? s.name : s.title));
  auto* right = new QVBoxLayout;
  story_ = new QPlainTextEdit;
  story_->setObjectName("scenarioStory");
  story_->setAccessibleName("Scenario story");
  story_->setReadOnly(true);
  story_->setMaximumHeight(110);
  verdict_ = new QLabel("Pick a scenario. Running one builds its hosts in network namespaces (needs root).");
  verdict_->setObjectName("scenarioVerdict");
  verdict_->setWordWrap(true);
  run_button_ = new QPushButton("Run scenario");
  output_ = new QPlainTextEdit;
  output_->setObjectName("scenarioOutput");
  output_->setAccessibleName("Scenario output");
  output_->setReadOnly(true);
  right->addWidget(story_);
  auto* row = new QHBoxLayout;
  row->addWidget(run_button_);
  row->addWidget(verdict_, 1);
  right->addLayout(row);
  right->addWidget(output_, 1);
  layout->addWidget(list_, 1);
  layout->addLayout(right, 3);
  connect(list_, &QListWidget::currentRowChanged, this, [this](int row) {
    if (row < 0 || row >= static_cast<int>(scenarios_.size())) return;
    const auto& s = scenarios_[static_cast<std::size_t>(row)];
    QString text = QString::fromStdString(s.story);
    for (const auto& f : s.faults) {
      QStringList hosts;
      for (int h : f.hosts)
        hosts << QString::number(h);
      text += QString("\nFault on %1: %2")
                  .arg(hosts.isEmpty() ? QString("every host") : "host " + hosts.join(", "),
                       QString::fromStdString(agent::describe(f.fault)));
    }
    story_->setPlainText(text + "\n\nExpected: " + QString::fromStdString(s.expect.dump()));
  });
  connect(run_button_, &QPushButton::clicked, this, &ScenariosPanel::run_selected);
  process_.setProcessChannelMode(QProcess::MergedChannels);
  connect(&process_, &QProcess::readyRead, this,
          [this] { output_->appendPlainText(QString::fromUtf8(process_.readAll()).trimmed()); });
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus) {
    run_button_->setEnabled(true);
    const bool passed = code == 0;
    if (code == 77) {
      verdict_->setText(
          "Skipped: scenarios need root (network namespaces, veth, nftables). Run the console as root, "
          "or `sudo ringmaster-cli repro run NAME`.");
    } else {
      verdict_->setText(passed ? "PASS: Ringmaster reported what the scenario expects (timeline on the Live tab)"
                               : "FAIL: see the output for expected vs observed");
    }
    verdict_->setStyleSheet(passed ? "color: #2e7d32; font-weight: bold" : "color: #c62828; font-weight: bold");
    if (QFile::exists(events_file_)) {
      Console::replay(events_file_, run_);
      const int row = list_->currentRow();
      if (code != 77 && row >= 0 && row < static_cast<int>(scenarios_.size())) {
        output_->appendPlainText(check_recorded(scenarios_[static_cast<std::size_t>(row)]).join('\n'));
      }
    }
    emit finished(passed);
  });
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
    if (error != QProcess::FailedToStart) return;
    run_button_->setEnabled(true);
    verdict_->setText("Cannot start " + cli_ + ": " + process_.errorString());
    verdict_->setStyleSheet("color: #c62828; font-weight: bold");
    emit finished(false);
  });
  if (!scenarios_.empty()) list_->setCurrentRow(0);
  if (!catalog_error.isEmpty()) {
    verdict_->setText("The scenario catalog cannot be read: " + catalog_error);
    verdict_->setStyleSheet("color: #c62828; font-weight: bold");
    run_button_->setEnabled(false);
  }
}

QString ScenariosPanel::selected_name() const {
  const int row = list_->currentRow();
  if (row < 0 || row >= static_cast<int>(scenarios_.size())) return {};
  return QString::fromStdString(scenarios_[static_cast<std::size_t>(row)].name);
}

void ScenariosPanel::run_selected() {
  const int row = list_->currentRow();
  if (row < 0 || row >= static_cast<int>(scenarios_.size()) || process_.state() != QProcess::NotRunning) return;
  output_->clear();
  QFile::remove(events_file_);
  verdict_->setText("Running…");
  verdict_->setStyleSheet({});
  run_button_->setEnabled(false);
  process_.start(cli_, {"repro", "run", QString::fromStdString(scenarios_[static_cast<std::size_t>(row)].name),
                        "--json-file", events_file_});
}

}  // namespace ringmaster::ui
