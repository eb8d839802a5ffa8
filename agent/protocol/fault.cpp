// Fault specs read, checked and written (ringmaster/agent/fault.h).
#include "ringmaster/agent/fault.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <optional>

#include "ringmaster/status.h"

namespace ringmaster::agent {

using nlohmann::json;

namespace {

// A value described without echoing it: a request's contents never reach
// the agent's replies or logs.
std::string described(const json& v) {
  if (v.is_string()) return fmt::format("a string of {} characters", v.get_ref<const std::string&>().size());
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

// The fields of one kind; a field the kind does not have is refused as
// soon as they are looked at.
class SpecFields {
 public:
  SpecFields(const json& j, std::string_view kind, std::initializer_list<const char*> known) : j_(j), kind_(kind) {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      const std::string& key = it.key();
      if (key == "kind") continue;
      if (std::none_of(known.begin(), known.end(), [&key](const char* k) { return key == k; })) {
        refuse(fmt::format("'{}' is not a field of {} (its fields: {})", shown(key), kind_,
                           fmt::join(known.begin(), known.end(), ", ")));
      }
    }
  }

  [[noreturn]] void refuse(const std::string& what) const {
    throw Error(ErrorCategory::config, fmt::format("fault '{}': {}", kind_, what));
  }

  const json* find(const char* key, bool required) const {
    const auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) refuse(fmt::format("needs '{}'", key));
      return nullptr;
    }
    return &*it;
  }
  std::string text(const char* key, bool required, const char* expected) const {
    const json* v = find(key, required);
    if (!v) return {};
    if (!v->is_string()) refuse(fmt::format("'{}' is {}, not {}", key, described(*v), expected));
    return v->get<std::string>();
  }
  // A number in (0, most].
  double positive(const char* key, double most, const char* unit) const {
    const json* v = find(key, true);
    if (!v->is_number()) refuse(fmt::format("'{}' is {}, not a number", key, described(*v)));
    const double x = v->get<double>();
    if (!(x > 0) || x > most || !std::isfinite(x)) {
      refuse(fmt::format("'{}' must be above 0 and at most {} {}", key, most, unit));
    }
    return x;
  }
  bool flag(const char* key) const {
    const json* v = find(key, false);
    if (!v) return false;
    if (!v->is_boolean()) refuse(fmt::format("'{}' is {}, not true or false", key, described(*v)));
    return v->get<bool>();
  }
  Direction direction() const {
    const std::string d = text("direction", false, "in, out or both");
    if (d.empty() && !j_.contains("direction")) return Direction::both;
    if (d == "in") return Direction::in;
    if (d == "out") return Direction::out;
    if (d == "both") return Direction::both;
    refuse(fmt::format("'direction' is {}, not in, out or both", described(j_["direction"])));
  }
  // A network device's name as the kernel takes it: 1-15 characters of
  // letters, digits, '.', '_' and '-'.
  std::string interface() const {
    const std::string i = text("interface", true, "a network device's name");
    const bool plain = std::all_of(i.begin(), i.end(),
                                   [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '_' || c == '-'; });
    if (i.empty() || i.size() > 15 || !plain) {
      refuse(fmt::format("'interface' is {}, not a network device's name (1-15 letters, digits, '.', '_', '-')",
                         described(j_["interface"])));
    }
    return i;
  }

