// The shared history: runs and certifications kept on a real PostgreSQL
// server (Debian's postgresql-15, started by the test in a folder of its
// own, password authentication over TCP) by the console and by
// `ringmaster-cli certify --history postgresql://...`, and read back by a
// second reader as another engineer's console would; SQLite by default.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QLabel>
#include <QProcess>
#include <QProcessEnvironment>
#include <QSignalSpy>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <memory>
#include <nlohmann/json.hpp>

#include "history/history_database.h"
#include "main_window.h"
#include "models/console.h"
#include "panels/bringup_panel.h"
#include "panels/history_panel.h"
#include "process.h"

using namespace ringmaster::ui;

namespace {

constexpr const char* kPassword = "s3cret-history";

// The newest PostgreSQL server Debian installed (/usr/lib/postgresql/N/bin).
QString postgresql_bin() {
  QDir lib("/usr/lib/postgresql");
  QStringList versions = lib.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
  std::sort(versions.begin(), versions.end(), [](const QString& a, const QString& b) { return a.toInt() < b.toInt(); });
  for (auto it = versions.rbegin(); it != versions.rend(); ++it)
    if (QFile::exists(lib.filePath(*it + "/bin/initdb"))) return lib.filePath(*it + "/bin");
  return {};
}

// A PostgreSQL server of the test's own: initdb into a fresh folder (as
// `nobody` when the test runs as root: the server refuses root), a user
// `ringmaster` with a password, listening on 127.0.0.1 at a free port.
class PostgresServer {
 public:
  ~PostgresServer() { stop(); }

