// libfabric (OFI) between ranks on different hosts: one reliable-datagram
// endpoint (FI_EP_RDM, messages sent in order) per connection, addressed
// through an address vector that holds only its peer.
//
// The endpoint's address travels in the same offer and answer over the
// bootstrap socket that negotiate shared memory; that socket stays open as
// the connection's liveness, so a dead peer shows as it closing. Data moves
// through registered bounce buffers: a send copies up to a slot into one and
// posts it, a receive reads the oldest completed slot and posts it again.
// Waiting polls one descriptor that wakes for either the completion queue
// (FI_WAIT_FD) or the liveness socket, only after fi_trywait allows it and
// for at most RINGMASTER_OFI_POLL_US: tcp;ofi_rxm's descriptor does not
// wake for data waiting in its sockets. Sends count as done only once
// completed (flushed()); until then ChannelLink keeps progressing them.
//
// Which provider: FI_PROVIDER if set (libfabric itself honours it), else
// the first of efa, verbs;ofi_rxm, tcp;ofi_rxm, sockets that offers RDM
// endpoints on the interface the rank bootstrapped on. Built only with
// libfabric (RINGMASTER_OFI); otherwise available() says so.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/socket.h"
#include "transport/connection.h"

namespace ringmaster::transport::ofi {

struct Availability {
  bool usable = false;
  bool rdma = false;                   // efa or verbs: preferred over sockets without being asked
  std::string provider;                // "tcp;ofi_rxm"
  std::string why;                     // when not usable
  std::vector<std::string> providers;  // every provider libfabric lists here
};
// For endpoints on `interface` (the tcp provider's domain name; empty: any).
const Availability& availability(const std::string& interface);
// What each connection registers with the provider: its bounce buffers,
// which an RDMA provider pins in RAM (counted against RLIMIT_MEMLOCK).
std::size_t registered_bytes_per_connection() noexcept;
// The version of the libfabric this process loads ("1.17"), or why none is
// loaded ("not loaded: ...").
std::string library_version();

class Endpoint;

// An endpoint not yet tied to its peer. Null and `why` on failure.
std::shared_ptr<Endpoint> open_endpoint(const std::string& interface, std::string& why);
// Its address, to send to the peer.
std::string endpoint_name(const Endpoint& endpoint);
// The connection once the peer's address is known; null and `why` when the
// address does not insert.
std::unique_ptr<Connection> connect(std::shared_ptr<Endpoint> endpoint, const std::string& peer_name,
                                    net::Socket liveness, std::string& why);

}  // namespace ringmaster::transport::ofi
