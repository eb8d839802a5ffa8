// What the console's tests share: colours counted in a region of a
// rendered window, and a model proxy that counts the reads of its text.
#pragma once

#include <QIdentityProxyModel>
#include <QImage>
#include <QRect>
#include <set>

#include "models/timeline_model.h"
#include "panels/timeline_view.h"

namespace console_support {

// Distinct colours in a region: a blank area has one or two.
inline int colours(const QImage& image, const QRect& region) {
  std::set<QRgb> seen;
  for (int y = region.top(); y <= region.bottom(); y += 2) {
    for (int x = region.left(); x <= region.right(); x += 2)
      seen.insert(image.pixel(x, y));
  }
  return static_cast<int>(seen.size());
}

// Distinct stage colours painted in a region (every column, every other row):
// each stage seen is a segment at least two pixels wide, however long the
// slowest stage took.
inline int stage_colours(const QImage& image, const QRect& region) {
  std::set<QRgb> palette, seen;
  for (int s = 0; s < ringmaster::ui::stage_names().size(); ++s)
    palette.insert(ringmaster::ui::stage_color(s).rgb());
  for (int y = region.top(); y <= region.bottom(); y += 2) {
    for (int x = region.left(); x <= region.right(); ++x) {
      if (palette.count(image.pixel(x, y))) seen.insert(image.pixel(x, y));
    }
  }
  return static_cast<int>(seen.size());
}

// A model as another model shows it, counting the reads of its text.
struct CountingReads : QIdentityProxyModel {
  mutable int reads = 0;
  QVariant data(const QModelIndex& index, int role) const override {
    if (role == Qt::DisplayRole) ++reads;
    return QIdentityProxyModel::data(index, role);
  }
};

}  // namespace console_support