 private:
  // A key named in an error: short plain names only.
  static std::string shown(const std::string& key) {
    const bool plain = key.size() <= 32 &&
                       std::all_of(key.begin(), key.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
    return plain ? key : fmt::format("(a name of {} characters)", key.size());
  }

  const json& j_;
  std::string_view kind_;
};

// "29500" → 29500; nothing when it is not a port.
std::optional<std::uint16_t> port_of(const std::string& text) {
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return std::nullopt;
  }
  const long v = std::stol(text);
  if (v < 1 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

DropPorts drop_ports(const SpecFields& f) {
  DropPorts d;
  const std::string ports = f.text("ports", true, "\"PORT\" or \"LOW-HIGH\"");
  const auto dash = ports.find('-');
  const auto low = port_of(ports.substr(0, dash));
  const auto high = dash == std::string::npos ? low : port_of(ports.substr(dash + 1));
  if (!low || !high) {
    f.refuse(fmt::format("'ports' is {}, not PORT or LOW-HIGH with ports in 1..65535", described(json(ports))));
  }
  if (*low > *high) f.refuse("'ports' has LOW above HIGH");
  d.low = *low;
  d.high = *high;
  d.direction = f.direction();
  const std::string except = f.text("except", false, "ports separated by commas");
  std::size_t start = 0;
  while (start < except.size()) {
    const auto comma = except.find(',', start);
    const auto port = port_of(except.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!port) f.refuse("'except' is not ports in 1..65535 separated by commas");
    d.except.push_back(*port);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  d.skip_loopback = f.flag("skip_loopback");
  d.reject = f.flag("reject");
  return d;
}

// An IPv4 or IPv6 address field, as written.
std::string address(const SpecFields& f, const char* field) {
  std::string a = f.text(field, true, "an IP address");
  unsigned char parsed[16];
  if (::inet_pton(AF_INET, a.c_str(), parsed) != 1 && ::inet_pton(AF_INET6, a.c_str(), parsed) != 1) {
    f.refuse(fmt::format("'{}' is {}, not an IPv4 or IPv6 address", field, described(json(a))));
  }
  return a;
}

DropAddress drop_address(const SpecFields& f) {
  DropAddress d;
  d.address = address(f, "address");
  d.direction = f.direction();
  return d;
}

Limit limit(const SpecFields& f) {
  Limit l;
  const std::string resource = f.text("resource", true, "nofile or memlock");
  if (resource == "nofile") {
    l.resource = Limit::Resource::nofile;
  } else if (resource == "memlock") {
    l.resource = Limit::Resource::memlock;
  } else {
    f.refuse(fmt::format("'resource' is {}, not nofile or memlock", described(json(resource))));
  }
  const json* v = f.find("value", true);
  if (!v->is_number_integer() || v->get<std::int64_t>() < 0) {
    f.refuse(fmt::format("'value' is {}, not a count of {}", described(*v),
                         l.resource == Limit::Resource::nofile ? "descriptors" : "bytes"));
  }
  l.value = v->get<std::uint64_t>();
  const std::uint64_t fewest = l.resource == Limit::Resource::nofile ? kFewestNofile : 0;
  if (l.value < fewest || l.value > kMostLimit) f.refuse(fmt::format("'value' must be {}..{}", fewest, kMostLimit));
  return l;
}

}  // namespace

std::string_view to_string(Limit::Resource r) {
  return r == Limit::Resource::nofile ? "nofile" : "memlock";
}

std::string_view to_string(Direction d) {
  switch (d) {
    case Direction::in:
      return "in";
    case Direction::out:
      return "out";
    case Direction::both:
      break;
  }
  return "both";
}

std::string_view kind_of(const FaultSpec& f) {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::kKind; }, f);
}

FaultSpec parse_fault(const json& j) {
  constexpr const char* kKinds = "drop_ports, drop_address, delay, loss, rate, shm_size, limit or memory_limit";
  if (!j.is_object()) throw Error(ErrorCategory::config, fmt::format("a fault is {}, not an object", described(j)));
  const auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string()) {
    throw Error(ErrorCategory::config, fmt::format("a fault needs a 'kind': {}", kKinds));
  }
  const std::string& k = kind->get_ref<const std::string&>();
  if (k == DropPorts::kKind) return drop_ports({j, k, {"ports", "direction", "except", "skip_loopback", "reject"}});
  if (k == DropAddress::kKind) return drop_address({j, k, {"address", "direction"}});
  if (k == Delay::kKind) {
    const SpecFields f(j, k, {"interface", "ms"});
    return Delay{f.interface(), f.positive("ms", kMostDelayMs, "ms")};
  }
  if (k == Loss::kKind) {
    const SpecFields f(j, k, {"interface", "percent", "direction"});
    return Loss{f.interface(), f.positive("percent", 100, "%"),
                j.contains("direction") ? f.direction() : Direction::out};
  }
  if (k == Rate::kKind) {
    const SpecFields f(j, k, {"interface", "mbit", "to"});
    Rate rate{f.interface(), f.positive("mbit", kMostRateMbit, "Mbit/s"), {}};
    if (j.contains("to")) rate.to = address(f, "to");
    return rate;
  }
  if (k == ShmSize::kKind) {
    const SpecFields f(j, k, {"bytes"});
    const json* v = f.find("bytes", true);
    if (!v->is_number_integer()) f.refuse(fmt::format("'bytes' is {}, not an integer", described(*v)));
    const auto bytes = v->get<std::int64_t>();
    if (bytes <= 0 || bytes > kMostShmBytes) f.refuse(fmt::format("'bytes' must be 1..{}", kMostShmBytes));
    return ShmSize{bytes};
  }
  if (k == Limit::kKind) return limit({j, k, {"resource", "value"}});
  if (k == MemoryLimit::kKind) {
    const SpecFields f(j, k, {"bytes"});
    const json* v = f.find("bytes", true);
    if (!v->is_number_integer()) f.refuse(fmt::format("'bytes' is {}, not an integer", described(*v)));
    const auto bytes = v->get<std::int64_t>();
    if (bytes < kFewestMemoryBytes || bytes > kMostShmBytes)
      f.refuse(fmt::format("'bytes' must be {}..{}", kFewestMemoryBytes, kMostShmBytes));
    return MemoryLimit{bytes};
  }
  throw Error(ErrorCategory::config,
              fmt::format("unknown fault kind ({} characters); the kinds are {}", k.size(), kKinds));
}

