#include "transport/ofi/ofi.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "base/log.h"
#include "base/params.h"

#if RINGMASTER_HAVE_OFI
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#endif

namespace ringmaster::transport::ofi {

#if RINGMASTER_HAVE_OFI

namespace {

constexpr std::size_t kSlotBytes = 512 * 1024;
constexpr int kSlots = 8;
constexpr const char* kPreferred[] = {"efa", "verbs;ofi_rxm", "tcp;ofi_rxm", "sockets"};

// tcp;ofi_rxm's completion-queue descriptor does not wake for data that
// waits in the sockets behind the endpoint: a waiting rank sleeps this long
// at most, then polls the provider again.
int poll_us() {
  static const int us = static_cast<int>(std::clamp<std::int64_t>(param_int(Param::OfiPollUs), 0, 100'000));
  return us;
}

// Puts back the process's signal handlers as they were when it was made.
// Libraries libfabric loads install their own: Debian's libfabric pulls in
// PSM's libinfinipath, whose constructor takes SIGINT, SIGTERM, SIGSEGV,
// SIGBUS, SIGILL and SIGABRT with a handler that calls exit(). Called
// while the process was inside malloc, that handler deadlocks in exit's
// destructors: an agent told to stop hung for good, and a rank's crash
// could no longer dump core. The process's own handlers win.
class SignalsKept {
 public:
  SignalsKept() {
    for (int sig = 1; sig < kSignals; ++sig)
      saved_[sig] = ::sigaction(sig, nullptr, &before_[sig]) == 0;
  }
  ~SignalsKept() {
    for (int sig = 1; sig < kSignals; ++sig) {
      struct sigaction now = {};
      if (!saved_[sig] || ::sigaction(sig, nullptr, &now) != 0) continue;
      if (now.sa_handler != before_[sig].sa_handler) ::sigaction(sig, &before_[sig], nullptr);
    }
  }
  SignalsKept(const SignalsKept&) = delete;
  SignalsKept& operator=(const SignalsKept&) = delete;

 private:
  static constexpr int kSignals = 32;
  struct sigaction before_[kSignals] = {};
  bool saved_[kSignals] = {};
};

// libfabric itself, opened at the first use: linked in, it would load its
// providers' libraries into every process (PSM's constructor alone takes
// 200 ms timing the CPU), though most never use libfabric. The few calls
// that are not inline in its headers go through this table; the ones that
// may load a provider keep the process's signal handlers.
struct Library {
  int getinfo(std::uint32_t version, const char* node, const char* service, std::uint64_t flags, const fi_info* hints,
              fi_info** info) const {
    const SignalsKept kept;
    return getinfo_(version, node, service, flags, hints, info);
  }
  int fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) const {
    const SignalsKept kept;
    return fabric_(attr, fabric, context);
  }
  decltype(&::fi_getinfo) getinfo_ = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;
  decltype(&::fi_fabric) fabric_ = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
  decltype(&::fi_version) version = nullptr;
  std::string why;  // empty when loaded
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    const SignalsKept kept;
    void* handle = ::dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = ::dlerror();
      l.why = fmt::format("cannot load libfabric.so.1: {}", err != nullptr ? err : "unknown error");
      return l;
    }
    auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (fn == nullptr && l.why.empty()) l.why = fmt::format("libfabric.so.1 has no {}", name);
    };
    resolve(l.getinfo_, "fi_getinfo");
    resolve(l.freeinfo, "fi_freeinfo");
    resolve(l.dupinfo, "fi_dupinfo");
    resolve(l.fabric_, "fi_fabric");
    resolve(l.strerror, "fi_strerror");
    resolve(l.version, "fi_version");
    return l;
  }();
  return lib;
}

std::string text(int rc) {
  return library().strerror(rc < 0 ? -rc : rc);
}

// RDM endpoints with messages delivered in the order they were sent.
fi_info* hints_for(const char* provider, const std::string& interface) {
  fi_info* h = library().dupinfo(nullptr);  // fi_allocinfo()
  h->ep_attr->type = FI_EP_RDM;
  h->caps = FI_MSG;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (provider != nullptr) h->fabric_attr->prov_name = ::strdup(provider);
  if (!interface.empty()) h->domain_attr->name = ::strdup(interface.c_str());
  return h;
}

