// What every network device of the node has carried so far, read from
// sysfs: /sys/class/net/*/statistics (every interface, loopback included)
// and, for RDMA devices such as EFA, /sys/class/infiniband/*/ports/*/
// hw_counters (EFA's rx_bytes and tx_bytes) or counters (InfiniBand's
// port_rcv_data and port_xmit_data, in 4-byte words). The agent sends them
// as `nic_sample` events, so traffic outside Ringmaster's own runs shows
// during bring-up too.
#pragma once

#include <string>

#include "ringmaster/agent/events.h"

namespace ringmaster::agent {

// At most this many devices are read (a node with more is cut there).
inline constexpr int kMostNics = 256;

// `sys`: the sysfs root ("/sys"; a test's copy elsewhere).
events::NicSample read_nic_counters(const std::string& sys = "/sys");

}  // namespace ringmaster::agent