std::string port_range(const DropPorts& d) {
  return d.low == d.high ? std::to_string(d.low) : fmt::format("{}-{}", d.low, d.high);
}

json to_json(const FaultSpec& f) {
  json j = {{"kind", kind_of(f)}};
  if (const auto* d = std::get_if<DropPorts>(&f)) {
    j["ports"] = port_range(*d);
    j["direction"] = to_string(d->direction);
    if (!d->except.empty()) j["except"] = fmt::format("{}", fmt::join(d->except, ","));
    if (d->skip_loopback) j["skip_loopback"] = true;
    if (d->reject) j["reject"] = true;
  } else if (const auto* a = std::get_if<DropAddress>(&f)) {
    j["address"] = a->address;
    j["direction"] = to_string(a->direction);
  } else if (const auto* delay = std::get_if<Delay>(&f)) {
    j["interface"] = delay->interface;
    j["ms"] = delay->ms;
  } else if (const auto* loss = std::get_if<Loss>(&f)) {
    j["interface"] = loss->interface;
    j["percent"] = loss->percent;
    j["direction"] = to_string(loss->direction);
  } else if (const auto* rate = std::get_if<Rate>(&f)) {
    j["interface"] = rate->interface;
    j["mbit"] = rate->mbit;
    if (!rate->to.empty()) j["to"] = rate->to;
  } else if (const auto* shm = std::get_if<ShmSize>(&f)) {
    j["bytes"] = shm->bytes;
  } else if (const auto* l = std::get_if<Limit>(&f)) {
    j["resource"] = to_string(l->resource);
    j["value"] = l->value;
  } else if (const auto* m = std::get_if<MemoryLimit>(&f)) {
    j["bytes"] = m->bytes;
  }
  return j;
}

std::string describe(const FaultSpec& f) {
  auto way = [](Direction d) {
    return d == Direction::in ? "arriving" : d == Direction::out ? "leaving" : "both ways";
  };
  if (const auto* d = std::get_if<DropPorts>(&f)) {
    std::string s = fmt::format("{} TCP to port{} {} {}", d->reject ? "reject" : "drop", d->low == d->high ? "" : "s",
                                port_range(*d), way(d->direction));
    if (!d->except.empty()) s += fmt::format(", except {}", fmt::join(d->except, ", "));
    if (d->skip_loopback) s += ", not on loopback";
    if (d->reject) s += ", with a TCP reset";
    return s;
  }
  if (const auto* a = std::get_if<DropAddress>(&f)) {
    return fmt::format("drop TCP/IP {} {}",
                       a->direction == Direction::in    ? "from"
                       : a->direction == Direction::out ? "to"
                                                        : "from and to",
                       a->address);
  }
  if (const auto* delay = std::get_if<Delay>(&f)) return fmt::format("delay {} by {} ms", delay->interface, delay->ms);
  if (const auto* loss = std::get_if<Loss>(&f))
    return fmt::format("lose {}% of what {} {}", loss->percent, loss->interface,
                       loss->direction == Direction::in    ? "receives"
                       : loss->direction == Direction::out ? "sends"
                                                           : "sends and receives");
  if (const auto* rate = std::get_if<Rate>(&f))
    return rate->to.empty()
               ? fmt::format("limit {} to {} Mbit/s", rate->interface, rate->mbit)
               : fmt::format("limit what {} sends to {} to {} Mbit/s", rate->interface, rate->to, rate->mbit);
  if (const auto* l = std::get_if<Limit>(&f)) {
    return l->resource == Limit::Resource::nofile
               ? fmt::format("ranks may open {} file descriptors (RLIMIT_NOFILE)", l->value)
               : fmt::format("ranks may lock {} bytes of memory (RLIMIT_MEMLOCK)", l->value);
  }
  if (const auto* m = std::get_if<MemoryLimit>(&f))
    return fmt::format("ranks run in a memory cgroup limited to {} bytes", m->bytes);
  const auto& shm = std::get<ShmSize>(f);
  return fmt::format("/dev/shm of {} bytes", shm.bytes);
}

}  // namespace ringmaster::agent
