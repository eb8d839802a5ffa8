// The first 16 bytes a rank sends on a connection it opens to another
// rank's bootstrap listener after the address exchange: who opens it and
// for what. The bootstrap reads them for connections that arrive while
// it still runs and hands those on; the transports say and read them.
#pragma once

#include <cstdint>

namespace ringmaster::net {

struct Hello {
  std::uint32_t magic = 0;       // what follows (transport/offer.h's kChannelHello, kExtraSocketHello)
  std::uint32_t rank = 0;        // the opening rank
  std::uint32_t connection = 0;  // the ring channel, or a direct connection
  std::uint32_t socket = 0;      // which of the connection's sockets (from 1), for a further socket
};
static_assert(sizeof(Hello) == 16);

}  // namespace ringmaster::net
