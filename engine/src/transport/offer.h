// What two ranks say on a new connection's socket to pick its transport
// (docs/transports.md): the opening rank's Hello and Offer, the accepting
// rank's Answer once it has accepted all of its connections. All fixed
// size, sent raw (the ranks run the same build).
#pragma once

#include <cstdint>

#include "net/hello.h"
#include "transport/connection.h"

namespace ringmaster::transport {

inline constexpr std::uint32_t kChannelHello = 0x4348414E;      // "CHAN": an Offer follows
inline constexpr std::uint32_t kExtraSocketHello = 0x534F434B;  // "SOCK": a further socket of an answered connection
inline constexpr std::uint32_t kDirectConnection = 0xFFFF;      // Hello::connection of a direct connection

// The first bytes on every new connection: who opens it and for what.
using net::Hello;

struct Offer {
  std::uint32_t magic = 0;
  std::uint32_t shm_enabled = 0;  // this rank allows shared memory
  std::uint64_t host_key = 0;     // shm::host_identity().key
  char segment[56] = {};          // the segment created for this connection, or empty
  char problem[200] = {};         // why no segment was created when one was wanted
  std::uint32_t ofi = 0;          // this rank offers a libfabric endpoint
  std::uint32_t ofi_name_length = 0;
  char ofi_name[64] = {};          // its address
  std::uint32_t sockets = 1;       // TCP sockets this rank wants per connection (RINGMASTER_NSOCKS_PER_CHANNEL)
  std::uint32_t ofi_required = 0;  // this rank takes libfabric or nothing to this peer (Setup::ofi_required)
  char no_ofi[160] = {};           // why it offers no libfabric endpoint, when it offers none
};

// Why a connection does not use shared memory.
enum class Refusal : std::uint32_t {
  none,             // it does
  different_hosts,  // not a fallback: the ranks are on different hosts
  disabled,         // NCCL_SHM_DISABLE on either rank: asked for
  failed,           // one host, both willing, and it did not work: worth a warning
};

struct Answer {
  std::uint32_t magic = 0;
  TransportKind transport = TransportKind::socket;  // what carries the connection
  std::uint8_t unused[3] = {};
  Refusal refusal = Refusal::none;  // why not shared memory
  std::uint32_t ofi_name_length = 0;
  char ofi_name[64] = {};          // the accepting rank's endpoint, over libfabric
  char reason[200] = {};           // why not shared memory, when the ranks share a host and it is not used
  std::uint32_t sockets = 1;       // over sockets: how many the connection has (the opener connects the others)
  std::uint32_t ofi_required = 0;  // over sockets: the accepting rank wanted libfabric and fails the connection
  char no_ofi[160] = {};           // over sockets: why the accepting rank did not take libfabric
};

inline constexpr std::uint32_t kOfferMagic = 0x4F464652;   // "OFFR"
inline constexpr std::uint32_t kAnswerMagic = 0x414E5357;  // "ANSW"

}  // namespace ringmaster::transport