// The first fi_info for `provider` (FI_PROVIDER decides when null), on
// the interface when one of its domains is named after it, else any.
fi_info* find(const char* provider, const std::string& interface) {
  for (const std::string& on : {interface, std::string()}) {
    fi_info* hints = hints_for(provider, on);
    fi_info* info = nullptr;
    const int rc = library().getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info);
    library().freeinfo(hints);
    if (rc == 0 && info != nullptr) return info;
    if (on.empty()) break;
  }
  return nullptr;
}

std::mutex known_mutex;
// What availability() found per interface: the provider's description,
// kept for every endpoint opened later (fi_getinfo takes tens of ms).
// Never destroyed: endpoints use it until the process ends, and a map
// torn down at exit would leave the descriptions behind unreferenced.
std::map<std::string, fi_info*>& chosen = *new std::map<std::string, fi_info*>;

// One fabric and domain per provider and interface, shared by the
// endpoints open on it.
struct Fabric {
  ~Fabric() {
    if (domain != nullptr) fi_close(&domain->fid);
    if (fabric != nullptr) fi_close(&fabric->fid);
  }
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
};
std::map<std::string, std::weak_ptr<Fabric>> fabrics;

}  // namespace

std::size_t registered_bytes_per_connection() noexcept {
  return 2 * kSlots * kSlotBytes;
}

const Availability& availability(const std::string& interface) {
  static std::map<std::string, Availability> known;
  std::lock_guard lock(known_mutex);
  if (auto it = known.find(interface); it != known.end()) return it->second;
  // ofi_rxm's defaults suit one endpoint per process: a receive context
  // shared by all its peers with bounce buffers for 2048 messages, zeroed
  // when the endpoint opens (17 MB, tens of ms), and queues of 128 per
  // peer. Here every connection has an endpoint of its own and keeps at
  // most kSlots messages in flight: its own short queues do. What the user
  // set stands. Read once, when libfabric loads its providers.
  const std::string queue = std::to_string(4 * kSlots);
  ::setenv("FI_OFI_RXM_USE_SRX", "0", 0);
  ::setenv("FI_OFI_RXM_MSG_TX_SIZE", queue.c_str(), 0);
  ::setenv("FI_OFI_RXM_MSG_RX_SIZE", queue.c_str(), 0);
  Availability a;
  if (!library().why.empty()) {
    a.why = library().why;
    return known.emplace(interface, std::move(a)).first->second;
  }
  fi_info* hints = hints_for(nullptr, "");
  fi_info* all = nullptr;
  if (library().getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &all) == 0) {
    for (fi_info* i = all; i != nullptr; i = i->next) {
      const std::string name = i->fabric_attr->prov_name;
      if (std::find(a.providers.begin(), a.providers.end(), name) == a.providers.end()) a.providers.push_back(name);
    }
    library().freeinfo(all);
  }
  library().freeinfo(hints);
  const char* forced = std::getenv("FI_PROVIDER");
  fi_info* info = nullptr;
  if (forced != nullptr && *forced != '\0') {
    info = find(nullptr, interface);
  } else {
    for (const char* p : kPreferred) {
      if ((info = find(p, interface)) != nullptr) break;
    }
  }
  if (info != nullptr) {
    a.usable = true;
    a.provider = info->fabric_attr->prov_name;
    a.rdma = a.provider.starts_with("efa") || a.provider.starts_with("verbs");
    info->tx_attr->size = std::min<std::size_t>(info->tx_attr->size, 4 * kSlots);
    info->rx_attr->size = std::min<std::size_t>(info->rx_attr->size, 4 * kSlots);
    chosen[interface] = info;  // kept for the life of the process
  } else {
    a.why = forced != nullptr && *forced != '\0'
                ? fmt::format("FI_PROVIDER={} offers no RDM endpoint with ordered messages", forced)
                : "no libfabric provider offers RDM endpoints with ordered messages";
  }
  return known.emplace(interface, std::move(a)).first->second;
}

class Endpoint {
 public:
  ~Endpoint() {
    if (ep != nullptr) fi_close(&ep->fid);
    if (av != nullptr) fi_close(&av->fid);
    if (cq != nullptr) fi_close(&cq->fid);
  }
  std::shared_ptr<Fabric> shared;  // the fabric and domain it is open on
  fi_info* info = nullptr;         // availability()'s, not owned
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  int wait_fd = -1;
  std::string name;
};