  bool start(QString* why) {
    const QString bin = postgresql_bin();
    if (bin.isEmpty()) {
      *why = "no PostgreSQL server installed (/usr/lib/postgresql/*/bin/initdb; postgresql-15, scripts/setup-deps)";
      return false;
    }
    char pattern[] = "/tmp/ringmaster-pg-XXXXXX";
    if (!::mkdtemp(pattern)) return fail(why, "mkdtemp failed");
    dir_ = pattern;
    const QString data = dir_ + "/data", pwfile = dir_ + "/pw";
    QFile pw(pwfile);
    if (!pw.open(QIODevice::WriteOnly) || pw.write(kPassword) <= 0) return fail(why, "cannot write the password file");
    pw.close();
    if (::geteuid() == 0) {
      wrap_ = {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"};
      if (QProcess::execute("chown", {"-R", "nobody:nogroup", dir_}) != 0) return fail(why, "chown failed");
    }
    QString output;
    if (!run(bin + "/initdb",
             {"-D", data, "-U", "ringmaster", "--pwfile", pwfile, "--auth-local=trust", "--auth-host=scram-sha-256",
              "--no-locale", "-E", "UTF8"},
             &output))
      return fail(why, "initdb failed: " + output);
    port_ = ringmaster::testing_support::free_port();
    server_ = std::make_unique<QProcess>();
    server_->setProcessChannelMode(QProcess::MergedChannels);
    QStringList args = wrap_;
    args << bin + "/postgres"
         << "-D" << data << "-k" << dir_ << "-p" << QString::number(port_) << "-c"
         << "listen_addresses=127.0.0.1";
    server_->start(args.takeFirst(), args);
    if (!server_->waitForStarted(10000)) return fail(why, "postgres did not start");
    for (int i = 0; i < 150; ++i) {  // ready within 15 s
      if (QProcess::execute(bin + "/pg_isready", {"-q", "-h", "127.0.0.1", "-p", QString::number(port_)}) == 0)
        return true;
      if (server_->state() == QProcess::NotRunning) break;
      QTest::qWait(100);
    }
    return fail(why, "postgres is not ready: " + QString::fromUtf8(server_->readAll()));
  }

  // A database of that name, for the team's history.
  bool create_database(const QString& name, QString* why) {
    QSqlDatabase db = QSqlDatabase::addDatabase("QPSQL", "admin");
    db.setHostName("127.0.0.1");
    db.setPort(port_);
    db.setUserName("ringmaster");
    db.setPassword(kPassword);
    db.setDatabaseName("postgres");
    bool made = db.open() && QSqlQuery(db).exec("CREATE DATABASE " + name);
    if (!made) *why = db.lastError().text();
    db.close();
    db = {};
    QSqlDatabase::removeDatabase("admin");
    return made;
  }

  QString url(const QString& database, const QString& password = kPassword) const {
    return QString("postgresql://ringmaster:%1@127.0.0.1:%2/%3").arg(password).arg(port_).arg(database);
  }

  void stop() {
    if (server_ && server_->state() != QProcess::NotRunning) {
      server_->terminate();  // SIGTERM: the server's smart shutdown
      if (!server_->waitForFinished(10000)) server_->kill();
    }
    server_.reset();
    if (!dir_.isEmpty()) QDir(dir_).removeRecursively();
    dir_.clear();
  }

 private:
  bool fail(QString* why, const QString& what) {
    *why = what;
    return false;
  }
  bool run(const QString& program, const QStringList& arguments, QString* output) {
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    QStringList args = wrap_;
    args << program << arguments;
    p.start(args.takeFirst(), args);
    const bool ok = p.waitForFinished(120000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    *output = QString::fromUtf8(p.readAll());
    return ok;
  }

  QString dir_;
  QStringList wrap_;
  std::uint16_t port_ = 0;
  std::unique_ptr<QProcess> server_;
};

// Two agents on loopback with a token, for the CLI.
struct CliAgents {
  QTemporaryDir dir;
  std::vector<std::unique_ptr<QProcess>> agents;
  QString list;

  bool start() {
    // The ranks run as `nobody`: they pass through the folder to the
    // agents' state.
    QFile::setPermissions(dir.path(), QFile::permissions(dir.path()) | QFileDevice::ExeOther);
    QFile token(dir.filePath("token"));
    if (!token.open(QIODevice::WriteOnly)) return false;
    token.write("history-test-token-0123456789\n");
    token.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner);
    token.close();
    QStringList addresses;
    for (int i = 0; i < 2; ++i) {
      const QString address = QString("127.0.0.1:%1").arg(ringmaster::testing_support::free_port());
      auto p = std::make_unique<QProcess>();
      p->setProcessChannelMode(QProcess::ForwardedChannels);
      p->start(RINGMASTER_AGENT, {"--listen", address, "--token-file", token.fileName(), "--state-dir",
                                  dir.filePath(QString("state-%1").arg(i))});
      if (!p->waitForStarted(5000)) return false;
      agents.push_back(std::move(p));
      addresses << address;
    }
    list = addresses.join(",");
    for (const QString& address : addresses)
      if (!listening(address.section(':', 1).toUShort())) return false;
    return true;
  }
  static bool listening(std::uint16_t port) {
    for (int i = 0; i < 100; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(port);
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool up = ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0;
      ::close(fd);
      if (up) return true;
      QTest::qWait(100);
    }
    return false;
  }
  ~CliAgents() {
    for (auto& p : agents) {
      p->terminate();
      if (!p->waitForFinished(10000)) p->kill();
    }
  }
};

// `ringmaster-cli certify` over the agents, short sweeps; its exit code,
// its stderr in `err`.
int certify(const CliAgents& agents, const QStringList& more, QString* err) {
  QProcess cli;
  QStringList args = {"certify",
                      "--agents",
                      agents.list,
                      "--token-file",
                      agents.dir.filePath("token"),
                      "--collectives",
                      "all_reduce",
                      "--max-bytes",
                      "1M",
                      "--link-bytes",
                      "1M",
                      "--env",
                      "NCCL_SHM_DISABLE=1"};
  args << more;
  cli.start(RINGMASTER_CLI, args);
  if (!cli.waitForFinished(240000)) {
    cli.kill();
    cli.waitForFinished();
    *err = "certify did not finish in 240 s";
    return -1;
  }
  *err = QString::fromUtf8(cli.readAllStandardError());
  return cli.exitStatus() == QProcess::NormalExit ? cli.exitCode() : -1;
}

}  // namespace

class HistoryTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void cleanupTestCase() { server_.stop(); }
  void theConsoleKeepsRunsAndCertificationsOnTheTeamsServer();
  void theCliKeepsACertificationInTheTeamsHistory();
  void theCliKeepsItInSqliteByDefault();

 private:
  PostgresServer server_;
  bool have_server_ = false;
  QString no_server_;
};

void HistoryTest::initTestCase() {
  QCoreApplication::setOrganizationName("Ringmaster");
  QCoreApplication::setApplicationName("ringmaster");
  if (!QSqlDatabase::isDriverAvailable("QPSQL")) {
    no_server_ = "Qt's PostgreSQL driver is missing (libqt6sql6-psql, scripts/setup-deps)";
    return;
  }
  QString why;
  have_server_ = server_.start(&why) && server_.create_database("history", &why);
  if (!have_server_) no_server_ = why;
}

