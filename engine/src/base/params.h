// The one registry of Ringmaster's tunables (NCCL's NCCL_PARAM idea).
//
// Every parameter is declared once in RINGMASTER_PARAMS below with its
// environment name, default and a line of help, so `ringmaster-cli env` can
// list them all with their current values. Values are read from the
// environment on each call; callers that need a value fixed for the life of
// the process cache it themselves. Thread-safe as long as nobody calls
// setenv concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ringmaster {

// X(Id, "ENV_NAME", "default", "help")
#define RINGMASTER_PARAMS(X)                                                                                     \
  X(CpuKernel, "RINGMASTER_CPU_KERNEL", "",                                                                      \
    "Force the CPU reduction kernel level: avx512, avx2, sse2, neon or scalar (default: the best supported)")    \
  X(StreamingStoreBytes, "RINGMASTER_STREAMING_STORE_BYTES", "8388608",                                          \
    "Reductions whose output is at least this many bytes bypass the cache with non-temporal stores")             \
  X(StoreTimeout, "RINGMASTER_STORE_TIMEOUT", "300",                                                             \
    "Seconds to reach the store and pass its barrier (STORE_CONNECT .. STORE_BARRIER)")                          \
  X(BootstrapTimeout, "RINGMASTER_BOOTSTRAP_TIMEOUT", "120", "Seconds for BOOTSTRAP_LISTEN .. ADDRESS_EXCHANGE") \
  X(PortRange, "RINGMASTER_PORT_RANGE", "", "lo-hi: ports for bootstrap listeners (default: ephemeral)")         \
  X(HostStore, "RINGMASTER_HOST_STORE", "auto",                                                                  \
    "auto: rank 0 hosts the store when MASTER_ADDR is local; 1: host it; 0: connect to an existing store")       \
  X(RunId, "RINGMASTER_RUN_ID", "default", "Prefix of every store key, so runs sharing one store stay apart")    \
  X(Store, "RINGMASTER_STORE", "",                                                                               \
    "etcd://host[:port][/prefix][?lease=S]: rendezvous on etcd v3 (default: a TCPStore on MASTER_ADDR)")         \
  X(ConnectFilter, "RINGMASTER_CONNECT_FILTER", "",                                                              \
    "In-engine firewall for tests and hosts without CAP_NET_ADMIN: drop:PORT|LO-HI|HOST[:LO-HI], allow:...")     \
  X(SocketIfname, "NCCL_SOCKET_IFNAME", "",                                                                      \
    "Interfaces for bootstrap and sockets: prefixes, ^ to exclude, = for exact names (default: automatic)")      \
  X(SocketFamily, "NCCL_SOCKET_FAMILY", "", "AF_INET or AF_INET6 to force the address family")                   \
  X(MinChannels, "NCCL_MIN_NCHANNELS", "1", "Fewest channels a collective is split across")                      \
  X(MaxChannels, "NCCL_MAX_NCHANNELS", "",                                                                       \
    "Most channels, each with its own connections and progress thread "                                          \
    "(default: half the CPU cores, 1 to 4)")                                                                     \
  X(Algo, "NCCL_ALGO", "",                                                                                       \
    "Algorithms allowed: Ring, Tree; 'allreduce:tree;broadcast:^tree' per collective, ^ excludes "               \
    "(default: the tuner picks)")                                                                                \
  X(Proto, "NCCL_PROTO", "",                                                                                     \
    "Protocols allowed: LL, LL128, Simple; same syntax as NCCL_ALGO (default: the tuner picks)")                 \
  X(TreeNodes, "RINGMASTER_TREE_NODES", "auto",                                                                  \
    "What the double binary trees span: rank (every rank a node, as sockets reach every rank alike), host "      \
    "(a host's ranks chained, the trees across hosts, as NCCL does) or auto (host when every rank reads the "    \
    "same NCCL_TOPO_FILE, rank otherwise)")                                                                      \
  X(Calibrate, "RINGMASTER_TUNE_CALIBRATE", "1",                                                                 \
    "Measure hop latency and bandwidth at init for the tuner (0: use RINGMASTER_TUNE_HOP_US and _GBS)")          \
  X(TuneCache, "RINGMASTER_TUNE_CACHE", "",                                                                      \
    "File where calibrations are kept for an hour, keyed by shape (default: ~/.cache/ringmaster/tuning.json; "   \
    "off: measure every time)")                                                                                  \
  X(TuneHopUs, "RINGMASTER_TUNE_HOP_US", "60", "Tuner's hop latency in microseconds when not calibrating")       \
  X(TuneGbs, "RINGMASTER_TUNE_GBS", "1", "Tuner's per-channel bandwidth in GB/s when not calibrating")           \
  X(ShmDisable, "NCCL_SHM_DISABLE", "0", "1: never use shared memory between ranks on one host")                 \
  X(Net, "NCCL_NET", "",                                                                                         \
    "Socket or OFI (libfabric) to other hosts; default OFI only on an RDMA provider (efa, verbs)")               \
  X(OfiPollUs, "RINGMASTER_OFI_POLL_US", "50",                                                                   \
    "Longest sleep (microseconds) of a rank waiting on libfabric before it polls the provider again")            \
  X(ShmFifoBytes, "RINGMASTER_SHM_FIFO_BYTES", "1048576",                                                        \
    "Bytes of each shared-memory FIFO (per connection and direction)")                                           \
  X(BuffSize, "NCCL_BUFFSIZE", "4194304", "Simple protocol buffer; a step moves BUFFSIZE/8 bytes at a time")     \
  X(NSocksPerChannel, "RINGMASTER_NSOCKS_PER_CHANNEL", "1",                                                      \
    "TCP sockets per ring connection (1-8); the stream is dealt across them in 128 KiB stripes")                 \
  X(SocketSpin, "RINGMASTER_SOCKET_SPIN_US", "50",                                                               \
    "Microseconds a waiting transfer retries before it sleeps in poll() (0: sleep at once; unset: 50, or 1000 "  \
    "where spinning yields)")                                                                                    \
  X(SpinYield, "RINGMASTER_SPIN_YIELD", "auto",                                                                  \
    "Whether a spinning rank yields its CPU on each retry: 1, 0, or auto (when this host runs more ranks than "  \
    "CPUs online)")                                                                                              \
  X(InlineBytes, "RINGMASTER_INLINE_BYTES", "65536",                                                             \
    "Collectives up to this size run on the calling thread when their channel is idle (0: never)")               \
  X(CudaStageChunk, "RINGMASTER_CUDA_STAGE_CHUNK", "8388608",                                                    \
    "all_reduce of CUDA device buffers moves through host memory in chunks of this many bytes, each its own "    \
    "host all_reduce (the same on every rank)")                                                                  \
  X(CudaIpc, "RINGMASTER_CUDA_IPC", "0",                                                                         \
    "1: all_reduce, all_gather, reduce_scatter, broadcast and reduce of CUDA device buffers between ranks of "   \
    "one host read the peers' buffers on the GPU (their pointers in one process, CUDA IPC between processes) "   \
    "instead of staging through host memory; "                                                                   \
    "0: staged (every rank must ask for it)")                                                                    \
  X(PairBytes, "RINGMASTER_PAIR_BYTES", "16384",                                                                 \
    "2-rank all_reduce up to this many bytes exchanges whole inputs in one step instead of the ring's two "      \
    "(unset: 16384 over shared memory, 524288 over sockets and libfabric)")                                      \
  X(CollTimeout, "RINGMASTER_COLL_TIMEOUT", "60",                                                                \
    "Seconds a collective may go without progress before it fails naming the silent peer")                       \
  X(StallS, "RINGMASTER_STALL_S", "10",                                                                          \
    "Seconds a collective may go without progress before its rank gathers every rank's recent calls and "        \
    "reports a stall naming the laggard (0: never); the collective goes on waiting")                             \
  X(FaultHoldAtCall, "RINGMASTER_FAULT_HOLD_AT_CALL", "",                                                        \
    "Fault for reproductions: this rank stops before its collective #N (from 0), as a rank busy elsewhere "      \
    "would, so its peers stall there; the call fails after twice RINGMASTER_COLL_TIMEOUT (unset: off)")          \
  X(TopoFile, "NCCL_TOPO_FILE", "",                                                                              \
    "NCCL or hwloc XML describing this node; used instead of hwloc discovery (marked declared)")                 \
  X(HostId, "NCCL_HOSTID", "",                                                                                   \
    "Names this rank's host instead of its hostname: ranks with different values are different nodes to the "    \
    "rings, trees and transports (no shared memory between them)")                                               \
  X(TopoDumpFile, "NCCL_TOPO_DUMP_FILE", "",                                                                     \
    "Rank 0 writes the topology its communicator used here, as NCCL topology XML (RINGMASTER_TOPO_DUMP_FILE, "   \
    "the earlier name, still read)")                                                                             \
  X(NSocksPerThread, "NCCL_NSOCKS_PERTHREAD", "",                                                                \
    "NCCL's sockets per helper thread: with NCCL_SOCKET_NTHREADS, their product is the sockets per connection "  \
    "(at most 8) unless RINGMASTER_NSOCKS_PER_CHANNEL is set")                                                   \
  X(SocketNThreads, "NCCL_SOCKET_NTHREADS", "",                                                                  \
    "NCCL's helper threads per socket connection: multiplies NCCL_NSOCKS_PERTHREAD (one progress thread per "    \
    "channel moves all of a connection's sockets here)")                                                         \
  X(LogTag, "RINGMASTER_LOG_TAG", "RINGMASTER",                                                                  \
    "Tag of every log line: RINGMASTER, or NCCL so that `grep \"NCCL WARN\"` habits find them")

enum class Param {
#define RINGMASTER_PARAM_ENUM(id, env, def, help) id,
  RINGMASTER_PARAMS(RINGMASTER_PARAM_ENUM)
#undef RINGMASTER_PARAM_ENUM
};

struct ParamInfo {
  Param id;
  std::string_view env;
  std::string_view default_value;
  std::string_view help;
};

std::span<const ParamInfo> all_params() noexcept;
const ParamInfo& param_info(Param p) noexcept;

// The environment's value, or nothing when the variable is unset or empty.
std::optional<std::string> param_env(Param p);
// The environment's value, or the default.
std::string param_string(Param p);
// Parses the value as a decimal integer; throws Error(config) naming the
// variable and its value when it is not one.
std::int64_t param_int(Param p);

}  // namespace ringmaster
