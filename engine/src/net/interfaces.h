// Network interfaces of this host and NCCL_SOCKET_IFNAME matching.
#pragma once

#include <string>
#include <vector>

#include "net/socket.h"

namespace ringmaster::net {

struct InterfaceAddress {
  SocketAddress address;  // port 0
  int prefix_length = 0;
};

struct Interface {
  std::string name;
  bool up = false;
  bool loopback = false;
  std::vector<InterfaceAddress> addresses;  // link-local IPv6 left out
};

// Every interface with at least one usable address.
std::vector<Interface> list_interfaces();

// "lo (127.0.0.1, ::1), eth0 (192.0.2.2)" for error messages.
std::string describe(const std::vector<Interface>& interfaces);

// NCCL_SOCKET_IFNAME semantics: comma list of name prefixes; a leading `^`
// excludes instead of selects; a leading `=` (after `^` if any) makes the
// names exact instead of prefixes.
bool ifname_matches(const std::string& spec, const std::string& name);

struct InterfaceChoice {
  std::string name;
  SocketAddress address;  // port 0
};

// Picks the interface and address for bootstrap listeners. With a spec,
// the first matching interface with an address of the family. Without:
// the interface whose subnet holds `toward` (MASTER_ADDR) if any, else the
// first that is not lo/docker/virbr, else loopback. family: AF_UNSPEC,
// AF_INET or AF_INET6. Throws Error(config) listing the interfaces that
// exist when nothing matches.
InterfaceChoice choose_interface(const std::string& spec, int family, const SocketAddress* toward);

}  // namespace ringmaster::net
