// Help > About and Help > Console guide: what this console runs on (its
// own version and those of Qt, hwloc and libfabric, as loaded) and where
// its documentation and scenario catalog lie, installed or in the source
// tree.
#pragma once

#include <QString>

namespace ringmaster::ui {

// Rich text for the About box.
QString about_text();
// The console's guide (console.md): the installed copy beside the binary
// (../share/doc/ringmaster), else the source tree's; empty when neither.
QString guide_path();
// The scenario catalog: installed beside the binary
// (../share/ringmaster/scenarios), else the source tree's.
QString scenario_catalog_path();

}  // namespace ringmaster::ui
