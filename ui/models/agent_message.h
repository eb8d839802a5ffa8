// One message from one agent, as the console's models receive it.
#pragma once

#include <QMetaType>
#include <QString>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ringmaster/agent/events.h"

namespace ringmaster::ui {

// One message from one agent, as it crosses from the agent's I/O thread to
// the GUI thread (a queued signal argument: cheap to copy, immutable).
struct AgentMessage {
  QString agent;  // host:port
  // The message; null for a `sample` event, whose text is kept instead.
  std::shared_ptr<const nlohmann::json> body;
  // The body's event, read on the thread that received it; null when the
  // body is no event message or did not read (the GUI thread reads it
  // again and reports what was wrong). 2,048 ranks' samples at 10 Hz took
  // the GUI thread 14 ms a tick to read.
  std::shared_ptr<const agent::events::EventMessage> event;
  // A sample's message as compact JSON text, made on the thread that
  // received it, which also frees its JSON tree: freeing the trees of
  // 2,048 samples a tick cost the GUI thread more than applying them.
  std::shared_ptr<const std::string> text;
  // The message as JSON: the body, or the text read again.
  nlohmann::json json() const;
  bool empty() const { return !body && !text; }
};

// A message with its event read beside it (a sample's kept as text).
AgentMessage agent_message(QString agent, nlohmann::json body);

}  // namespace ringmaster::ui

Q_DECLARE_METATYPE(ringmaster::ui::AgentMessage)
