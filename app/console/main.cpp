// ringmaster: the operations console. With no arguments it starts local
// agents on loopback and connects to them; --agents connects to running
// ones instead. --screenshot runs a sweep and saves the window as a PNG.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QSocketNotifier>
#include <QTimer>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "agent_addresses.h"
#include "completion.h"
#include "main_window.h"
#include "models/console.h"
#include "panels/links_panel.h"
#include "ringmaster/version.h"

namespace {

// SIGTERM, SIGINT and SIGHUP end the console as closing its window does:
// its local agents stopped, its temporary directory (the agents' token)
// removed. A handler only writes to a pipe; the event loop quits.
int signal_pipe[2] = {-1, -1};

void quit_on_signals() {
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  auto* notifier = new QSocketNotifier(signal_pipe[0], QSocketNotifier::Read, qApp);
  QObject::connect(notifier, &QSocketNotifier::activated, qApp, [] {
    unsigned char signo = 0;
    if (::read(signal_pipe[0], &signo, 1) == 1) {
      std::fprintf(stderr, "ringmaster: %s: closing\n", ::strsignal(signo));
      QCoreApplication::exit(128 + signo);
    }
  });
  struct sigaction action {};
  action.sa_handler = [](int signo) {
    const unsigned char byte = static_cast<unsigned char>(signo);
    [[maybe_unused]] const auto written = ::write(signal_pipe[1], &byte, 1);
  };
  ::sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signo : {SIGTERM, SIGINT, SIGHUP})
    ::sigaction(signo, &action, nullptr);
}

// --version needs no display: answered before Qt starts.
bool version_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--version") {
      std::printf("ringmaster %s\n", RINGMASTER_VERSION_STRING);
      return true;
    }
  }
  return false;
}

