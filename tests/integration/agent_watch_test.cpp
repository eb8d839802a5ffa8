// The agent's `watch`: a job it did not start, on its node, watched by a
// watcher it starts as the job's own user (never with more rights than
// the job has), contained as a run's ranks are, its findings relayed as
// typed events (job_rank, job_wavefront, job_nccl).
#include "agent_test_support.h"

namespace ringmaster::agent_testing {
namespace {

const std::string kPython = RINGMASTER_PYTHON_ENV "/bin/python";

// The uid a user name has; -1 when there is none.
long uid_of(const char* name) {
  const passwd* p = ::getpwnam(name);
  return p ? static_cast<long>(p->pw_uid) : -1;
}

// The effective uid /proc/PID/status gives; -1 when the process is gone.
long effective_uid(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream fields(line);
    std::string key;
    long real = -1, effective = -1;
    if (fields >> key >> real >> effective && key == "Uid:") return effective;
  }
  return -1;
}

json watch_message(const std::string& id, json selector, double seconds) {
  selector["watch_id"] = id;
  selector["duration_s"] = seconds;
  selector["interval_s"] = 0.2;
  return {{"type", "watch"}, {"watch", std::move(selector)}};
}

}  // namespace

// A torch job whose MASTER_PORT is dropped in its ranks' network
// namespace, run as `nobody`: the agent's watcher runs as nobody too, and
// ranks 1-3 come back as job_rank events at STORE_CONNECT, unanswered,
// with the bootstrap's hint, within 5 s of the first look; the watch is
// listed in the inventory while it runs and ends with run_done.
TEST(AgentWatch, ATorchJobsStoreHangSeenThroughTheAgentAsTheJobsUser) {
  if (::access(kPython.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no torch in " RINGMASTER_PYTHON_ENV " (scripts/setup-deps installs torch there)";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a network namespace, an nftables rule and a second user";
  const long nobody = uid_of("nobody");
  if (nobody < 0) GTEST_SKIP() << "no user nobody here";
  NetNamespace ns;
  auto in_ns = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"/usr/sbin/ip", "netns", "exec", ns.name});
    auto p = testing_support::spawn(argv, {}, true);
    p.finish();
    return p.exit_code();
  };
  // Nothing listens in the namespace: any port will do.
  const auto port = static_cast<std::uint16_t>(30000 + ::getpid() % 20000);
  ASSERT_EQ(in_ns({"/usr/sbin/nft", "add", "table", "inet", "rmwatch"}), 0);
  in_ns({"/usr/sbin/nft", "add", "chain", "inet", "rmwatch", "in", "{ type filter hook input priority 0; }"});
  in_ns({"/usr/sbin/nft", "add", "rule", "inet", "rmwatch", "in", "tcp", "dport", std::to_string(port), "drop"});
  const std::string rank_script =
      "import os, time\n"
      "from datetime import timedelta\n"
      "import torch.distributed as d\n"
      "s = d.TCPStore(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']), int(os.environ['WORLD_SIZE']),\n"
      "               False, timeout=timedelta(seconds=30), wait_for_workers=False)\n"
      "time.sleep(60)\n";
  const std::string job_id = "agent-watched-" + std::to_string(::getpid());
  std::vector<testing_support::ChildProcess> ranks;
  for (int r = 1; r <= 3; ++r) {
    ranks.push_back(
        testing_support::spawn({"/usr/sbin/ip", "netns", "exec", ns.name, "/usr/bin/setpriv", "--reuid=nobody",
                                "--regid=nogroup", "--clear-groups", kPython, "-c", rank_script},
                               {{"RANK", std::to_string(r)},
                                {"WORLD_SIZE", "4"},
                                {"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", std::to_string(port)},
                                {"TORCHELASTIC_RUN_ID", job_id},
                                {"HOME", "/tmp"}},
                               true));
  }
  Agent a;
  Inbox inbox;
  auto client = agent::AgentClient::connect(a.options(), inbox.handler());
  client->call({{"type", "subscribe"}});
  // setpriv has exec'd python once the processes run as nobody.
  for (int i = 0;
       i < 100 && std::any_of(ranks.begin(), ranks.end(), [&](auto& r) { return effective_uid(r.pid) != nobody; }); ++i)
    std::this_thread::sleep_for(50ms);
  // Long enough for torch's import on a loaded machine (under ASan it took
  // over 8 s); stopped once every rank is named.
  const json reply = client->call(watch_message("hang", {{"job_run_id", job_id}}, 60));
  EXPECT_EQ(reply["user"], "nobody") << reply.dump();
  EXPECT_EQ(reply["processes"].size(), 3u) << reply.dump();
  const int watcher = reply["pid"].get<int>();
  EXPECT_EQ(effective_uid(watcher), nobody) << "the watcher runs as someone else than the job";
  const json inventory = client->call({{"type", "inventory"}});
  bool listed = false;
  for (const auto& run : inventory["runs"])
    listed |= run["run_id"] == "hang" && run.value("watch", false);
  EXPECT_TRUE(listed) << inventory["runs"].dump();

  auto all_named = [&] {
    std::set<int> named;
    for (const auto& m : inbox.snapshot()) {
      const auto& e = m.value("event", json::object());
      if (m.value("run_id", "") == "hang" && e.value("outcome", "") == "unanswered" &&
          e.value("syn_retransmits", 0) > 0)
        named.insert(e.value("rank", -1));
    }
    return named.size() == 3;
  };
  for (int i = 0; i < 1000 && !all_named(); ++i)
    std::this_thread::sleep_for(50ms);
  client->call({{"type", "watch_stop"}, {"watch_id", "hang"}});
  std::map<int, double> first_seen, named;
  const auto events = inbox.run_events("hang", 1, 30s);
  for (auto& r : ranks) {
    ::kill(r.pid, SIGKILL);
    r.finish();
  }
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back()["event"].value("cancelled", false)) << events.back().dump();
  std::string seen;
  for (const auto& m : events) {
    seen += m.dump() + "\n";
    const auto parsed = agent::events::parse_event_message(m);
    ASSERT_TRUE(parsed) << m.dump();
    EXPECT_EQ(parsed->rank, -1) << m.dump();
    const auto* e = std::get_if<agent::events::JobRank>(&parsed->event);
    if (e == nullptr || e->outcome != "unanswered") continue;
    EXPECT_EQ(e->stage, Stage::store_connect) << m.dump();
    EXPECT_EQ(e->remote, "127.0.0.1:" + std::to_string(port)) << m.dump();
    const double at = m["event"].value("seen_at", 0.0);
    first_seen.emplace(e->rank, at);
    if (e->syn_retransmits > 0 && e->hint.find("got no answer at all") != std::string::npos) named.emplace(e->rank, at);
  }
  for (int r = 1; r <= 3; ++r) {
    ASSERT_TRUE(named.contains(r)) << "rank " << r << "\n" << seen;
    EXPECT_LT(named[r] - first_seen[r], 5.0) << "rank " << r << "\n" << seen;
  }
}

