// Console: connections, local agents, runs, recording.
#include "console.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>
#include <QTextStream>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>
#include <utility>

#include "ringmaster/agent/client.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/agent/node_gate.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/status.h"

namespace ringmaster::ui {

using nlohmann::json;

// A file of messages, one JSON line each, written from any thread (each
// agent's I/O thread writes its own messages, in the order they came).
class Console::Recording {
 public:
  ~Recording() { close(); }
  bool open(const QString& path) {
    std::lock_guard lock(mutex_);
    if (file_) std::fclose(file_);
    file_ = std::fopen(QFile::encodeName(path).constData(), "w");
    return file_ != nullptr;
  }
  void close() {
    std::lock_guard lock(mutex_);
    if (file_) std::fclose(file_);
    file_ = nullptr;
  }
  bool is_open() const {
    std::lock_guard lock(mutex_);
    return file_ != nullptr;
  }
  // One line, without its newline; flushed, so that a console that dies
  // leaves what it received.
  void write(const std::string& line) {
    std::lock_guard lock(mutex_);
    if (!file_) return;
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fputc('\n', file_);
    std::fflush(file_);
  }
  // A message as it came: a sample's text is not parsed again.
  void write(const AgentMessage& m) {
    if (!is_open()) return;
    write(R"({"agent":)" + json(m.agent.toStdString()).dump() + R"(,"message":)" +
          (m.text   ? *m.text
           : m.body ? m.body->dump()
                    : "null") +
          "}");
  }

