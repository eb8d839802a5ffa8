#include "store/protocol.h"

#include <array>

namespace ringmaster::store {

std::string_view name_of(Command c) noexcept {
  static constexpr std::array<std::string_view, kMaxCommand + 1> names = {
      "VALIDATE",    "SET",        "COMPARE_SET", "GET",       "ADD",       "CHECK",
      "WAIT",        "GETNUMKEYS", "DELETE_KEY",  "APPEND",    "MULTI_GET", "MULTI_SET",
      "CANCEL_WAIT", "PING",       "QUEUE_PUSH",  "QUEUE_POP", "QUEUE_LEN", "LIST_KEYS"};
  const auto i = static_cast<std::size_t>(c);
  return i < names.size() ? names[i] : std::string_view("UNKNOWN");
}

}  // namespace ringmaster::store