std::shared_ptr<Endpoint> open_endpoint(const std::string& interface, std::string& why) {
  const auto& a = availability(interface);
  if (!a.usable) {
    why = a.why;
    return nullptr;
  }
  auto e = std::make_shared<Endpoint>();
  auto fail = [&](const char* what, int rc) {
    why = fmt::format("{} ({}): {}", what, a.provider, text(rc));
    return nullptr;
  };
  int rc = 0;
  {
    std::lock_guard lock(known_mutex);
    e->info = chosen.at(interface);
    e->shared = fabrics[interface].lock();
    if (!e->shared) {
      auto f = std::make_shared<Fabric>();
      rc = library().fabric(e->info->fabric_attr, &f->fabric, nullptr);
      if (rc != 0) return fail("fi_fabric", rc);
      rc = fi_domain(f->fabric, e->info, &f->domain, nullptr);
      if (rc != 0) return fail("fi_domain", rc);
      fabrics[interface] = f;
      e->shared = std::move(f);
    }
  }
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_MSG;
  cq_attr.wait_obj = FI_WAIT_FD;
  cq_attr.size = 4 * kSlots;
  rc = fi_cq_open(e->shared->domain, &cq_attr, &e->cq, nullptr);
  if (rc != 0) return fail("fi_cq_open with a wait descriptor", rc);
  rc = fi_control(&e->cq->fid, FI_GETWAIT, &e->wait_fd);
  if (rc != 0) return fail("the completion queue's wait descriptor", rc);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = 1;
  rc = fi_av_open(e->shared->domain, &av_attr, &e->av, nullptr);
  if (rc != 0) return fail("fi_av_open", rc);
  rc = fi_endpoint(e->shared->domain, e->info, &e->ep, nullptr);
  if (rc != 0) return fail("fi_endpoint", rc);
  rc = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc == 0) rc = fi_ep_bind(e->ep, &e->av->fid, 0);
  if (rc != 0) return fail("fi_ep_bind", rc);
  rc = fi_enable(e->ep);
  if (rc != 0) return fail("fi_enable", rc);
  char name[256];
  std::size_t len = sizeof(name);
  rc = fi_getname(&e->ep->fid, name, &len);
  if (rc != 0) return fail("fi_getname", rc);
  e->name.assign(name, len);
  return e;
}

std::string endpoint_name(const Endpoint& endpoint) {
  return endpoint.name;
}

namespace {

class OfiConnection final : public Connection {
 public:
  OfiConnection(std::shared_ptr<Endpoint> e, fi_addr_t peer, net::Socket liveness)
      : e_(std::move(e)), peer_(peer), liveness_(std::move(liveness)) {}

  ~OfiConnection() override {
    if (e_->ep != nullptr) {
      fi_close(&e_->ep->fid);  // cancels what is posted before the buffers go
      e_->ep = nullptr;
    }
    if (mr_ != nullptr) fi_close(&mr_->fid);
    if (epoll_ >= 0) ::close(epoll_);
  }

  // Registers the buffers, posts the receives and builds the wait
  // descriptor; false and `why` on failure.
  bool start(std::string& why) {
    buffer_.resize(2 * kSlots * kSlotBytes);
    if ((e_->info->domain_attr->mr_mode & FI_MR_LOCAL) != 0) {
      const int rc =
          fi_mr_reg(e_->shared->domain, buffer_.data(), buffer_.size(), FI_SEND | FI_RECV, 0, 0, 0, &mr_, nullptr);
      if (rc != 0) {
        why = fmt::format("fi_mr_reg of {} KiB: {}", buffer_.size() >> 10, text(rc));
        rlimit locked{};
        if (::getrlimit(RLIMIT_MEMLOCK, &locked) == 0 && locked.rlim_cur != RLIM_INFINITY) {
          why += fmt::format(
              " (RLIMIT_MEMLOCK is {} KiB here, and an RDMA provider pins what it registers: raise it "
              "to unlimited, ulimit -l unlimited or LimitMEMLOCK=infinity)",
              locked.rlim_cur >> 10);
        }
        return false;
      }
      desc_ = fi_mr_desc(mr_);
    }
    for (int i = 0; i < kSlots; ++i) {
      send_[i].data = buffer_.data() + static_cast<std::size_t>(i) * kSlotBytes;
      send_[i].sending = true;
      free_sends_.push_back(i);
      recv_[i].data = buffer_.data() + static_cast<std::size_t>(kSlots + i) * kSlotBytes;
      if (const int rc = post_recv(recv_[i]); rc != 0) {
        why = "fi_recv: " + text(rc);
        return false;
      }
      posted_.push_back(i);
    }
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    if (epoll_ < 0 || ::epoll_ctl(epoll_, EPOLL_CTL_ADD, e_->wait_fd, &ev) != 0 ||
        ::epoll_ctl(epoll_, EPOLL_CTL_ADD, liveness_.fd(), &ev) != 0) {
      why = std::string("epoll: ") + std::strerror(errno);
      return false;
    }
    return true;
  }

