// Where runs and certifications are kept: an SQLite file by default (one
// engineer's machine) or a PostgreSQL server that a team shares
// (postgresql://user:password@host:port/database), both through Qt SQL's
// drivers and one schema. The console's run history (models/history.h) and
// `ringmaster-cli certify --history` write here; Qt Core and Sql only, so
// the command line keeps its records without the console's widgets.
#pragma once

#include <QSqlDatabase>
#include <QString>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace ringmaster::ui {

// One certification as the history keeps it: who ran it, over which nodes,
// the verdicts counted, and the whole JSON report (docs/certify.md's
// schema) to read back.
struct CertificationRecord {
  QString id;
  qint64 finished_ms = 0;
  QString who;       // user@host that ran it
  QString agents;    // the agents (host:port) or the nodes' addresses, comma separated
  QString instance;  // the declared instance type, empty when none
  QString verdict;   // PASS, MONITOR, ISOLATE
  int nodes = 0, passed = 0, monitored = 0, isolated = 0, links_isolated = 0;
  bool short_of_envelope = false;
  double seconds = 0;
  QString report;  // the JSON report
};

// The record of a certification's JSON report (agent::to_json's schema),
// stamped now by this user on this host.
CertificationRecord certification_record(const nlohmann::json& report, const QString& instance);

class HistoryDatabase {
 public:
  HistoryDatabase();
  ~HistoryDatabase();
  HistoryDatabase(const HistoryDatabase&) = delete;
  HistoryDatabase& operator=(const HistoryDatabase&) = delete;

  // Opens `where`, an SQLite file (created with its folder when missing)
  // or a postgresql:// URL (user, password, host, port, database; query
  // items such as ?sslmode=require become the driver's connect options),
  // and creates the tables it lacks. On failure `error` says what, naming
  // the location without its password.
  bool open(const QString& where, QString* error = nullptr);
  bool is_open() const;
  bool is_postgresql() const { return postgresql_; }
  // The location as given, its password replaced by "***".
  const QString& where() const { return shown_; }
  QSqlDatabase database() const;

  // history.sqlite in the application's data directory
  // (~/.local/share/Ringmaster/ringmaster/ for the console and the CLI).
  static QString default_location();
  static bool is_postgresql_url(const QString& where);

  bool save_certification(const CertificationRecord& c, QString* error = nullptr);
  // Newest first, at most `limit`.
  std::vector<CertificationRecord> certifications(int limit = 100) const;

 private:
  bool open_postgresql(const QString& where, QString* error);
  bool open_sqlite(const QString& where, QString* error);
  bool create_tables(QString* error);

  QString connection_;
  QString shown_;
  bool postgresql_ = false;
};

}  // namespace ringmaster::ui
