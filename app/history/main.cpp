// ringmaster-history: the history the console and `ringmaster-cli
// certify` keep (an SQLite file, or a PostgreSQL server a team shares),
// from the command line. `keep` takes a certification's JSON report on
// stdin (certify hands it over); `list` and `show` read what everyone kept;
// `check` opens it, creating the tables, and says where it is.
//
// The location: --history, else $RINGMASTER_HISTORY, else the console's
// history.sqlite. A URL's password never appears in what it prints.
#include <CLI/CLI.hpp>
#include <QCoreApplication>
#include <QDateTime>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "completion_cli11.h"
#include "history/history_database.h"
#include "ringmaster/version.h"

namespace {

using ringmaster::ui::CertificationRecord;
using ringmaster::ui::HistoryDatabase;

struct Options {
  std::string history;
  std::string instance, agents;  // keep
  std::string id;                // show
  int limit = 20;                // list
  bool json = false;             // list
};

QString location_of(const Options& o) {
  if (!o.history.empty()) return QString::fromStdString(o.history);
  return qEnvironmentVariable("RINGMASTER_HISTORY", HistoryDatabase::default_location());
}

// Opens the history or says why on stderr (exit 2: nothing can be kept).
bool open(HistoryDatabase& db, const Options& o) {
  QString error;
  if (db.open(location_of(o), &error)) return true;
  std::fprintf(stderr, "ringmaster-history: %s\n", qPrintable(error));
  return false;
}

int keep(const Options& o) {
  HistoryDatabase db;
  if (!open(db, o)) return 2;
  const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const nlohmann::json report = nlohmann::json::parse(text, nullptr, false);
  if (!report.is_object() || !report.contains("schema") || !report.contains("nodes")) {
    std::fprintf(stderr, "ringmaster-history: keep: stdin is not a certification report (certify --json)\n");
    return 2;
  }
  CertificationRecord record = ringmaster::ui::certification_record(report, QString::fromStdString(o.instance));
  if (!o.agents.empty()) record.agents = QString::fromStdString(o.agents);
  QString error;
  if (!db.save_certification(record, &error)) {
    std::fprintf(stderr, "ringmaster-history: %s\n", qPrintable(error));
    return 1;
  }
  std::printf("kept in %s as certification %s\n", qPrintable(db.where()), qPrintable(record.id));
  return 0;
}

nlohmann::json record_json(const CertificationRecord& c) {
  return {{"id", c.id.toStdString()},
          {"finished", QDateTime::fromMSecsSinceEpoch(c.finished_ms).toString(Qt::ISODate).toStdString()},
          {"who", c.who.toStdString()},
          {"agents", c.agents.toStdString()},
          {"instance", c.instance.toStdString()},
          {"verdict", c.verdict.toStdString()},
          {"nodes", c.nodes},
          {"passed", c.passed},
          {"monitored", c.monitored},
          {"isolated", c.isolated},
          {"links_isolated", c.links_isolated},
          {"short_of_envelope", c.short_of_envelope},
          {"seconds", c.seconds}};
}

int list(const Options& o) {
  HistoryDatabase db;
  if (!open(db, o)) return 2;
  const auto kept = db.certifications(o.limit);
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : kept)
      out.push_back(record_json(c));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("# %zu certification(s) in %s, newest first\n", kept.size(), qPrintable(db.where()));
  for (const auto& c : kept) {
    std::printf("%s  %-7s %2d node(s): %d isolated, %d link(s) isolated%s  %s  by %s  %s\n",
                qPrintable(QDateTime::fromMSecsSinceEpoch(c.finished_ms).toString("yyyy-MM-dd hh:mm:ss")),
                qPrintable(c.verdict), c.nodes, c.isolated, c.links_isolated,
                c.short_of_envelope ? ", short of the envelope" : "",
                c.instance.isEmpty() ? "-" : qPrintable(c.instance), qPrintable(c.who), qPrintable(c.id));
  }
  return 0;
}

int show(const Options& o) {
  HistoryDatabase db;
  if (!open(db, o)) return 2;
  for (const auto& c : db.certifications(1 << 30)) {
    if (c.id != QString::fromStdString(o.id)) continue;
    std::printf("%s\n", qPrintable(c.report));
    return 0;
  }
  std::fprintf(stderr, "ringmaster-history: no certification %s in %s\n", o.id.c_str(), qPrintable(db.where()));
  return 1;
}

int check(const Options& o) {
  HistoryDatabase db;
  if (!open(db, o)) return 2;
  std::printf("%s: %s, open\n", qPrintable(db.where()), db.is_postgresql() ? "PostgreSQL" : "SQLite");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication::setOrganizationName("Ringmaster");  // the console's data directory
  QCoreApplication::setApplicationName("ringmaster");
  QCoreApplication app(argc, argv);
  CLI::App cli{
      "The certifications the console and `ringmaster-cli certify` keep: an SQLite file, or a PostgreSQL "
      "server a team shares"};
  cli.set_version_flag("--version", "ringmaster-history " RINGMASTER_VERSION_STRING);
  cli.require_subcommand(1);
  Options o;
  cli.add_option("--history", o.history,
                 "An SQLite file or postgresql://user[:password]@host:port/db (default: $RINGMASTER_HISTORY, else "
                 "the console's history.sqlite); libpq reads PGPASSWORD and ~/.pgpass");
  auto* keep_cmd = cli.add_subcommand("keep", "Keep the certification report on stdin (certify --json's)");
  keep_cmd->add_option("--instance", o.instance, "The instance type it was certified against");
  keep_cmd->add_option("--agents", o.agents, "The agents it ran through (host:port,...)");
  auto* list_cmd = cli.add_subcommand("list", "The certifications kept, newest first");
  list_cmd->add_option("-n,--limit", o.limit, "At most this many")->capture_default_str();
  list_cmd->add_flag("--json", o.json, "As a JSON array");
  auto* show_cmd = cli.add_subcommand("show", "One certification's whole JSON report");
  show_cmd->add_option("id", o.id, "Its id (from list)")->required();
  auto* check_cmd = cli.add_subcommand("check", "Open the history (creating its tables) and say where it is");
  if (argc == 2 && std::string_view(argv[1]) == "--bash-completion") {  // for the build; not in --help
    std::fputs(ringmaster::app::bash_completion_script(cli, "ringmaster-history").c_str(), stdout);
    return 0;
  }
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  if (keep_cmd->parsed()) return keep(o);
  if (list_cmd->parsed()) return list(o);
  if (show_cmd->parsed()) return show(o);
  if (check_cmd->parsed()) return check(o);
  return 2;
}