  TransportKind kind() const noexcept override { return TransportKind::ofi; }

  std::int64_t send_some(const iovec* iov, int count) noexcept override {
    if (const int rc = progress(); rc != 0) return rc;
    std::size_t moved = 0;
    int i = 0;
    std::size_t at = 0;  // within iov[i]
    while (i < count && !free_sends_.empty()) {
      Slot& s = send_[free_sends_.back()];
      std::size_t len = 0;
      int j = i;
      std::size_t aj = at;
      while (j < count && len < kSlotBytes) {
        const std::size_t n = std::min(iov[j].iov_len - aj, kSlotBytes - len);
        std::memcpy(s.data + len, static_cast<const std::byte*>(iov[j].iov_base) + aj, n);
        len += n;
        aj += n;
        if (aj == iov[j].iov_len) ++j, aj = 0;
      }
      if (len == 0) break;
      const ssize_t rc = fi_send(e_->ep, s.data, len, desc_, peer_, &s.context);
      if (rc == -FI_EAGAIN) break;  // not taken: the bytes stay the caller's
      if (rc != 0) return fail("fi_send", static_cast<int>(rc));
      free_sends_.pop_back();
      moved += len;
      i = j;
      at = aj;
    }
    return static_cast<std::int64_t>(moved);
  }

  std::int64_t recv_some(const iovec* iov, int count) noexcept override {
    if (const int rc = progress(); rc != 0) return rc;
    std::size_t moved = 0;
    int i = 0;
    std::size_t at = 0;
    while (i < count && !posted_.empty()) {
      Slot& s = recv_[posted_.front()];
      if (!s.done) break;
      while (i < count && s.offset < s.length) {
        const std::size_t n = std::min(iov[i].iov_len - at, s.length - s.offset);
        std::memcpy(static_cast<std::byte*>(iov[i].iov_base) + at, s.data + s.offset, n);
        s.offset += n;
        at += n;
        moved += n;
        if (at == iov[i].iov_len) ++i, at = 0;
      }
      if (s.offset == s.length) {
        s.done = false;
        s.offset = s.length = 0;
        if (const int rc = post_recv(s); rc != 0) return fail("fi_recv", rc);
        posted_.push_back(posted_.front());
        posted_.pop_front();
      }
    }
    return static_cast<std::int64_t>(moved);
  }

  // The received messages in the order their slots were posted, as
  // recv_some will hand them out.
  bool look_ahead(void* out, std::size_t bytes) noexcept override {
    if (progress() != 0) return false;
    auto* to = static_cast<std::byte*>(out);
    std::size_t got = 0;
    for (const int index : posted_) {
      const Slot& s = recv_[index];
      if (!s.done) break;
      const std::size_t n = std::min(bytes - got, s.length - s.offset);
      std::memcpy(to + got, s.data + s.offset, n);
      got += n;
      if (got == bytes) return true;
    }
    return false;
  }

  int max_sleep_us() const noexcept override { return poll_us(); }

  bool flushed() noexcept override { return free_sends_.size() == static_cast<std::size_t>(kSlots); }

  int fd() const noexcept override { return epoll_; }
  bool data_pollable() const noexcept override { return false; }

  // Sleeping on the completion queue's descriptor is allowed only when
  // nothing completed meanwhile and the provider says nothing is left to
  // progress (fi_trywait); otherwise the caller tries again at once.
  bool arm_wait(bool, bool) noexcept override {
    if (read_completions() != 0) return true;
    fid* fids[] = {&e_->cq->fid};
    return fi_trywait(e_->shared->fabric, fids, 1) != FI_SUCCESS;
  }

  int drain_rings() noexcept override {
    char byte = 0;
    const ssize_t r = ::recv(liveness_.fd(), &byte, 1, MSG_DONTWAIT);
    if (r == 0) return net::kPeerClosed;
    if (r < 0) return errno == EAGAIN || errno == EINTR ? 0 : -errno;
    return -EPROTO;
  }

