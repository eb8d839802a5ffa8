// Messages from agents, their events read where they arrive.
#include "models/agent_message.h"

#include "ringmaster/status.h"

namespace ringmaster::ui {

AgentMessage agent_message(QString agent, nlohmann::json body) {
  AgentMessage m{std::move(agent), std::make_shared<const nlohmann::json>(std::move(body)), nullptr};
  try {
    if (auto e = agent::events::parse_event_message(*m.body, agent::events::Body::drop)) {
      m.event = std::make_shared<const agent::events::EventMessage>(std::move(*e));
    }
  } catch (const Error&) {
    // Read again, and reported, by the run it belongs to.
  }
  return m;
}

}  // namespace ringmaster::ui