 private:
  mutable std::mutex mutex_;
  std::FILE* file_ = nullptr;
};

Console::Console(QObject* parent) : QObject(parent), recording_(std::make_shared<Recording>()) {
  qRegisterMetaType<AgentMessage>();
  connect(&poll_, &QTimer::timeout, this, &Console::poll_agents);
  poll_.start(1000);
  QString error;
  if (!history.open(qEnvironmentVariable("RINGMASTER_HISTORY", HistoryDatabase::default_location()), &error))
    std::fprintf(stderr, "ringmaster: history: %s\n", qPrintable(error));
  connect(&run, &RunState::finished, this, [this] {
    if (!run.links().empty() && !linkcheck_running_) {
      links.set_run(run.run_id(), run.world_size(), run.links(), run.slow_links(), run.results.best_busbw());
    }
    if (pending_what_.isEmpty()) return;
    QString error;
    if (!keep_run("run", pending_what_, &error)) std::fprintf(stderr, "ringmaster: history: %s\n", qPrintable(error));
    pending_what_.clear();
    if (!nccl_follows_.isEmpty()) {
      emit engines_compared(std::exchange(nccl_follows_, {}), run.run_id());
    } else if (then_nccl_) {
      // Whatever became of the Ringmaster run, NCCL's over the same agents
      // says whether the fault is ours; started once this signal is over.
      QTimer::singleShot(0, this, [this, next = *std::exchange(then_nccl_, std::nullopt), first = run.run_id()] {
        if (!start_run(next).isEmpty()) nccl_follows_ = first;
      });
    }
  });
  // A pair whose NCCL run could not start compares nothing.
  connect(this, &Console::run_launch_failed, this, [this] {
    then_nccl_.reset();
    nccl_follows_.clear();
  });
}

bool Console::keep_run(const QString& kind, const QString& what, QString* error) {
  return history.save(run, kind, what, error);
}

Console::~Console() {
  if (preflight_thread_.joinable()) preflight_thread_.join();
  closing_ = true;
  if (linkcheck_thread_.joinable()) linkcheck_thread_.join();
  if (certify_thread_.joinable()) certify_thread_.join();
  stop_watch();
  links_.clear();  // closes every client (joins its I/O thread)
  for (QProcess* p : local_) {
    p->terminate();
    if (!p->waitForFinished(3000)) p->kill();
    p->waitForFinished(1000);
    delete p;
  }
}

std::vector<std::pair<std::shared_ptr<agent::AgentClient>, std::string>> Console::connected_clients() const {
  std::vector<std::pair<std::shared_ptr<agent::AgentClient>, std::string>> out;
  for (const QString& address : order_) {
    const auto it = links_.find(address);
    if (it == links_.end() || !it->second.client || !it->second.client->connected()) continue;
    out.emplace_back(it->second.client, it->second.host.toStdString());
  }
  return out;
}

bool Console::start_preflight(const agent::PreflightOptions& options, QString* error) {
  std::vector<std::shared_ptr<agent::AgentClient>> clients;
  std::vector<std::string> hosts;
  for (auto& [client, host] : connected_clients()) {
    clients.push_back(client);
    hosts.push_back(host);
  }
  if (clients.size() < 2) {
    if (error) *error = "a preflight needs at least two connected agents";
    return false;
  }
  if (certify_running_) {
    if (error) *error = "a certification is under way";
    return false;
  }
  if (preflight_running_.exchange(true)) {
    if (error) *error = "a preflight is under way";
    return false;
  }
  if (preflight_thread_.joinable()) preflight_thread_.join();
  preflight_thread_ = std::thread([this, clients = std::move(clients), hosts = std::move(hosts), options] {
    std::vector<agent::PreflightAgent> agents;
    for (std::size_t i = 0; i < clients.size(); ++i)
      agents.push_back({clients[i].get(), hosts[i]});
    PreflightReport report;
    try {
      report = agent::run_preflight(agents, options);
    } catch (const std::exception& e) {
      QMetaObject::invokeMethod(
          this,
          [this, why = QString::fromStdString(e.what())] {
            preflight_running_ = false;
            emit preflight_failed(why);
          },
          Qt::QueuedConnection);
      return;
    }
    QMetaObject::invokeMethod(
        this,
        [this, report = std::move(report)]() mutable {
          preflight.set(std::move(report));
          preflight_running_ = false;
          emit preflight_finished();
        },
        Qt::QueuedConnection);
  });
  return true;
}

agent::NextMessage Console::next_from(const std::shared_ptr<Inbox>& inbox, const std::atomic<bool>& closing) {
  return [inbox, &closing](std::chrono::steady_clock::time_point deadline) -> std::optional<json> {
    std::unique_lock lock(inbox->mutex);
    // A slice at a time, so that a console closing ends the wait.
    while (inbox->messages.empty()) {
      if (closing) throw Error(ErrorCategory::internal, "interrupted: the console is closing");
      const auto slice = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
      inbox->ready.wait_until(lock, slice, [&] { return !inbox->messages.empty(); });
      if (inbox->messages.empty() && std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    }
    json m = std::move(inbox->messages.front());
    inbox->messages.pop_front();
    return m;
  };
}

// A certification that ran to its end goes to the history beside the runs
// (a team's PostgreSQL server when the console was started with
// --history postgresql://...); one stopped half way waits for its resume.
void Console::keep_certification(const agent::CertifyReport& report, const nlohmann::json& document,
                                 const QString& instance, const QStringList& endpoints) {
  if (!agent::certification_complete(report) || !history.is_open()) return;
  QString error;
  CertificationRecord record = certification_record(document, instance);
  record.agents = endpoints.join(",");
  if (!history.database().save_certification(record, &error))
    std::fprintf(stderr, "ringmaster: history: %s\n", qPrintable(error));
  emit certification_kept();
}

bool Console::start_certify(agent::CertifyOptions options, QString* error) {
  auto clients = connected_clients();
  QStringList endpoints;  // host:port of each, for the history
  for (const QString& address : order_)
    if (const auto it = links_.find(address); it != links_.end() && it->second.client && it->second.client->connected())
      endpoints << address;
  if (clients.size() < 2) {
    if (error) *error = "a certification needs at least two connected agents";
    return false;
  }
  if (preflight_running_ || linkcheck_running_) {
    if (error) *error = preflight_running_ ? "a preflight is under way" : "a link check is under way";
    return false;
  }
  agent::DeclaredCluster declared;  // checked before anything runs
  try {
    declared = agent::certify_declared_cluster(options, static_cast<int>(clients.size()));
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    return false;
  }
  if (certify_running_.exchange(true)) {
    if (error) *error = "a certification is under way";
    return false;
  }
  if (certify_thread_.joinable()) certify_thread_.join();
  // A certification the console stopped half way (closed, an agent lost)
  // over these nodes resumes: its finished steps are kept.
  const QString data_dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  QDir().mkpath(data_dir);
  const std::string state = QDir(data_dir).filePath("certify-state.json").toStdString();
  std::vector<std::string> hosts;
  for (const auto& [client, host] : clients)
    hosts.push_back(host);
  try {
    options.resume = agent::load_unfinished_certification(state, hosts);
  } catch (const std::exception&) {
    options.resume.reset();  // not a state: started afresh, and overwritten
  }
  certify.begin(options.resume ? static_cast<int>(options.resume->steps.size()) : 0);
  if (options.resume) {
    for (const auto& step : options.resume->steps)
      certify.set_step(step, true);
  }
  options.on_progress = [state, hosts](const agent::CertifyReport& so_far) {
    try {
      agent::save_certification_state(state, hosts, so_far);
    } catch (const std::exception&) {
      // The certification goes on; only its resuming is lost.
    }
  };
  auto inbox = std::make_shared<Inbox>();
  checks_inbox_ = inbox;
  options.stop = &closing_;
  options.on_step = [this](const agent::CertifyStep& step, bool ended) {
    QMetaObject::invokeMethod(
        this, [this, step, ended] { certify.set_step(step, ended); }, Qt::QueuedConnection);
  };
  certify_thread_ = std::thread([this, clients = std::move(clients), inbox, options = std::move(options), endpoints,
                                 instance = QString::fromStdString(declared.name)] {
    std::vector<agent::PreflightAgent> agents;
    for (const auto& [client, host] : clients)
      agents.push_back({client.get(), host});
    try {
      agent::CertifyReport report = agent::certify(agents, next_from(inbox, closing_), options);
      QMetaObject::invokeMethod(
          this,
          [this, report = std::move(report), instance, endpoints]() mutable {
            checks_inbox_.reset();
            if (report.preflight) preflight.set(*report.preflight);
            if (report.linkcheck) links.set_linkcheck(*report.linkcheck, agent::diagnose_links(*report.linkcheck));
            const nlohmann::json document = agent::to_json(report);
            keep_certification(report, document, instance, endpoints);
            certify.finish(document);
            certify_running_ = false;
            emit certify_finished();
          },
          Qt::QueuedConnection);
    } catch (const std::exception& e) {
      QMetaObject::invokeMethod(
          this,
          [this, why = QString::fromStdString(e.what())] {
            checks_inbox_.reset();
            certify_running_ = false;
            emit certify_failed(why);
          },
          Qt::QueuedConnection);
    }
  });
  return true;
}

bool Console::start_linkcheck(const agent::LinkcheckOptions& options, QString* error) {
  auto clients = connected_clients();
  if (clients.size() < 2) {
    if (error) *error = "a link check needs at least two connected agents";
    return false;
  }
  if (preflight_running_ || certify_running_) {
    if (error) *error = preflight_running_ ? "a preflight is under way" : "a certification is under way";
    return false;
  }
  if (linkcheck_running_.exchange(true)) {
    if (error) *error = "a link check is under way";
    return false;
  }
  if (linkcheck_thread_.joinable()) linkcheck_thread_.join();
  auto inbox = std::make_shared<Inbox>();
  checks_inbox_ = inbox;
  linkcheck_thread_ = std::thread([this, clients = std::move(clients), inbox, options] {
    std::vector<agent::PreflightAgent> agents;
    for (const auto& [client, host] : clients)
      agents.push_back({client.get(), host});
    const agent::NextMessage next = next_from(inbox, closing_);
    agent::LinkcheckReport report;
    std::vector<std::string> findings;
    try {
      report = agent::run_linkcheck(agents, next, options);
      findings = agent::diagnose_links(report);
    } catch (const std::exception& e) {
      QMetaObject::invokeMethod(
          this,
          [this, why = QString::fromStdString(e.what())] {
            checks_inbox_.reset();
            linkcheck_running_ = false;
            emit linkcheck_failed(why);
          },
          Qt::QueuedConnection);
      return;
    }
    QMetaObject::invokeMethod(
        this,
        [this, report = std::move(report), findings = std::move(findings)] {
          checks_inbox_.reset();
          links.set_linkcheck(report, findings);
          linkcheck_running_ = false;
          emit linkcheck_finished();
        },
        Qt::QueuedConnection);
  });
  return true;
}

namespace {

// What a console that was killed (SIGKILL, a crash) left behind: its
// directory, with its local agents' token, in the temporary directory.
// Each directory names its console in console.pid; one whose console is
// gone is removed. One whose pid is alive is kept, whoever that is now.
void remove_what_dead_consoles_left() {
  const QDir tmp(QDir::tempPath());
  for (const QFileInfo& dir : tmp.entryInfoList({"ringmaster-console-*"}, QDir::Dirs | QDir::NoDotAndDotDot)) {
    if (dir.ownerId() != ::geteuid()) continue;
    QFile pid_file(dir.filePath() + "/console.pid");
    if (!pid_file.open(QIODevice::ReadOnly)) continue;  // not a console's of this version: left alone
    bool ok = false;
    const int pid = QString::fromUtf8(pid_file.readAll()).trimmed().toInt(&ok);
    if (!ok || pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    QDir(dir.filePath()).removeRecursively();
  }
}

}  // namespace

bool Console::start_local_agents(int n, const QString& agent_path, QString* error, const QString& topology_file) {
  if (!local_dir_) {
    remove_what_dead_consoles_left();
    local_dir_ = std::make_unique<QTemporaryDir>(QDir::tempPath() + "/ringmaster-console-XXXXXX");  // mode 0700
    local_token_ = QString::fromStdString(agent::random_nonce());
    QFile token(local_dir_->filePath("token"));
    QFile pid(local_dir_->filePath("console.pid"));
    if (!local_dir_->isValid() || !token.open(QIODevice::WriteOnly | QIODevice::NewOnly) ||
        !token.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner) ||
        token.write(local_token_.toUtf8() + "\n") <= 0 || !pid.open(QIODevice::WriteOnly | QIODevice::NewOnly) ||
        pid.write(QByteArray::number(::getpid()) + "\n") <= 0) {
      if (error) *error = "cannot make a private token for the local agents in " + QDir::tempPath();
      return false;
    }
  }
  if (!topology_file.isEmpty() && !QFileInfo(topology_file).isReadable()) {
    if (error) *error = QString("the topology file %1 cannot be read").arg(topology_file);
    return false;
  }
  for (int i = 0; i < n; ++i) {
    auto* p = new QProcess;
    p->setProcessChannelMode(QProcess::SeparateChannels);
    // The agent's log goes on to the console's stderr, its last lines kept
    // for the reason when it does not start.
    auto tail = std::make_shared<QByteArray>();
    QObject::connect(p, &QProcess::readyReadStandardError, p, [p, tail] {
      const QByteArray data = p->readAllStandardError();
      std::fwrite(data.constData(), 1, static_cast<std::size_t>(data.size()), stderr);
      *tail += data;
      if (tail->size() > 4096) tail->remove(0, tail->size() - 4096);
    });
    // A local agent never outlives its console: when the console dies in
    // any way (SIGKILL, a crash), the kernel sends the agent SIGTERM, on
    // which it stops its runs and reverts its faults.
    const pid_t console_pid = ::getpid();
    p->setChildProcessModifier([console_pid] {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != console_pid) ::_exit(1);  // it died before the line above
    });
    // Local agents run the ranks as the console's user, as a local launch would.
    QStringList args = {"--listen",
                        "127.0.0.1:0",
                        "--print-port",
                        "--token-file",
                        local_dir_->filePath("token"),
                        "--state-dir",
                        local_dir_->filePath(QString("agent-%1").arg(local_.size())),
                        "--rank-user",
                        QString::fromStdString(agent::effective_user_name())};
    if (!topology_file.isEmpty()) args << "--topology-file" << QFileInfo(topology_file).absoluteFilePath();
    p->start(agent_path, args);
    local_.append(p);
    QByteArray line;
    if (p->waitForStarted(5000)) {
      while (!line.contains('\n') && p->waitForReadyRead(10000))
        line += p->readAllStandardOutput();
    }
    const int port = line.trimmed().toInt();
    if (port <= 0) {
      if (p->state() != QProcess::NotRunning) p->waitForFinished(2000);
      *tail += p->readAllStandardError();
      // The agent's own reason: its last error line, without the log prefix.
      QString why;
      for (const QByteArray& l : tail->split('\n')) {
        const QString text = QString::fromUtf8(l).trimmed();
        const int at = static_cast<int>(text.indexOf(" error: "));
        if (at >= 0) why = text.mid(at + 8);
      }
      if (why.isEmpty() && p->error() == QProcess::FailedToStart) why = p->errorString();
      if (why.isEmpty())
        why = p->state() == QProcess::NotRunning ? QString("it exited with status %1").arg(p->exitCode())
                                                 : QString("it printed no port within 10 s");
      if (error) {
        *error = !topology_file.isEmpty() && why.contains(QFileInfo(topology_file).fileName())
                     ? QString("the local agent refused the topology file %1: %2").arg(topology_file, why)
                     : QString("%1 did not start: %2").arg(agent_path, why);
      }
      return false;
    }
    connect_agent("127.0.0.1", static_cast<quint16>(port), local_token_);
  }
  return true;
}

void Console::connect_agent(const QString& host, quint16 port, const QString& token) {
  AgentAccess access;
  access.token = token;
  connect_agent(host, port, access);
}

void Console::connect_agent(const QString& host, quint16 port, const AgentAccess& access) {
  const QString address = QString("%1:%2").arg(host).arg(port);
  agents.add(address, access.name);
  links_[address] = Link{host, port, nullptr};
  if (std::find(order_.begin(), order_.end(), address) == order_.end()) order_.push_back(address);
  QPointer<Console> guard(this);
  agent::ClientOptions options;
  options.host = host.toStdString();
  options.port = port;
  options.token = access.token.toStdString();
  options.tls = access.tls || !access.tls_ca.isEmpty() || !access.tls_cert.isEmpty();
  options.tls_ca_file = access.tls_ca.toStdString();
  options.tls_insecure = access.tls_insecure;
  options.tls_cert_file = access.tls_cert.toStdString();
  options.tls_key_file = access.tls_key.toStdString();
  options.tls_name = access.name.toStdString();
  std::thread([guard, address, options, arrived = arrival()] {
    auto on_message = [address, arrived](const json& m) { arrived(agent_message(address, m)); };
    auto on_close = [guard, address](const std::string& why) {
      const QString w = QString::fromStdString(why);
      if (guard) {
        QMetaObject::invokeMethod(
            guard.data(),
            [guard, address, w] {
              if (!guard) return;
              guard->agents.set_state(address, "lost: " + w);
              emit guard->agent_lost(address, w);
            },
            Qt::QueuedConnection);
      }
    };
    try {
      std::shared_ptr<agent::AgentClient> client = agent::AgentClient::connect(options, on_message, on_close);
      client->call({{"type", "subscribe"}});
      const agent::Inventory inventory = agent::Inventory::parse(client->call({{"type", "inventory"}}));
      if (!guard) return;
      QMetaObject::invokeMethod(
          guard.data(),
          [guard, address, client, inventory] {
            if (!guard) return;
            auto it = guard->links_.find(address);
            if (it == guard->links_.end()) return;  // disconnected meanwhile
            it->second.client = client;
            guard->agents.set_state(address, "connected");
            guard->agents.set_inventory(address, inventory);
            emit guard->agent_connected(address);
          },
          Qt::QueuedConnection);
    } catch (const std::exception& e) {
      const QString why = QString::fromUtf8(e.what());
      if (guard) {
        QMetaObject::invokeMethod(
            guard.data(),
            [guard, address, why] {
              if (guard) guard->agents.set_state(address, "failed: " + why);
              if (guard) emit guard->agent_lost(address, why);
            },
            Qt::QueuedConnection);
      }
    }
  }).detach();
}

void Console::disconnect_agent(const QString& address) {
  links_.erase(address);
  order_.erase(std::remove(order_.begin(), order_.end(), address), order_.end());
  agents.set_state(address, "disconnected");
  nics.remove(address);
}

int Console::connected_count() const {
  int n = 0;
  for (const auto& [a, l] : links_)
    n += l.client && l.client->connected() ? 1 : 0;
  return n;
}

void Console::poll_agents() {
  for (const auto& [address, link] : links_) {
    if (!link.client) continue;
    agents.set_rtt(address, static_cast<double>(link.client->round_trip().count()) / 1000.0);
  }
}

Console::Arrival Console::arrival() {
  QPointer<Console> guard(this);
  return [guard, recording = recording_, samples = run.shared_samples(), queue = queue_](AgentMessage m) {
    recording->write(m);
    if (samples->take(m)) return;  // freed here, not on the GUI thread
    bool first = false;
    {
      std::lock_guard lock(queue->mutex);
      first = queue->messages.empty();
      queue->messages.push_back(std::move(m));
    }
    if (first && guard) {
      QMetaObject::invokeMethod(
          guard.data(),
          [guard] {
            if (guard) guard->take_queued();
          },
          Qt::QueuedConnection);
    }
  };
}

void Console::take_queued() {
  std::vector<AgentMessage> messages;
  {
    std::lock_guard lock(queue_->mutex);
    messages.swap(queue_->messages);
  }
  for (const auto& m : messages)
    on_message(m);
}

void Console::on_message(const AgentMessage& m) {
  if (checks_inbox_) {
    std::lock_guard lock(checks_inbox_->mutex);
    checks_inbox_->messages.push_back(m.json());
    checks_inbox_->ready.notify_all();
  }
  if (m.event && !watched.watch_id().isEmpty() && m.event->run_id == watched.watch_id().toStdString()) {
    watched.apply(m.agent, m.event->event);
    return;
  }
  if (m.body && m.body->value("type", json()) == "event" && m.body->value("rank", json()) == -1) {
    // The agent's own events (rank -1): its faults, for the agents list,
    // and its NICs' counters, for the rails.
    try {
      if (const auto e = agent::events::parse_event_message(*m.body)) {
        if (const auto* applied = std::get_if<agent::events::FaultApplied>(&e->event)) {
          agents.fault_applied(m.agent, *applied);
        } else if (const auto* reverted = std::get_if<agent::events::FaultReverted>(&e->event)) {
          agents.fault_reverted(m.agent, reverted->fault_id);
        } else if (const auto* sample = std::get_if<agent::events::NicSample>(&e->event)) {
          nics.add(m.agent, *sample);
        }
      }
    } catch (const Error&) {
      // Left to the inventory the console asks for again.
    }
  }
  run.apply(m);
}

void Console::record(const json& line) {
  recording_->write(line.dump());
}

bool Console::record_to(const QString& path) {
  return recording_->open(path);
}

namespace {

std::vector<std::string> to_strings(const std::vector<QString>& in) {
  std::vector<std::string> out;
  for (const auto& s : in)
    out.push_back(s.toStdString());
  return out;
}

std::vector<std::vector<std::string>> to_string_lists(const std::vector<std::vector<QString>>& in) {
  std::vector<std::vector<std::string>> out;
  for (const auto& l : in)
    out.push_back(to_strings(l));
  return out;
}

// The rails of an agent's node: the network devices of its topology's
// NICs, else its interfaces (a node without NICs in its topology).
std::vector<QString> rails_of(const agent::Inventory& inventory) {
  std::vector<QString> out;
  auto add = [&](const std::string& name) {
    const QString n = QString::fromStdString(name);
    if (!n.isEmpty() && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  const agent::TopologyInfo& topology = inventory.topology;
  for (const auto& n : topology.nodes) {
    if (n.kind == "net" && topology.has(n.parent) && topology.node(n.parent).kind == "nic") add(n.name);
  }
  if (out.empty()) {
    for (const auto& i : inventory.interfaces)
      add(i.name);
  }
  return out;
}

// Whether NCCL's runner takes the spec; else why not.
// The node gate (node_gate.h) over the agents' inventories, in the run's
// order: why the run is refused, or empty. `differs` gets what the run
// goes ahead with anyway, for its history entry. An agent whose
// inventory has not come yet is left out of the comparison.
QString node_gate(const std::vector<const agent::Inventory*>& inventories, agent::PerfRequest::Engine engine,
                  bool allow_mixed, QString* differs) {
  std::vector<agent::Inventory> nodes;
  for (const auto* inventory : inventories) {
    if (inventory) nodes.push_back(*inventory);
  }
  const agent::NodeGate gate = agent::check_nodes_alike(nodes, engine);
  if (!gate.passed() && !allow_mixed)
    return QString::fromStdString(gate.refusal("tick \"Allow nodes that differ\" to launch anyway"));
  std::vector<std::string> said = gate.refusals;
  said.insert(said.end(), gate.notes.begin(), gate.notes.end());
  for (const auto& line : said)
    *differs += QString::fromStdString("; " + line);
  return {};
}

bool nccl_runs(const RunSpec& spec, QString* why) {
  const std::string refused =
      agent::nccl_runner_refusal(spec.collective.toStdString(), spec.dtype.toStdString(), spec.op.toStdString());
  if (!refused.empty()) *why = "engine both: " + QString::fromStdString(refused);
  return refused.empty();
}

}  // namespace

namespace {

// The Run form as the agents' perf request; throws Error(config) naming
// the field that is wrong.
agent::PerfRequest perf_request(const RunSpec& spec) {
  agent::PerfRequest perf;
  const std::string collective = spec.collective.toStdString();
  const auto c = agent::perf_collective_named(collective);
  if (!c) throw Error(ErrorCategory::config, "collective '" + collective + "' is not one perf measures");
  perf.collective = *c;
  auto size = [](const char* field, const QString& text) {
    try {
      return agent::parse_request_size(text.toStdString());
    } catch (const Error& e) {
      throw Error(ErrorCategory::config, std::string(field) + ": " + e.status().message());
    }
  };
  perf.min_bytes = size("min bytes", spec.min_bytes);
  perf.max_bytes = size("max bytes", spec.max_bytes);
  perf.step_factor = spec.step_factor;
  perf.iters = spec.iters;
  perf.warmup = spec.warmup;
  if (spec.engine == "nccl") {
    perf.engine = agent::PerfRequest::Engine::nccl;  // NCCL's runner: float sums
  } else {
    const auto type = parse_data_type(spec.dtype.toStdString());
    if (!type) throw Error(ErrorCategory::config, "data type '" + spec.dtype.toStdString() + "' is not one perf takes");
    const auto op = parse_red_op(spec.op.toStdString());
    if (!op) throw Error(ErrorCategory::config, "operation '" + spec.op.toStdString() + "' is not one perf takes");
    perf.type = *type;
    perf.op = *op;
  }
  if (!spec.algo.isEmpty()) {
    perf.algorithm = parse_algorithm(spec.algo.toStdString());
    if (!perf.algorithm)
      throw Error(ErrorCategory::config, "algorithm '" + spec.algo.toStdString() + "': Ring or Tree");
  }
  if (!spec.proto.isEmpty()) {
    perf.protocol = parse_protocol(spec.proto.toStdString());
    if (!perf.protocol) {
      throw Error(ErrorCategory::config, "protocol '" + spec.proto.toStdString() + "': LL, LL128 or Simple");
    }
  }
  perf.channels = std::max(0, spec.channels);
  return perf;
}

}  // namespace

bool Console::start_watch(agent::WatchRequest request, QString* error) {
  auto fail = [&](const QString& why) {
    if (error) *error = why;
    return false;
  };
  if (request.pids.empty() && request.job_run_id.empty() && request.master_port == 0)
    return fail("name the job: its TORCHELASTIC_RUN_ID, its MASTER_PORT or its processes");
  const auto clients = connected_clients();
  if (clients.empty()) return fail("no agent is connected");
  stop_watch();
  static int serial = 0;
  request.watch_id = QString("console-watch-%1-%2").arg(QCoreApplication::applicationPid()).arg(++serial).toStdString();
  watched.start(QString::fromStdString(request.watch_id));
  QPointer<Console> guard(this);
  for (const auto& [client, host] : clients) {
    watching_.push_back(client);
    const QString agent = QString::fromStdString(client->address());
    // Each agent on a thread of its own: one that is slow to answer holds
    // up no other.
    std::thread([guard, client, agent, request] {
      bool ok = false;
      QString text;
      try {
        const json reply = client->call({{"type", "watch"}, {"watch", request.to_json()}});
        ok = true;
        text = QString("watching processes %1 as %2 (watcher pid %3)")
                   .arg(QString::fromStdString(reply.value("processes", json::array()).dump()),
                        QString::fromStdString(reply.value("user", "?")))
                   .arg(reply.value("pid", 0));
      } catch (const std::exception& e) {
        text = QString::fromUtf8(e.what());
      }
      if (!guard) return;
      const QString id = QString::fromStdString(request.watch_id);
      QMetaObject::invokeMethod(
          guard.data(),
          [guard, agent, ok, text, id] {
            // An answer to a watch since replaced by another is not this one's.
            if (!guard || guard->watched.watch_id() != id) return;
            guard->watched.note(QString("%1: %2").arg(agent, text));
            emit guard->watch_answered(agent, ok, text);
          },
          Qt::QueuedConnection);
    }).detach();
  }
  return true;
}

void Console::stop_watch() {
  const std::string id = watched.watch_id().toStdString();
  for (const auto& client : watching_) {
    if (client && client->connected() && !id.empty()) client->request({{"type", "watch_stop"}, {"watch_id", id}});
  }
  watching_.clear();
}

void Console::send_run(std::vector<std::shared_ptr<agent::AgentClient>> clients, agent::RunRequest request,
                       int per_agent) {
  QPointer<Console> guard(this);
  // The agent with rank 0 picks the store's port; the others need it, so
  // the requests go one after another, off the GUI thread.
  std::thread([guard, clients, request, per_agent]() mutable {
    try {
      for (std::size_t i = 0; i < clients.size(); ++i) {
        request.ranks.clear();
        for (int l = 0; l < per_agent; ++l)
          request.ranks.push_back(static_cast<int>(i) * per_agent + l);
        const json reply = clients[i]->call(request.to_json());
        if (i == 0) request.master_port = reply.at("master_port").get<int>();
      }
    } catch (const std::exception& e) {
      const QString why = QString::fromUtf8(e.what());
      if (guard) {
        QMetaObject::invokeMethod(
            guard.data(),
            [guard, why] {
              if (guard) emit guard->run_launch_failed(why);
            },
            Qt::QueuedConnection);
      }
    }
  }).detach();
}

QString Console::start_run(const RunSpec& spec) {
  then_nccl_.reset();
  nccl_follows_.clear();
  if (spec.engine == "both") {
    QString why;
    if (!nccl_runs(spec, &why)) {
      emit run_launch_failed(why);
      return {};
    }
    RunSpec first = spec, second = spec;
    first.engine = "ringmaster";
    second.engine = "nccl";
    const QString id = start_run(first);
    if (!id.isEmpty()) then_nccl_ = second;
    return id;
  }
  if (spec.engine != "ringmaster" && spec.engine != "nccl") {
    emit run_launch_failed("engine must be ringmaster, nccl or both, not " + spec.engine);
    return {};
  }
  agent::PerfRequest perf;
  try {
    perf = perf_request(spec);
  } catch (const Error& e) {
    emit run_launch_failed(QString::fromStdString(e.status().message()));
    return {};
  }
  std::vector<std::shared_ptr<agent::AgentClient>> clients;
  std::vector<QString> addresses;
  std::vector<std::vector<QString>> rails;
  std::vector<const agent::Inventory*> inventories;  // null: none came yet
  QString master;
  for (const auto& address : order_) {
    const auto& link = links_.at(address);
    if (!link.client || !link.client->connected()) continue;
    if (clients.empty()) master = link.host;
    clients.push_back(link.client);
    addresses.push_back(address);
    const int row = agents.row_of(address);
    const agent::Inventory* inventory = row >= 0 ? agents.inventory(row) : nullptr;
    rails.push_back(inventory ? rails_of(*inventory) : std::vector<QString>{});
    inventories.push_back(inventory);
  }
  if (clients.empty()) {
    emit run_launch_failed("no agent is connected");
    return {};
  }
  QString differs;
  if (const QString why = node_gate(inventories, perf.engine, spec.allow_mixed_nodes, &differs); !why.isEmpty()) {
    emit run_launch_failed(why);
    return {};
  }
  const int placed = static_cast<int>(clients.size()) * spec.ranks_per_agent;
  const int world = std::max(spec.world_size, placed);
  const QString run_id = QString("console-%1").arg(QDateTime::currentMSecsSinceEpoch());
  std::vector<int> placement(static_cast<std::size_t>(world), -1);  // ranks beyond those placed: nowhere
  for (int r = 0; r < placed; ++r)
    placement[static_cast<std::size_t>(r)] = r / spec.ranks_per_agent;
  run.begin(run_id, world, static_cast<int>(clients.size()), placement);
  run.set_agents(addresses, rails);
  pending_what_ = QString("%1 %2..%3 %4 %5, %6 iters, %7 agent(s) x %8 rank(s), world %9")
                      .arg(spec.collective, spec.min_bytes, spec.max_bytes, spec.dtype, spec.op)
                      .arg(spec.iters)
                      .arg(clients.size())
                      .arg(spec.ranks_per_agent)
                      .arg(world);
  if (spec.engine == "nccl") pending_what_ = "through NCCL: " + pending_what_;
  pending_what_ += differs;
  if (!spec.algo.isEmpty() || !spec.proto.isEmpty() || spec.channels > 0) {
    pending_what_ += QString(", forced %1/%2/%3 ch")
                         .arg(spec.algo.isEmpty() ? "-" : spec.algo, spec.proto.isEmpty() ? "-" : spec.proto)
                         .arg(spec.channels);
  }
  if (recording_->is_open()) {
    record({{"run_begin", run_id.toStdString()},
            {"world_size", world},
            {"agents", clients.size()},
            {"placement", placement},
            {"agent_addresses", to_strings(addresses)},
            {"rails", to_string_lists(rails)}});
  }
  agent::RunRequest request;
  request.run_id = run_id.toStdString();
  request.world_size = world;
  request.master_addr = master.toStdString();
  request.perf = perf;
  if (spec.store_timeout_s > 0) request.store_timeout_s = spec.store_timeout_s;
  if (spec.coll_timeout_s > 0) request.coll_timeout_s = spec.coll_timeout_s;
  send_run(clients, request, spec.ranks_per_agent);
  return run_id;
}

void Console::cancel_run() {
  then_nccl_.reset();  // a cancelled pair stops here
  if (run.run_id().isEmpty()) return;
  for (const auto& [a, link] : links_) {
    if (link.client) link.client->request({{"type", "cancel"}, {"run_id", run.run_id().toStdString()}});
  }
}

int Console::replay(const QString& path, RunState& into) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return -1;
  int n = 0;
  while (!file.atEnd()) {
    const QByteArray line = file.readLine();
    const json j = json::parse(line.constData(), line.constData() + line.size(), nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("run_begin")) {
      into.begin(QString::fromStdString(j["run_begin"].get<std::string>()), j.value("world_size", 0),
                 j.value("agents", 0), j.value("placement", std::vector<int>{}));
      std::vector<QString> addresses;
      std::vector<std::vector<QString>> rails;
      try {
        for (const auto& a : j.value("agent_addresses", std::vector<std::string>{}))
          addresses.push_back(QString::fromStdString(a));
        for (const auto& node : j.value("rails", std::vector<std::vector<std::string>>{})) {
          rails.emplace_back();
          for (const auto& d : node)
            rails.back().push_back(QString::fromStdString(d));
        }
      } catch (const json::exception&) {
        // A recording from before these fields, or a damaged one: no names.
      }
      into.set_agents(std::move(addresses), std::move(rails));
      continue;
    }
    into.apply(agent_message(QString::fromStdString(j.value("agent", "")), j.value("message", json::object())));
    ++n;
  }
  return n;
}

}  // namespace ringmaster::ui
