#include "main_window.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QCompleter>
#include <QDesktopServices>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIcon>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QStringList>
#include <QStyleFactory>
#include <QTabWidget>
#include <QTableView>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>

#include "about.h"
#include "panels/bandwidth_chart.h"
#include "panels/bringup_panel.h"
#include "panels/busbw_plot.h"
#include "panels/history_panel.h"
#include "panels/links_panel.h"
#include "panels/preflight_panel.h"
#include "panels/rings_view.h"
#include "panels/scenarios_panel.h"
#include "panels/table_columns.h"
#include "panels/timeline_view.h"
#include "panels/topology_view.h"
#include "panels/tuner_panel.h"
#include "panels/watch_panel.h"

namespace ringmaster::ui {

namespace {
// RunSpec::engine for each entry of the Engine field, in its order.
const QStringList kEngines = {"ringmaster", "nccl", "both"};
}  // namespace

const QStringList& MainWindow::tab_names() {
  static const QStringList names = {"Live",      "Stages (ms)", "Results", "Engine decisions", "Tuner",
                                    "Wavefront", "Preflight",   "Links",   "Topology",         "Rings",
                                    "Scenarios", "History",     "Watch",   "Bring-up"};
  return names;
}

int MainWindow::tab_named(const QString& name) {
  const QString wanted = name.trimmed();
  for (int i = 0; i < tab_names().size(); ++i) {
    const QString& title = tab_names()[i];
    if (title.compare(wanted, Qt::CaseInsensitive) == 0 ||
        title.section(' ', 0, 0).compare(wanted, Qt::CaseInsensitive) == 0)
      return i;
  }
  return -1;
}

// The tabs after Scenarios: the run history, the watch of a job the
// console did not launch, and the bring-up checklist.
void MainWindow::add_history_watch_and_bring_up() {
  history_ = new HistoryPanel(console_);
  tabs_->addTab(history_, tab_names()[11]);
  tabs_->addTab(new WatchPanel(console_), tab_names()[12]);
  auto* bring_up = new BringupPanel(console_);
  tabs_->addTab(bring_up, tab_names()[13]);
  connect(bring_up, &BringupPanel::open_tab, this, [this](const QString& name) {
    const int tab = tab_named(name);
    if (tab >= 0) tabs_->setCurrentIndex(tab);
  });
  connect(history_, &HistoryPanel::certification_opened, this,
          [this, bring_up](const QString& report, const QString& about) {
            if (bring_up->show_kept(report, about)) tabs_->setCurrentWidget(bring_up);
          });
  connect(history_, &HistoryPanel::opened, this, [this] {
    tabs_->setCurrentIndex(0);
    set_source("run " + console_.run.run_id() + " from the history");
    if (console_.run.cause()) show_cause();
  });
  connect(&console_, &Console::engines_compared, this, [this](const QString& ours, const QString& nccl) {
    // Called as the NCCL run ends: console_.run is that run.
    const QStringList problems = console_.run.problems();
    const QString remark = console_.run.ok() || problems.isEmpty() ? QString() : "NCCL: " + problems.front();
    history_->compare_runs(ours, nccl, "Ringmaster", "NCCL", remark);
    statusBar()->showMessage("Ringmaster and NCCL compared size by size in History", 15000);
  });
}

MainWindow::MainWindow(Console& console, QWidget* parent) : QMainWindow(parent), console_(console) {
  setWindowTitle("Ringmaster");
  setWindowIcon(QIcon(":/ringmaster.svg"));
  setObjectName("mainWindow");
  resize(1360, 760);

  // Left: agents and the launcher.
  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  agents_view_ = new QTableView;
  agents_view_->setObjectName("agentsView");
  agents_view_->setModel(&console_.agents);
  agents_view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  agents_view_->verticalHeader()->hide();
  lay_out_agents_table();
  left_layout->addWidget(new QLabel("<b>Agents</b>"));
  left_layout->addWidget(agents_view_, 1);
  auto* connect_row = new QHBoxLayout;
  agent_address_ = new QLineEdit;
  agent_address_->setPlaceholderText("host:port");
  token_file_ = new QLineEdit;
  token_file_->setPlaceholderText("token file (optional)");
  auto* connect_button = new QPushButton("Connect");
  auto* disconnect_button = new QPushButton("Disconnect");
  connect_row->addWidget(agent_address_, 2);
  connect_row->addWidget(token_file_, 2);
  connect_row->addWidget(connect_button);
  connect_row->addWidget(disconnect_button);
  left_layout->addLayout(connect_row);
  // TLS: the CA that signed the agents' certificates, and this console's
  // certificate for agents started with --tls-client-ca.
  auto* tls_row = new QHBoxLayout;
  tls_ = new QCheckBox("TLS");
  tls_->setObjectName("agentTls");
  tls_->setToolTip("The agent serves TLS (ringmaster-agent --tls-cert)");
  auto file_field = [](const char* name, const QString& hint, const QString& tip) {
    auto* f = new QLineEdit;
    f->setObjectName(name);
    f->setPlaceholderText(hint);
    f->setToolTip(tip);
    f->setAccessibleName(hint);
    return f;
  };
  tls_ca_ = file_field("agentTlsCa", "CA file", "PEM CA that signed the agents' certificates: verifies them");
  tls_cert_ = file_field("agentTlsCert", "client certificate",
                         "This console's PEM certificate, for agents started with --tls-client-ca");
  tls_key_ = file_field("agentTlsKey", "client key", "Private key (PEM) of the client certificate");
  agent_address_->setObjectName("agentAddress");
  agent_address_->setAccessibleName("agent address");
  token_file_->setObjectName("agentTokenFile");
  token_file_->setAccessibleName("token file");
  connect_button->setObjectName("agentConnect");
  tls_row->addWidget(tls_);
  tls_row->addWidget(tls_ca_, 2);
  tls_row->addWidget(tls_cert_, 2);
  tls_row->addWidget(tls_key_, 2);
  left_layout->addLayout(tls_row);

  QFormLayout* form = build_run_form();
  agents_view_->setAccessibleName("Agents");
  left_layout->addWidget(new QLabel("<b>Run</b>"));
  left_layout->addLayout(form);
  run_button_ = new QPushButton("Run");
  run_button_->setObjectName("runButton");
  auto* cancel_button = new QPushButton("Cancel");
  cancel_button->setObjectName("cancelButton");
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(run_button_);
  buttons->addWidget(cancel_button);
  left_layout->addLayout(buttons);
  auto* dock = new QDockWidget("Agents and run");
  dock->setObjectName("agentsDock");
  dock->setWidget(left);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::LeftDockWidgetArea, dock);

