#include "models/history.h"

#include <QColor>
#include <QDateTime>
#include <QSqlError>
#include <QSqlQuery>
#include <QVariant>
#include <map>
#include <nlohmann/json.hpp>

#include "models/console.h"
#include "ringmaster/agent/events.h"
#include "ringmaster/status.h"

namespace ringmaster::ui {

using nlohmann::json;

RunHistory::RunHistory(QObject* parent) : QAbstractTableModel(parent) {}

RunHistory::~RunHistory() = default;

bool RunHistory::open(const QString& where, QString* error) {
  const bool opened = db_.open(where, error);
  reload();
  return opened;
}

bool RunHistory::save(const RunState& run, const QString& kind, const QString& what, QString* error) {
  QSqlDatabase db = db_.database();
  auto fail = [&](const QString& why) {
    if (error) *error = why;
    db.rollback();
    return false;
  };
  if (!db.isOpen()) return fail("the history is not open");
  if (run.run_id().isEmpty()) return fail("no run to keep");
  db.transaction();
  QSqlQuery q(db);
  q.prepare("DELETE FROM messages WHERE run_id = ?");
  q.addBindValue(run.run_id());
  if (!q.exec()) return fail(q.lastError().text());
  // DELETE then INSERT: SQLite's INSERT OR REPLACE is not PostgreSQL's.
  q.prepare("DELETE FROM runs WHERE run_id = ?");
  q.addBindValue(run.run_id());
  if (!q.exec()) return fail(q.lastError().text());
  q.prepare(
      "INSERT INTO runs (run_id, started_ms, kind, what, world_size, agents, placement, ok, rows, busbw, "
      "problems) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  q.addBindValue(run.run_id());
  q.addBindValue(run.started_ms());
  q.addBindValue(kind);
  q.addBindValue(what);
  q.addBindValue(run.world_size());
  q.addBindValue(run.agents());
  q.addBindValue(QString::fromStdString(json(run.placement()).dump()));
  q.addBindValue(run.ok() ? 1 : 0);
  q.addBindValue(run.results.rowCount());
  q.addBindValue(run.results.average_busbw());
  QStringList problems = run.problems();
  for (const auto& l : run.slow_links())
    problems << "slow link: " + l;
  q.addBindValue(problems.join("\n"));
  if (!q.exec()) return fail(q.lastError().text());
  q.prepare("INSERT INTO messages (run_id, seq, agent, body) VALUES (?, ?, ?, ?)");
  int seq = 0;
  for (const auto& m : run.messages()) {
    if (!m.body) continue;
    q.addBindValue(run.run_id());
    q.addBindValue(seq++);
    q.addBindValue(m.agent);
    q.addBindValue(QString::fromStdString(m.body->dump()));
    if (!q.exec()) return fail(q.lastError().text());
  }
  if (!db.commit()) return fail(db.lastError().text());
  reload();
  return true;
}

int RunHistory::load(const QString& run_id, RunState& into) const {
  QSqlDatabase db = db_.database();
  if (!db.isOpen()) return -1;
  QSqlQuery q(db);
  q.prepare("SELECT world_size, agents, placement, started_ms FROM runs WHERE run_id = ?");
  q.addBindValue(run_id);
  if (!q.exec() || !q.next()) return -1;
  const json placement = json::parse(q.value(2).toString().toStdString(), nullptr, false);
  into.begin(run_id, q.value(0).toInt(), q.value(1).toInt(),
             placement.is_array() ? placement.get<std::vector<int>>() : std::vector<int>{});
  into.set_started_ms(q.value(3).toLongLong());
  q.prepare("SELECT agent, body FROM messages WHERE run_id = ? ORDER BY seq");
  q.addBindValue(run_id);
  if (!q.exec()) return -1;
  int n = 0;
  while (q.next()) {
    json body = json::parse(q.value(1).toString().toStdString(), nullptr, false);
    if (body.is_discarded()) continue;
    into.apply(agent_message(q.value(0).toString(), std::move(body)));
    ++n;
  }
  return n;
}

QString RunHistory::run_id_at(int row) const {
  return row >= 0 && row < rowCount() ? rows_[static_cast<std::size_t>(row)].run_id : QString();
}

std::vector<RunHistory::Comparison> RunHistory::compare(const QString& run_a, const QString& run_b) const {
  std::map<std::uint64_t, Comparison> by_size;
  QSqlDatabase db = db_.database();
  if (!db.isOpen()) return {};
  for (int side = 0; side < 2; ++side) {
    QSqlQuery q(db);
    q.prepare("SELECT body FROM messages WHERE run_id = ? AND body LIKE '%\"result\"%' ORDER BY seq");
    q.addBindValue(side == 0 ? run_a : run_b);
    if (!q.exec()) continue;
    while (q.next()) {
      const json body = json::parse(q.value(0).toString().toStdString(), nullptr, false);
      std::optional<agent::events::EventMessage> m;
      try {
        m = agent::events::parse_event_message(body);
      } catch (const Error&) {
        continue;  // kept as it came; the run's view names it
      }
      if (!m || m->rank != 0) continue;
      const auto* row = std::get_if<agent::events::Result>(&m->event);
      if (!row) continue;
      auto& c = by_size[row->bytes];
      c.bytes = row->bytes;
      (side == 0 ? c.busbw_a : c.busbw_b) = row->out_of_place.busbw;
    }
  }
  std::vector<Comparison> out;
  for (auto& [bytes, c] : by_size)
    out.push_back(c);
  return out;
}

void RunHistory::reload() {
  beginResetModel();
  rows_.clear();
  QSqlDatabase db = db_.database();
  if (db.isOpen()) {
    QSqlQuery q(db);
    if (q.exec("SELECT run_id, started_ms, kind, what, world_size, ok, rows, busbw, problems FROM runs ORDER BY "
               "started_ms DESC")) {
      while (q.next()) {
        Row r;
        r.run_id = q.value(0).toString();
        r.started_ms = q.value(1).toLongLong();
        r.kind = q.value(2).toString();
        r.what = q.value(3).toString();
        r.world_size = q.value(4).toInt();
        r.ok = q.value(5).toInt() != 0;
        r.rows = q.value(6).toInt();
        r.busbw = q.value(7).toDouble();
        r.problems = q.value(8).toString();
        rows_.push_back(std::move(r));
      }
    }
  }
  endResetModel();
}

int RunHistory::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int RunHistory::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : column_count;
}

QVariant RunHistory::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= column_count) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  if (role == Qt::ToolTipRole) {
    const QString what = r.what + " (run " + r.run_id + ")";
    return r.problems.isEmpty() ? what : what + "\n" + r.problems;
  }
  if (role == Qt::ForegroundRole && index.column() == result_column)
    return r.ok ? QColor(0x2e, 0x7d, 0x32) : QColor(0xc6, 0x28, 0x28);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case started_column:
      return QDateTime::fromMSecsSinceEpoch(r.started_ms).toString("yyyy-MM-dd hh:mm:ss");
    case run_column:
      return r.run_id;
    case kind_column:
      return r.kind;
    case what_column:
      return r.what;
    case ranks_column:
      return r.world_size;
    case result_column:
      return r.ok ? QString("ok") : QString("failed");
    case rows_column:
      return r.rows;
    case busbw_column:
      return QString::number(r.busbw, 'f', 2);
    default:
      return {};
  }
}

QVariant RunHistory::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Started", "Run", "Kind", "What", "Ranks", "Result", "Rows", "Avg busbw (GB/s)"};
  return section >= 0 && section < column_count ? QString(names[section]) : QVariant();
}

}  // namespace ringmaster::ui
