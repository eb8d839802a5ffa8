// The agent's control-port input as a client can send it: bytes cut into
// frames by the frame decoder (fed in two pieces, as TCP may deliver them),
// each frame's JSON checked for depth and against the message schema, as
// the agent does before it acts on a message, and a fault's spec and a
// run read as the agent reads them. Nothing may crash, hang or
// leak; every frame is either a message or a clear refusal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ringmaster/agent/fault.h"
#include "ringmaster/agent/protocol.h"
#include "ringmaster/agent/requests.h"
#include "ringmaster/status.h"
#include "run_env.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringmaster::agent;
  const char* bytes = reinterpret_cast<const char*>(data);
  const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  for (const std::uint32_t limit : {std::uint32_t{4096}, kMaxFrameBytes}) {  // before and after auth
    FrameDecoder decoder(limit);
    try {
      decoder.feed(bytes, cut);
      decoder.feed(bytes + cut, size - cut);
      for (int frames = 0; frames < 1024; ++frames) {
        auto message = decoder.next();
        if (!message) break;
        if (check_client_message(*message)) continue;
        // A fault's spec, as the agent reads it next: a clear refusal or a
        // spec that writes back and reads again the same.
        if ((*message)["type"] == "fault") {
          try {
            const FaultSpec f = parse_fault((*message)["fault"]);
            if (to_json(parse_fault(to_json(f))) != to_json(f)) __builtin_trap();
            (void)describe(f);
          } catch (const ringmaster::Error&) {
          }
        }
        // A run as the agent reads it next: a clear refusal or a request
        // that writes back and reads again the same; then its id and
        // environment, as the agent checks them.
        if ((*message)["type"] == "run") {
          try {
            const RunRequest run = RunRequest::parse(*message);
            if (!(RunRequest::parse(run.to_json()) == run)) __builtin_trap();
          } catch (const ringmaster::Error&) {
          }
          try {
            check_run_id((*message)["run_id"].get<std::string>());
            if (message->contains("env")) (void)checked_run_env((*message)["env"], "/nonexistent/runs/fuzz");
          } catch (const ringmaster::Error&) {
          }
        }
      }
      if (decoder.pending() > 0) (void)decoder.truncation();
    } catch (const ringmaster::Error&) {
      // A refused frame: the agent answers and closes this connection.
    }
  }
  (void)json_depth(std::string_view(bytes, size), kMaxJsonDepth);
  return 0;
}
