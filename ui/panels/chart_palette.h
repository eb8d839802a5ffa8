// Qt Charts draw with their own theme, white whatever the application's
// palette: this gives a chart the palette's colours (background, text,
// grid), for the dark palette as for the light one.
#pragma once

#include <QPalette>

QT_BEGIN_NAMESPACE
class QChart;
QT_END_NAMESPACE

namespace ringmaster::ui {

void follow_palette(QChart* chart, const QPalette& palette);

}  // namespace ringmaster::ui
