#include "watch_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include "models/console.h"
#include "timeline_view.h"

namespace ringmaster::ui {

WatchPanel::WatchPanel(Console& console, QWidget* parent) : QWidget(parent), console_(console) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  by_ = new QComboBox;
  by_->addItems({"run id", "master port", "pids"});
  by_->setAccessibleName("Name the job by");
  by_->setToolTip("TORCHELASTIC_RUN_ID (torchrun's --rdzv-id), MASTER_PORT, or process ids on the agents' nodes");
  value_ = new QLineEdit;
  value_->setObjectName("watchJob");
  value_->setPlaceholderText("e.g. job-7, 29500, or 4101 4102");
  value_->setAccessibleName("The job");
  flight_recorder_ = new QCheckBox("Flight Recorder");
  flight_recorder_->setObjectName("watchFlightRecorder");
  flight_recorder_->setToolTip(
      "Ask torch's debug server for the ranks' Flight Recorder and name the ranks behind "
      "(the job runs with TORCH_FR_BUFFER_SIZE and start_debug_server())");
  nccl_log_ = new QCheckBox("NCCL log");
  nccl_log_->setObjectName("watchNcclLog");
  nccl_log_->setToolTip("Read each rank's NCCL_DEBUG_FILE (NCCL_DEBUG=INFO)");
  nccl_ras_ = new QCheckBox("NCCL RAS");
  nccl_ras_->setObjectName("watchNcclRas");
  nccl_ras_->setToolTip(
      "Ask NCCL's RAS port on each node (NCCL_RAS_ADDR, localhost:28028) for dead, missing and "
      "lagging ranks");
  minutes_ = new QSpinBox;
  minutes_->setRange(1, 1440);
  minutes_->setValue(60);
  minutes_->setSuffix(" min");
  minutes_->setAccessibleName("Watch for");
  attach_ = new QPushButton("Attach to job");
  attach_->setObjectName("watchAttach");
  attach_->setToolTip("Every connected agent watches the job's processes on its node, as the job's own user");
  stop_ = new QPushButton("Stop watching");
  stop_->setObjectName("watchStop");
  stop_->setEnabled(false);
  row->addWidget(new QLabel("Job by"));
  row->addWidget(by_);
  row->addWidget(value_, 1);
  row->addWidget(flight_recorder_);
  row->addWidget(nccl_log_);
  row->addWidget(nccl_ras_);
  row->addWidget(new QLabel("for"));
  row->addWidget(minutes_);
  row->addWidget(attach_);
  row->addWidget(stop_);
  layout->addLayout(row);
  summary_ = new QLabel(
      "Attach to a job this console did not launch. Watched, not launched: the console never kills or signals it; "
      "with Flight Recorder on, it only asks torch's debug server for its records.");
  summary_->setObjectName("watchSummary");
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
  auto* split = new QSplitter(Qt::Vertical);
  table_ = new QTableView;
  table_->setObjectName("watchTable");
  table_->setModel(&console_.watched);
  table_->setAccessibleName("The watched job's processes: where each one's rendezvous stands");
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->hide();
  table_->setWordWrap(false);
  split->addWidget(table_);
  // The ranks' rendezvous over time, drawn as the Stages tab draws a run's.
  timeline_ = new TimelineView(console_.watched.timeline);
  timeline_->setObjectName("watchTimeline");
  timeline_->setAccessibleName("The watched job's rendezvous over time, a row a rank");
  timeline_->setMinimumHeight(120);
  split->addWidget(timeline_);
  detail_ = new QPlainTextEdit;
  detail_->setObjectName("watchDetail");
  detail_->setReadOnly(true);
  detail_->setPlaceholderText("Click a process for what its sockets say and the hint");
  detail_->setAccessibleName("The selected process: what its sockets say and the hint");
  split->addWidget(detail_);
  notes_ = new QPlainTextEdit;
  notes_->setObjectName("watchNotes");
  notes_->setReadOnly(true);
  notes_->setAccessibleName("Wavefront, NCCL logs and the agents' answers");
  split->addWidget(notes_);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 1);
  split->setStretchFactor(3, 2);
  layout->addWidget(split, 1);

  connect(attach_, &QPushButton::clicked, this, [this] { attach(); });
  connect(value_, &QLineEdit::returnPressed, this, [this] { attach(); });
  connect(stop_, &QPushButton::clicked, this, [this] {
    console_.stop_watch();
    stop_->setEnabled(false);
    summary_->setText("Stopped watching (the job itself goes on).");
  });
  connect(&console_.watched, &JobWatchModel::notes_changed, this, &WatchPanel::show_notes);
  // A handful of rows: fitted to their text each time one comes or changes.
  auto fit = [this] { QTimer::singleShot(0, table_, [this] { table_->resizeColumnsToContents(); }); };
  connect(&console_.watched, &QAbstractItemModel::rowsInserted, this, fit);
  connect(&console_.watched, &QAbstractItemModel::modelReset, detail_, &QPlainTextEdit::clear);
  connect(&console_.watched, &QAbstractItemModel::dataChanged, this, fit);
  // A selected row's hint in full.
  connect(table_, &QTableView::clicked, this, [this](const QModelIndex& index) {
    const auto& r = console_.watched.rank_at(index.row());
    detail_->setPlainText(QString("rank %1 (pid %2): %3%4")
                              .arg(r.rank)
                              .arg(r.pid)
                              .arg(QString::fromStdString(r.error.empty() ? r.detail : r.error),
                                   r.hint.empty() ? QString() : "\n\n" + QString::fromStdString(r.hint)));
  });
}

void WatchPanel::set_job(const QString& by, const QString& value) {
  by_->setCurrentText(by);
  value_->setText(value);
}

bool WatchPanel::attach() {
  agent::WatchRequest request;
  const QString text = value_->text().trimmed();
  bool ok = !text.isEmpty();
  if (by_->currentText() == "run id") {
    request.job_run_id = text.toStdString();
  } else if (by_->currentText() == "master port") {
    const int port = text.toInt(&ok);
    ok = ok && port > 0 && port < 65536;
    request.master_port = port;
  } else {
    for (const QString& word : text.split(QRegularExpression("[\\s,]+"), Qt::SkipEmptyParts)) {
      const int pid = word.toInt(&ok);
      if (!ok || pid <= 0) break;
      request.pids.push_back(pid);
    }
    ok = ok && !request.pids.empty();
  }
  if (!ok) {
    summary_->setText(QString("Not a %1: '%2'").arg(by_->currentText(), text));
    return false;
  }
  request.duration_s = minutes_->value() * 60.0;
  request.flight_recorder = flight_recorder_->isChecked();
  request.nccl_log = nccl_log_->isChecked();
  request.nccl_ras = nccl_ras_->isChecked();
  QString why;
  if (!console_.start_watch(request, &why)) {
    summary_->setText("Cannot attach: " + why);
    return false;
  }
  stop_->setEnabled(true);
  summary_->setText(QString("Watching the job with %1 %2 through %3 agent(s). Watched, not launched: the console never "
                            "kills or signals it; with Flight Recorder on, it only asks torch's debug server for "
                            "its records.")
                        .arg(by_->currentText(), text)
                        .arg(console_.connected_count()));
  return true;
}

void WatchPanel::show_notes() {
  notes_->setPlainText(console_.watched.notes().join("\n"));
}

}  // namespace ringmaster::ui
