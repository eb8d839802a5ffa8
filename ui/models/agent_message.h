// One message from one agent, as the console's models receive it.
#pragma once

#include <QMetaType>
#include <QString>
#include <memory>
#include <nlohmann/json.hpp>

namespace ringmaster::ui {

// One message from one agent, as it crosses from the agent's I/O thread to
// the GUI thread (a queued signal argument: cheap to copy, immutable).
struct AgentMessage {
  QString agent;  // host:port
  std::shared_ptr<const nlohmann::json> body;
};

}  // namespace ringmaster::ui

Q_DECLARE_METATYPE(ringmaster::ui::AgentMessage)
