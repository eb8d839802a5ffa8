#include "about.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QUrl>
#include <QtGlobal>

#include "ringmaster/version.h"

namespace ringmaster::ui {

QString about_text() {
  QString rows = QString("<tr><td>Ringmaster</td><td>%1</td></tr>").arg(RINGMASTER_VERSION_STRING);
  rows += QString("<tr><td>Qt</td><td>%1 (built with %2)</td></tr>").arg(qVersion(), QT_VERSION_STR);
  for (const auto& [name, version] : component_versions()) {
    rows += QString("<tr><td>%1</td><td>%2</td></tr>")
                .arg(QString::fromStdString(name), QString::fromStdString(version).toHtmlEscaped());
  }
  const QString guide = guide_path();
  return QString(
             "<h3>Ringmaster console</h3>"
             "<p>Topology, live per-channel bandwidth, the engine's choices and the rendezvous timeline of "
             "collective runs on the agents of a cluster.</p>"
             "<table cellspacing='6'>%1</table>%2")
      .arg(rows, guide.isEmpty() ? QString()
                                 : QString("<p>Guide: <a href='%1'>%2</a></p>")
                                       .arg(QUrl::fromLocalFile(guide).toString(), guide.toHtmlEscaped()));
}

QString scenario_catalog_path() {
  const QFileInfo installed(QDir(QCoreApplication::applicationDirPath()).filePath(RINGMASTER_SCENARIOS_FROM_BIN));
  return installed.isDir() ? installed.canonicalFilePath() : QString(RINGMASTER_SCENARIO_DIR);
}

QString guide_path() {
  const QDir bin(QCoreApplication::applicationDirPath());
  for (const QString& candidate :
       {bin.filePath(RINGMASTER_DOC_FROM_BIN "/console.md"), QString(RINGMASTER_SOURCE_DOC_DIR "/console.md")}) {
    if (QFileInfo(candidate).isReadable()) return QFileInfo(candidate).canonicalFilePath();
  }
  return {};
}

}  // namespace ringmaster::ui
