// `ringmaster-cli store`: serve a TCPStore, or poke any TCPStore (ours or a
// torchrun's MASTER_PORT).
#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <thread>

#include "commands.h"
#include "ringmaster/status.h"
#include "ringmaster/store.h"

namespace ringmaster::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;

struct StoreOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 29500;
  double timeout_s = 30;
  std::string key;
  std::string value;
  std::int64_t delta = 1;
  std::vector<std::string> keys;
  std::string listen;
  int expected = 0;
};

// --listen ADDR:PORT, [V6]:PORT or :PORT into host and port; a bare
// address (no port, or an IPv6 literal without brackets) keeps --port.
void split_listen(StoreOptions& o) {
  std::string& l = o.listen;
  std::size_t colon = std::string::npos;
  if (!l.empty() && l.front() == '[') {
    const auto close = l.find(']');
    if (close == std::string::npos || (close + 1 < l.size() && l[close + 1] != ':')) {
      throw Error(ErrorCategory::config, "--listen " + l + ": expected [IPV6]:PORT");
    }
    colon = close + 1 < l.size() ? close + 1 : std::string::npos;
    if (colon == std::string::npos) {
      l = l.substr(1, close - 1);
      return;
    }
  } else if (std::count(l.begin(), l.end(), ':') == 1) {
    colon = l.find(':');
  }
  if (colon == std::string::npos) return;
  const std::string port = l.substr(colon + 1);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    throw Error(ErrorCategory::config, "--listen " + l + ": bad port '" + port + "'");
  }
  o.port = static_cast<std::uint16_t>(value);
  std::string host = l.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  l = host;
}

}  // namespace

Runner add_store_command(CLI::App& app) {
  auto* store = app.add_subcommand("store", "Serve or query a TCPStore (wire-compatible with torch's c10d)");
  store->require_subcommand(1);
  auto opts = std::make_shared<StoreOptions>();
  auto common = [opts](CLI::App* sub) {
    sub->add_option("--host", opts->host, "Store host (MASTER_ADDR)")->capture_default_str();
    sub->add_option("--port", opts->port, "Store port (MASTER_PORT)")->capture_default_str();
    sub->add_option("--timeout", opts->timeout_s, "Seconds for connect and each operation")->capture_default_str();
  };
  auto* serve = store->add_subcommand("serve", "Run a store until interrupted");
  serve->add_option("--listen", opts->listen,
                    "ADDR:PORT, [IPV6]:PORT or :PORT to listen on, as the agent's --listen (default: every IPv6 and "
                    "IPv4 address, port 29500; port 0: pick a free one)");
  serve->add_option("--port", opts->port)->group("");  // the old spelling: --listen ADDR --port N
  serve->add_option("--expected-clients", opts->expected, "Clients expected at once (sizes the backlog)");
  auto* get = store->add_subcommand("get", "Print a key's value (waits for it, as torch does)");
  auto* set = store->add_subcommand("set", "Set a key");
  auto* add = store->add_subcommand("add", "Add to a counter and print its new value");
  auto* wait = store->add_subcommand("wait", "Wait until every key exists");
  auto* check = store->add_subcommand("check", "Exit 0 when every key exists, 1 otherwise");
  auto* ping = store->add_subcommand("ping", "Measure a round trip");
  for (auto* sub : {get, set, add, wait, check, ping})
    common(sub);
  get->add_option("key", opts->key)->required();
  set->add_option("key", opts->key)->required();
  set->add_option("value", opts->value)->required();
  add->add_option("key", opts->key)->required();
  add->add_option("delta", opts->delta)->capture_default_str();
  wait->add_option("keys", opts->keys)->required();
  check->add_option("keys", opts->keys)->required();

  return [=]() -> int {
    const auto timeout = std::chrono::milliseconds(static_cast<long long>(opts->timeout_s * 1000));
    if (serve->parsed()) {
      split_listen(*opts);
      TcpStoreServer server(
          StoreServerOptions{.host = opts->listen, .port = opts->port, .expected_clients = opts->expected});
      std::printf("store listening on %s:%u\n", opts->listen.empty() ? "*" : opts->listen.c_str(), server.port());
      std::fflush(stdout);
      std::signal(SIGINT, [](int) { g_stop = 1; });
      std::signal(SIGTERM, [](int) { g_stop = 1; });
      while (g_stop == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return 0;
    }
    TcpStoreClient client(opts->host, opts->port, timeout);
    if (get->parsed()) {
      const auto v = client.get(opts->key);
      std::fwrite(v.data(), 1, v.size(), stdout);
      std::printf("\n");
    } else if (set->parsed()) {
      client.set(opts->key, opts->value);
      client.ping();  // SET has no reply; a round trip makes sure it landed
    } else if (add->parsed()) {
      std::printf("%lld\n", static_cast<long long>(client.add(opts->key, opts->delta)));
    } else if (wait->parsed()) {
      client.wait(opts->keys, timeout);
    } else if (check->parsed()) {
      const bool ready = client.check(opts->keys);
      std::printf("%s\n", ready ? "ready" : "not ready");
      return ready ? 0 : 1;
    } else if (ping->parsed()) {
      std::printf("%.1f us\n", static_cast<double>(client.ping().count()));
    }
    return 0;
  };
}

}  // namespace ringmaster::cli
