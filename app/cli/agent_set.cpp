#include "agent_set.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "agent_addresses.h"
#include "ringmaster/status.h"

namespace ringmaster::cli {
namespace {

std::vector<Endpoint> parse_agents(const std::string& list, const std::string& where) {
  std::vector<Endpoint> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      Endpoint e;
      const auto colon = item.rfind(':');
      e.host = colon == std::string::npos ? item : item.substr(0, colon);
      if (colon != std::string::npos) {
        const int port = std::atoi(item.c_str() + colon + 1);
        if (port <= 0 || port > 65535) throw Error(ErrorCategory::config, where + ": bad port in " + item);
        e.port = static_cast<std::uint16_t>(port);
      }
      out.push_back(e);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

void add_agent_set_options(CLI::App& command, AgentSet& set) {
  command
      .add_option("--agents", set.agents,
                  "Comma list of HOST:PORT; a name with several addresses (a headless Service) is an agent at each")
      ->capture_default_str();
  command.add_option("--agents-file", set.agents_file, "More agents, one HOST:PORT a line (# comments)");
  command.add_option("--token-file", set.token_file, "File with the agents' shared token");
  command.add_flag("--tls", set.tls, "The agents serve TLS (needs --tls-ca, or --tls-insecure)");
  command.add_flag("--tls-insecure", set.tls_insecure,
                   "With --tls and no --tls-ca: encrypt, but take any certificate (whoever answers gets this "
                   "client's proof); implies --tls");
  command.add_option("--tls-ca", set.tls_ca,
                     "CA certificate (PEM) that signed the agents' certificates; implies --tls");
  command.add_option("--tls-cert", set.tls_cert,
                     "This client's certificate (PEM), for agents started with --tls-client-ca; needs --tls-key");
  command.add_option("--tls-key", set.tls_key, "Private key (PEM) of --tls-cert");
}

std::vector<Endpoint> endpoints_of(const AgentSet& set, const char* command) {
  std::vector<Endpoint> given = parse_agents(set.agents, "--agents");
  if (!set.agents_file.empty()) {
    const auto lines = app::agents_file_lines(set.agents_file);
    if (!lines) throw Error(ErrorCategory::config, "--agents-file " + set.agents_file + ": cannot read it");
    for (const auto& line : *lines) {
      for (auto& e : parse_agents(line, "--agents-file " + set.agents_file))
        given.push_back(std::move(e));
    }
  }
  if (given.empty()) throw Error(ErrorCategory::config, "--agents: give at least one HOST:PORT");
  std::vector<Endpoint> out;
  for (const auto& e : given) {
    const auto addresses = app::addresses_of(e.host);
    if (addresses.size() <= 1) {
      out.push_back(e);  // an address, a name of one, or one that fails to connect with its own error
      continue;
    }
    std::string list;
    for (const auto& a : addresses) {
      out.push_back({a, e.port, e.host});
      list += (list.empty() ? "" : ", ") + a;
    }
    std::fprintf(stderr, "ringmaster-cli %s: %s is %zu agents: %s (port %u)\n", command, e.host.c_str(),
                 addresses.size(), list.c_str(), static_cast<unsigned>(e.port));
  }
  return out;
}

std::string token_of(const AgentSet& set) {
  return set.token_file.empty() ? std::string() : agent::read_token_file(set.token_file);
}

agent::ClientOptions client_options(const AgentSet& set, const Endpoint& e, const std::string& token) {
  agent::ClientOptions c;
  c.host = e.host;
  c.port = e.port;
  c.tls_name = e.name;
  c.token = token;
  c.tls = set.tls || set.tls_insecure || !set.tls_ca.empty();
  c.tls_ca_file = set.tls_ca;
  c.tls_insecure = set.tls_insecure;
  c.tls_cert_file = set.tls_cert;
  c.tls_key_file = set.tls_key;
  return c;
}

void read_env_options(const std::vector<std::string>& options, std::map<std::string, std::string>& env) {
  for (const auto& kv : options) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw Error(ErrorCategory::config, "--env takes NAME=VALUE, got " + kv);
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
}

SubscribedAgents subscribe_agents(const AgentSet& set, const char* command, std::size_t fewest) {
  const auto endpoints = endpoints_of(set, command);
  if (endpoints.size() < fewest) {
    throw Error(ErrorCategory::config, fmt::format("--agents: {} needs at least {} agents", command, fewest));
  }
  const std::string token = token_of(set);
  SubscribedAgents out;
  for (const auto& e : endpoints) {
    out.clients.push_back(agent::AgentClient::connect(
        client_options(set, e, token), [inbox = out.inbox](const nlohmann::json& m) { inbox->push(m); }));
    out.clients.back()->call({{"type", "subscribe"}});
    out.nodes.push_back({out.clients.back().get(), e.host});
  }
  return out;
}

void print_report(const nlohmann::json& report, const std::string& text, bool json_out, const std::string& json_file) {
  if (!json_file.empty()) {
    std::ofstream out(json_file);
    out << report.dump() << "\n";
    if (!out) throw Error(ErrorCategory::config, "--json-file " + json_file + ": cannot write it");
  }
  if (json_out) {
    std::printf("%s\n", report.dump().c_str());
  } else {
    std::fputs(text.c_str(), stdout);
  }
}

}  // namespace ringmaster::cli
