#include "net/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "ringmaster/status.h"

namespace ringmaster::net {
namespace {

int prefix_of(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  int bits = 0;
  const unsigned char* p = nullptr;
  std::size_t n = 0;
  if (mask->sa_family == AF_INET) {
    p = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    p = reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  }
  for (std::size_t i = 0; i < n; ++i)
    bits += __builtin_popcount(p[i]);
  return bits;
}

const unsigned char* raw_bytes(const SocketAddress& a, std::size_t& n) {
  if (a.family() == AF_INET) {
    n = 4;
    return reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr);
  }
  n = 16;
  return reinterpret_cast<const unsigned char*>(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
}

bool same_subnet(const InterfaceAddress& ia, const SocketAddress& other) {
  if (ia.address.family() != other.family()) return false;
  std::size_t n = 0, m = 0;
  const unsigned char* a = raw_bytes(ia.address, n);
  const unsigned char* b = raw_bytes(other, m);
  int bits = ia.prefix_length;
  for (std::size_t i = 0; i < n && bits > 0; ++i, bits -= 8) {
    const unsigned char mask = bits >= 8 ? 0xFF : static_cast<unsigned char>(0xFF << (8 - bits));
    if ((a[i] & mask) != (b[i] & mask)) return false;
  }
  return true;
}

bool skipped_by_default(const std::string& name) {
  return name.starts_with("lo") || name.starts_with("docker") || name.starts_with("virbr");
}

const InterfaceAddress* address_of_family(const Interface& i, int family) {
  for (const auto& a : i.addresses) {
    if (family == AF_UNSPEC || a.address.family() == family) return &a;
  }
  return nullptr;
}

}  // namespace

std::vector<Interface> list_interfaces() {
  std::vector<Interface> result;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return result;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr)) {
      continue;  // needs a scope id to be reachable; NCCL skips these too
    }
    auto it = std::find_if(result.begin(), result.end(), [&](const auto& i) { return i.name == ifa->ifa_name; });
    if (it == result.end()) {
      it = result.insert(
          result.end(),
          Interface{ifa->ifa_name, (ifa->ifa_flags & IFF_UP) != 0, (ifa->ifa_flags & IFF_LOOPBACK) != 0, {}});
    }
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    it->addresses.push_back({SocketAddress::from_sockaddr(ifa->ifa_addr, len), prefix_of(ifa->ifa_netmask)});
  }
  freeifaddrs(list);
  return result;
}

std::string describe(const std::vector<Interface>& interfaces) {
  std::string out;
  for (const auto& i : interfaces) {
    if (!out.empty()) out += ", ";
    out += i.name + " (";
    for (std::size_t k = 0; k < i.addresses.size(); ++k) {
      if (k > 0) out += ", ";
      out += i.addresses[k].address.host();
    }
    out += i.up ? ")" : "; down)";
  }
  return out.empty() ? "none" : out;
}

bool ifname_matches(const std::string& spec_in, const std::string& name) {
  std::string_view spec(spec_in);
  const bool exclude = spec.starts_with('^');
  if (exclude) spec.remove_prefix(1);
  const bool exact = spec.starts_with('=');
  if (exact) spec.remove_prefix(1);
  bool listed = false;
  for (;;) {
    const auto comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    if (!item.empty() && (exact ? name == item : std::string_view(name).starts_with(item))) {
      listed = true;
      break;
    }
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return exclude ? !listed : listed;
}

InterfaceChoice choose_interface(const std::string& spec, int family, const SocketAddress* toward) {
  const auto interfaces = list_interfaces();
  auto pick = [&](const Interface& i) -> std::optional<InterfaceChoice> {
    if (!i.up) return std::nullopt;
    if (const auto* a = address_of_family(i, family)) return InterfaceChoice{i.name, a->address};
    return std::nullopt;
  };
  if (!spec.empty()) {
    for (const auto& i : interfaces) {
      if (!ifname_matches(spec, i.name)) continue;
      if (auto choice = pick(i)) return *choice;
    }
    throw Error(ErrorCategory::config, "no interface matches NCCL_SOCKET_IFNAME=" + spec +
                                           (family == AF_UNSPEC ? std::string() : " with an address of the family") +
                                           "; interfaces on this host: " + describe(interfaces));
  }
  if (toward != nullptr) {
    for (const auto& i : interfaces) {
      if (!i.up) continue;
      for (const auto& a : i.addresses) {
        if ((family == AF_UNSPEC || a.address.family() == family) && same_subnet(a, *toward)) {
          return InterfaceChoice{i.name, a.address};
        }
      }
    }
  }
  for (const auto& i : interfaces) {
    if (skipped_by_default(i.name)) continue;
    if (auto choice = pick(i)) return *choice;
  }
  for (const auto& i : interfaces) {
    if (auto choice = pick(i)) return *choice;
  }
  throw Error(ErrorCategory::config, "no usable network interface; interfaces on this host: " + describe(interfaces));
}

}  // namespace ringmaster::net
