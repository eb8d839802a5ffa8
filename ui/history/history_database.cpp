#include "history/history_database.h"

#include <pwd.h>
#include <unistd.h>

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QStringList>
#include <QSysInfo>
#include <QUrl>
#include <QUrlQuery>
#include <QUuid>
#include <QVariant>
#include <nlohmann/json.hpp>

namespace ringmaster::ui {

namespace {

// One schema for both servers: BIGINT (milliseconds since the epoch do not
// fit PostgreSQL's INTEGER) and DOUBLE PRECISION (PostgreSQL's REAL is 4
// bytes) are names SQLite reads as INTEGER and REAL. A file made before
// keeps its own column types, which SQLite treats alike.
constexpr const char* kTables[] = {
    "CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, started_ms BIGINT, kind TEXT, what TEXT, "
    "world_size INTEGER, agents INTEGER, placement TEXT, ok INTEGER, rows INTEGER, busbw DOUBLE PRECISION, "
    "problems TEXT)",
    "CREATE TABLE IF NOT EXISTS messages (run_id TEXT, seq INTEGER, agent TEXT, body TEXT, "
    "PRIMARY KEY (run_id, seq))",
    "CREATE TABLE IF NOT EXISTS certifications (certification_id TEXT PRIMARY KEY, finished_ms BIGINT, who TEXT, "
    "agents TEXT, instance TEXT, verdict TEXT, nodes INTEGER, passed INTEGER, monitored INTEGER, isolated INTEGER, "
    "links_isolated INTEGER, short_of_envelope INTEGER, seconds DOUBLE PRECISION, report TEXT)",
};

QString without_password(const QString& where) {
  QUrl url(where);
  if (!url.isValid() || url.password().isEmpty()) return where;
  url.setPassword("***");
  return url.toString();
}

}  // namespace

CertificationRecord certification_record(const nlohmann::json& report, const QString& instance) {
  CertificationRecord c;
  c.id = QUuid::createUuid().toString(QUuid::WithoutBraces);
  c.finished_ms = QDateTime::currentMSecsSinceEpoch();
  QString user = qEnvironmentVariable("USER", qEnvironmentVariable("LOGNAME"));
  if (user.isEmpty()) {
    const passwd* pw = ::getpwuid(::geteuid());
    user = pw ? QString::fromLocal8Bit(pw->pw_name) : QString::number(::geteuid());
  }
  c.who = user + "@" + QSysInfo::machineHostName();
  c.instance = instance;
  c.verdict = QString::fromStdString(report.value("verdict", std::string()));
  c.short_of_envelope = report.value("short_of_envelope", false);
  c.seconds = report.value("seconds", 0.0);
  QStringList agents;
  if (const auto nodes = report.find("nodes"); nodes != report.end() && nodes->is_array()) {
    for (const auto& n : *nodes) {
      agents << QString::fromStdString(n.value("address", std::string()));
      const std::string verdict = n.value("verdict", std::string());
      ++c.nodes;
      c.passed += verdict == "PASS";
      c.monitored += verdict == "MONITOR";
      c.isolated += verdict == "ISOLATE";
    }
  }
  if (const auto links = report.find("links"); links != report.end() && links->is_array())
    for (const auto& l : *links)
      c.links_isolated += l.value("verdict", std::string()) == "ISOLATE";
  c.agents = agents.join(",");
  c.report = QString::fromStdString(report.dump());
  return c;
}

HistoryDatabase::HistoryDatabase() : connection_("history-" + QUuid::createUuid().toString(QUuid::WithoutBraces)) {}

HistoryDatabase::~HistoryDatabase() {
  {
    QSqlDatabase db = QSqlDatabase::database(connection_, false);
    if (db.isOpen()) db.close();
  }
  if (QSqlDatabase::contains(connection_)) QSqlDatabase::removeDatabase(connection_);
}

QString HistoryDatabase::default_location() {
  return QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath("history.sqlite");
}

bool HistoryDatabase::is_postgresql_url(const QString& where) {
  return where.startsWith("postgresql://") || where.startsWith("postgres://");
}

bool HistoryDatabase::is_open() const {
  return QSqlDatabase::database(connection_, false).isOpen();
}

QSqlDatabase HistoryDatabase::database() const {
  return QSqlDatabase::database(connection_, false);
}

bool HistoryDatabase::open(const QString& where, QString* error) {
  {
    QSqlDatabase db = QSqlDatabase::database(connection_, false);
    if (db.isOpen()) db.close();
  }
  if (QSqlDatabase::contains(connection_)) QSqlDatabase::removeDatabase(connection_);
  shown_ = without_password(where);
  postgresql_ = is_postgresql_url(where);
  if (!(postgresql_ ? open_postgresql(where, error) : open_sqlite(where, error))) return false;
  return create_tables(error);
}

bool HistoryDatabase::open_postgresql(const QString& where, QString* error) {
  auto fail = [&](const QString& why) {
    if (error) *error = shown_ + ": " + why;
    return false;
  };
  if (!QSqlDatabase::isDriverAvailable("QPSQL")) return fail("Qt's PostgreSQL driver is missing (libqt6sql6-psql)");
  const QUrl url(where);
  if (!url.isValid()) return fail("not a URL: " + url.errorString());
  const QString database = url.path().mid(1);
  if (database.isEmpty() || database.contains('/'))
    return fail("name the database after the host: postgresql://user@host:5432/DATABASE");
  QSqlDatabase db = QSqlDatabase::addDatabase("QPSQL", connection_);
  db.setHostName(url.host());
  if (url.port() > 0) db.setPort(url.port());
  db.setUserName(url.userName());
  db.setPassword(url.password());
  db.setDatabaseName(database);
  QStringList options;
  for (const auto& [key, value] : QUrlQuery(url).queryItems(QUrl::FullyDecoded))
    options << key + "=" + value;
  db.setConnectOptions(options.join(";"));
  if (!db.open()) return fail(db.lastError().text().trimmed());
  // The server's notices ("relation ... already exists, skipping") would
  // reach the terminal through libpq.
  QSqlQuery(db).exec("SET client_min_messages TO WARNING");
  return true;
}

bool HistoryDatabase::open_sqlite(const QString& where, QString* error) {
  auto fail = [&](const QString& why) {
    if (error) *error = where + ": " + why;
    return false;
  };
  if (!QSqlDatabase::isDriverAvailable("QSQLITE")) return fail("Qt's SQLite driver is missing (libqt6sql6-sqlite)");
  if (!QDir().mkpath(QFileInfo(where).absolutePath())) return fail("cannot create its folder");
  QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", connection_);
  db.setDatabaseName(where);
  if (!db.open()) return fail(db.lastError().text());
  return true;
}

bool HistoryDatabase::create_tables(QString* error) {
  QSqlQuery q(database());
  for (const char* ddl : kTables) {
    if (!q.exec(ddl)) {
      if (error) *error = shown_ + ": " + q.lastError().text().trimmed();
      database().close();
      return false;
    }
  }
  return true;
}

bool HistoryDatabase::save_certification(const CertificationRecord& c, QString* error) {
  QSqlDatabase db = database();
  if (!db.isOpen()) {
    if (error) *error = "the history is not open";
    return false;
  }
  QSqlQuery q(db);
  q.prepare(
      "INSERT INTO certifications (certification_id, finished_ms, who, agents, instance, verdict, nodes, passed, "
      "monitored, isolated, links_isolated, short_of_envelope, seconds, report) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const QVariant& v :
       {QVariant(c.id), QVariant(c.finished_ms), QVariant(c.who), QVariant(c.agents), QVariant(c.instance),
        QVariant(c.verdict), QVariant(c.nodes), QVariant(c.passed), QVariant(c.monitored), QVariant(c.isolated),
        QVariant(c.links_isolated), QVariant(c.short_of_envelope ? 1 : 0), QVariant(c.seconds), QVariant(c.report)})
    q.addBindValue(v);
  if (!q.exec()) {
    if (error) *error = shown_ + ": " + q.lastError().text().trimmed();
    return false;
  }
  return true;
}

std::vector<CertificationRecord> HistoryDatabase::certifications(int limit) const {
  std::vector<CertificationRecord> out;
  QSqlQuery q(database());
  q.prepare(
      "SELECT certification_id, finished_ms, who, agents, instance, verdict, nodes, passed, monitored, isolated, "
      "links_isolated, short_of_envelope, seconds, report FROM certifications ORDER BY finished_ms DESC LIMIT ?");
  q.addBindValue(limit);
  if (!q.exec()) return out;
  while (q.next()) {
    CertificationRecord c;
    c.id = q.value(0).toString();
    c.finished_ms = q.value(1).toLongLong();
    c.who = q.value(2).toString();
    c.agents = q.value(3).toString();
    c.instance = q.value(4).toString();
    c.verdict = q.value(5).toString();
    c.nodes = q.value(6).toInt();
    c.passed = q.value(7).toInt();
    c.monitored = q.value(8).toInt();
    c.isolated = q.value(9).toInt();
    c.links_isolated = q.value(10).toInt();
    c.short_of_envelope = q.value(11).toInt() != 0;
    c.seconds = q.value(12).toDouble();
    c.report = q.value(13).toString();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ringmaster::ui
