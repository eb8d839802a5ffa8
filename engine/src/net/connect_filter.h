// The in-engine connect filter: a stand-in for a firewall when the process
// may not change the host's (no CAP_NET_ADMIN) and for tests.
//
// Spec: comma-separated rules, first match wins; no match allows.
//   drop:29500            drop connects to that port on any host
//   drop:1025-65535       a port range
//   drop:10.0.0.5         every port of one host
//   drop:10.0.0.5:1-100   a host and a port range
//   allow:29500           an exception listed before a wider drop
// A dropped connect behaves like a SYN swallowed by a security group: it
// waits until its deadline and fails with ETIMEDOUT. Read from
// RINGMASTER_CONNECT_FILTER at first use; set_connect_filter replaces it.
// Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "net/socket.h"

namespace ringmaster::net {

// Throws Error(config) naming the bad rule.
void set_connect_filter(std::string_view spec);
bool connect_filter_drops(const SocketAddress& to);
std::string connect_filter_spec();

}  // namespace ringmaster::net