void HistoryTest::theConsoleKeepsRunsAndCertificationsOnTheTeamsServer() {
  if (!have_server_) QSKIP(qPrintable(no_server_));
  Console console;
  QString error;
  QVERIFY2(console.history.open(server_.url("history"), &error), qPrintable(error));
  QVERIFY(console.history.database().is_postgresql());
  QVERIFY2(!console.history.path().contains(kPassword), qPrintable(console.history.path()));
  QVERIFY2(console.history.path().contains("ringmaster:***@127.0.0.1"), qPrintable(console.history.path()));
  QVERIFY2(console.start_local_agents(2, RINGMASTER_AGENT, &error), qPrintable(error));
  QTRY_COMPARE_WITH_TIMEOUT(console.connected_count(), 2, 20000);
  RunSpec spec;
  spec.min_bytes = "64K";
  spec.max_bytes = "1M";
  spec.iters = 2;
  spec.warmup = 1;
  QSignalSpy finished(&console.run, &RunState::finished);
  const QString run_id = console.start_run(spec);
  QVERIFY(finished.wait(120000));
  QTRY_COMPARE_WITH_TIMEOUT(console.history.rowCount(), 1, 5000);

  ringmaster::agent::CertifyOptions options;
  options.collectives = {ringmaster::Collective::all_reduce};
  options.max_bytes = "1M";
  options.linkcheck.bytes = "1M";
  options.env["NCCL_SHM_DISABLE"] = "1";
  QSignalSpy kept(&console, &Console::certification_kept);
  QSignalSpy failed(&console, &Console::certify_failed);
  QVERIFY2(console.start_certify(options, &error), qPrintable(error));
  QVERIFY2(kept.wait(180000), failed.isEmpty() ? "not kept" : qPrintable(failed.at(0).at(0).toString()));

  // Another engineer's console on the same server sees both.
  RunHistory other;
  QVERIFY2(other.open(server_.url("history"), &error), qPrintable(error));
  QCOMPARE(other.rowCount(), 1);
  QCOMPARE(other.run_id_at(0), run_id);
  RunState replay;
  QVERIFY(other.load(run_id, replay) > 0);
  QCOMPARE(replay.world_size(), console.run.world_size());
  QVERIFY(replay.results.rowCount() >= 5);  // 64K..1M
  QVERIFY(!other.compare(run_id, run_id).empty());
  const auto certifications = other.database().certifications();
  QCOMPARE(certifications.size(), std::size_t{1});
  const auto& c = certifications[0];
  QCOMPARE(c.nodes, 2);
  QCOMPARE(c.passed + c.monitored + c.isolated, 2);
  QVERIFY2(c.who.contains('@') && !c.who.startsWith("@"), qPrintable(c.who));
  QCOMPARE(c.agents.split(',').size(), 2);
  QVERIFY2(c.agents.startsWith("127.0.0.1:"), qPrintable(c.agents));
  const auto report = nlohmann::json::parse(c.report.toStdString());
  QCOMPARE(QString::fromStdString(report.at("verdict").get<std::string>()), c.verdict);
  QCOMPARE(report.at("steps").size(), std::size_t{5});

  // That engineer's window: the run and the certification in History; a
  // double-click opens the certification in the Bring-up tab.
  Console theirs;
  QVERIFY2(theirs.history.open(server_.url("history"), &error), qPrintable(error));
  MainWindow window(theirs);
  window.resize(1360, 900);
  window.show();
  auto* history = window.findChild<HistoryPanel*>();
  auto* tabs = window.findChild<QTabWidget*>();
  tabs->setCurrentWidget(history);
  QCOMPARE(theirs.history.rowCount(), 1);
  QCOMPARE(history->certifications()->rowCount(), 1);
  QCOMPARE(history->certifications()->item(0, 1)->text().section(',', 0, 0), c.verdict);
  QVERIFY2(history->certifications()->item(0, 2)->text().startsWith("2 ("),
           qPrintable(history->certifications()->item(0, 2)->text()));
  if (qEnvironmentVariableIsSet("RINGMASTER_TEST_SAVE"))
    window.grab().save(qEnvironmentVariable("RINGMASTER_TEST_SAVE") + "-history.png");
  QVERIFY(history->open_certification(0));
  auto* bring_up = window.findChild<BringupPanel*>();
  QCOMPARE(tabs->currentWidget(), static_cast<QWidget*>(bring_up));
  QVERIFY2(
      bring_up->verdict()->text().startsWith(c.verdict) && bring_up->verdict()->text().contains("kept by " + c.who),
      qPrintable(bring_up->verdict()->text()));
  QCOMPARE(bring_up->nodes()->rowCount() >= 2, true);
  QCOMPARE(theirs.certify.state(0), QString::fromStdString(report.at("steps")[0].at("state").get<std::string>()));
  QVERIFY(!theirs.certify.findings(3).isEmpty() || !theirs.certify.findings(0).isEmpty() ||
          theirs.certify.state(3) == "passed");
}