  // Centre: tabs.
  tabs_ = new QTabWidget;
  tabs_->setObjectName("tabs");
  tabs_->setAccessibleName("Views");
  // Live: bandwidth over the rendezvous timeline, the two things watched
  // during bring-up, with the detail of the stage last clicked.
  auto* live = new QSplitter(Qt::Vertical);
  live_ = live;
  live->setObjectName("live");
  bandwidth_ = new BandwidthChart(console_.run.bandwidth(), &console_.run);
  timeline_ = new TimelineView(console_.run.timeline);
  detail_ = new QPlainTextEdit;
  detail_->setObjectName("stageDetail");
  detail_->setReadOnly(true);
  detail_->setAccessibleName("Stage detail");
  detail_->setPlaceholderText("Click a stage for its detail: addresses, errno, joined and missing ranks, the hint.");
  // A run of 2,048 ranks shows its 256 nodes, each at least a line high:
  // the timeline scrolls.
  auto* timeline_scroll = new QScrollArea;
  timeline_scroll->setObjectName("timelineScroll");
  timeline_scroll->setAccessibleName("Rendezvous timeline, scrolled");
  timeline_scroll->setWidgetResizable(true);
  timeline_scroll->setFrameShape(QFrame::NoFrame);
  timeline_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  timeline_scroll->setWidget(timeline_);
  live->addWidget(bandwidth_);
  live->addWidget(timeline_scroll);
  live->addWidget(detail_);
  live->setStretchFactor(0, 5);
  live->setStretchFactor(1, 3);
  live->setStretchFactor(2, 1);
  live->setSizes({420, 200, 60});
  tabs_->addTab(live, tab_names()[0]);
  auto* table = new QTableView;
  table->setObjectName("timelineTable");
  table->setModel(&console_.run.timeline);
  // Sized to contents, 2,048 ranks' stage events had it measure its rows'
  // text again after each batch: 40% of the GUI thread while a run's
  // ranks still came up.
  fit_columns_when_rows_change(table, [](int) { return QString("88888"); });
  table->setAccessibleName("Stages per rank (ms)");
  tabs_->addTab(table, tab_names()[1]);
  auto* results = new QTableView;
  results->setObjectName("resultsView");
  results->setModel(&console_.run.results);
  results->setAccessibleName("Results");
  results->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  auto* results_split = new QSplitter(Qt::Vertical);
  results_split->addWidget(results);
  busbw_plot_ = new BusbwPlot(console_.run.results);
  results_split->addWidget(busbw_plot_);
  results_split->setStretchFactor(0, 3);
  results_split->setStretchFactor(1, 2);
  busbw_plot_->setMinimumHeight(220);
  tabs_->addTab(results_split, tab_names()[2]);
  auto* decisions = new QTableView;
  decisions->setModel(&console_.run.decisions);
  decisions->setAccessibleName("Engine decisions");
  decisions->horizontalHeader()->setStretchLastSection(true);
  tabs_->addTab(decisions, tab_names()[3]);
  tabs_->addTab(new TunerPanel(console_.run.tuner, &console_.run.results), tab_names()[4]);
  // The latest stall: every rank's recent calls around the stalled one.
  auto* wavefront = new QWidget;
  auto* wavefront_layout = new QVBoxLayout(wavefront);
  wavefront_summary_ = new QLabel(
      "No stall. When a collective makes no progress for RINGMASTER_STALL_S seconds "
      "(default 10), every rank's recent calls show here with who lags and why.");
  wavefront_summary_->setObjectName("wavefrontSummary");
  wavefront_summary_->setWordWrap(true);
  wavefront_summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* wavefront_view = new QTableView;
  wavefront_view->setObjectName("wavefrontView");
  wavefront_view->setModel(&console_.run.wavefront);
  wavefront_view->setAccessibleName("Every rank's recent collectives at the stall");
  wavefront_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  wavefront_layout->addWidget(wavefront_summary_);
  wavefront_layout->addWidget(wavefront_view, 1);
  tabs_->addTab(wavefront, tab_names()[5]);
  connect(&console_.run, &RunState::stalled, this, [this] {
    wavefront_summary_->setText(console_.run.wavefront.summary());
    update_status();
  });
  connect(&console_.run, &RunState::started, this,
          [this] { wavefront_summary_->setText("No stall in this run so far."); });
  tabs_->addTab(new PreflightPanel(console_), tab_names()[6]);
  tabs_->addTab(new LinksPanel(console_), tab_names()[7]);
  topology_ = new TopologyView;
  topology_->follow_run(&console_.run);
  tabs_->addTab(topology_, tab_names()[8]);
  auto* rings = new RingsView(console_.run);
  tabs_->addTab(rings, tab_names()[9]);
  // A channel opened in the Rings tab is drawn over the node too.
  connect(rings, &RingsView::channel_activated, this, [this](int channel) { topology_->show_path(channel); });
  scenarios_ = new ScenariosPanel(console_.run, scenario_catalog_path(),
                                  QDir(QCoreApplication::applicationDirPath()).filePath("ringmaster-agent"));
  tabs_->addTab(scenarios_, tab_names()[10]);
  connect(scenarios_, &ScenariosPanel::finished, this, [this](bool passed) {
    // A scenario's run is kept like any other, with its verdict.
    if (console_.run.run_id().startsWith("repro-")) {
      console_.keep_run("scenario", scenarios_->selected_name() + (passed ? ": PASS" : ": FAIL"));
    }
    update_status();
  });
  add_history_watch_and_bring_up();
  setCentralWidget(tabs_);

