// Frames, message checks and the HMAC handshake of control protocol v1.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "ringmaster/agent/protocol.h"
#include "ringmaster/status.h"

namespace ringmaster::agent {

using nlohmann::json;

std::string encode_frame(const json& message) {
  // Invalid UTF-8 (a rank's raw output) is replaced, not thrown on.
  const std::string body = message.dump(-1, ' ', false, json::error_handler_t::replace);
  if (body.size() > kMaxFrameBytes) {
    throw Error(ErrorCategory::protocol,
                fmt::format("message of {} bytes is over the {} byte frame limit", body.size(), kMaxFrameBytes));
  }
  const auto n = static_cast<std::uint32_t>(body.size());
  std::string frame;
  frame.reserve(4 + body.size());
  frame.push_back(static_cast<char>(n >> 24));
  frame.push_back(static_cast<char>(n >> 16));
  frame.push_back(static_cast<char>(n >> 8));
  frame.push_back(static_cast<char>(n));
  frame += body;
  return frame;
}

std::uint32_t frame_length(const unsigned char h[4]) noexcept {
  return (std::uint32_t{h[0]} << 24) | (std::uint32_t{h[1]} << 16) | (std::uint32_t{h[2]} << 8) | h[3];
}

void FrameDecoder::feed(const char* data, std::size_t size) {
  if (offset_ > 0 && offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  buffer_.append(data, size);
}

std::optional<json> FrameDecoder::next() {
  if (pending() < 4) return std::nullopt;
  const auto* h = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  const std::uint32_t n = frame_length(h);
  if (n > max_frame_) {
    throw Error(
        ErrorCategory::protocol,
        max_frame_ == kMaxFrameBytes
            ? fmt::format("frame length {} is over the limit of {} bytes (16 MiB)", n, kMaxFrameBytes)
            : fmt::format("frame length {} is over the limit of {} bytes before authentication", n, max_frame_));
  }
  if (pending() < 4 + std::size_t{n}) return std::nullopt;
  const std::string_view body(buffer_.data() + offset_ + 4, n);
  offset_ += 4 + std::size_t{n};
  // The consumed bytes are dropped once the frame is parsed: `body` points
  // into the buffer (dropping them first parsed moved bytes, and a frame
  // that ended past the first MiB of a burst read as invalid JSON).
  struct Compact {
    FrameDecoder& d;
    ~Compact() {
      if (d.offset_ > (1u << 20) && d.offset_ * 2 > d.buffer_.size()) {
        d.buffer_.erase(0, d.offset_);
        d.offset_ = 0;
      }
    }
  } compact{*this};
  if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    throw Error(ErrorCategory::protocol,
                fmt::format("frame of {} bytes nests objects or arrays deeper than {} levels", n, kMaxJsonDepth));
  }
  json message = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) {
    throw Error(ErrorCategory::protocol, fmt::format("frame of {} bytes is not valid JSON", n));
  }
  if (!message.is_object()) {
    throw Error(ErrorCategory::protocol, fmt::format("a message must be a JSON object, got {}", message.type_name()));
  }
  return message;
}

int json_depth(std::string_view text, int limit) noexcept {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

std::string FrameDecoder::truncation() const {
  if (pending() < 4) return fmt::format("{} of the 4 header bytes", pending());
  const auto* h = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  return fmt::format("{} of {} body bytes", pending() - 4, frame_length(h));
}

namespace {

// A name from the client, shown only when it is short and plain; error
// messages never echo what a client sent otherwise (types and lengths only).
enum class Kind { string, integer, number, boolean, object, array, size };

bool has_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::string:
      return v.is_string();
    case Kind::integer:
      return v.is_number_integer();
    case Kind::number:
      return v.is_number();
    case Kind::boolean:
      return v.is_boolean() || v.is_number_integer();
    case Kind::object:
      return v.is_object();
    case Kind::array:
      return v.is_array();
    case Kind::size:
      return v.is_string() || v.is_number_unsigned() || (v.is_number_integer() && v.get<long long>() >= 0);
  }
  return false;
}

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::string:
      return "a string";
    case Kind::integer:
      return "an integer";
    case Kind::number:
      return "a number";
    case Kind::boolean:
      return "a boolean";
    case Kind::object:
      return "an object";
    case Kind::array:
      return "an array";
    case Kind::size:
      return "a size (bytes, or a string such as \"64M\")";
  }
  return "?";
}

