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
#include <fstream>
#include <nlohmann/json.hpp>

#include "ringmaster/agent/events.h"
#include "ringmaster/agent/scenario_runner.h"
#include "ringmaster/status.h"

namespace ringmaster::ui {

using nlohmann::json;

QStringList ScenariosPanel::check_recorded(const agent::Scenario& s) const {
  // Refused by the node gate: no rank started, nothing was recorded; the
  // runner checked the refusal's words.
  if (s.expect.value("outcome", "") == "refused")
    return {"The run was refused before launch: no events to check here."};
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

namespace {
QString quoted_list(const nlohmann::json& words) {
  QStringList out;
  if (words.is_array()) {
    for (const auto& w : words)
      out << QString("\u201c%1\u201d").arg(QString::fromStdString(w.is_string() ? w.get<std::string>() : w.dump()));
  }
  return out.join(", ");
}

QString ranks_text(const nlohmann::json& ranks) {
  if (ranks.is_string()) {
    const auto r = ranks.get<std::string>();
    if (r == "all") return "every rank";
    if (r == "any") return "at least one rank";
    if (r == "nonzero") return "every rank but rank 0";
    return QString::fromStdString(r);
  }
  if (ranks.is_array()) {
    QStringList list;
    for (const auto& r : ranks)
      list << QString::number(r.is_number_integer() ? r.get<int>() : -1);
    if (list.size() == 1) return "rank " + list.front();
    const QString last = list.takeLast();
    return "ranks " + list.join(", ") + " and " + last;
  }
  return QString::fromStdString(ranks.dump());
}
// "certify": the nodes and links it must isolate, and within how long.
QString certify_text(const nlohmann::json& value) {
  QStringList nodes, links;
  for (const auto& n : value.value("isolate_nodes", nlohmann::json::array()))
    nodes << QString("node %1").arg(n.get<int>());
  for (const auto& l : value.value("isolate_links", nlohmann::json::array()))
    links << QString("node %1 \u2192 node %2").arg(l.at(0).get<int>()).arg(l.at(1).get<int>());
  QStringList isolated = nodes + links;
  QString line = isolated.isEmpty() ? QString("Certify isolates nothing")
                                    : "Certify isolates exactly " + isolated.join(", ") + ", every other node passing";
  if (value.contains("within_s")) line += QString(", within %1 s").arg(value["within_s"].dump().c_str());
  return line + ".";
}

// "bisect": what the bisection inside the job must name.
QString bisect_text(const nlohmann::json& value) {
  QString what = "nothing in particular";
  if (value.contains("node")) what = QString("node %1").arg(value["node"].get<int>());
  if (value.contains("link"))
    what = QString("the link between nodes %1 and %2")
               .arg(value["link"].at(0).get<int>())
               .arg(value["link"].at(1).get<int>());
  if (value.contains("verdict") && value["verdict"] == "between") what = "a link between the two halves";
  return "After its sweep the job bisects its nodes inside itself and names " + what +
         ", within log2(nodes) + 2 rounds.";
}

}  // namespace

QString expectation_text(const nlohmann::json& expect) {
  if (!expect.is_object()) return QString::fromStdString(expect.dump());
  QStringList lines;
  const std::string outcome = expect.value("outcome", "");
  if (outcome == "fail") {
    QString line = "The run fails";
    if (expect.contains("stage")) line += " at " + QString::fromStdString(expect["stage"].get<std::string>());
    if (expect.contains("ranks")) line += " on " + ranks_text(expect["ranks"]);
    lines << line + ".";
  } else if (outcome == "complete") {
    lines << "The run completes.";
  } else if (outcome == "refused") {
    lines << "The run is refused before launch: no rank starts.";
  }
  for (const auto& [key, value] : expect.items()) {
    if (key == "outcome" || key == "stage" || key == "ranks") continue;
    if (key == "keywords") {
      lines << (outcome == "refused" ? "The refusal says " : "The failure says ") + quoted_list(value) + ".";
    } else if (key == "not_entered") {
      QStringList stages;
      for (const auto& st : value)
        stages << QString::fromStdString(st.get<std::string>());
      lines << "No rank gets to " + stages.join(", ") + ".";
    } else if (key == "every_rank_errors" && value == true) {
      lines << "Every rank reports an error.";
    } else if (key == "any_error_keywords") {
      lines << "An error names " + quoted_list(value) + ".";
    } else if (key == "slow_link" && value.is_object()) {
      lines << QString("The run names the link rank %1 \u2192 rank %2 as %3.")
                   .arg(value.value("from", -1))
                   .arg(value.value("to", -1))
                   .arg(value.value("lossy", false) ? "lossy" : "slow");
    } else if (key == "exits" && value.is_array()) {
      for (const auto& e : value)
        lines << QString("The agent says rank %1 ended so: %2.")
                     .arg(e.value("rank", -1))
                     .arg(quoted_list(e.value("keywords", nlohmann::json::array())));
    } else if (key == "notes" && value.is_object()) {
      lines << "A stage that ends well says " + quoted_list(value.value("keywords", nlohmann::json::array())) + ".";
    } else if (key == "transport" && value.is_object()) {
      lines << QString("Rank %1 \u2192 rank %2 goes by %3%4.")
                   .arg(value.value("from", -1))
                   .arg(value.value("to", -1))
                   .arg(QString::fromStdString(value.value("via", std::string("?"))))
                   .arg(value.contains("keywords") ? ", saying " + quoted_list(value["keywords"]) : QString());
    } else if (key == "stall" && value.is_object()) {
      lines << QString("A stall report%1 says %2.")
                   .arg(value.contains("within_s") ? QString(" within %1 s").arg(value["within_s"].dump().c_str())
                                                   : QString())
                   .arg(quoted_list(value.value("keywords", nlohmann::json::array())));
    } else if (key == "together" && value.is_object()) {
      lines << "Read together, the failures say " + quoted_list(value.value("keywords", nlohmann::json::array())) + ".";
    } else if (key == "certify" && value.is_object()) {
      lines << certify_text(value);
    } else if (key == "bisect" && value.is_object()) {
      lines << bisect_text(value);
    } else if ((key == "preflight" || key == "linkcheck") && value.is_object()) {
      const QString who = key == "preflight" ? "Preflight" : "The link check";
      if (value.contains("keywords")) lines << who + " says " + quoted_list(value["keywords"]) + ".";
      for (const auto& c : value.value("cells", nlohmann::json::array())) {
        lines << QString("%1 finds the %2 port from node %3 to node %4 %5.")
                     .arg(who)
                     .arg(QString::fromStdString(c.value("class", std::string("?"))))
                     .arg(c.value("from", -1))
                     .arg(c.value("to", -1))
                     .arg(QString::fromStdString(c.value("reach", std::string("?"))));
      }
    } else {
      lines << QString("%1: %2").arg(QString::fromStdString(key), QString::fromStdString(value.dump()));
    }
  }
  return lines.join("\n");
}

ScenariosPanel::ScenariosPanel(RunState& run, QString catalog, QString agent, QWidget* parent)
    : QWidget(parent), run_(run), agent_(std::move(agent)) {
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
  // Whole titles, wrapped where the list is narrow, the name in the tooltip.
  list_->setWordWrap(true);
  list_->setTextElideMode(Qt::ElideNone);
  list_->setUniformItemSizes(false);
  for (const auto& s : scenarios_) {
    list_->addItem(QString::fromStdString(s.title.empty() ? s.name : s.title));
    list_->item(list_->count() - 1)->setToolTip(QString::fromStdString(s.name));
  }
  auto* right = new QVBoxLayout;
  story_ = new QPlainTextEdit;
  story_->setObjectName("scenarioStory");
  story_->setAccessibleName("Scenario story");
  story_->setReadOnly(true);
  verdict_ = new QLabel("Pick a scenario. Running one builds its hosts in network namespaces (needs root).");
  verdict_->setObjectName("scenarioVerdict");
  verdict_->setWordWrap(true);
  run_button_ = new QPushButton("Run scenario");
  output_ = new QPlainTextEdit;
  output_->setObjectName("scenarioOutput");
  output_->setAccessibleName("Scenario output");
  output_->setReadOnly(true);
  right->addWidget(story_, 2);
  auto* row = new QHBoxLayout;
  row->addWidget(run_button_);
  row->addWidget(verdict_, 1);
  right->addLayout(row);
  right->addWidget(output_, 3);
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
    story_->setPlainText(text + "\n\nWhat Ringmaster must report:\n" + expectation_text(s.expect));
  });
  connect(run_button_, &QPushButton::clicked, this, &ScenariosPanel::run_selected);
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

ScenariosPanel::~ScenariosPanel() {
  // A scenario in progress stops waiting and takes its hosts down.
  stop_ = true;
  if (worker_.joinable()) worker_.join();
}

void ScenariosPanel::run_selected() {
  const int row = list_->currentRow();
  if (row < 0 || row >= static_cast<int>(scenarios_.size()) || worker_running_) return;
  output_->clear();
  QFile::remove(events_file_);
  verdict_->setText("Running…");
  verdict_->setStyleSheet({});
  run_button_->setEnabled(false);
  if (worker_.joinable()) worker_.join();
  const agent::Scenario scenario = scenarios_[static_cast<std::size_t>(row)];
  output_->appendPlainText(QString::fromStdString("== " + scenario.name + ": " + scenario.title));
  worker_running_ = true;
  stop_ = false;
  // The runner builds namespaces and waits on agents for seconds: off the
  // window's thread, its verdict handed back to it.
  worker_ = std::thread([this, scenario, agent = agent_.toStdString(), events_file = events_file_.toStdString()] {
    agent::ScenarioVerdict v;
    if (const std::string why = agent::scenarios_cannot_run(); !why.empty()) {
      v.passed = false;
      v.skipped = why;
    } else {
      std::ofstream events(events_file);
      agent::ScenarioRunOptions options;
      options.agent_path = agent;
      options.events = &events;
      options.stop = &stop_;
      try {
        agent::remove_scenario_leftovers();
        v = agent::run_scenario(scenario, options);
      } catch (const Error& e) {
        v.passed = false;
        v.reasons.push_back(e.what());
      }
      // What the CLI's run of the catalog fails on fails it here too.
      std::vector<std::string> problems;
      for (const auto& left : agent::scenario_leftovers())
        problems.push_back("left behind: " + left);
      for (const auto& problem : agent::take_agent_exit_problems())
        problems.push_back("agent at exit: " + problem);
      if (!problems.empty()) v.passed = false;
      v.reasons.insert(v.reasons.end(), problems.begin(), problems.end());
    }
    QMetaObject::invokeMethod(
        this, [this, v] { show_verdict(v); }, Qt::QueuedConnection);
  });
}

void ScenariosPanel::show_verdict(const agent::ScenarioVerdict& v) {
  worker_running_ = false;
  run_button_->setEnabled(true);
  for (const auto& line : v.report)
    output_->appendPlainText(QString::fromStdString("   | " + line));
  for (const auto& reason : v.reasons)
    output_->appendPlainText(QString::fromStdString("   - " + reason));
  const bool skipped = !v.skipped.empty();
  const bool passed = !skipped && v.passed;
  if (skipped) {
    verdict_->setText(QString::fromStdString("Skipped: " + v.skipped) +
                      ". Run the console as root, or `sudo ringmaster-cli repro run NAME`.");
  } else {
    verdict_->setText(passed ? "PASS: Ringmaster reported what the scenario expects (timeline on the Live tab)"
                             : "FAIL: see the output for expected vs observed");
  }
  verdict_->setStyleSheet(passed ? "color: #2e7d32; font-weight: bold" : "color: #c62828; font-weight: bold");
  if (QFile::exists(events_file_)) {
    Console::replay(events_file_, run_);
    const int row = list_->currentRow();
    if (!skipped && row >= 0 && row < static_cast<int>(scenarios_.size())) {
      output_->appendPlainText(check_recorded(scenarios_[static_cast<std::size_t>(row)]).join('\n'));
    }
  }
  emit finished(passed);
}

}  // namespace ringmaster::ui