  status_agents_ = new QLabel;
  status_run_ = new QLabel;
  statusBar()->addWidget(status_agents_);
  statusBar()->addPermanentWidget(status_run_);

  connect(connect_button, &QPushButton::clicked, this, [this] {
    const QString text = agent_address_->text().trimmed();
    const int colon = static_cast<int>(text.lastIndexOf(':'));
    const int port = colon > 0 ? text.mid(colon + 1).toInt() : 0;
    if (colon <= 0 || port <= 0 || port > 65535) {
      QMessageBox::warning(this, "Ringmaster", "Give the agent as host:port, e.g. 10.0.0.5:29600.");
      return;
    }
    AgentAccess access;
    QString why;
    if (!access_from_row(&access, &why)) {
      QMessageBox::warning(this, "Ringmaster", why);
      return;
    }
    console_.connect_agent(text.left(colon), static_cast<quint16>(port), access);
    remember_agent(text, {token_file_->text(), tls_->isChecked() ? "tls" : "", tls_ca_->text(), tls_cert_->text(),
                          tls_key_->text()});
  });
  connect(disconnect_button, &QPushButton::clicked, this, [this] {
    const auto rows = agents_view_->selectionModel()->selectedRows();
    for (const auto& r : rows)
      console_.disconnect_agent(console_.agents.address(r.row()));
  });
  connect(run_button_, &QPushButton::clicked, this, &MainWindow::start_run);
  connect(cancel_button, &QPushButton::clicked, &console_, &Console::cancel_run);
  connect(timeline_, &TimelineView::segment_clicked, this, &MainWindow::show_stage_detail);
  connect(timeline_, &TimelineView::node_segment_clicked, this,
          [this](int node, int stage) { detail_->setPlainText(console_.run.timeline.node_summary(node, stage)); });
  connect(table, &QTableView::clicked, this, [this](const QModelIndex& i) {
    show_stage_detail(i.row(), i.column());
    tabs_->setCurrentIndex(0);
  });
  connect(agents_view_, &QTableView::clicked, this, [this] { show_selected_topology(); });
  connect(&console_, &Console::agent_connected, this, [this](const QString& address) {
    if (console_.agents.row_of(address) == 0) {
      agents_view_->selectRow(0);
      show_selected_topology();
    }
    update_status();
  });
  connect(&console_, &Console::agent_lost, this, [this] { update_status(); });
  connect(&console_, &Console::run_launch_failed, this, [this](const QString& why) {
    status_run_->setText("run not started: " + why);
    detail_->setPlainText("The run could not start: " + why);
  });
  connect(&console_.run, &RunState::started, this, [this] {
    if (live_folded_) {  // a new run: the chart back
      live_->setSizes({420, 200, 60});
      live_folded_ = false;
    }
    update_status();
  });
  connect(&console_.run, &RunState::stage_failed, this, &MainWindow::show_cause);
  connect(&console_.run, &RunState::finished, this, [this] {
    update_status();
    if (console_.run.cause()) {
      show_cause();
      return;
    }
    QStringList lines = console_.run.problems();
    for (const auto& l : console_.run.slow_links())
      lines << "Slow link: " + l;
    if (!lines.isEmpty()) detail_->setPlainText(lines.join("\n"));
  });
  auto* status_timer = new QTimer(this);
  connect(status_timer, &QTimer::timeout, this, &MainWindow::update_status);
  status_timer->start(1000);

