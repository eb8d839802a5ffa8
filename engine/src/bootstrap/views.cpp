#include "bootstrap/views.h"

#include "bootstrap/bootstrap_impl.h"

namespace ringmaster {

BootstrapListener::BootstrapListener(Bootstrap& bootstrap) : impl_(*bootstrap.impl_) {}

net::Socket BootstrapListener::accept(net::Clock::time_point deadline, int& err) {
  return impl_.listener.accept(deadline, err);
}

net::SocketAddress BootstrapListener::local_address() const {
  return impl_.listener.local_address();
}

bool BootstrapListener::has_early() const noexcept {
  return !impl_.early_connections.empty();
}

std::pair<net::Hello, net::Socket> BootstrapListener::take_early() {
  auto early = std::move(impl_.early_connections.back());
  impl_.early_connections.pop_back();
  return early;
}

net::ConnectProgress BootstrapListener::progress(Stage stage) const {
  return connect_progress(impl_, stage);
}

BootstrapStore store_of(Bootstrap& bootstrap) {
  Bootstrap::Impl& impl = *bootstrap.impl_;
  return {impl.store.get(), impl.store_server.get(), impl.config};
}

}  // namespace ringmaster
