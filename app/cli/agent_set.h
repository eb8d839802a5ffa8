// The agents a command drives (--agents, --agents-file) and how to reach
// them (--token-file, TLS): shared by `remote` and `preflight`.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ringmaster/agent/client.h"
#include "ringmaster/agent/preflight.h"
#include "ringmaster/agent/protocol.h"

namespace ringmaster::cli {

struct AgentSet {
  std::string agents = "127.0.0.1:29600";
  std::string agents_file;
  std::string token_file;
  bool tls = false;
  std::string tls_ca;
  bool tls_insecure = false;      // TLS without a CA: any certificate taken
  std::string tls_cert, tls_key;  // this client's, for agents that ask for one
};

struct Endpoint {
  std::string host;  // an address when `name` resolved to several
  std::uint16_t port = agent::kDefaultPort;
  std::string name;  // the name it came from (a headless Service); TLS verifies it
};

void add_agent_set_options(CLI::App& command, AgentSet& set);

// The agents of --agents and --agents-file (one HOST:PORT a line, # for
// comments). A name that resolves to several addresses, as a Kubernetes
// headless Service does, is an agent at each, in sorted order.
std::vector<Endpoint> endpoints_of(const AgentSet& set, const char* command);

// --token-file's token, or empty (the local agent's own).
std::string token_of(const AgentSet& set);

agent::ClientOptions client_options(const AgentSet& set, const Endpoint& e, const std::string& token);

// Messages from every agent's I/O thread, consumed by the command's thread.
struct Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<nlohmann::json> messages;

  void push(nlohmann::json m) {
    {
      std::lock_guard lock(mutex);
      messages.push_back(std::move(m));
    }
    cv.notify_one();
  }
  std::optional<nlohmann::json> pop(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex);
    if (!cv.wait_until(lock, deadline, [&] { return !messages.empty(); })) return std::nullopt;
    nlohmann::json m = std::move(messages.front());
    messages.pop_front();
    return m;
  }
};

// --env NAME=VALUE options into `env`; Error(config) naming a bad one.
void read_env_options(const std::vector<std::string>& options, std::map<std::string, std::string>& env);

// Every agent of the set, connected and subscribed, their events in one
// inbox: what a check over the nodes (link check, certify) drives. At
// least `fewest` agents, else Error(config) naming the command.
struct SubscribedAgents {
  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  std::vector<std::unique_ptr<agent::AgentClient>> clients;
  std::vector<agent::PreflightAgent> nodes;  // each client and the address the others reach it at

  std::optional<nlohmann::json> next(std::chrono::steady_clock::time_point deadline) { return inbox->pop(deadline); }
};
SubscribedAgents subscribe_agents(const AgentSet& set, const char* command, std::size_t fewest);

// A report as `--json` (one object on stdout) or as text, and to
// `--json-file` when given.
void print_report(const nlohmann::json& report, const std::string& text, bool json_out, const std::string& json_file);

}  // namespace ringmaster::cli
