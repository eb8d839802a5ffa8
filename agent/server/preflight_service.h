// The agent's side of preflight: listens on sample ports while a preflight
// runs (released on request or after its hold time), probes other nodes
// on a thread of its own, answers with this node's facts.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "ringmaster/tools/preflight.h"

namespace ringmaster::agent {

class FaultManager;

class PreflightService {
 public:
  // `ports`: the agent's --preflight-ports, LOW-HIGH within 1024-65535;
  // no request makes it listen outside them (Error(config) otherwise).
  // `faults`: the limits ranks start under (limit faults), which the
  // node's facts report rather than the agent's own, since ranks are what
  // run; none when null.
  PreflightService(boost::asio::io_context& io, const std::string& ports, const FaultManager* faults = nullptr);
  ~PreflightService();
  PreflightService(const PreflightService&) = delete;
  PreflightService& operator=(const PreflightService&) = delete;

  // How a request ends: the reply's fields, or the error's message; called
  // on the I/O thread.
  using Done = std::function<void(nlohmann::json fields, std::string error)>;

  // preflight_listen: drops the ports of an earlier preflight, listens on
  // this request's and answers {facts, classes: [{name, label, ports}]}.
  // preflight_probe: connects to every target and answers {results}.
  // Both check the request at once (throwing Error(config) naming a field
  // out of bounds, or when another preflight request is under way) and
  // do their work on a thread of their own, so the agent's I/O thread
  // keeps answering pings meanwhile.
  void listen(const nlohmann::json& request, Done done);
  std::pair<std::uint16_t, std::uint16_t> ports() const noexcept { return ports_; }
  void probe(const nlohmann::json& request, Done done);

  // preflight_release, and the hold timer's end.
  void release();

 private:
  // Runs `work` on the worker thread; its result goes to `done` on the
  // I/O thread.
  void run_off_io(std::function<nlohmann::json()> work, Done done);

  boost::asio::io_context& io_;
  boost::asio::steady_timer hold_;
  std::pair<std::uint16_t, std::uint16_t> ports_;
  std::unique_ptr<PortListeners> listeners_;
  std::thread worker_;
  std::atomic<bool> busy_{false};
  const FaultManager* faults_ = nullptr;
};

}  // namespace ringmaster::agent