  void shutdown() noexcept override {
    if (liveness_.valid()) ::shutdown(liveness_.fd(), SHUT_RDWR);
  }

 private:
  struct Slot {
    fi_context2 context;  // first: completions hand back its address
    std::byte* data = nullptr;
    std::size_t length = 0, offset = 0;
    bool done = false;
    bool sending = false;
  };

  int post_recv(Slot& s) {
    for (;;) {
      const ssize_t rc = fi_recv(e_->ep, s.data, kSlotBytes, desc_, FI_ADDR_UNSPEC, &s.context);
      if (rc != -FI_EAGAIN) return static_cast<int>(rc);
      if (const int p = progress(); p != 0) return p;
    }
  }

  int fail(const char* what, int rc) noexcept {
    RM_WARN(net, "OFI: {}: {}", what, text(rc));
    return -EIO;
  }

  int progress() noexcept override { return static_cast<int>(std::min<std::int64_t>(read_completions(), 0)); }

  // Reads completions: a send's slot is free again, a receive's slot holds
  // its message. How many, or a negative errno.
  std::int64_t read_completions() noexcept {
    fi_cq_msg_entry entries[16];
    std::int64_t done = 0;
    for (;;) {
      const ssize_t n = fi_cq_read(e_->cq, entries, 16);
      if (n == -FI_EAGAIN) return done;
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(e_->cq, &err, 0);
        RM_WARN(net, "OFI completion error: {} ({})", text(err.err),
                fi_cq_strerror(e_->cq, err.prov_errno, err.err_data, nullptr, 0));
        return err.err == FI_ECONNREFUSED || err.err == FI_ECONNRESET ? net::kPeerClosed : -EIO;
      }
      if (n < 0) return fail("fi_cq_read", static_cast<int>(n));
      done += n;
      for (ssize_t k = 0; k < n; ++k) {
        auto* s = reinterpret_cast<Slot*>(entries[k].op_context);
        if (s->sending) {
          free_sends_.push_back(static_cast<int>(s - send_));
        } else {
          s->length = entries[k].len;
          s->offset = 0;
          s->done = true;
        }
      }
    }
  }

  std::shared_ptr<Endpoint> e_;
  fi_addr_t peer_;
  net::Socket liveness_;
  std::vector<std::byte> buffer_;
  fid_mr* mr_ = nullptr;
  void* desc_ = nullptr;
  Slot send_[kSlots];
  Slot recv_[kSlots];
  std::vector<int> free_sends_;
  std::deque<int> posted_;  // receive slots in the order they were posted
  int epoll_ = -1;
};

}  // namespace

std::unique_ptr<Connection> connect(std::shared_ptr<Endpoint> endpoint, const std::string& peer_name,
                                    net::Socket liveness, std::string& why) {
  fi_addr_t peer = FI_ADDR_UNSPEC;
  const int inserted = fi_av_insert(endpoint->av, peer_name.data(), 1, &peer, 0, nullptr);
  if (inserted != 1) {
    why = "fi_av_insert could not add the peer's address";
    return nullptr;
  }
  auto c = std::make_unique<OfiConnection>(std::move(endpoint), peer, std::move(liveness));
  if (!c->start(why)) return nullptr;
  return c;
}

std::string library_version() {
  const Library& lib = library();
  if (!lib.why.empty()) return "not loaded: " + lib.why;
  const std::uint32_t v = lib.version();
  return fmt::format("{}.{}", FI_MAJOR(v), FI_MINOR(v));
}

#else  // built without libfabric

std::string library_version() {
  return "not built in";
}

std::size_t registered_bytes_per_connection() noexcept {
  return 0;
}

const Availability& availability(const std::string&) {
  static const Availability a{
      false, false, "", "built without libfabric (RINGMASTER_OFI; Debian package libfabric-dev)", {}};
  return a;
}

class Endpoint {};

std::shared_ptr<Endpoint> open_endpoint(const std::string& interface, std::string& why) {
  why = availability(interface).why;
  return nullptr;
}

std::string endpoint_name(const Endpoint&) {
  return {};
}

std::unique_ptr<Connection> connect(std::shared_ptr<Endpoint>, const std::string&, net::Socket, std::string& why) {
  why = availability("").why;
  return nullptr;
}

#endif

}  // namespace ringmaster::transport::ofi