struct Field {
  const char* name;
  Kind kind;
  bool required;
};

// The fields each client message carries besides type, id and v.
const std::map<std::string, std::vector<Field>, std::less<>>& schema() {
  static const std::map<std::string, std::vector<Field>, std::less<>> s = {
      {"auth", {{"hmac", Kind::string, true}, {"nonce", Kind::string, true}}},
      {"inventory", {}},
      {"run",
       {{"run_id", Kind::string, true},
        {"world_size", Kind::integer, true},
        {"ranks", Kind::array, true},
        {"master_addr", Kind::string, true},
        {"master_port", Kind::integer, true},
        {"perf", Kind::object, true},  // its fields: PerfRequest::parse, when the run starts
        {"env", Kind::object, false},
        {"timeouts", Kind::object, false}}},
      {"cancel", {{"run_id", Kind::string, true}}},
      {"watch", {{"watch", Kind::object, true}}},  // its fields: WatchRequest::parse
      {"watch_stop", {{"watch_id", Kind::string, true}}},
      {"fault", {{"fault", Kind::object, true}}},
      {"fault_clear", {{"fault_id", Kind::integer, false}}},
      {"preflight_listen",
       {{"master_port", Kind::integer, false},
        {"count", Kind::integer, false},
        {"hold_s", Kind::integer, false},
        {"master_addr", Kind::string, false},
        {"socket_ifname", Kind::string, false},
        {"port_range", Kind::string, false}}},
      {"preflight_probe", {{"targets", Kind::array, true}, {"window_ms", Kind::integer, false}}},
      {"preflight_release", {}},
      {"subscribe", {}},
      {"unsubscribe", {}},
      {"ping", {}},
      {"shutdown", {}},
  };
  return s;
}

std::optional<std::string> check_fields(const json& m, std::string_view where, const std::vector<Field>& fields) {
  for (const auto& f : fields) {
    const auto it = m.find(f.name);
    if (it == m.end()) {
      if (f.required) return fmt::format("{} is missing field '{}' ({})", where, f.name, kind_name(f.kind));
      continue;
    }
    if (!has_kind(*it, f.kind)) {
      return fmt::format("field '{}' of {} must be {}, got {}", f.name, where, kind_name(f.kind), it->type_name());
    }
  }
  return std::nullopt;
}

}  // namespace

std::string shown_name(std::string_view name) {
  const bool plain = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
  return plain ? std::string(name) : fmt::format("(a name of {} bytes)", name.size());
}

std::optional<std::string> check_client_message(const json& m) {
  if (!m.is_object()) return "a message must be a JSON object";
  const auto type = m.find("type");
  if (type == m.end() || !type->is_string()) return "message has no 'type' string";
  const auto id = m.find("id");
  if (id == m.end() || !id->is_number_integer()) {
    return fmt::format("{} message has no integer 'id'", shown_name(type->get_ref<const std::string&>()));
  }
  const auto v = m.find("v");
  if (v == m.end() || !v->is_number_integer()) {
    return fmt::format("{} message has no integer 'v' (protocol version)",
                       shown_name(type->get_ref<const std::string&>()));
  }
  if (v->get<long long>() != kProtocolVersion) {
    return fmt::format("protocol version {} is not supported; this agent speaks version {}", v->get<long long>(),
                       kProtocolVersion);
  }
  const std::string& name = type->get_ref<const std::string&>();
  const auto& s = schema();
  const auto entry = s.find(name);
  if (entry == s.end()) {
    std::string known;
    for (const auto& [k, _] : s)
      known += (known.empty() ? "" : ", ") + k;
    return fmt::format("unknown message type '{}' (known: {})", shown_name(name), known);
  }
  // A run's values (its ranks in range, its perf request, ...) are read
  // when it starts (RunRequest::parse): a wrong one is refused in the
  // reply, the connection kept.
  if (auto problem = check_fields(m, name, entry->second)) return problem;
  return std::nullopt;
}

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length)) {
    throw Error(ErrorCategory::internal, "HMAC-SHA256 failed in OpenSSL");
  }
  std::string hex;
  for (unsigned int i = 0; i < length; ++i)
    hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string random_nonce() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) throw Error(ErrorCategory::internal, "OpenSSL RAND_bytes failed");
  std::string hex;
  for (unsigned char b : bytes)
    hex += fmt::format("{:02x}", b);
  return hex;
}

