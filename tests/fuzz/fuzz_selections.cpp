// The values users type into the environment: NCCL_ALGO and NCCL_PROTO
// (lists, `^` to exclude, per-collective `name:list;` parts) and
// NCCL_SOCKET_IFNAME (prefixes, `^` to exclude, `=` for exact names). The
// input is a value, a newline, then an interface name. A value is taken
// or refused with an error naming the variable; nothing may crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/interfaces.h"
#include "ringmaster/status.h"
#include "ringmaster/tools/tuner.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ringmaster::tune::Selection;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto newline = input.find('\n');
  const std::string spec(input.substr(0, newline));
  const std::string name(newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1));
  for (const auto kind : {Selection::Kind::algorithm, Selection::Kind::protocol}) {
    try {
      const Selection s = Selection::parse(kind, kind == Selection::Kind::algorithm ? "NCCL_ALGO" : "NCCL_PROTO", spec);
      (void)s.allowed_key();
      (void)s.text();
      for (int c = 0; c < 5; ++c) {
        for (int index = 0; index < 3; ++index)
          (void)s.why_not(static_cast<ringmaster::Collective>(c), index);
      }
    } catch (const ringmaster::Error&) {
    }
  }
  (void)ringmaster::net::ifname_matches(spec, name);
  return 0;
}