void HistoryTest::theCliKeepsACertificationInTheTeamsHistory() {
  if (!have_server_) QSKIP(qPrintable(no_server_));
  CliAgents agents;
  QVERIFY(agents.start());
  QString err;
  // A wrong password: refused before anything runs, the location named
  // without the password given.
  QCOMPARE(certify(agents, {"--history", server_.url("history", "wrong-password")}, &err), 2);
  QVERIFY2(err.contains("--history postgresql://ringmaster:***@127.0.0.1") && err.contains("password"),
           qPrintable(err));
  QVERIFY2(!err.contains("wrong-password") && !err.contains("# nodes"), qPrintable(err));
  QCOMPARE(certify(agents, {"--history", server_.url("nohistory")}, &err), 2);
  QVERIFY2(err.contains("nohistory") && err.contains("does not exist"), qPrintable(err));

  HistoryDatabase team;
  QString error;
  QVERIFY2(team.open(server_.url("history"), &error), qPrintable(error));
  const std::size_t before = team.certifications().size();
  const int code = certify(agents, {"--history", server_.url("history"), "--instance", "p5.48xlarge"}, &err);
  QVERIFY2(code == 0 || code == 1, qPrintable(err));
  QVERIFY2(err.contains("# kept in postgresql://ringmaster:***@"), qPrintable(err));
  const auto certifications = team.certifications();
  QCOMPARE(certifications.size(), before + 1);
  const auto& c = certifications[0];
  QCOMPARE(c.agents, agents.list);
  QCOMPARE(c.instance, QString("p5.48xlarge"));
  QCOMPARE(c.nodes, 2);
  QVERIFY(c.short_of_envelope);  // loopback is no p5
  QCOMPARE(code, 1);
  QVERIFY2(err.contains(c.id), qPrintable(err));

  // ringmaster-history reads it back from the command line: the list (the
  // location from the environment, as certify hands it), the whole report.
  QProcess history;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("RINGMASTER_HISTORY", server_.url("history"));
  history.setProcessEnvironment(env);
  history.start(RINGMASTER_HISTORY_PROGRAM, {"list", "--json"});
  QVERIFY(history.waitForFinished(30000));
  QCOMPARE(history.exitCode(), 0);
  const auto listed = nlohmann::json::parse(history.readAllStandardOutput().toStdString());
  QCOMPARE(QString::fromStdString(listed.at(0).at("id").get<std::string>()), c.id);
  QCOMPARE(QString::fromStdString(listed.at(0).at("instance").get<std::string>()), QString("p5.48xlarge"));
  history.start(RINGMASTER_HISTORY_PROGRAM, {"show", c.id});
  QVERIFY(history.waitForFinished(30000));
  QCOMPARE(history.exitCode(), 0);
  const auto shown = nlohmann::json::parse(history.readAllStandardOutput().toStdString());
  QCOMPARE(shown.at("nodes").size(), std::size_t{2});
  history.start(RINGMASTER_HISTORY_PROGRAM, {"list"});
  QVERIFY(history.waitForFinished(30000));
  const QString text = QString::fromUtf8(history.readAllStandardOutput());
  QVERIFY2(text.contains("postgresql://ringmaster:***@") && !text.contains(kPassword) && text.contains(c.id),
           qPrintable(text));
}

void HistoryTest::theCliKeepsItInSqliteByDefault() {
  CliAgents agents;
  QVERIFY(agents.start());
  const QString file = HistoryDatabase::default_location();  // under the test's HOME
  QVERIFY2(file.startsWith(QDir::homePath()), qPrintable(file));
  QFile::remove(file);
  QString err;
  const int code = certify(agents, {}, &err);
  QVERIFY2(code == 0 || code == 1, qPrintable(err));
  QVERIFY2(err.contains("# kept in " + file), qPrintable(err));
  HistoryDatabase mine;
  QString error;
  QVERIFY2(mine.open(file, &error), qPrintable(error));
  QVERIFY(!mine.is_postgresql());
  QCOMPARE(mine.certifications().size(), std::size_t{1});
  QCOMPARE(mine.certifications()[0].nodes, 2);
  // --history off keeps nothing.
  QVERIFY2(certify(agents, {"--history", "off"}, &err) <= 1, qPrintable(err));
  QVERIFY2(!err.contains("# kept in"), qPrintable(err));
  QCOMPARE(mine.certifications().size(), std::size_t{1});
}

QTEST_MAIN(HistoryTest)
#include "history_test.moc"
