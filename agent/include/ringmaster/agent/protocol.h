// The agent's control protocol, version 1 (docs/protocol.md).
//
// A frame is a u32 big-endian byte count followed by that many bytes of
// JSON, at most 16 MiB. Every message is an object with `type` (string),
// `id` (the sender's integer message number) and `v` (1). Replies name
// the request they answer in `re`. This library is shared by the agent,
// the console and `ringmaster-cli remote`; it has no Qt and no sockets.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ringmaster/version.h"

namespace ringmaster::agent {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::uint32_t kMaxFrameBytes = 16u << 20;
// Before a client has authenticated it may send `auth` only, in a frame of
// at most this many bytes.
inline constexpr std::uint32_t kMaxPreAuthFrameBytes = 4096;
// Objects and arrays nested deeper than this are refused before parsing:
// every message of the protocol needs four levels; printing or freeing a
// value nested a hundred thousand deep overflows the stack.
inline constexpr int kMaxJsonDepth = 32;
inline constexpr std::uint16_t kDefaultPort = 29600;
inline constexpr std::string_view kAgentVersion = RINGMASTER_VERSION_STRING;

// The 4-byte header and the JSON text of `message`.
std::string encode_frame(const nlohmann::json& message);

// Splits a byte stream into messages. Throws Error(protocol) naming the
// problem: a length over the limit (kMaxFrameBytes unless lowered; as soon
// as the header is in), a body nested deeper than kMaxJsonDepth, or a body
// that is not JSON, or JSON that is not an object.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::uint32_t max_frame_bytes = kMaxFrameBytes) : max_frame_(max_frame_bytes) {}
  void set_max_frame_bytes(std::uint32_t bytes) noexcept { max_frame_ = bytes; }
  void feed(const char* data, std::size_t size);
  std::optional<nlohmann::json> next();
  // Bytes of an incomplete frame held back; non-zero at end of stream
  // means the peer sent a truncated frame.
  std::size_t pending() const noexcept { return buffer_.size() - offset_; }
  // "5 of 120 body bytes": how far the frame got when the stream ends now.
  std::string truncation() const;

 private:
  std::string buffer_;
  std::size_t offset_ = 0;
  std::uint32_t max_frame_;
};

// The deepest nesting of objects and arrays in JSON text (brackets inside
// strings do not count); stops counting past `limit`.
int json_depth(std::string_view text, int limit) noexcept;

// The length announced by a 4-byte header.
std::uint32_t frame_length(const unsigned char header[4]) noexcept;

// What is wrong with a message a client sent, or nothing: the common
// fields, a known type, and each field that type needs with its type.
std::optional<std::string> check_client_message(const nlohmann::json& message);

// HMAC-SHA256(key, message) as lowercase hex (OpenSSL).
std::string hmac_sha256_hex(std::string_view key, std::string_view message);
// 32 random bytes as hex, from OpenSSL's CSPRNG.
std::string random_nonce();

// The handshake's two proofs of the token, over both nonces and, under
// TLS, the session's exported keying material (`binding`, hex; empty
// without TLS), so a proof taken from one session is worth nothing in
// another and a man in the middle of two TLS sessions cannot relay it:
//   client: HMAC-SHA256(token, "ringmaster client|" agent_nonce "|" client_nonce "|" binding)
//   agent:  HMAC-SHA256(token, "ringmaster agent|"  agent_nonce "|" client_nonce "|" binding)
std::string client_proof(std::string_view token, std::string_view agent_nonce, std::string_view client_nonce,
                         std::string_view binding);
std::string agent_proof(std::string_view token, std::string_view agent_nonce, std::string_view client_nonce,
                        std::string_view binding);
// 32 bytes of keying material exported from a TLS session (RFC 5705,
// label "EXPERIMENTAL-ringmaster-auth"), as hex; empty when `ssl` is null.
// Takes an SSL* (void* keeps OpenSSL out of this header).
std::string tls_binding(void* ssl);
// Compares in time independent of where the strings differ.
bool equal_constant_time(std::string_view a, std::string_view b) noexcept;

// Microseconds on the monotonic clock (heartbeats, silence, round trips)
// and on the wall clock (the time stamps messages carry: ping_us, time_us,
// t_us — comparable between processes on one machine).
long long steady_us() noexcept;
long long wall_us() noexcept;

// Tokens are at least this long (a random token is 64 hex digits).
inline constexpr std::size_t kMinTokenBytes = 16;

// Reads a token file: its first line, surrounding whitespace removed.
// Throws Error(config) naming the file when it is missing, not a regular
// file, readable or writable by group or others, or holds a token shorter
// than kMinTokenBytes.
std::string read_token_file(const std::string& path);

// What a client may do, by the token it authenticated with (the kubelet's
// split): read (ping, inventory, subscribe), run (run, cancel, preflight_*), fault
// (fault, fault_clear), watch (watch, watch_stop: a watcher of a job on
// the node, run as the job's own user). The agent's own token (or
// --token-file's) has all of them, and only all of them may shut the
// agent down.
enum Role : unsigned { kRoleRead = 1, kRoleRun = 2, kRoleFault = 4, kRoleWatch = 8, kAllRoles = 15 };
struct RoleToken {
  unsigned roles = 0;
  std::string token;
};
// "read,run"
std::string role_names(unsigned roles);
// The roles a message type needs (0 for auth).
unsigned roles_needed(std::string_view type);
// Reads a file of tokens with roles, one a line: ROLES TOKEN, ROLES a
// comma-separated list of read, run, fault and watch; blank lines and lines from
// '#' are skipped. The file is checked as read_token_file checks (mode
// 0600, regular, at most 64 KiB) and every token as long. Throws
// Error(config) naming the file and line.
std::vector<RoleToken> read_role_tokens_file(const std::string& path);

// A name a client sent, fit to print in a reply or a log line: as it is
// when it is a plain name (letters, digits, _ - .; at most 64 bytes),
// else "(a name of N bytes)".
std::string shown_name(std::string_view name);

// What a run with engine "nccl" (ringmaster-nccl-perf on the agent) takes:
// all_reduce, all_gather, reduce_scatter or broadcast, in float sums.
// Empty when it takes `collective` in `dtype` with `op`; otherwise why
// not, naming what it takes ("NCCL's runner takes ..., not 'alltoall'").
// The agent, the console and `ringmaster-cli remote` all ask this.
std::string nccl_runner_refusal(std::string_view collective, std::string_view dtype = "float",
                                std::string_view op = "sum");

// The agent's state directory when none is given: /var/lib/ringmaster for
// root, else $XDG_STATE_HOME/ringmaster or ~/.local/state/ringmaster.
std::string default_state_dir();
// STATE_DIR/agent.token: the token an agent started without --token-file
// uses, made (64 random hex digits, mode 0600) at its first start.
std::string token_path(const std::string& state_dir);
// The agent's token from that file, made first when there is none.
// Throws Error(config) as read_token_file does, or when it cannot be made.
std::string load_or_create_token(const std::string& state_dir);
// The name of this process's effective user ("root"; the uid in digits
// when it has no name). Launchers of local agents run the ranks as the
// user who launched them: --rank-user with this.
std::string effective_user_name();
// The token of an agent on this machine that uses the default state
// directory, when this user can read it; empty otherwise.
std::string local_agent_token();

}  // namespace ringmaster::agent
