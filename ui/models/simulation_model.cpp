// simulation_model
#include "models/simulation_model.h"

#include "models/text.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/simulate.h"

namespace ringmaster::ui {

namespace {

enum Column { kSize, kMeasured, kTime, kBusbw, kRatio, kPick, kColumns };

}  // namespace

int SimulationModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int SimulationModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumns;
}

QVariant SimulationModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  static const char* names[] = {
      "size (B)",      "measured busbw (GB/s)", "simulated time (us)", "simulated busbw (GB/s)", "simulated / measured",
      "simulated pick"};
  return section >= 0 && section < kColumns ? QString(names[section]) : QVariant();
}

QVariant SimulationModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  if (role == Qt::TextAlignmentRole)
    return index.column() == kPick ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kSize:
      return size_text(r.bytes);
    case kMeasured:
      return r.measured_busbw < 0 ? QString() : QString::number(r.measured_busbw, 'f', 2);
    case kTime:
      return QString::number(r.time_us, 'f', 1);
    case kBusbw:
      return QString::number(r.busbw, 'f', 2);
    case kRatio:
      return r.measured_busbw > 0 ? QString("%1x").arg(r.busbw / r.measured_busbw, 0, 'f', 1) : QString();
    case kPick:
      return r.pick;
    default:
      return {};
  }
}

QStringList SimulationModel::instances() {
  QStringList out;
  for (const auto& p : tune::instance_profiles())
    out << qs(p.name);
  return out;
}

void SimulationModel::clear() {
  beginResetModel();
  rows_.clear();
  title_.clear();
  endResetModel();
}

bool SimulationModel::simulate(const QString& instance, int nodes, const ResultsModel& measured, QString* error) {
  auto fail = [&](const QString& why) {
    if (error) *error = why;
    return false;
  };
  if (nodes < 1 || nodes > 4096) return fail(QString("nodes %1: expected 1 to 4096").arg(nodes));
  // The run's collective and type, and its sizes (out of place).
  std::string collective_name = "all_reduce", type_name = "float";
  std::vector<std::pair<std::uint64_t, double>> sizes;
  for (int i = 0; i < measured.rowCount(); ++i) {
    const auto& row = measured.row(i);
    if (!row.candidate.empty()) continue;  // perf --candidates: the tuner's own row only
    if (sizes.empty()) {
      collective_name = row.collective;
      type_name = row.dtype;
    }
    if (row.collective == collective_name && row.dtype == type_name)
      sizes.emplace_back(row.bytes, row.out_of_place.busbw);
  }
  if (sizes.empty()) {
    for (std::uint64_t b = 8; b <= (1ULL << 30); b *= 4)
      sizes.emplace_back(b, -1.0);
  }
  const auto type = parse_data_type(type_name);
  if (!type) return fail(QString("data type %1 is not one the simulator knows").arg(QString::fromStdString(type_name)));
  std::vector<Row> rows;
  QString title;
  try {
    const Collective collective = tune::simulated_collective(collective_name);
    const auto& profile = tune::instance_profile(instance.toStdString());
    const tune::Shape shape = tune::instance_shape(profile, nodes);
    const tune::Tuner tuner(shape);
    for (const auto& [bytes, busbw] : sizes) {
      const auto simulated = tune::simulate(tuner, collective, *type, bytes, bytes, 2);
      if (simulated.empty()) continue;
      const auto& s = simulated.front();
      rows.push_back({bytes, busbw, s.time_us, s.busbw_gbs,
                      QString("%1/%2 on %3 channel(s)")
                          .arg(qs(tune::algorithm_name(s.pick)), qs(name_of(s.pick.protocol)))
                          .arg(s.pick.channels)});
    }
    title = QString("%1 x %2 (%3 ranks, %4 EFA x %5 Gbit/s each): %6 %7")
                .arg(nodes)
                .arg(instance)
                .arg(nodes * profile.gpus)
                .arg(profile.nics)
                .arg(profile.nic_gbits)
                .arg(QString::fromStdString(collective_name), QString::fromStdString(type_name));
  } catch (const Error& e) {
    return fail(QString::fromStdString(e.status().message()));
  }
  beginResetModel();
  rows_ = std::move(rows);
  title_ = title;
  endResetModel();
  return true;
}

}  // namespace ringmaster::ui