// Who may watch, and what is refused with a reason: a read-only token
// cannot (watch needs the watch role), a watch-only token can but cannot
// run; a watch that names no process here, one whose processes run as two
// users, or a field of the wrong kind is refused; watch_stop ends a watch
// (run_done, cancelled) and names an unknown one.
TEST(AgentWatch, WatchingNeedsItsRoleAndOneUsersProcesses) {
  const std::string reader = "reader-token-0123456789abcdef";
  const std::string watcher = "watcher-token-0123456789abcdef";
  Agent a({"--role-tokens", write_token("agent-watch-roles", "read " + reader + "\nread,watch " + watcher + "\n")});
  const std::string job_id = "roles-" + std::to_string(::getpid());
  auto job = testing_support::spawn({"/bin/sleep", "60"}, {{"RANK", "0"}, {"TORCHELASTIC_RUN_ID", job_id}});
  {
    auto c = agent::AgentClient::connect(a.options(reader));
    expect_refused(*c, watch_message("w", {{"job_run_id", job_id}}, 5), "needs watch");
    expect_refused(*c, {{"type", "watch_stop"}, {"watch_id", "w"}}, "needs watch");
  }
  Inbox inbox;
  auto c = agent::AgentClient::connect(a.options(watcher), inbox.handler());
  c->call({{"type", "subscribe"}});
  expect_refused(*c, one_rank_run("by-watcher"), "needs run");
  expect_refused(*c, watch_message("none", {{"job_run_id", "no-such-job-" + job_id}}, 5), "no process of the job");
  expect_refused(*c, watch_message("bad", {{"master_port", "29500"}}, 5), "watch.master_port must be an integer");
  expect_refused(*c, watch_message("bad", {{"pids", {job.pid}}, {"interval", 1}}, 5), "watch.interval is not a field");
  expect_refused(*c, {{"type", "watch"}, {"watch", {{"watch_id", "x"}}}}, "watch names no job");
  expect_refused(*c, {{"type", "watch_stop"}, {"watch_id", "never-started"}}, "no watch never-started");
  const json reply = c->call(watch_message("long", {{"pids", {job.pid}}}, 600));
  EXPECT_EQ(reply["processes"], json::array({job.pid})) << reply.dump();
  expect_refused(*c, watch_message("long", {{"pids", {job.pid}}}, 5), "already running");
  // Its first look, then stopped.
  auto rank_seen = [&] {
    for (const auto& m : inbox.snapshot()) {
      if (m.value("run_id", "") == "long" && m["event"].value("type", "") == "job_rank" &&
          m["event"].value("pid", 0) == job.pid)
        return true;
    }
    return false;
  };
  for (int i = 0; i < 200 && !rank_seen(); ++i)
    std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(rank_seen()) << "no job_rank for the watched process";
  c->call({{"type", "watch_stop"}, {"watch_id", "long"}});
  const auto events = inbox.run_events("long", 1, 20s);
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back()["event"].value("cancelled", false)) << events.back().dump();
  // Two users' processes under one run id: refused, naming both.
  if (::geteuid() == 0 && uid_of("nobody") >= 0) {
    auto other = testing_support::spawn(
        {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/sleep", "60"},
        {{"RANK", "1"}, {"TORCHELASTIC_RUN_ID", job_id}});
    for (int i = 0; i < 100 && effective_uid(other.pid) != uid_of("nobody"); ++i)
      std::this_thread::sleep_for(20ms);
    expect_refused(*c, watch_message("mixed", {{"job_run_id", job_id}}, 5), "run as different users");
    ::kill(other.pid, SIGKILL);
    other.finish();
  }
  ::kill(job.pid, SIGKILL);
  job.finish();
  EXPECT_TRUE(a.alive());
}

}  // namespace ringmaster::agent_testing