  build_menus();
  QSettings settings;
  restoreGeometry(settings.value("window/geometry").toByteArray());
  restoreState(settings.value("window/state").toByteArray());
  agent_address_->setText(settings.value("agents/last").toString());
  fill_row_from_memory(agent_address_->text());
  refresh_completions();
  set_dark(settings.value("window/dark", false).toBool());
  update_status();
}

// The agents table in a dock a third of a laptop screen wide: the columns
// that tell agents apart and say whether they answer come first (address,
// state, round trip, faults), the address never cut, anything else elided
// in the middle with the whole text in its tooltip; "From" shows only
// when an agent was found through a name.
void MainWindow::lay_out_agents_table() {
  auto* header = agents_view_->horizontalHeader();
  header->setStretchLastSection(false);
  put_columns_first(agents_view_, {AgentsModel::address_column, AgentsModel::state_column, AgentsModel::rtt_column,
                                   AgentsModel::faults_column, AgentsModel::topology_column, AgentsModel::host_column,
                                   AgentsModel::version_column, AgentsModel::origin_column});
  auto fit = [this] {
    auto* h = agents_view_->horizontalHeader();
    const QFontMetrics fm(agents_view_->font());
    bool any_origin = false;
    for (int r = 0; r < console_.agents.rowCount(); ++r)
      any_origin = any_origin || !console_.agents.index(r, AgentsModel::origin_column).data().toString().isEmpty();
    agents_view_->setColumnHidden(AgentsModel::origin_column, !any_origin);
    // Widest first row text per column, capped for the columns that may
    // be long (a topology summary, a version string).
    auto widest = [&](int column, int cap) {
      int w = fm.horizontalAdvance(console_.agents.headerData(column, Qt::Horizontal, Qt::DisplayRole).toString()) + 24;
      for (int r = 0; r < console_.agents.rowCount() && r < 256; ++r)
        w = std::max(w, fm.horizontalAdvance(console_.agents.index(r, column).data().toString()) + 16);
      return cap > 0 ? std::min(w, cap) : w;
    };
    h->resizeSection(AgentsModel::address_column, widest(AgentsModel::address_column, 0));
    h->resizeSection(AgentsModel::state_column,
                     std::max(widest(AgentsModel::state_column, 0), fm.horizontalAdvance("connecting") + 16));
    h->resizeSection(AgentsModel::rtt_column,
                     std::max(widest(AgentsModel::rtt_column, 0), fm.horizontalAdvance("888.88 ms") + 16));
    h->resizeSection(AgentsModel::faults_column, widest(AgentsModel::faults_column, 0));
    h->resizeSection(AgentsModel::topology_column, widest(AgentsModel::topology_column, 160));
    h->resizeSection(AgentsModel::host_column, widest(AgentsModel::host_column, 120));
    h->resizeSection(AgentsModel::version_column, widest(AgentsModel::version_column, 90));
    h->resizeSection(AgentsModel::origin_column, widest(AgentsModel::origin_column, 140));
  };
  for (auto signal : {&QAbstractItemModel::rowsInserted, &QAbstractItemModel::rowsRemoved})
    connect(&console_.agents, signal, this, fit);
  connect(&console_.agents, &QAbstractItemModel::modelReset, this, fit);
  // A host name or topology arrives with the inventory, after the row.
  connect(&console_.agents, &QAbstractItemModel::dataChanged, this,
          [this, fit](const QModelIndex& from, const QModelIndex& to) {
            if (from.column() <= AgentsModel::topology_column && to.column() >= AgentsModel::host_column) fit();
          });
  fit();
}