bool equal_constant_time(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

long long steady_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

long long wall_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// A file only its owner may read or write: its text. Throws Error(config)
// naming `what` and the file.
std::string read_private_file(const std::string& path, const char* what, std::size_t max_bytes) {
  // Symbolic links are followed: a Kubernetes Secret mounts each key as a
  // link into a timestamped directory (token -> ..data/token). What counts
  // is the file reached: regular, small, private, and owned by this user
  // or root, so nobody else can have planted it. O_NONBLOCK: opening a
  // FIFO would otherwise wait for a writer for ever (it is refused below as
  // not a regular file); on a regular file it changes nothing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    throw Error(ErrorCategory::config, fmt::format("{} {}: cannot open: {}", what, path, std::strerror(errno)));
  }
  struct stat st = {};
  std::string text;
  const bool regular =
      ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) <= max_bytes;
  if (regular) {
    text.resize(static_cast<std::size_t>(st.st_size));
    const ssize_t n = ::read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  if (!regular) {
    throw Error(ErrorCategory::config,
                fmt::format("{} {} is not a regular file of at most {} KiB", what, path, max_bytes / 1024));
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    throw Error(ErrorCategory::config,
                fmt::format("{} {} belongs to uid {}, neither this user nor root; chown it", what, path, st.st_uid));
  }
  if ((st.st_mode & 077) != 0) {
    throw Error(ErrorCategory::config, fmt::format("{} {} is open to group or others (mode {:04o}); chmod 600 it", what,
                                                   path, st.st_mode & 07777));
  }
  return text;
}

std::string trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return std::string(s.substr(first, last - first + 1));
}

}  // namespace

std::string read_token_file(const std::string& path) {
  const std::string text = read_private_file(path, "token file", 4096);
  std::string token = trimmed(std::string_view(text).substr(0, text.find('\n')));
  if (token.empty()) throw Error(ErrorCategory::config, fmt::format("token file {} is empty", path));
  if (token.size() < kMinTokenBytes) {
    throw Error(ErrorCategory::config, fmt::format("token file {} holds a token of {} bytes; at least {}", path,
                                                   token.size(), kMinTokenBytes));
  }
  return token;
}

std::string effective_user_name() {
  passwd entry{};
  passwd* found = nullptr;
  std::array<char, 16384> buffer{};
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return entry.pw_name;
  }
  return std::to_string(::geteuid());
}

std::string nccl_runner_refusal(std::string_view collective, std::string_view dtype, std::string_view op) {
  static constexpr std::string_view kTaken[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
  if (std::find(std::begin(kTaken), std::end(kTaken), collective) == std::end(kTaken)) {
    return fmt::format("NCCL's runner takes all_reduce, all_gather, reduce_scatter or broadcast, not '{}'", collective);
  }
  if (dtype != "float" || op != "sum") {
    return fmt::format("NCCL's runner runs float sums, not {} {}", dtype, op);
  }
  return {};
}

std::string role_names(unsigned roles) {
  std::vector<std::string> names;
  if (roles & kRoleRead) names.emplace_back("read");
  if (roles & kRoleRun) names.emplace_back("run");
  if (roles & kRoleFault) names.emplace_back("fault");
  if (roles & kRoleWatch) names.emplace_back("watch");
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ","));
}

unsigned roles_needed(std::string_view type) {
  if (type == "auth") return 0;
  // Preflight listens on ports and connects out: as much as a run does.
  if (type == "run" || type == "cancel" || type.starts_with("preflight_")) return kRoleRun;
  if (type == "fault" || type == "fault_clear") return kRoleFault;
  if (type == "watch" || type == "watch_stop") return kRoleWatch;
  if (type == "shutdown") return kAllRoles;
  return kRoleRead;
}

