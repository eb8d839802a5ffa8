#include "net/connect_filter.h"

#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <vector>

#include "ringmaster/status.h"

namespace ringmaster::net {
namespace {

struct Rule {
  bool drop = true;
  std::string host;  // empty: any host
  std::uint16_t lo = 0, hi = 65535;
};

std::optional<std::uint16_t> parse_port(std::string_view s) {
  unsigned v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

// "lo-hi" or "port"
bool parse_range(std::string_view s, Rule& rule) {
  const auto dash = s.find('-');
  auto lo = parse_port(s.substr(0, dash));
  auto hi = dash == std::string_view::npos ? lo : parse_port(s.substr(dash + 1));
  if (!lo || !hi || *lo > *hi) return false;
  rule.lo = *lo;
  rule.hi = *hi;
  return true;
}

std::vector<Rule> parse(std::string_view spec) {
  std::vector<Rule> rules;
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    Rule rule;
    std::string_view target;
    if (item.starts_with("drop:")) {
      target = item.substr(5);
    } else if (item.starts_with("allow:")) {
      rule.drop = false;
      target = item.substr(6);
    } else {
      throw Error(ErrorCategory::config, "connect filter rule '" + std::string(item) +
                                             "' must start with drop: or allow: (RINGMASTER_CONNECT_FILTER)");
    }
    bool ok = false;
    if (target.find_first_not_of("0123456789-") == std::string_view::npos) {
      ok = parse_range(target, rule);
    } else {
      // host, or host:range; an IPv6 host is written in brackets.
      std::string_view host = target, range;
      if (target.front() == '[') {
        const auto close = target.find(']');
        if (close != std::string_view::npos) {
          host = target.substr(1, close - 1);
          if (close + 1 < target.size() && target[close + 1] == ':') range = target.substr(close + 2);
        }
      } else if (const auto colon = target.rfind(':'); colon != std::string_view::npos) {
        host = target.substr(0, colon);
        range = target.substr(colon + 1);
      }
      rule.host = std::string(host);
      ok = !rule.host.empty() && (range.empty() || parse_range(range, rule));
    }
    if (!ok) {
      throw Error(ErrorCategory::config,
                  "connect filter rule '" + std::string(item) + "' is not PORT, LO-HI, HOST or HOST:LO-HI");
    }
    rules.push_back(rule);
  }
  return rules;
}

struct Filter {
  std::mutex mutex;
  std::string spec;
  std::vector<Rule> rules;
  Filter() {
    if (const char* env = std::getenv("RINGMASTER_CONNECT_FILTER")) {
      rules = parse(env);
      spec = env;
    }
  }
};

Filter& filter() {
  static Filter f;
  return f;
}

}  // namespace

void set_connect_filter(std::string_view spec) {
  auto rules = parse(spec);
  auto& f = filter();
  std::lock_guard lock(f.mutex);
  f.rules = std::move(rules);
  f.spec = std::string(spec);
}

bool connect_filter_drops(const SocketAddress& to) {
  auto& f = filter();
  std::lock_guard lock(f.mutex);
  if (f.rules.empty()) return false;
  const std::string host = to.host();
  const std::uint16_t port = to.port();
  for (const auto& rule : f.rules) {
    if (!rule.host.empty() && rule.host != host) continue;
    if (port < rule.lo || port > rule.hi) continue;
    return rule.drop;
  }
  return false;
}

std::string connect_filter_spec() {
  auto& f = filter();
  std::lock_guard lock(f.mutex);
  return f.spec;
}

}  // namespace ringmaster::net
