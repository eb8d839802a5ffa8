// Messages from agents, their events read where they arrive.
#include "models/agent_message.h"

#include "ringmaster/status.h"

namespace ringmaster::ui {

AgentMessage agent_message(QString agent, nlohmann::json body) {
  AgentMessage m{std::move(agent), nullptr, nullptr, nullptr};
  try {
    if (auto e = agent::events::parse_event_message(body, agent::events::Body::drop)) {
      m.event = std::make_shared<const agent::events::EventMessage>(std::move(*e));
    }
  } catch (const Error&) {
    // Read again, and reported, by the run it belongs to.
  }
  if (m.event && std::holds_alternative<agent::events::Sample>(m.event->event)) {
    m.text = std::make_shared<const std::string>(body.dump());
  } else {
    m.body = std::make_shared<const nlohmann::json>(std::move(body));
  }
  return m;
}

nlohmann::json AgentMessage::json() const {
  if (body) return *body;
  if (text) return nlohmann::json::parse(*text, nullptr, false);
  return nullptr;
}

}  // namespace ringmaster::ui