std::vector<RoleToken> read_role_tokens_file(const std::string& path) {
  const std::string text = read_private_file(path, "role tokens file", 65536);
  std::vector<RoleToken> out;
  std::size_t line_number = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    auto end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    ++line_number;
    const std::string line = trimmed(std::string_view(text).substr(begin, end - begin));
    begin = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find_first_of(" \t");
    auto bad = [&](const std::string& why) {
      return Error(ErrorCategory::config, fmt::format("role tokens file {} line {}: {}", path, line_number, why));
    };
    if (space == std::string::npos) throw bad("want ROLES TOKEN (ROLES: read, run, fault, watch, comma-separated)");
    RoleToken entry;
    const std::string roles = line.substr(0, space);
    for (std::size_t b = 0; b <= roles.size();) {
      auto e = roles.find(',', b);
      if (e == std::string::npos) e = roles.size();
      const std::string role = roles.substr(b, e - b);
      if (role == "read") {
        entry.roles |= kRoleRead;
      } else if (role == "run") {
        entry.roles |= kRoleRun;
      } else if (role == "fault") {
        entry.roles |= kRoleFault;
      } else if (role == "watch") {
        entry.roles |= kRoleWatch;
      } else {
        throw bad(
            fmt::format("unknown role (of {} characters); the roles are read, run, fault and watch", role.size()));
      }
      b = e + 1;
    }
    entry.token = trimmed(std::string_view(line).substr(space));
    if (entry.token.size() < kMinTokenBytes) {
      throw bad(fmt::format("a token of {} bytes; at least {}", entry.token.size(), kMinTokenBytes));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::string client_proof(std::string_view token, std::string_view agent_nonce, std::string_view client_nonce,
                         std::string_view binding) {
  return hmac_sha256_hex(token, fmt::format("ringmaster client|{}|{}|{}", agent_nonce, client_nonce, binding));
}

std::string agent_proof(std::string_view token, std::string_view agent_nonce, std::string_view client_nonce,
                        std::string_view binding) {
  return hmac_sha256_hex(token, fmt::format("ringmaster agent|{}|{}|{}", agent_nonce, client_nonce, binding));
}

std::string tls_binding(void* ssl) {
  if (ssl == nullptr) return {};
  static constexpr char kLabel[] = "EXPERIMENTAL-ringmaster-auth";
  unsigned char material[32];
  if (SSL_export_keying_material(static_cast<SSL*>(ssl), material, sizeof(material), kLabel, sizeof(kLabel) - 1,
                                 nullptr, 0, 0) != 1) {
    throw Error(ErrorCategory::internal, "cannot export keying material from the TLS session");
  }
  std::string hex;
  for (unsigned char b : material)
    hex += fmt::format("{:02x}", b);
  return hex;
}

std::string default_state_dir() {
  if (::geteuid() == 0) return "/var/lib/ringmaster";
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg == '/') return std::string(xdg) + "/ringmaster";
  if (const char* home = std::getenv("HOME"); home && *home == '/')
    return std::string(home) + "/.local/state/ringmaster";
  return "/tmp/ringmaster-" + std::to_string(::geteuid());
}

std::string token_path(const std::string& state_dir) {
  return state_dir + "/agent.token";
}

std::string load_or_create_token(const std::string& state_dir) {
  const std::string path = token_path(state_dir);
  if (::access(path.c_str(), F_OK) != 0) {
    // Written whole under another name, then linked into place: two agents
    // starting at once agree on one token and neither reads half of it.
    const std::string temporary = fmt::format("{}.{}", path, random_nonce().substr(0, 16));
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      throw Error(ErrorCategory::config, fmt::format("cannot make the token file {}: {}", path, std::strerror(errno)));
    }
    const std::string line = random_nonce() + "\n";
    const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    const int linked = written ? ::link(temporary.c_str(), path.c_str()) : -1;
    const int err = errno;
    ::unlink(temporary.c_str());
    if (!written || (linked != 0 && err != EEXIST)) {
      throw Error(ErrorCategory::config,
                  fmt::format("cannot write the token file {}: {}", path, std::strerror(written ? err : EIO)));
    }
  }
  return read_token_file(path);
}

std::string local_agent_token() {
  try {
    return read_token_file(token_path(default_state_dir()));
  } catch (const Error&) {
    return {};
  }
}

}  // namespace ringmaster::agent
