// Certify's checklist (docs/certify.md) for the console's Bring-up tab:
// one row per step in its order, each waiting, running, or with its
// result and summary as it ends; the whole report (certify's JSON) once
// the certification is over.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>

#include <nlohmann/json.hpp>

#include <vector>

#include "ringmaster/agent/certify.h"

namespace ringmaster::ui {

class CertifyModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { step_column, result_column, summary_column, column_count };

  explicit CertifyModel(QObject* parent = nullptr);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

  // A certification begins: every step waiting, the last report gone;
  // `resumed` steps come from a certification stopped half way.
  void begin(int resumed = 0);
  int resumed_steps() const { return resumed_; }
  // A step began (`ended` false) or ended with its result.
  void set_step(const agent::CertifyStep& step, bool ended);
  // It is over: the report as certify's JSON (to_json).
  void finish(nlohmann::json report);
  // A certification finished before (the history's): every step as the
  // report has it, then the report.
  void show_report(nlohmann::json report);

  // The step's name in `row` ("nodes", "preflight", ...), and what it found.
  QString step_name(int row) const;
  QStringList findings(int row) const;
  // "waiting", "running", "passed", "found", "failed", "skipped".
  QString state(int row) const;
  const nlohmann::json& report() const { return report_; }
  // "ISOLATE: 8 node(s) in 34.0 s", "running: preflight", or "" before
  // any; a resumed certification says how many steps it kept.
  QString verdict_text() const;

 private:
  struct Row {
    QString name, title, state = "waiting", summary;
    QStringList findings;
    double seconds = 0;
  };
  std::vector<Row> rows_;
  nlohmann::json report_;
  int resumed_ = 0;
};

}  // namespace ringmaster::ui
