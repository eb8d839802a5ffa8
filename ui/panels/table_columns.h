// Table columns sized when rows come or go, not at every change of a value.
#pragma once

#include <initializer_list>

#include <QString>
#include <functional>

QT_BEGIN_NAMESPACE
class QTableView;
QT_END_NAMESPACE

namespace ringmaster::ui {

// Sizes `view`'s columns to their text (its first 64 rows and the header)
// a moment after its model's rows come or go or it is reset, and leaves
// them when only values change: sized to contents, a table measures its
// rows' text again at every change of a value, which a table streaming
// values (NIC rates, 2,048 ranks' stages) does many times a second,
// shown or not. `widest` (may be empty) gives, per column, the widest
// text it may show later, e.g. "888.88 Mb/s": its column is never
// narrower. Call after the view's model is set.
void fit_columns_when_rows_change(QTableView* view, std::function<QString(int column)> widest = {});

// A table for a narrow window: its columns shown in `order` (model column
// numbers, the decisive first), text elided in the middle, one line a row.
void put_columns_first(QTableView* view, std::initializer_list<int> order);

}  // namespace ringmaster::ui