// Agents connected by hand, newest first (at most 10), with their token
// files: offered as completions and by File > Connect to remembered agents.
void MainWindow::remember_agent(const QString& address, const QStringList& access_files) {
  QSettings settings;
  QStringList recent = settings.value("agents/recent").toStringList();
  const QString entry = QStringList({address, access_files.join('|')}).join('|');
  recent.erase(
      std::remove_if(recent.begin(), recent.end(), [&](const QString& e) { return e.section('|', 0, 0) == address; }),
      recent.end());
  recent.prepend(entry);
  while (recent.size() > 10)
    recent.removeLast();
  settings.setValue("agents/recent", recent);
  settings.setValue("agents/last", address);
  refresh_completions();
}

bool MainWindow::access_from_row(AgentAccess* access, QString* error) const {
  if (!token_file_->text().isEmpty()) {
    QFile f(token_file_->text());
    if (!f.open(QIODevice::ReadOnly)) {
      *error = "Cannot read the token file " + token_file_->text();
      return false;
    }
    access->token = QString::fromUtf8(f.readLine()).trimmed();
  }
  access->tls_ca = tls_ca_->text().trimmed();
  access->tls_cert = tls_cert_->text().trimmed();
  access->tls_key = tls_key_->text().trimmed();
  access->tls = tls_->isChecked() || !access->tls_ca.isEmpty() || !access->tls_cert.isEmpty();
  if (access->tls_cert.isEmpty() != access->tls_key.isEmpty()) {
    *error = "Give the client certificate and its key together.";
    return false;
  }
  for (const QString& f : {access->tls_ca, access->tls_cert, access->tls_key}) {
    if (!f.isEmpty() && !QFileInfo(f).isReadable()) {
      *error = "Cannot read " + f;
      return false;
    }
  }
  return true;
}

void MainWindow::fill_row_from_memory(const QString& address) {
  for (const auto& e : QSettings().value("agents/recent").toStringList()) {
    if (e.section('|', 0, 0) != address) continue;
    token_file_->setText(e.section('|', 1, 1));
    tls_->setChecked(e.section('|', 2, 2) == "tls");
    tls_ca_->setText(e.section('|', 3, 3));
    tls_cert_->setText(e.section('|', 4, 4));
    tls_key_->setText(e.section('|', 5, 5));
    return;
  }
}

QStringList MainWindow::remembered_agents() const {
  QStringList out;
  for (const auto& e : QSettings().value("agents/recent").toStringList())
    out << e.section('|', 0, 0);
  return out;
}

void MainWindow::refresh_completions() {
  auto* completer = new QCompleter(remembered_agents(), agent_address_);
  completer->setObjectName("agentCompleter");
  connect(completer, QOverload<const QString&>::of(&QCompleter::activated), this, &MainWindow::fill_row_from_memory);
  agent_address_->setCompleter(completer);
}

bool MainWindow::export_results(const QString& path) const {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return false;
  const QByteArray text = path.endsWith(".json", Qt::CaseInsensitive)
                              ? QByteArray::fromStdString(console_.run.results.to_json())
                              : console_.run.results.to_csv().toUtf8();
  return f.write(text) == text.size();
}

