#include "preflight_service.h"

#include "faults.h"

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <charconv>
#include <tuple>

#include "ringmaster/agent/preflight.h"
#include "ringmaster/comm.h"
#include "ringmaster/status.h"
#include "run_env.h"

namespace ringmaster::agent {

using nlohmann::json;

namespace {

int bounded(const json& request, const char* field, int fallback, int lo, int hi) {
  const int v = request.contains(field) ? request[field].get<int>() : fallback;
  if (v < lo || v > hi) {
    throw Error(ErrorCategory::config,
                fmt::format("preflight field '{}' must be in [{}, {}], got {}", field, lo, hi, v));
  }
  return v;
}

std::string bounded_text(const json& request, const char* field) {
  std::string v = request.value(field, std::string());
  if (v.size() > 255) {
    throw Error(ErrorCategory::config,
                fmt::format("preflight field '{}' is {} characters long; at most 255", field, v.size()));
  }
  return v;
}

// "LOW-HIGH" within 1024-65535: an agent running as root never listens on
// a privileged port for a client.
std::pair<std::uint16_t, std::uint16_t> port_range_of(const std::string& text, const char* what) {
  const auto range = low_high(text);
  const auto [lo, hi] = range.value_or(std::pair{0ul, 0ul});
  if (!range || lo < 1024 || hi > 65535 || lo > hi) {
    throw Error(ErrorCategory::config,
                fmt::format("{} must be LOW-HIGH within 1024-65535 (no privileged ports)", what));
  }
  return {static_cast<std::uint16_t>(lo), static_cast<std::uint16_t>(hi)};
}

json ports_json(const std::vector<PortListeners::Port>& ports) {
  json out = json::array();
  for (const auto& p : ports) {
    json one = {{"port", p.port}, {"listening", p.listening}};
    if (!p.note.empty()) one["note"] = p.note;
    out.push_back(std::move(one));
  }
  return out;
}

}  // namespace

PreflightService::PreflightService(boost::asio::io_context& io, const std::string& ports, const FaultManager* faults)
    : io_(io), hold_(io), ports_(port_range_of(ports, "--preflight-ports")), faults_(faults) {}

PreflightService::~PreflightService() {
  if (worker_.joinable()) worker_.join();
}

void PreflightService::run_off_io(std::function<json()> work, Done done) {
  if (busy_.exchange(true)) {
    throw Error(ErrorCategory::config, "another preflight request is under way on this agent");
  }
  if (worker_.joinable()) worker_.join();
  worker_ = std::thread([this, work = std::move(work), done = std::move(done)]() mutable {
    json fields;
    std::string error;
    try {
      fields = work();
    } catch (const std::exception& e) {
      error = fmt::format("preflight failed inside the agent: {}", e.what());
    }
    boost::asio::post(io_, [this, fields = std::move(fields), error = std::move(error), done = std::move(done)] {
      busy_ = false;
      done(fields, error);
    });
  });
}

void PreflightService::listen(const json& request, Done done) {
  const int master_port = bounded(request, "master_port", 29500, 0, 65535);
  if (master_port != 0 && master_port < 1024) {
    throw Error(
        ErrorCategory::config,
        fmt::format("preflight field 'master_port' is {}: the agent listens on unprivileged ports only (1024-65535)",
                    master_port));
  }
  const std::uint16_t allowed_lo = ports_.first, allowed_hi = ports_.second;  // captured below (no bindings)
  if (master_port != 0 && (master_port < allowed_lo || master_port > allowed_hi)) {
    throw Error(ErrorCategory::config,
                fmt::format("preflight field 'master_port' is {}: this agent listens for preflight within {}-{} only "
                            "(its --preflight-ports)",
                            master_port, allowed_lo, allowed_hi));
  }
  const int count = bounded(request, "count", 2, 1, kPreflightMaxPortsPerClass);
  const int hold_s = bounded(request, "hold_s", 120, 1, kPreflightMaxHoldS);
  NodeFactsQuery query{bounded_text(request, "master_addr"), bounded_text(request, "socket_ifname")};
  const std::string port_range = bounded_text(request, "port_range");
  const auto range = port_range.empty() ? std::pair<std::uint16_t, std::uint16_t>{}
                                        : port_range_of(port_range, "preflight field 'port_range'");
  if (!port_range.empty() && (range.first < allowed_lo || range.second > allowed_hi)) {
    throw Error(ErrorCategory::config,
                fmt::format("preflight field 'port_range' reaches beyond {}-{}, the ports this agent listens on for "
                            "preflight (its --preflight-ports)",
                            allowed_lo, allowed_hi));
  }
  if (busy_) throw Error(ErrorCategory::config, "another preflight request is under way on this agent");
  release();  // the ports it held may be asked for again
  auto listeners = std::make_shared<std::unique_ptr<PortListeners>>(std::make_unique<PortListeners>());
  const auto limits = faults_ ? faults_->rank_limits() : std::vector<RankLimit>{};
  run_off_io(
      [=, query = std::move(query)] {
        NodeFacts facts = gather_node_facts(query);
        facts.settings = settings_ranks_inherit();
        facts.settings_known = true;
        for (const auto& l : limits) {
          auto [soft, hard] = l.resource == RLIMIT_NOFILE ? std::tie(facts.nofile_soft, facts.nofile_hard)
                                                          : std::tie(facts.memlock_soft, facts.memlock_hard);
          soft = hard = static_cast<long long>(l.value);
        }
        for (const auto& t : transport_availability()) {
          std::string name = t.name;
          for (auto& c : name)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (t.usable) {
            facts.transports.push_back(name);
          } else {
            facts.transports_unusable.emplace_back(name, t.why);
          }
        }
        PortListeners& l = **listeners;
        // Linux's default when the file cannot be read.
        const std::uint16_t lo = facts.ephemeral_lo != 0 ? facts.ephemeral_lo : 32768;
        const std::uint16_t hi = facts.ephemeral_hi != 0 ? facts.ephemeral_hi : 60999;
        json classes = json::array();
        auto add = [&](const char* name, std::string label, const std::vector<PortListeners::Port>& ports) {
          classes.push_back({{"name", name}, {"label", std::move(label)}, {"ports", ports_json(ports)}});
        };
        // Each class sampled where it meets the agent's --preflight-ports;
        // a class outside them is left out.
        auto sample = [&](const char* name, std::string label, std::uint16_t from, std::uint16_t to) {
          from = std::max(from, allowed_lo);
          to = std::min(to, allowed_hi);
          if (from <= to) add(name, std::move(label), l.listen_in(from, to, count));
        };
        if (master_port != 0) {
          add("master", fmt::format("MASTER_PORT {}", master_port),
              {l.listen_on(static_cast<std::uint16_t>(master_port))});
        }
        sample("ephemeral", fmt::format("ephemeral ports {}-{} (ip_local_port_range)", lo, hi), lo, hi);
        if (lo > 1025) {
          sample("below_ephemeral", fmt::format("ports 1025-{} (below the ephemeral range)", lo - 1), 1025,
                 static_cast<std::uint16_t>(lo - 1));
        }
        if (hi < 65535) {
          sample("above_ephemeral", fmt::format("ports {}-65535 (above the ephemeral range)", hi + 1),
                 static_cast<std::uint16_t>(hi + 1), 65535);
        }
        if (!port_range.empty()) {
          add("port_range", fmt::format("RINGMASTER_PORT_RANGE {}", port_range),
              l.listen_in(range.first, range.second, count));
        }
        return json{{"facts", to_json(facts)}, {"classes", classes}};
      },
      [this, listeners, hold_s, done = std::move(done)](json fields, std::string error) {
        if (error.empty()) {
          listeners_ = std::move(*listeners);
          hold_.expires_after(std::chrono::seconds(hold_s));
          hold_.async_wait([this](boost::system::error_code ec) {
            if (!ec) listeners_.reset();
          });
        }
        done(std::move(fields), std::move(error));
      });
}

void PreflightService::probe(const json& request, Done done) {
  const int window_ms = bounded(request, "window_ms", 3000, 100, kPreflightMaxWindowMs);
  const json& list = request.at("targets");
  if (!list.is_array() || list.size() > kPreflightMaxTargets) {
    throw Error(ErrorCategory::config,
                fmt::format("preflight_probe.targets must be an array of at most {} targets", kPreflightMaxTargets));
  }
  std::vector<ReachTarget> targets;
  targets.reserve(list.size());
  for (const auto& t : list) {
    const std::string host = bounded_text(t, "host");
    const int port = bounded(t, "port", 0, 1, 65535);
    if (host.empty()) throw Error(ErrorCategory::config, "a preflight_probe target has no 'host'");
    targets.push_back({host, static_cast<std::uint16_t>(port)});
  }
  run_off_io(
      [targets = std::move(targets), window_ms] {
        json results = json::array();
        for (const auto& r : probe_reach(targets, std::chrono::milliseconds(window_ms))) {
          json one = {{"reach", name_of(r.reach)}, {"ms", r.ms}};
          if (r.path_mtu > 0) one["path_mtu"] = r.path_mtu;
          if (!r.detail.empty()) one["detail"] = r.detail;
          results.push_back(std::move(one));
        }
        return json{{"results", std::move(results)}};
      },
      std::move(done));
}

void PreflightService::release() {
  hold_.cancel();
  listeners_.reset();
}

}  // namespace ringmaster::agent
