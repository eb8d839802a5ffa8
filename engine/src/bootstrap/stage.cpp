#include <fmt/format.h>

#include <array>

#include "ringmaster/tools/bootstrap.h"

namespace ringmaster {

std::string_view name_of(Stage stage) noexcept {
  static constexpr std::array<std::string_view, 11> names = {
      "RESOLVE_MASTER", "STORE_CONNECT",    "STORE_HANDSHAKE", "STORE_BARRIER",     "BOOTSTRAP_LISTEN",
      "BOOTSTRAP_RING", "ADDRESS_EXCHANGE", "TOPOLOGY",        "TRANSPORT_CONNECT", "CALIBRATE",
      "READY"};
  return names[static_cast<std::size_t>(stage)];
}

std::string StageFailure::joined_text() const {
  if (joined < 0) return {};
  std::string text = fmt::format("{}/{} joined", joined, world_size);
  if (!missing.empty()) {
    text += "; missing: ";
    for (std::size_t i = 0; i < missing.size(); ++i) {
      if (i == 8 && missing.size() > 10) {
        text += fmt::format(", ... ({} more)", missing.size() - 8);
        break;
      }
      text += (i > 0 ? ", " : "") + std::to_string(missing[i]);
    }
  }
  return text;
}

std::string StageFailure::to_string() const {
  std::string out = fmt::format("{} failed on rank {}: {}", name_of(stage), rank, summary);
  if (peer_rank >= 0) out += fmt::format("\n  peer rank:  {}", peer_rank);
  if (!local_address.empty()) out += fmt::format("\n  local:      {}", local_address);
  if (!remote_address.empty()) out += fmt::format("\n  remote:     {}", remote_address);
  if (!errno_text.empty()) out += fmt::format("\n  error:      {}", errno_text);
  if (timeout.count() > 0) {
    out +=
        fmt::format("\n  waited:     {:.3f} s of {:.3f} s allowed", elapsed.count() / 1000.0, timeout.count() / 1000.0);
  }
  if (joined >= 0) out += fmt::format("\n  ranks:      {}", joined_text());
  if (!hint.empty()) out += fmt::format("\n  hint:       {}", hint);
  return out;
}

StageError::StageError(StageFailure failure)
    : Error(failure.category, failure.to_string()), failure_(std::move(failure)) {}

}  // namespace ringmaster
