#include "conntrack_fill.h"

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "ringmaster/status.h"

namespace ringmaster::agent {

namespace {

constexpr long long kMostEntries = 4LL << 20;
constexpr std::uint8_t kTcpEstablished = 3;  // TCP_CONNTRACK_ESTABLISHED
// IPS_SEEN_REPLY | IPS_ASSURED | IPS_CONFIRMED: the kernel marks an entry made
// through ctnetlink confirmed before it reads the status, and refuses a
// status that would clear that bit (EBUSY).
constexpr std::uint32_t kSeenReplyAssured = 14;
constexpr std::uint32_t kTimeoutS = 3600;

long long read_number(const char* path) {
  std::ifstream in(path);
  long long v = -1;
  in >> v;
  return v;
}

// One netlink message being written: attributes appended, nests closed.
class Message {
 public:
  explicit Message(std::vector<char>& out) : out_(out), start_(out.size()) {
    nlmsghdr h{};
    h.nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW;
    h.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
    append(&h, sizeof(h));
    nfgenmsg g{};
    g.nfgen_family = AF_INET;
    g.version = NFNETLINK_V0;
    append(&g, sizeof(g));
  }
  ~Message() {
    nlmsghdr h{};
    std::memcpy(&h, out_.data() + start_, sizeof(h));
    h.nlmsg_len = static_cast<std::uint32_t>(out_.size() - start_);
    std::memcpy(out_.data() + start_, &h, sizeof(h));
  }
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;

  template <class T>
  void put(std::uint16_t type, T value) {
    nlattr a{static_cast<std::uint16_t>(NLA_HDRLEN + sizeof(T)), type};
    append(&a, sizeof(a));
    append(&value, sizeof(T));
    pad();
  }
  std::size_t open(std::uint16_t type) {
    const std::size_t at = out_.size();
    nlattr a{0, static_cast<std::uint16_t>(type | NLA_F_NESTED)};
    append(&a, sizeof(a));
    return at;
  }
  void close(std::size_t at) {
    const auto len = static_cast<std::uint16_t>(out_.size() - at);
    std::memcpy(out_.data() + at, &len, sizeof(len));
  }
  // CTA_TUPLE_ORIG or _REPLY: a TCP flow, addresses and ports in network order.
  void tuple(std::uint16_t which, std::uint32_t src, std::uint32_t dst, std::uint16_t sport, std::uint16_t dport) {
    const auto t = open(which);
    const auto ip = open(CTA_TUPLE_IP);
    put(CTA_IP_V4_SRC, src);
    put(CTA_IP_V4_DST, dst);
    close(ip);
    const auto proto = open(CTA_TUPLE_PROTO);
    put(CTA_PROTO_NUM, static_cast<std::uint8_t>(IPPROTO_TCP));
    put(CTA_PROTO_SRC_PORT, sport);
    put(CTA_PROTO_DST_PORT, dport);
    close(proto);
    close(t);
  }

 private:
  void append(const void* p, std::size_t n) {
    const char* c = static_cast<const char*>(p);
    out_.insert(out_.end(), c, c + n);
  }
  void pad() { out_.resize(NLMSG_ALIGN(out_.size()), 0); }
  std::vector<char>& out_;
  std::size_t start_;
};

// Entry `i`: a client in 100.64.0.0/10 (shared address space, never the
// scenario's) connected to 100.127.255.1:443.
void write_entry(std::vector<char>& out, long long i) {
  Message m(out);
  const std::uint32_t client = htonl(0x64400000u + static_cast<std::uint32_t>(i >> 14));
  const std::uint32_t server = htonl(0x647fff01u);
  const auto port = htons(static_cast<std::uint16_t>(1024 + (i & 0x3fff)));
  const auto https = htons(443);
  m.tuple(CTA_TUPLE_ORIG, client, server, port, https);
  m.tuple(CTA_TUPLE_REPLY, server, client, https, port);
  m.put(CTA_STATUS, htonl(kSeenReplyAssured));
  m.put(CTA_TIMEOUT, htonl(kTimeoutS));
  const auto info = m.open(CTA_PROTOINFO);
  const auto tcp = m.open(CTA_PROTOINFO_TCP);
  m.put(CTA_PROTOINFO_TCP_STATE, kTcpEstablished);
  m.close(tcp);
  m.close(info);
}

// The errors the kernel sent back so far (without waiting); the first
// error's errno in `first`.
int drain_errors(int fd, int& first) {
  int errors = 0;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got <= 0) return errors;
    // Each message in turn (not NLMSG_OK/NEXT, whose int length compares
    // with an unsigned field).
    const auto len = static_cast<std::size_t>(got);
    constexpr std::size_t kHeader = NLMSG_ALIGN(sizeof(nlmsghdr));
    for (std::size_t at = 0; at + sizeof(nlmsghdr) <= len;) {
      nlmsghdr h{};
      std::memcpy(&h, buffer + at, sizeof(h));
      if (h.nlmsg_len < sizeof(nlmsghdr) || at + h.nlmsg_len > len) break;
      if (h.nlmsg_type == NLMSG_ERROR && h.nlmsg_len >= kHeader + sizeof(nlmsgerr)) {
        nlmsgerr e{};
        std::memcpy(&e, buffer + at + kHeader, sizeof(e));
        if (e.error != 0 && errors++ == 0) first = -e.error;
      }
      at += NLMSG_ALIGN(h.nlmsg_len);
    }
  }
}

}  // namespace

ConntrackFill fill_conntrack_table() {
  ConntrackFill r;
  r.max = read_number("/proc/sys/net/netfilter/nf_conntrack_max");
  const long long before = read_number("/proc/sys/net/netfilter/nf_conntrack_count");
  if (r.max <= 0 || before < 0) {
    r.cannot = "connection tracking is not loaded in the namespace (no nf_conntrack_max)";
    return r;
  }
  if (r.max > kMostEntries) {
    r.cannot = fmt::format(
        "net.netfilter.nf_conntrack_max is {} here: filling it would take gigabytes of kernel "
        "memory (at most {} entries)",
        r.max, kMostEntries);
    return r;
  }
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0) throw Error(ErrorCategory::config, std::string("ctnetlink socket: ") + std::strerror(errno));
  const int rcvbuf = 1 << 22;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  std::vector<char> batch;
  int errors = 0, first = 0;
  const long long want = r.max - before;
  for (long long i = 0; i < want;) {
    batch.clear();
    for (; i < want && batch.size() < (1 << 16) - 256; ++i)
      write_entry(batch, i);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd, batch.data(), batch.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(ErrorCategory::config, std::string("ctnetlink send: ") + std::strerror(err));
    }
    errors += drain_errors(fd, first);
  }
  errors += drain_errors(fd, first);
  ::close(fd);
  r.count = read_number("/proc/sys/net/netfilter/nf_conntrack_count");
  r.inserted = r.count - before;
  // A few refused at the very end (the scenario's own connections came
  // first) is a full table too.
  if (r.count < r.max)
    throw Error(ErrorCategory::config,
                fmt::format("the connection-tracking table holds {} of {} entries after inserting {}: {} insert(s) "
                            "refused ({})",
                            r.count, r.max, want, errors, first != 0 ? std::strerror(first) : "no error given"));
  return r;
}

}  // namespace ringmaster::agent