void MainWindow::build_menus() {
  auto* file = menuBar()->addMenu("&File");
  auto* reconnect = file->addAction("&Connect to remembered agents");
  connect(reconnect, &QAction::triggered, this, [this] {
    for (const auto& e : QSettings().value("agents/recent").toStringList()) {
      const QString address = e.section('|', 0, 0);
      const int colon = static_cast<int>(address.lastIndexOf(':'));
      AgentAccess access;
      const QString token_path = e.section('|', 1, 1);
      if (!token_path.isEmpty()) {
        QFile f(token_path);
        if (f.open(QIODevice::ReadOnly)) access.token = QString::fromUtf8(f.readLine()).trimmed();
      }
      access.tls = e.section('|', 2, 2) == "tls";
      access.tls_ca = e.section('|', 3, 3);
      access.tls_cert = e.section('|', 4, 4);
      access.tls_key = e.section('|', 5, 5);
      if (colon > 0)
        console_.connect_agent(address.left(colon), static_cast<quint16>(address.mid(colon + 1).toInt()), access);
    }
  });
  auto* export_csv = file->addAction("Export results as &CSV…");
  connect(export_csv, &QAction::triggered, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, "Export results", "results.csv", "CSV (*.csv)");
    if (!path.isEmpty() && !export_results(path)) detail_->setPlainText("Cannot write " + path);
  });
  auto* export_json = file->addAction("Export results as &JSON…");
  connect(export_json, &QAction::triggered, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, "Export results", "results.json", "JSON (*.json)");
    if (!path.isEmpty() && !export_results(path)) detail_->setPlainText("Cannot write " + path);
  });
  auto* shot = file->addAction("Save window as &PNG…");
  connect(shot, &QAction::triggered, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, "Save window", "ringmaster.png", "PNG (*.png)");
    if (!path.isEmpty() && !save_screenshot(path)) detail_->setPlainText("Cannot write " + path);
  });
  file->addSeparator();
  auto* quit = file->addAction("&Quit");
  quit->setShortcut(QKeySequence::Quit);
  connect(quit, &QAction::triggered, this, &QWidget::close);
  auto* run = menuBar()->addMenu("&Run");
  auto* start = run->addAction("&Start");
  start->setShortcut(QKeySequence("Ctrl+R"));
  connect(start, &QAction::triggered, this, &MainWindow::start_run);
  auto* cancel = run->addAction("&Cancel");
  cancel->setShortcut(QKeySequence("Ctrl+."));
  connect(cancel, &QAction::triggered, &console_, &Console::cancel_run);
  auto* view = menuBar()->addMenu("&View");
  auto* dark = view->addAction("&Dark palette");
  dark->setCheckable(true);
  dark->setChecked(QSettings().value("window/dark", false).toBool());
  connect(dark, &QAction::toggled, this, [this](bool on) {
    set_dark(on);
    QSettings().setValue("window/dark", on);
  });
  for (int i = 0; i < tabs_->count(); ++i) {
    auto* a = view->addAction(tabs_->tabText(i));
    a->setShortcut(QKeySequence(QString("Ctrl+%1").arg(i + 1)));
    connect(a, &QAction::triggered, this, [this, i] { tabs_->setCurrentIndex(i); });
  }
  // Last, as desktop applications place it.
  auto* help = menuBar()->addMenu("&Help");
  auto* guide = help->addAction("Console &guide");
  guide->setShortcut(QKeySequence::HelpContents);
  connect(guide, &QAction::triggered, this, [this] {
    const QString path = guide_path();
    if (path.isEmpty() || !QDesktopServices::openUrl(QUrl::fromLocalFile(path))) {
      QMessageBox::information(this, "Ringmaster",
                               path.isEmpty() ? "The guide is not installed (share/doc/ringmaster/console.md)."
                                              : "No viewer opened " + path);
    }
  });
  auto* about = help->addAction("&About Ringmaster");
  about->setObjectName("aboutAction");
  connect(about, &QAction::triggered, this, [this] { QMessageBox::about(this, "About Ringmaster", about_text()); });
  auto* about_qt = help->addAction("About &Qt");
  connect(about_qt, &QAction::triggered, this, [this] { QMessageBox::aboutQt(this); });
}

void MainWindow::set_dark(bool dark) {
  QPalette p = QApplication::style()->standardPalette();
  if (dark) {
    p.setColor(QPalette::Window, QColor(0x30, 0x30, 0x30));
    p.setColor(QPalette::WindowText, Qt::white);
    p.setColor(QPalette::Base, QColor(0x24, 0x24, 0x24));
    p.setColor(QPalette::AlternateBase, QColor(0x35, 0x35, 0x35));
    p.setColor(QPalette::Text, Qt::white);
    p.setColor(QPalette::Button, QColor(0x3a, 0x3a, 0x3a));
    p.setColor(QPalette::ButtonText, Qt::white);
    p.setColor(QPalette::Highlight, QColor(0x2a, 0x82, 0xda));
    p.setColor(QPalette::Mid, QColor(0x60, 0x60, 0x60));
    p.setColor(QPalette::ToolTipBase, QColor(0x42, 0x42, 0x42));
    p.setColor(QPalette::ToolTipText, Qt::white);
  }
  QApplication::setPalette(p);
}

