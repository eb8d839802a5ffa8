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

namespace ringmaster::ui {

using nlohmann::json;

std::vector<json> load_scenarios(const QString& dir) {
  std::vector<json> out;
  const auto files = QDir(dir).entryList({"*.json"}, QDir::Files, QDir::Name);
  for (const auto& name : files) {
    QFile f(QDir(dir).filePath(name));
    if (!f.open(QIODevice::ReadOnly)) continue;
    const QByteArray text = f.readAll();
    json j = json::parse(text.constData(), text.constData() + text.size(), nullptr, false);
    if (!j.is_discarded() && j.contains("name")) out.push_back(std::move(j));
  }
  return out;
}

ScenariosPanel::ScenariosPanel(RunState& run, QString catalog, QString cli, QWidget* parent)
    : QWidget(parent), run_(run), cli_(std::move(cli)) {
  setObjectName("scenariosPanel");
  scenarios_ = load_scenarios(catalog);
  events_file_ = QDir(QStandardPaths::writableLocation(QStandardPaths::TempLocation))
                     .filePath(QString("ringmaster-scenario-%1.jsonl").arg(QCoreApplication::applicationPid()));
  auto* layout = new QHBoxLayout(this);
  list_ = new QListWidget;
  list_->setObjectName("scenarioList");
  list_->setAccessibleName("Scenarios");
  for (const auto& s : scenarios_)
    list_->addItem(QString::fromStdString(s.value("title", s["name"].get<std::string>())));
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
    story_->setPlainText(QString::fromStdString(s.value("story", std::string())) +
                         "\n\nExpected: " + QString::fromStdString(s.value("expect", json::object()).dump()));
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
    if (QFile::exists(events_file_)) Console::replay(events_file_, run_);
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
}

QString ScenariosPanel::selected_name() const {
  const int row = list_->currentRow();
  if (row < 0 || row >= static_cast<int>(scenarios_.size())) return {};
  return QString::fromStdString(scenarios_[static_cast<std::size_t>(row)].value("name", std::string()));
}

void ScenariosPanel::run_selected() {
  const int row = list_->currentRow();
  if (row < 0 || row >= static_cast<int>(scenarios_.size()) || process_.state() != QProcess::NotRunning) return;
  output_->clear();
  QFile::remove(events_file_);
  verdict_->setText("Running…");
  verdict_->setStyleSheet({});
  run_button_->setEnabled(false);
  process_.start(cli_, {"repro", "run", QString::fromStdString(scenarios_[static_cast<std::size_t>(row)]["name"]),
                        "--json-file", events_file_});
}

}  // namespace ringmaster::ui
