#include "job_watch_model.h"

#include <QBrush>
#include <QColor>
#include <QDateTime>
#include <algorithm>
#include <type_traits>
#include <variant>

namespace ringmaster::ui {

namespace ev = agent::events;

int JobWatchModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int JobWatchModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumns;
}

QVariant JobWatchModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[kColumns] = {"Agent", "Rank", "PID", "Stage", "Outcome", "What its sockets say"};
  return section >= 0 && section < kColumns ? QVariant(names[section]) : QVariant();
}

QVariant JobWatchModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const auto& [agent, r] = rows_[static_cast<std::size_t>(index.row())];
  if (role == Qt::ToolTipRole) {
    return r.error.empty() ? QString::fromStdString(r.hint.empty() ? r.detail : r.detail + "\n\n" + r.hint)
                           : QString::fromStdString(r.error);
  }
  if (role == Qt::ForegroundRole && index.column() == kOutcome) {
    if (r.outcome == "unanswered" || r.outcome == "rejected" || r.outcome == "refused" || !r.error.empty())
      return QBrush(QColor(0xc6, 0x28, 0x28));
    if (r.outcome == "hosting" || r.outcome == "connected") return QBrush(QColor(0x2e, 0x7d, 0x32));
    return {};
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kAgent:
      return agent;
    case kRank:
      return r.rank >= 0 ? QVariant(r.rank) : QVariant("?");
    case kPid:
      return r.pid;
    case kStage:
      return r.error.empty() ? QString::fromStdString(std::string(name_of(r.stage))) : QString();
    case kOutcome:
      return r.error.empty() ? QString::fromStdString(r.outcome) : QString("unreadable");
    case kDetail:
      return QString::fromStdString(r.error.empty() ? r.detail : r.error);
    default:
      return {};
  }
}

void JobWatchModel::start(const QString& watch_id) {
  beginResetModel();
  watch_id_ = watch_id;
  rows_.clear();
  timeline.reset(0);
  stage_of_.clear();
  answers_.clear();
  wavefront_.clear();
  nccl_.clear();
  ras_.clear();
  ends_.clear();
  ended_ = 0;
  endResetModel();
  compose();
}

void JobWatchModel::note(const QString& line) {
  answers_.push_back(line);
  compose();
}

void JobWatchModel::compose() {
  notes_ = answers_;
  for (const auto& [agent, lines] : wavefront_) {
    for (const auto& line : lines)
      notes_.push_back(QString("%1: wavefront: %2").arg(agent, QString::fromStdString(line)));
  }
  for (const auto& [_, line] : nccl_)
    notes_.push_back(line);
  for (const auto& [_, line] : ras_)
    notes_.push_back(line);
  notes_ += ends_;
  emit notes_changed();
}

void JobWatchModel::to_timeline(const ev::JobRank& e) {
  if (!e.error.empty() || e.rank < 0) return;
  if (timeline.ranks() == 0) timeline.reset(std::max({e.world_size, e.rank + 1, 1}));
  if (e.rank >= timeline.ranks()) return;
  const long long now_us = QDateTime::currentMSecsSinceEpoch() * 1000;
  auto [seen, first] = stage_of_.try_emplace(e.rank, Since{e.stage, now_us, e.detail});
  Since& at = seen->second;
  if (!first && e.stage != at.stage) {
    // It moved on: the stage it was in ended when it was seen in the next.
    ev::StageEnded ended;
    ended.stage = at.stage;
    ended.rank = e.rank;
    ended.ok = true;
    ended.begin_us = at.since_us;
    ended.duration_ms = static_cast<double>(now_us - at.since_us) / 1000;
    ended.detail = at.detail;
    timeline.add_stage(e.rank, ended);
    at = Since{e.stage, now_us, e.detail};
  }
  at.detail = e.detail;
  ev::StageProgress progress;
  progress.stage = e.stage;
  progress.rank = e.rank;
  progress.outcome = e.outcome;
  progress.remote = e.remote;
  progress.attempts = e.syn_retransmits;
  progress.begin_us = at.since_us;
  progress.elapsed_ms = static_cast<double>(now_us - at.since_us) / 1000;
  progress.detail = "watched: " + e.outcome + ": " + e.detail;
  timeline.add_progress(e.rank, progress);
}

void JobWatchModel::apply(const QString& agent, const ev::Event& event) {
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, ev::JobRank>) {
          to_timeline(e);
          for (std::size_t i = 0; i < rows_.size(); ++i) {
            if (rows_[i].first == agent && rows_[i].second.pid == e.pid) {
              rows_[i].second = e;
              emit dataChanged(index(static_cast<int>(i), 0), index(static_cast<int>(i), kColumns - 1));
              return;
            }
          }
          const int row = static_cast<int>(rows_.size());
          beginInsertRows({}, row, row);
          rows_.emplace_back(agent, e);
          endInsertRows();
        } else if constexpr (std::is_same_v<E, ev::JobWavefront>) {
          wavefront_[agent] = e.wavefront;
          compose();
        } else if constexpr (std::is_same_v<E, ev::JobNcclLog>) {
          nccl_[{agent, e.pid}] = QString("%1: rank %2 (pid %3) %4")
                                      .arg(agent)
                                      .arg(e.rank)
                                      .arg(e.pid)
                                      .arg(QString::fromStdString(e.summary));
          compose();
        } else if constexpr (std::is_same_v<E, ev::JobRas>) {
          ras_[agent] = QString("%1: %2").arg(agent, QString::fromStdString(ev::describe(e)));
          compose();
        } else if constexpr (std::is_same_v<E, ev::RankFailed>) {
          ends_.push_back(QString("%1: %2").arg(agent, QString::fromStdString(e.summary)));
          compose();
        } else if constexpr (std::is_same_v<E, ev::RunDone>) {
          ++ended_;
          ends_.push_back(QString("%1: the watcher ended%2").arg(agent, e.cancelled ? " (stopped)" : ""));
          compose();
        }
      },
      event);
}

}  // namespace ringmaster::ui