// The run's fields, nccl-tests' flags among them, each named by its row's
// label for screen readers.
QFormLayout* MainWindow::build_run_form() {
  auto* form = new QFormLayout;
  collective_ = new QComboBox;
  collective_->addItems({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "gather",
                         "scatter", "sendrecv"});
  min_bytes_ = new QLineEdit("8");
  max_bytes_ = new QLineEdit("64M");
  factor_ = new QDoubleSpinBox;
  factor_->setRange(1, 16);
  factor_->setValue(2);
  iters_ = new QSpinBox;
  iters_->setRange(1, 100000);
  iters_->setValue(20);
  per_agent_ = new QSpinBox;
  per_agent_->setRange(1, 64);
  per_agent_->setValue(2);
  world_ = new QSpinBox;
  world_->setRange(0, 4096);
  world_->setSpecialValueText("agents × ranks");
  dtype_ = new QComboBox;
  dtype_->addItems({"float", "half", "bfloat16", "double", "int8", "uint8", "int32", "uint32", "int64", "uint64"});
  op_ = new QComboBox;
  op_->addItems({"sum", "prod", "max", "min", "avg"});
  algo_ = new QComboBox;
  algo_->addItems({"tuner", "Ring", "Tree"});
  proto_ = new QComboBox;
  proto_->addItems({"tuner", "LL", "Simple"});
  channels_ = new QSpinBox;
  channels_->setRange(0, 64);
  channels_->setSpecialValueText("tuner");
  engine_ = new QComboBox;
  engine_->addItems({"Ringmaster", "NCCL", "Ringmaster, then NCCL"});
  engine_->setToolTip(
      "NCCL: the same sweep through NCCL on each agent's GPUs (ringmaster-nccl-perf; float sums). Ringmaster, then "
      "NCCL: both runs, one after the other, compared size by size in History");
  form->addRow("Engine", engine_);
  form->addRow("Collective", collective_);
  form->addRow("Min bytes (-b)", min_bytes_);
  form->addRow("Max bytes (-e)", max_bytes_);
  form->addRow("Step factor (-f)", factor_);
  form->addRow("Iterations (-n)", iters_);
  form->addRow("Data type (-d)", dtype_);
  form->addRow("Operation (-o)", op_);
  form->addRow("Algorithm", algo_);
  form->addRow("Protocol", proto_);
  form->addRow("Channels", channels_);
  form->addRow("Ranks per agent", per_agent_);
  form->addRow("World size", world_);
  allow_mixed_ = new QCheckBox("Allow nodes that differ");
  allow_mixed_->setObjectName("allowMixedNodes");
  allow_mixed_->setToolTip(
      "Launch although the agents' nodes load different NCCL, libfabric or driver versions or give their ranks "
      "different NCCL_* settings (refused otherwise, naming the nodes and the difference)");
  form->addRow("Node gate", allow_mixed_);
  // Each field is named by its row's label for screen readers.
  for (int row = 0; row < form->rowCount(); ++row) {
    auto* label = qobject_cast<QLabel*>(form->itemAt(row, QFormLayout::LabelRole)->widget());
    QWidget* field = form->itemAt(row, QFormLayout::FieldRole)->widget();
    if (label && field) field->setAccessibleName(label->text());
  }
  return form;
}

RunSpec MainWindow::run_spec() const {
  RunSpec s;
  s.collective = collective_->currentText();
  s.min_bytes = min_bytes_->text();
  s.max_bytes = max_bytes_->text();
  s.step_factor = factor_->value();
  s.iters = iters_->value();
  s.ranks_per_agent = per_agent_->value();
  s.world_size = world_->value();
  s.dtype = dtype_->currentText();
  s.op = op_->currentText();
  s.algo = algo_->currentIndex() == 0 ? QString() : algo_->currentText();
  s.proto = proto_->currentIndex() == 0 ? QString() : proto_->currentText();
  s.channels = channels_->value();
  s.engine = kEngines[engine_->currentIndex()];
  s.allow_mixed_nodes = allow_mixed_->isChecked();
  return s;
}

