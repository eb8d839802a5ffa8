#include "panels/chart_palette.h"

#include <QAbstractAxis>
#include <QChart>
#include <QLegend>

namespace ringmaster::ui {

void follow_palette(QChart* chart, const QPalette& palette) {
  const QColor text = palette.color(QPalette::Text);
  QColor grid = palette.color(QPalette::Mid);
  chart->setBackgroundBrush(palette.base());
  chart->setPlotAreaBackgroundVisible(false);
  chart->setTitleBrush(text);
  chart->legend()->setLabelColor(text);
  for (QAbstractAxis* axis : chart->axes()) {
    axis->setLabelsBrush(text);
    axis->setTitleBrush(text);
    axis->setLinePenColor(text);
    axis->setGridLineColor(grid);
    axis->setMinorGridLineColor(grid.darker(120));
  }
}

}  // namespace ringmaster::ui
