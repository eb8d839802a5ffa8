// The live reports of stages that wait on the network (bootstrap_impl.h):
// retrying connects, a name asked again, a connected peer that stays silent.
#include <fmt/format.h>
#include <netdb.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "base/log.h"
#include "bootstrap/bootstrap_impl.h"

namespace ringmaster {
namespace {

using Clock = net::Clock;

// The live line for a retrying connect: what the last attempt met, for how
// long, and what that usually means.
std::string connect_progress_text(Stage stage, const net::ConnectAttempts& a) {
  const std::string to = a.last_address.to_string();
  const double seconds = std::chrono::duration<double>(Clock::now() - a.first_attempt).count();
  switch (a.last_outcome) {
    case net::ConnectOutcome::unanswered: {
      const double silent = std::chrono::duration<double>(Clock::now() - a.first_unanswered).count();
      return fmt::format(
          "retrying {}: SYN to {} unanswered for {:.0f} s ({} attempt(s)) - likely dropped by a firewall or "
          "security group",
          name_of(stage), to, silent, a.attempts);
    }
    case net::ConnectOutcome::refused:
      return fmt::format(
          "retrying {}: {} refused the connection ({} attempt(s) in {:.1f} s) - nothing listens "
          "there yet",
          name_of(stage), to, a.attempts, seconds);
    case net::ConnectOutcome::rejected:
      return fmt::format(
          "retrying {}: {} rejected with an ICMP error ({}; {} attempt(s)) - a firewall rejects "
          "the port, or the host is unreachable",
          name_of(stage), to, net::errno_text(a.last_error), a.attempts);
    case net::ConnectOutcome::no_route:
      return fmt::format(
          "retrying {}: no route to {} from this host ({}; {} attempt(s)) - check the routes and "
          "NCCL_SOCKET_IFNAME",
          name_of(stage), to, net::errno_text(a.last_error), a.attempts);
    default:
      return fmt::format("retrying {}: connect to {} failed: {} ({} attempt(s))", name_of(stage), to,
                         net::errno_text(a.last_error), a.attempts);
  }
}

}  // namespace

void report_progress(Bootstrap::Impl& impl, Stage stage, std::string outcome, std::string remote, int attempts,
                     std::string detail) {
  StageEvent event;
  event.stage = stage;
  event.rank = impl.config.rank;
  event.duration = Clock::now() - impl.stage_begin;
  event.begin = std::chrono::system_clock::now() -
                std::chrono::duration_cast<std::chrono::system_clock::duration>(event.duration);
  event.in_progress = true;
  event.connect_outcome = std::move(outcome);
  event.remote_address = std::move(remote);
  event.attempts = attempts;
  event.detail = std::move(detail);
  RM_INFO(bootstrap, "{}", event.detail);
  if (impl.on_event) impl.on_event(event);
}

net::ConnectProgress connect_progress(Bootstrap::Impl& impl, Stage stage) {
  return [&impl, stage](const net::ConnectAttempts& a) {
    report_progress(impl, stage, net::name_of(a.last_outcome), a.last_address.to_string(), a.attempts,
                    connect_progress_text(stage, a));
  };
}

void report_unresolved(Bootstrap::Impl& impl, const std::string& master, const net::ResolveResult& failed,
                       int attempts) {
  const double seconds = std::chrono::duration<double>(Clock::now() - impl.stage_begin).count();
  report_progress(impl, Stage::resolve_master, "unresolved", master, attempts,
                  fmt::format("retrying RESOLVE_MASTER: '{}' does not resolve ({}) for {:.0f} s ({} attempt(s)) - {}",
                              impl.config.master_addr, failed.error, seconds, attempts,
                              failed.gai_error == EAI_AGAIN
                                  ? "no DNS server answered; check the pod's or host's resolver"
                                  : "the name is not in DNS or /etc/hosts (yet): a headless Service without a "
                                    "ready pod, or a typo"));
}

SilentPeerReporter::SilentPeerReporter(Bootstrap::Impl& impl, Stage stage, std::string remote, std::string awaited)
    : watcher_([&impl, stage, remote = std::move(remote), awaited = std::move(awaited)](std::stop_token stop) {
        const auto connected = Clock::now();
        std::mutex mutex;
        std::condition_variable_any wake;
        std::unique_lock lock(mutex);
        for (auto next = connected + kSilentPeerAfter;; next += std::chrono::seconds(1)) {
          wake.wait_until(lock, stop, next, [] { return false; });
          if (stop.stop_requested()) return;
          const double silent = std::chrono::duration<double>(Clock::now() - connected).count();
          report_progress(impl, stage, "stuck_after_handshake", remote, 1,
                          fmt::format("waiting in {}: {} accepted the connection {:.0f} s ago and has not answered "
                                      "{} - something other than the expected peer listens there, or its process "
                                      "is stopped",
                                      name_of(stage), remote, silent, awaited));
        }
      }) {}

}  // namespace ringmaster