// A screenshot needs no screen: render offscreen when there is none.
void offscreen_for_screenshot(int argc, char** argv) {
  bool wants_screenshot = false;
  for (int i = 1; i < argc; ++i)
    wants_screenshot |= std::string(argv[i]) == "--screenshot";
  if (wants_screenshot && !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") &&
      !std::getenv("QT_QPA_PLATFORM")) {
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (version_asked(argc, argv)) return 0;
  offscreen_for_screenshot(argc, argv);
  QCommandLineParser cli;
  cli.setApplicationDescription("Ringmaster console: topology, live bandwidth and the rendezvous timeline of runs");
  cli.addHelpOption();
  cli.addVersionOption();
  QCommandLineOption agents_opt("agents",
                                "Connect to these agents instead of starting local ones; a name with several addresses "
                                "(a headless Service) is an agent at each.",
                                "host:port,...");
  QCommandLineOption agents_file_opt("agents-file", "More agents, one host:port a line (# comments).", "file");
  QCommandLineOption token_opt("token-file", "The agents' shared token.", "file");
  QCommandLineOption tls_opt("tls", "The --agents serve TLS (needs --tls-ca, or --tls-insecure).");
  QCommandLineOption tls_ca_opt("tls-ca", "CA certificate (PEM) that signed the agents' certificates; implies --tls.",
                                "file");
  QCommandLineOption tls_cert_opt(
      "tls-cert", "This console's certificate (PEM), for agents started with --tls-client-ca; needs --tls-key.",
      "file");
  QCommandLineOption tls_key_opt("tls-key", "Private key (PEM) of --tls-cert.", "file");
  QCommandLineOption tls_insecure_opt("tls-insecure",
                                      "With --tls and no --tls-ca: encrypt, but take any certificate (whoever answers "
                                      "gets the console's proof); implies --tls.");
  QCommandLineOption local_opt("local", "Local agents to start (default 4).", "n", "4");
  QCommandLineOption local_topology_opt(
      "local-topology",
      "The local agents each declare this node (NCCL or hwloc XML) and are a node of their own: a cluster of such "
      "nodes rehearsed on this machine, its rings drawn through their GPUs and NICs.",
      "file");
  QCommandLineOption run_opt("run", "Start a run as soon as the agents are connected.");
  QCommandLineOption shot_opt("screenshot", "Run, wait for the results, save the window to this PNG and exit.", "file");
  QCommandLineOption collective_opt("collective", "Collective of the run (default all_reduce).", "name", "all_reduce");
  QCommandLineOption min_opt("min-bytes", "Smallest size (default 8).", "size", "8");
  QCommandLineOption max_opt("max-bytes", "Largest size (default 64M).", "size", "64M");
  QCommandLineOption iters_opt("iters", "Timed iterations per size (default 20).", "n", "20");
  QCommandLineOption engine_opt("engine",
                                "Engine of the run: ringmaster (default); nccl, the same sweep through NCCL; both, "
                                "Ringmaster then NCCL, compared size by size in History.",
                                "name", "ringmaster");
  QCommandLineOption per_agent_opt("np-per-agent", "Ranks per agent (default 1).", "n", "1");
  QCommandLineOption record_opt("record", "Write every agent message to this file (JSON lines).", "file");
  QCommandLineOption replay_opt("replay",
                                "Show a recorded run (--record, or ringmaster-cli repro run --json-file) instead of "
                                "starting agents; with --screenshot, the picture of it.",
                                "file");
  QCommandLineOption tab_opt("tab",
                             "The tab to open on (its title or first word, e.g. Tuner; default Live); with "
                             "--screenshot, Preflight runs a preflight over the agents after the run, Links a link "
                             "check.",
                             "title", "Live");
  QCommandLineOption size_opt("size", "Window size, e.g. 1366x768 (default: as last time).", "WxH");
  QCommandLineOption history_opt("history",
                                 "Keep runs and certifications here: an SQLite file or postgresql://user:password@"
                                 "host:port/db, a team's server (default: $RINGMASTER_HISTORY, else history.sqlite "
                                 "in the data directory).",
                                 "location");
  const std::initializer_list<const QCommandLineOption*> options = {
      &agents_opt,  &agents_file_opt,  &token_opt,          &tls_opt,       &tls_ca_opt, &tls_cert_opt,
      &tls_key_opt, &tls_insecure_opt, &local_opt,          &run_opt,       &shot_opt,   &collective_opt,
      &min_opt,     &max_opt,          &iters_opt,          &per_agent_opt, &record_opt, &tab_opt,
      &size_opt,    &replay_opt,       &local_topology_opt, &engine_opt,    &history_opt};
  for (const auto* o : options)
    cli.addOption(*o);
  // For the build: the bash completion script (needs no display).
  if (argc == 2 && std::string_view(argv[1]) == "--bash-completion") {
    ringmaster::app::CompletionLevel top{"", {"-h", "--help", "--help-all", "-v", "--version"}};
    for (const auto* o : options) {
      for (const QString& name : o->names())
        top.words.push_back((name.size() == 1 ? "-" : "--") + name.toStdString());
    }
    std::fputs(ringmaster::app::bash_completion_script("ringmaster", {top}).c_str(), stdout);
    return 0;
  }
  // The command line is checked before any window exists, by a core
  // application (it loads no platform plugin): --help, and every usage
  // error, answer without a display, exit 2 with the usage text.
  int tab = 0;
  QString engine;
  {
    QCoreApplication core(argc, argv);
    QCoreApplication::setApplicationName("ringmaster");
    QCoreApplication::setApplicationVersion(RINGMASTER_VERSION_STRING);
    auto usage_error = [&](const QString& what) {
      std::fprintf(stderr, "ringmaster: %s\n\n%s", qPrintable(what), qPrintable(cli.helpText()));
      return 2;
    };
    if (!cli.parse(QCoreApplication::arguments())) return usage_error(cli.errorText());
    if (cli.isSet("help")) cli.showHelp(0);
    if (cli.isSet("version")) {
      std::printf("ringmaster %s\n", RINGMASTER_VERSION_STRING);
      return 0;
    }
    if (!cli.positionalArguments().isEmpty()) {
      return usage_error("unexpected argument '" + cli.positionalArguments().front() + "'");
    }
    tab = ringmaster::ui::MainWindow::tab_named(cli.value(tab_opt));
    if (tab < 0) {
      return usage_error(QString("--tab %1: no such tab (tabs: %2)")
                             .arg(cli.value(tab_opt), ringmaster::ui::MainWindow::tab_names().join(", ")));
    }
    engine = cli.value(engine_opt);
    if (engine != "ringmaster" && engine != "nccl" && engine != "both") {
      return usage_error("--engine " + engine + ": ringmaster, nccl or both");
    }
    // Qt aborts (exit 134, "Reinstalling the application may fix this
    // problem") when it has no display to open: say what to do instead.
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !std::getenv("QT_QPA_PLATFORM")) {
      return usage_error(
          "no display (DISPLAY and WAYLAND_DISPLAY are unset): run it on a desktop, with --screenshot FILE "
          "(drawn offscreen), or run the same job headless with ./run.sh or ringmaster-cli remote");
    }
  }
  QApplication app(argc, argv);
  QApplication::setOrganizationName("Ringmaster");
  QApplication::setApplicationName("ringmaster");
  QApplication::setApplicationVersion(RINGMASTER_VERSION_STRING);
  QGuiApplication::setDesktopFileName("ringmaster");  // resources/desktop/ringmaster.desktop
  cli.parse(QCoreApplication::arguments());           // checked above; the values for what follows
  quit_on_signals();

  ringmaster::ui::Console console;
  if (QString error; cli.isSet(history_opt) && !console.history.open(cli.value(history_opt), &error))
    std::fprintf(stderr, "ringmaster: history: %s\n", qPrintable(error));
  if (cli.isSet(record_opt) && !console.record_to(cli.value(record_opt))) {
    std::fprintf(stderr, "ringmaster: cannot write %s\n", qPrintable(cli.value(record_opt)));
    return 2;
  }
  int expected = 0;
  if (cli.isSet(agents_opt) || cli.isSet(agents_file_opt)) {
    ringmaster::ui::AgentAccess access;
    access.tls_ca = cli.value(tls_ca_opt);
    access.tls_cert = cli.value(tls_cert_opt);
    access.tls_key = cli.value(tls_key_opt);
    access.tls_insecure = cli.isSet(tls_insecure_opt);
    access.tls = cli.isSet(tls_opt) || access.tls_insecure || !access.tls_ca.isEmpty() || !access.tls_cert.isEmpty();
    if (access.tls_cert.isEmpty() != access.tls_key.isEmpty()) {
      std::fprintf(stderr, "ringmaster: --tls-cert and --tls-key go together\n");
      return 2;
    }
    QString& token = access.token;
    if (cli.isSet(token_opt)) {
      QFile f(cli.value(token_opt));
      if (!f.open(QIODevice::ReadOnly)) {
        std::fprintf(stderr, "ringmaster: cannot read token file %s\n", qPrintable(cli.value(token_opt)));
        return 2;
      }
      token = QString::fromUtf8(f.readLine()).trimmed();
    }
    QStringList given = cli.value(agents_opt).split(',', Qt::SkipEmptyParts);
    if (cli.isSet(agents_file_opt)) {
      const auto lines = ringmaster::app::agents_file_lines(cli.value(agents_file_opt).toStdString());
      if (!lines) {
        std::fprintf(stderr, "ringmaster: --agents-file %s: cannot read it\n", qPrintable(cli.value(agents_file_opt)));
        return 2;
      }
      for (const auto& line : *lines)
        given << QString::fromStdString(line).split(',', Qt::SkipEmptyParts);
    }
    for (const QString& a : given) {
      const int colon = static_cast<int>(a.lastIndexOf(':'));
      const int port = colon > 0 ? a.mid(colon + 1).toInt() : 0;
      if (port <= 0 || port > 65535) {
        std::fprintf(stderr, "ringmaster: --agents: %s is not host:port\n", qPrintable(a));
        return 2;
      }
      // A name with several addresses (a headless Service) is an agent at
      // each, as for ringmaster-cli remote: IPv4 when there is any, sorted.
      const QString host = a.left(colon);
      QStringList found;
      for (const auto& address : ringmaster::app::addresses_of(host.toStdString()))
        found << QString::fromStdString(address);
      if (found.size() <= 1) {
        console.connect_agent(host, static_cast<quint16>(port), access);
        ++expected;
        continue;
      }
      std::fprintf(stderr, "ringmaster: %s is %d agents: %s (port %d)\n", qPrintable(host),
                   static_cast<int>(found.size()), qPrintable(found.join(", ")), port);
      ringmaster::ui::AgentAccess named = access;
      named.name = host;
      for (const QString& address : found) {
        console.connect_agent(address, static_cast<quint16>(port), named);
        ++expected;
      }
    }
  } else if (!cli.isSet(replay_opt)) {
    expected = cli.value(local_opt).toInt();
    QString error;
    const QString agent = QDir(QCoreApplication::applicationDirPath()).filePath("ringmaster-agent");
    if (!console.start_local_agents(expected, agent, &error, cli.value(local_topology_opt))) {
      std::fprintf(stderr, "ringmaster: %s\n", qPrintable(error));
      return 1;
    }
  }

  ringmaster::ui::MainWindow window(console);
  ringmaster::ui::RunSpec spec;
  spec.collective = cli.value(collective_opt);
  spec.min_bytes = cli.value(min_opt);
  spec.max_bytes = cli.value(max_opt);
  spec.iters = cli.value(iters_opt).toInt();
  spec.ranks_per_agent = cli.value(per_agent_opt).toInt();
  spec.engine = engine;
  window.set_run_spec(spec);
  if (cli.isSet(size_opt)) {
    const auto wh = cli.value(size_opt).split('x');
    const int w = wh.size() == 2 ? wh[0].toInt() : 0, h = wh.size() == 2 ? wh[1].toInt() : 0;
    if (w < 320 || h < 240) {
      std::fprintf(stderr, "ringmaster: --size %s: expected WxH, at least 320x240\n", qPrintable(cli.value(size_opt)));
      return 2;
    }
    window.resize(w, h);
  }
  if (cli.isSet(tab_opt)) window.tabs()->setCurrentIndex(tab);
  window.show();

  const bool screenshot = cli.isSet(shot_opt);
  if (cli.isSet(run_opt) || screenshot) {
    // The count lives in the slot: a local of this block would be gone by
    // the time the agents connect.
    QObject::connect(&console, &ringmaster::ui::Console::agent_connected, &window,
                     [&window, expected, connected = 0]() mutable {
                       if (++connected == expected) window.start_run();
                     });
    QObject::connect(&console, &ringmaster::ui::Console::agent_lost, &window,
                     [&](const QString& a, const QString& why) {
                       std::fprintf(stderr, "ringmaster: agent %s: %s\n", qPrintable(a), qPrintable(why));
                       if (screenshot) QCoreApplication::exit(1);
                     });
    QObject::connect(&console, &ringmaster::ui::Console::run_launch_failed, &window, [&](const QString& why) {
      std::fprintf(stderr, "ringmaster: run not started: %s\n", qPrintable(why));
      if (screenshot) QCoreApplication::exit(1);
    });
  }
  if (screenshot) {
    auto take_shot = [&](bool ok) {
      // Let the chart draw the last samples before the picture is taken.
      QTimer::singleShot(700, &window, [&, ok] {
        const bool saved = window.save_screenshot(cli.value(shot_opt));
        std::printf("%s %s (run %s)\n", saved ? "saved" : "could not save", qPrintable(cli.value(shot_opt)),
                    ok ? "ok" : "failed");
        QCoreApplication::exit(saved ? 0 : 1);
      });
    };
    // With both engines, the picture waits for the second run.
    auto shoot = [&, take_shot](bool ok) {
      window.tabs()->setCurrentIndex(tab);
      const QString shown = window.tabs()->tabText(tab);
      if (shown != "Preflight" && shown != "Links") {
        take_shot(ok);
        return;
      }
      // The Preflight and Links tabs show a preflight or a link check over
      // the same agents, run now.
      auto failed = [](const QString& why) {
        std::fprintf(stderr, "ringmaster: %s\n", qPrintable(why));
        QCoreApplication::exit(1);
      };
      QString why;
      if (shown == "Preflight") {
        QObject::connect(&console, &ringmaster::ui::Console::preflight_finished, &window,
                         [take_shot, ok] { take_shot(ok); });
        QObject::connect(&console, &ringmaster::ui::Console::preflight_failed, &window,
                         [failed](const QString& w) { failed("preflight failed: " + w); });
        if (!console.start_preflight({}, &why)) failed("preflight not started: " + why);
      } else {
        QObject::connect(&console, &ringmaster::ui::Console::linkcheck_finished, &window,
                         [take_shot, ok] { take_shot(ok); });
        QObject::connect(&console, &ringmaster::ui::Console::linkcheck_failed, &window,
                         [failed](const QString& w) { failed("link check failed: " + w); });
        // The local agents share one host: sockets, as between nodes
        // (shared memory between them is faster than it can be timed).
        auto* links = window.findChild<ringmaster::ui::LinksPanel*>();
        links->set_environment("NCCL_SHM_DISABLE=1");
        if (!links->start()) failed("link check not started");
      }
    };
    if (engine == "both") {
      QObject::connect(&console, &ringmaster::ui::Console::engines_compared, &window,
                       [&, shoot] { shoot(console.run.ok()); });
    } else {
      QObject::connect(&console.run, &ringmaster::ui::RunState::finished, &window, shoot);
    }
  }
  if (cli.isSet(replay_opt)) {
    const QString file = cli.value(replay_opt);
    QTimer::singleShot(0, &window, [&console, &window, &cli, &shot_opt, file, screenshot] {
      window.set_source("replay of " + QFileInfo(file).fileName());
      if (ringmaster::ui::Console::replay(file, console.run) < 0) {
        std::fprintf(stderr, "ringmaster: --replay: cannot read %s\n", qPrintable(file));
        QCoreApplication::exit(2);
        return;
      }
      // A recording cut before every agent said run_done: shown as it is.
      if (console.run.running() && screenshot) {
        std::fprintf(stderr, "ringmaster: --replay: the recorded run does not end; saving it as it is\n");
        QCoreApplication::exit(window.save_screenshot(cli.value(shot_opt)) ? 0 : 1);
      }
    });
  }
  return app.exec();
}