void MainWindow::set_run_spec(const RunSpec& s) {
  collective_->setCurrentText(s.collective);
  min_bytes_->setText(s.min_bytes);
  max_bytes_->setText(s.max_bytes);
  factor_->setValue(s.step_factor);
  iters_->setValue(s.iters);
  per_agent_->setValue(s.ranks_per_agent);
  world_->setValue(s.world_size);
  dtype_->setCurrentText(s.dtype);
  op_->setCurrentText(s.op);
  algo_->setCurrentText(s.algo.isEmpty() ? "tuner" : s.algo);
  proto_->setCurrentText(s.proto.isEmpty() ? "tuner" : s.proto);
  channels_->setValue(s.channels);
  engine_->setCurrentIndex(std::max(0, static_cast<int>(kEngines.indexOf(s.engine))));
  allow_mixed_->setChecked(s.allow_mixed_nodes);
}

void MainWindow::start_run() {
  detail_->clear();
  source_.clear();
  console_.start_run(run_spec());
  tabs_->setCurrentIndex(0);
}

void MainWindow::set_source(const QString& what) {
  source_ = what;
  update_status();
}

void MainWindow::show_cause() {
  const QString text = console_.run.cause_text();
  if (text.isEmpty()) return;
  detail_->setPlainText(text);
  tabs_->setCurrentIndex(0);
  // The chart has nothing to show for a run that did not start: its room
  // goes to the cause, the timeline keeps what it needs.
  if (console_.run.samples() > 0) return;
  const QList<int> sizes = live_->sizes();
  int total = 0;
  for (int h : sizes)
    total += h;
  if (total <= 0) total = live_->height();
  const int timeline = std::clamp(total * 2 / 5, std::min(timeline_->minimumHeight(), total / 2), total / 2);
  live_->setSizes({0, timeline, total - timeline});
  live_folded_ = true;
}

void MainWindow::update_status() {
  const int agents = console_.agents.rowCount();
  if (agents == 0 && !source_.isEmpty()) {
    status_agents_->setText(source_);
  } else {
    status_agents_->setText(QString("%1 of %2 agents connected").arg(console_.connected_count()).arg(agents) +
                            (source_.isEmpty() ? QString() : " · shown: " + source_));
  }
  const auto& run = console_.run;
  if (run.run_id().isEmpty()) {
    status_run_->setText("no run");
  } else if (run.running()) {
    QString text = QString("run %1: %2 ranks, running, %3 rows")
                       .arg(run.run_id())
                       .arg(run.world_size())
                       .arg(run.results.rowCount());
    if (run.wavefront.report()) text += "; STALLED (see Wavefront)";
    status_run_->setText(text);
  } else {
    QString text = QString("run %1: %2").arg(run.run_id(), run.ok() ? "done" : "FAILED");
    if (const auto& cause = run.cause()) {
      text += QString(" at %1 on rank %2")
                  .arg(stage_names().value(static_cast<int>(cause->failure.stage)))
                  .arg(cause->rank);
      if (!cause->failure.remote.empty()) text += " (" + QString::fromStdString(cause->failure.remote) + ")";
    }
    if (run.results.rowCount() > 0) {
      text += QString(" (%1 rows, avg busbw %2 GB/s)")
                  .arg(run.results.rows_seen())
                  .arg(run.results.average_busbw(), 0, 'f', 2);
    } else {
      text += ", no result rows";
    }
    if (!run.slow_links().isEmpty()) text += "; slow link: " + run.slow_links().front();
    status_run_->setText(text);
  }
  run_button_->setEnabled(!run.running());
}

void MainWindow::show_stage_detail(int rank, int stage) {
  if (rank < 0 || rank >= console_.run.timeline.ranks() || stage < 0 || stage >= stage_names().size()) return;
  const auto& c = console_.run.timeline.cell(rank, stage);
  detail_->setPlainText(QString("rank %1, %2: %3 (%4 ms)\n%5")
                            .arg(rank)
                            .arg(stage_names()[stage])
                            .arg(!c.seen  ? "not reached"
                                 : c.live ? "retrying"
                                 : c.ok   ? "ok"
                                          : "FAILED")
                            .arg(c.duration_ms, 0, 'f', 3)
                            .arg(c.live ? c.live_text : c.detail));
}

void MainWindow::show_selected_topology() {
  const auto rows = agents_view_->selectionModel() ? agents_view_->selectionModel()->selectedRows() : QModelIndexList{};
  const int row = rows.isEmpty() ? 0 : rows.front().row();
  if (row >= console_.agents.rowCount()) return;
  if (const agent::Inventory* inventory = console_.agents.inventory(row))
    topology_->show_topology(console_.agents.address(row), inventory->topology);
}

bool MainWindow::save_screenshot(const QString& path) {
  return grab().save(path, "PNG");
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  event->accept();
}

}  // namespace ringmaster::ui
