// Configuration from torchrun's environment, interface matching, and the
// structured stage failure text.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <thread>

#include "base/cpus.h"
#include "base/descriptors.h"
#include "comm/settings.h"
#include "net/connect_filter.h"
#include "net/conntrack.h"
#include "net/interfaces.h"
#include "net/port_use.h"
#include "ringmaster/config.h"
#include "ringmaster/tools/bootstrap.h"
#include "ringmaster/tools/flight_recorder.h"
#include "ringmaster/tools/job_watch.h"

namespace ringmaster {
namespace {

class EnvGuard {
 public:
  EnvGuard(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      names_.push_back(k);
      ::setenv(k, v, 1);
    }
  }
  ~EnvGuard() {
    for (const auto* k : names_)
      ::unsetenv(k);
  }

 private:
  std::vector<const char*> names_;
};

std::string config_error(std::initializer_list<std::pair<const char*, const char*>> vars) {
  EnvGuard env(vars);
  try {
    Config::from_env();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::config);
    return e.what();
  }
  return "no error";
}

TEST(Config, ReadsTorchrunEnvironment) {
  EnvGuard env({{"RANK", "3"},
                {"WORLD_SIZE", "8"},
                {"LOCAL_RANK", "1"},
                {"LOCAL_WORLD_SIZE", "2"},
                {"MASTER_ADDR", "trainer-0.trainer"},
                {"MASTER_PORT", "29501"},
                {"RINGMASTER_STORE_TIMEOUT", "2.5"},
                {"RINGMASTER_PORT_RANGE", "40000-40100"}});
  const Config c = Config::from_env();
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 2);
  EXPECT_EQ(c.master_addr, "trainer-0.trainer");
  EXPECT_EQ(c.master_port, 29501);
  EXPECT_EQ(c.store_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c.port_range_lo, 40000);
  EXPECT_EQ(c.port_range_hi, 40100);
}

TEST(Config, EveryBadValueNamesItsVariable) {
  EXPECT_NE(config_error({{"RANK", "abc"}}).find("RANK=abc is not an integer"), std::string::npos);
  EXPECT_NE(config_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}}).find("RANK=4 must be in [0, WORLD_SIZE=4)"),
            std::string::npos);
  EXPECT_NE(config_error({{"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0"), std::string::npos);
  EXPECT_NE(config_error({{"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000 is out of range"), std::string::npos);
  EXPECT_NE(config_error({{"RINGMASTER_STORE_TIMEOUT", "-1"}}).find("RINGMASTER_STORE_TIMEOUT=-1"), std::string::npos);
  EXPECT_NE(config_error({{"RINGMASTER_PORT_RANGE", "5000"}}).find("RINGMASTER_PORT_RANGE=5000 must be lo-hi"),
            std::string::npos);
  EXPECT_NE(config_error({{"RINGMASTER_PORT_RANGE", "6000-5000"}}).find("is empty"), std::string::npos);
  EXPECT_NE(config_error({{"NCCL_SOCKET_FAMILY", "AF_UNIX"}}).find("NCCL_SOCKET_FAMILY=AF_UNIX"), std::string::npos);
  EXPECT_NE(config_error({{"RINGMASTER_HOST_STORE", "maybe"}}).find("RINGMASTER_HOST_STORE=maybe"), std::string::npos);
}

// srun, mpirun and MPICH's Hydra say a process's rank in their own
// variables; without RANK/WORLD_SIZE the engine reads them instead of
// running every process as rank 0 of 1.
TEST(Launchers, OpenMpiPmiAndSlurmGiveRankAndSize) {
  {
    EnvGuard env({{"OMPI_COMM_WORLD_RANK", "1"},
                  {"OMPI_COMM_WORLD_SIZE", "2"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    const Config c = Config::from_env();
    EXPECT_EQ(c.launcher, "Open MPI");
    EXPECT_EQ(c.rank, 1);
    EXPECT_EQ(c.world_size, 2);
    EXPECT_EQ(c.local_rank, 1);
    EXPECT_EQ(c.local_world_size, 2);
  }
  {
    EnvGuard env({{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "4"}});
    const Config c = Config::from_env();
    EXPECT_EQ(c.launcher, "PMI");
    EXPECT_EQ(c.rank, 5);
    EXPECT_EQ(c.world_size, 8);
    EXPECT_EQ(c.local_rank, 1);
    EXPECT_EQ(c.local_world_size, 4);
  }
  {
    EnvGuard env({{"SLURM_PROCID", "5"},
                  {"SLURM_NTASKS", "6"},
                  {"SLURM_STEP_ID", "0"},
                  {"SLURM_LOCALID", "1"},
                  {"SLURM_NODEID", "2"},
                  {"SLURM_TASKS_PER_NODE", "2(x2),2"},
                  {"SLURM_JOB_NODELIST", "gpu-[07-09],login"}});
    const Config c = Config::from_env();
    EXPECT_EQ(c.launcher, "Slurm");
    EXPECT_EQ(c.rank, 5);
    EXPECT_EQ(c.world_size, 6);
    EXPECT_EQ(c.local_rank, 1);
    EXPECT_EQ(c.local_world_size, 2);
    EXPECT_EQ(c.group_rank, 2);
    EXPECT_EQ(c.master_addr, "gpu-07");
    EXPECT_NE(c.master_addr_from.find("SLURM_JOB_NODELIST"), std::string::npos);
    EXPECT_NE(c.describe().find("from Slurm"), std::string::npos) << c.describe();
  }
  {
    // Explicit variables win over the launcher's, and MASTER_ADDR over the node list.
    EnvGuard env({{"RANK", "0"},
                  {"WORLD_SIZE", "1"},
                  {"MASTER_ADDR", "10.0.0.5"},
                  {"SLURM_PROCID", "3"},
                  {"SLURM_NTASKS", "4"},
                  {"SLURM_STEP_ID", "0"},
                  {"SLURM_JOB_NODELIST", "gpu-1"},
                  {"OMPI_COMM_WORLD_RANK", "1"},
                  {"OMPI_COMM_WORLD_SIZE", "2"}});
    const Config c = Config::from_env();
    EXPECT_EQ(c.launcher, "RANK/WORLD_SIZE");
    EXPECT_EQ(c.world_size, 1);
    EXPECT_EQ(c.master_addr, "10.0.0.5");
  }
}

// A process a launcher counts among several, that cannot tell its rank (a
// batch script outside srun), is refused instead of running as one rank.
TEST(Launchers, RefusedAsOneRankWhenALauncherCountsMore) {
  const std::string batch = config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  EXPECT_NE(batch.find("SLURM_NTASKS=2"), std::string::npos) << batch;
  EXPECT_NE(batch.find("srun"), std::string::npos) << batch;
  EXPECT_NE(config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "4294967291"}}).find("srun"),
            std::string::npos);
  EXPECT_NE(config_error({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"RANK", "1"}})
                .find("RANK=1 must be in [0, WORLD_SIZE=1)"),
            std::string::npos);
  EXPECT_NE(config_error({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}}).find("RANK=2"),
            std::string::npos);
  // One task: a batch script of a one-task job runs as one rank.
  EnvGuard one({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(Config::from_env().world_size, 1);
}

TEST(Launchers, SlurmNodeListsAndTasksPerNode) {
  EXPECT_EQ(first_slurm_host("L", "node01"), "node01");
  EXPECT_EQ(first_slurm_host("L", "gpu-[3-5]-eth,cpu1"), "gpu-3-eth");
  EXPECT_EQ(first_slurm_host("L", "rack[2,4]-node[001-004]"), "rack2-node001");
  EXPECT_EQ(first_slurm_host("L", "a[10],b[1-2]"), "a10");
  for (const char* bad : {"", ",x", "gpu-[3-5", "gpu-[x-1]"}) {
    try {
      first_slurm_host("SLURM_JOB_NODELIST", bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_JOB_NODELIST"), std::string::npos);
    }
  }
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), 0);
}

// Under torchrun's agent store, rank 0 connects instead of hosting, and the
// keys of each attempt stay apart (torch prefixes its own /worker/attempt_N).
TEST(Launchers, TorchrunsAgentStoreAndRestartCount) {
  {
    EnvGuard env({{"RANK", "0"},
                  {"WORLD_SIZE", "2"},
                  {"GROUP_RANK", "0"},
                  {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                  {"TORCHELASTIC_RUN_ID", "job42"},
                  {"TORCHELASTIC_RESTART_COUNT", "1"}});
    const Config c = Config::from_env();
    EXPECT_EQ(c.store_hosting, StoreHosting::connect);
    EXPECT_EQ(c.run_id, "job42/attempt_1");
  }
  {
    EnvGuard env({{"TORCHELASTIC_USE_AGENT_STORE", "False"},
                  {"RINGMASTER_RUN_ID", "mine"},
                  {"TORCHELASTIC_RUN_ID", "job42"},
                  {"TORCHELASTIC_RESTART_COUNT", "0"}});
    const Config c = Config::from_env();
    EXPECT_EQ(c.store_hosting, StoreHosting::automatic);
    EXPECT_EQ(c.run_id, "mine/attempt_0");
  }
  {
    EnvGuard env({{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"RINGMASTER_HOST_STORE", "1"}});
    EXPECT_EQ(Config::from_env().store_hosting, StoreHosting::host);  // said explicitly
  }
}

// NCCL_NET as NCCL and its plugins spell it.
TEST(NcclVariables, NetworkNamesOfNcclAndItsPlugins) {
  EXPECT_EQ(comm::network_named(""), "");
  EXPECT_EQ(comm::network_named("Socket"), "socket");
  EXPECT_EQ(comm::network_named("OFI"), "ofi");
  EXPECT_EQ(comm::network_named("AWS Libfabric"), "ofi");
  EXPECT_EQ(comm::network_named("Libfabric"), "ofi");
  EXPECT_EQ(comm::network_named("IB"), "ofi");
  try {
    comm::network_named("UCX");
    ADD_FAILURE() << "UCX accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Socket, IB, OFI, AWS Libfabric or Libfabric"), std::string::npos);
  }
}

// NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS sockets per connection,
// unless Ringmaster's own variable says; at most 8 here.
TEST(NcclVariables, SocketsPerConnectionFromNcclsPair) {
  {
    EnvGuard env({{"NCCL_NSOCKS_PERTHREAD", "2"}, {"NCCL_SOCKET_NTHREADS", "2"}});
    EXPECT_EQ(comm::LocalSettings::resolve({}).sockets_per_channel, 4u);
  }
  {
    EnvGuard env({{"NCCL_NSOCKS_PERTHREAD", "8"}, {"NCCL_SOCKET_NTHREADS", "4"}});
    EXPECT_EQ(comm::LocalSettings::resolve({}).sockets_per_channel, 8u);
  }
  {
    EnvGuard env({{"NCCL_NSOCKS_PERTHREAD", "4"}, {"RINGMASTER_NSOCKS_PER_CHANNEL", "2"}});
    EXPECT_EQ(comm::LocalSettings::resolve({}).sockets_per_channel, 2u);
  }
  EnvGuard bad({{"NCCL_NSOCKS_PERTHREAD", "16"}, {"NCCL_SOCKET_NTHREADS", "16"}});
  EXPECT_THROW(comm::LocalSettings::resolve({}), Error);
}

// RINGMASTER_CUDA_IPC (or CommOptions::cuda_ipc): asked per rank, carried
// in the settings word, taken only when every rank asks and all are on one
// host; a word from a rank that predates it reads as not asking.
TEST(CudaIpcSetting, TakenOnlyWhenEveryRankOfOneHostAsks) {
  {
    EnvGuard bad({{"RINGMASTER_CUDA_IPC", "yes"}});
    try {
      comm::LocalSettings::resolve({});
      ADD_FAILURE() << "RINGMASTER_CUDA_IPC=yes was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("RINGMASTER_CUDA_IPC=yes: expected 0 or 1"), std::string::npos) << e.what();
    }
  }
  auto word = [](std::optional<bool> ipc) {
    CommOptions options;
    options.cuda_ipc = ipc;
    return comm::LocalSettings::resolve(options).encode();
  };
  EXPECT_FALSE(comm::LocalSettings::decode(word({}))->cuda_ipc);  // off unless asked
  {
    EnvGuard on({{"RINGMASTER_CUDA_IPC", "1"}});
    EXPECT_TRUE(comm::LocalSettings::resolve({}).cuda_ipc);
  }
  auto peer = [](int rank, std::string settings) {
    PeerInfo p;
    p.rank = rank;
    p.settings = std::move(settings);
    return p;
  };
  const std::string on = word(true), off = word(false);
  EXPECT_TRUE(comm::LocalSettings::decode(on)->cuda_ipc);
  EXPECT_TRUE(comm::agree({peer(0, on)}, 4, false).cuda_ipc);
  EXPECT_FALSE(comm::agree({peer(0, on)}, 4, true).cuda_ipc);  // several hosts
  const auto mixed = comm::agree({peer(0, on), peer(2, off)}, 4, false);
  EXPECT_FALSE(mixed.cuda_ipc);
  ASSERT_FALSE(mixed.reconciled.empty());
  EXPECT_NE(mixed.reconciled.back().find("RINGMASTER_CUDA_IPC: not every rank asked for it"), std::string::npos);
  // The word without the field, as a rank before it sends.
  std::string old = off;
  old.erase(old.find(";ipc=0"), 6);
  ASSERT_TRUE(comm::LocalSettings::decode(old).has_value());
  EXPECT_FALSE(comm::agree({peer(0, on), peer(1, old)}, 2, false).cuda_ipc);
}

// A cgroup v2 quota bounds the CPUs the engine sizes its channels and its
// spinning for (a pod limited to 4 CPUs on a 192-core node has 4).
TEST(Cpus, CgroupQuotaIsReadFromCpuMax) {
  EXPECT_EQ(base::cpus_from_cpu_max("max 100000\n"), 0);
  EXPECT_EQ(base::cpus_from_cpu_max("400000 100000\n"), 4);
  EXPECT_EQ(base::cpus_from_cpu_max("150000 100000"), 2);  // 1.5 CPUs: two run at once
  EXPECT_EQ(base::cpus_from_cpu_max("garbage"), 0);
  EXPECT_EQ(base::cpus_from_cpu_max("-1 100000"), 0);
  EXPECT_GE(base::host_cpus(), 1);
  EXPECT_LE(base::host_cpus(), static_cast<int>(std::thread::hardware_concurrency()));
}

TEST(Interfaces, NcclSocketIfnameSemantics) {
  EXPECT_TRUE(net::ifname_matches("eth", "eth0"));
  EXPECT_TRUE(net::ifname_matches("ib,eth", "eth1"));
  EXPECT_FALSE(net::ifname_matches("eth", "ens5"));
  EXPECT_TRUE(net::ifname_matches("=eth0", "eth0"));
  EXPECT_FALSE(net::ifname_matches("=eth0", "eth01"));
  EXPECT_FALSE(net::ifname_matches("^docker,lo", "docker0"));
  EXPECT_FALSE(net::ifname_matches("^docker,lo", "lo"));
  EXPECT_TRUE(net::ifname_matches("^docker,lo", "eth0"));
  EXPECT_TRUE(net::ifname_matches("^=eth0", "eth01"));
  EXPECT_FALSE(net::ifname_matches("^=eth0", "eth0"));
}

TEST(Interfaces, ChoosesTheInterfaceTowardMasterAndListsThemOnError) {
  const auto interfaces = net::list_interfaces();
  ASSERT_FALSE(interfaces.empty());
  auto loopback = net::SocketAddress::parse("127.0.0.1:29500");
  const auto choice = net::choose_interface("", AF_UNSPEC, &*loopback);
  EXPECT_TRUE(choice.address.is_loopback()) << choice.name;
  try {
    net::choose_interface("=nosuchif0", AF_UNSPEC, nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lo ("), std::string::npos) << e.what();
  }
}

TEST(ConnectFilter, RulesMatchInOrder) {
  net::set_connect_filter("allow:29500,drop:1025-65535,drop:10.0.0.9");
  auto at = [](const char* s) { return *net::SocketAddress::parse(s); };
  EXPECT_FALSE(net::connect_filter_drops(at("127.0.0.1:29500")));
  EXPECT_TRUE(net::connect_filter_drops(at("127.0.0.1:40000")));
  EXPECT_FALSE(net::connect_filter_drops(at("127.0.0.1:80")));
  EXPECT_TRUE(net::connect_filter_drops(at("10.0.0.9:80")));
  EXPECT_THROW(net::set_connect_filter("block:80"), Error);
  EXPECT_THROW(net::set_connect_filter("drop:90-80"), Error);
  net::set_connect_filter("");
  EXPECT_FALSE(net::connect_filter_drops(at("127.0.0.1:40000")));
}

TEST(StageFailure, ReportCarriesEveryField) {
  StageFailure f;
  f.stage = Stage::store_barrier;
  f.rank = 0;
  f.world_size = 4;
  f.joined = 3;
  f.missing = {2};
  f.remote_address = "10.0.0.5:29500";
  f.elapsed = std::chrono::milliseconds(30010);
  f.timeout = std::chrono::milliseconds(30000);
  f.summary = "not every rank reached the store barrier";
  f.hint = "check rank 2";
  EXPECT_EQ(f.joined_text(), "3/4 joined; missing: 2");
  const std::string text = f.to_string();
  EXPECT_NE(text.find("STORE_BARRIER failed on rank 0"), std::string::npos) << text;
  EXPECT_NE(text.find("10.0.0.5:29500"), std::string::npos) << text;
  EXPECT_NE(text.find("30.010 s of 30.000 s"), std::string::npos) << text;
  EXPECT_NE(text.find("hint:       check rank 2"), std::string::npos) << text;
  EXPECT_EQ(name_of(Stage::resolve_master), "RESOLVE_MASTER");
  EXPECT_EQ(name_of(Stage::ready), "READY");
}

StageFailure failed_at(Stage stage, int rank, std::string local, std::string remote, std::string error) {
  StageFailure f;
  f.stage = stage;
  f.rank = rank;
  f.local_address = std::move(local);
  f.remote_address = std::move(remote);
  f.errno_text = std::move(error);
  return f;
}

// Rank 0 listened and waited; the others were refused at its address: a
// rule that rejects. Refused elsewhere: the name resolves differently.
TEST(StageFailure, FailuresReadTogetherNameWhatNoneSaysAlone) {
  const std::string refused = "Connection refused (ECONNREFUSED)";
  const auto server = failed_at(Stage::store_barrier, 0, "198.18.0.1:29500", "trainer:29500", "");
  auto together = read_together({server, failed_at(Stage::store_connect, 1, "", "198.18.0.1:29500", refused),
                                 failed_at(Stage::store_connect, 2, "", "198.18.0.1:29500", refused)});
  ASSERT_EQ(together.size(), 1u);
  EXPECT_NE(together[0].find("rank 0 listened on 198.18.0.1:29500"), std::string::npos) << together[0];
  EXPECT_NE(together[0].find("ranks 1, 2 were refused there: a firewall rule rejects"), std::string::npos);
  EXPECT_NE(together[0].find("Allow 29500/tcp"), std::string::npos);
  // Timed out, not refused: a drop, which each rank's own hint names.
  EXPECT_TRUE(read_together({server, failed_at(Stage::store_connect, 1, "", "198.18.0.1:29500",
                                               "Connection timed out (ETIMEDOUT)")})
                  .empty());
  // Refused at another address: not a rule, a name that differs.
  together = read_together({server, failed_at(Stage::store_connect, 2, "", "198.18.0.2:29500", refused)});
  ASSERT_EQ(together.size(), 1u);
  EXPECT_NE(together[0].find("rank 2 looked for the store at 198.18.0.2, but rank 0 serves it at 198.18.0.1:29500"),
            std::string::npos)
      << together[0];
  const auto on_loopback = failed_at(Stage::store_barrier, 0, "127.0.1.1:29500", "trainer-0:29500", "");
  together = read_together({on_loopback, failed_at(Stage::store_connect, 1, "", "198.18.0.1:29500", refused)});
  ASSERT_EQ(together.size(), 1u);
  EXPECT_NE(together[0].find("a loopback address no other host can reach"), std::string::npos) << together[0];
  // Without the store's host: ranks that disagree among themselves.
  together = read_together({failed_at(Stage::store_connect, 1, "", "10.0.0.1:29500", refused),
                            failed_at(Stage::store_connect, 2, "", "10.0.0.2:29500", refused)});
  ASSERT_EQ(together.size(), 1u);
  EXPECT_NE(together[0].find("rank 1 at 10.0.0.1; rank 2 at 10.0.0.2"), std::string::npos) << together[0];
  EXPECT_EQ(together[0].find("IPv6"), std::string::npos) << together[0];
  // One family here, the other there: the mix is named, from either side.
  together = read_together({server, failed_at(Stage::store_connect, 1, "", "[fd77::1]:29500", refused)});
  ASSERT_EQ(together.size(), 1u);
  EXPECT_NE(together[0].find("rank 1 looked for the store at fd77::1"), std::string::npos) << together[0];
  EXPECT_NE(together[0].find("The ranks mix IPv4 and IPv6"), std::string::npos) << together[0];
  together = read_together({failed_at(Stage::store_connect, 1, "", "[fd77::1]:29500", refused),
                            failed_at(Stage::store_connect, 2, "", "10.0.0.1:29500", refused)});
  ASSERT_EQ(together.size(), 1u);
  EXPECT_NE(together[0].find("NCCL_SOCKET_FAMILY=AF_INET"), std::string::npos) << together[0];
  EXPECT_TRUE(read_together({}).empty());
}

// A host whose connection-tracking table is full drops new connections to
// it and from it: its own rank says so, and the ranks that got no answer
// from that host are read against it.
TEST(StageFailure, AFullConntrackTableIsReadAgainstTheRanksItLeftUnanswered) {
  const std::string timed_out = "Connection timed out (ETIMEDOUT)";
  auto full = failed_at(Stage::store_connect, 0, "198.18.0.1:29500", "198.18.0.1:29500", timed_out);
  full.conntrack = "262144 of 262144 entries, 9 new connection(s) dropped";
  const auto together = read_together({full, failed_at(Stage::store_connect, 1, "", "198.18.0.1:29500", timed_out),
                                       failed_at(Stage::transport_connect, 2, "", "198.18.0.3:40001", timed_out)});
  ASSERT_EQ(together.size(), 1u);
  EXPECT_NE(together[0].find("rank 0's host (198.18.0.1) drops new connections: its connection-tracking table is "
                             "full (262144 of 262144 entries, 9 new connection(s) dropped), so rank 1 got no answer "
                             "there"),
            std::string::npos)
      << together[0];
  EXPECT_NE(together[0].find("nf_conntrack_max"), std::string::npos);
  // Without one: nothing said of tables.
  EXPECT_TRUE(read_together({failed_at(Stage::store_connect, 1, "", "198.18.0.1:29500", timed_out)}).empty());
}

// Room for locked memory, under real limits in a child process: a soft
// limit below the need is raised to the need and its margin where the hard
// limit allows; under a hard limit below the need there is none.
TEST(Limits, RoomForLockedMemoryIsMadeUpToTheHardLimit) {
  const auto in_child = [](rlim_t soft, rlim_t hard, std::uint64_t needed) {
    int out[2];
    if (::pipe(out) != 0) return std::string("pipe failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(out[0]);
      const rlimit limit{soft, hard};
      std::string said = "setrlimit failed";
      if (::setrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
        const auto room = base::make_room_for_locked_bytes(needed);
        rlimit now{};
        ::getrlimit(RLIMIT_MEMLOCK, &now);
        said = fmt::format("enough={} raised={} soft={} hard={} kernel={}", room.enough, room.raised, room.soft,
                           room.hard, static_cast<std::uint64_t>(now.rlim_cur));
      }
      [[maybe_unused]] const auto n = ::write(out[1], said.data(), said.size());
      ::_exit(0);
    }
    ::close(out[1]);
    std::string text(256, '\0');
    const auto n = ::read(out[0], text.data(), text.size());
    ::close(out[0]);
    ::waitpid(pid, nullptr, 0);
    text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return text;
  };
  // Within this process's hard limit (raising it needs CAP_SYS_RESOURCE).
  rlimit ours{};
  ASSERT_EQ(::getrlimit(RLIMIT_MEMLOCK, &ours), 0);
  const std::uint64_t hard = ours.rlim_max == RLIM_INFINITY ? 1ULL << 30 : ours.rlim_max;
  ASSERT_GE(hard, 1U << 20) << "RLIMIT_MEMLOCK's hard limit is below 1 MiB here";
  const std::uint64_t need = hard / 2;
  EXPECT_EQ(in_child(64 << 10, 64 << 10, need), "enough=false raised=false soft=65536 hard=65536 kernel=65536");
  EXPECT_EQ(in_child(64 << 10, hard, need),
            fmt::format("enough=true raised=true soft={0} hard={1} kernel={0}", std::min(hard, need + need / 4), hard));
  EXPECT_EQ(in_child(hard, hard, need), fmt::format("enough=true raised=false soft={0} hard={0} kernel={0}", hard));
}

// /proc/net/stat/nf_conntrack: one row a CPU, in hex; "drop" summed.
TEST(Conntrack, DropsAreSummedOverCpus) {
  const std::string stat =
      "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error\n"
      "00040000  00000000 00000000 00000000 00000003 00000000 00000000 00000000 00000000 00000000 0000000a 00000000 "
      "00000000\n"
      "00040000  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000007 00000000 "
      "00000000\n";
  EXPECT_EQ(net::parse_conntrack_drops(stat), 17u);
  EXPECT_EQ(net::parse_conntrack_drops("entries found\n00000001 00000002\n"), 0u);
  EXPECT_EQ(net::parse_conntrack_drops(""), 0u);
  const net::ConntrackTable t{.count = 262144, .max = 262144, .drops = 3};
  EXPECT_TRUE(t.full());
  EXPECT_FALSE((net::ConntrackTable{.count = 1000, .max = 262144}).full());
  EXPECT_EQ(t.describe(), "262144 of 262144 entries, 3 new connection(s) dropped");
  EXPECT_NE(net::conntrack_hint(t).find("sysctl -w net.netfilter.nf_conntrack_max=1048576"), std::string::npos);
}

// The kernel's socket table as /proc/net/tcp writes it: a listener on
// 29500 and an outbound connection from it, told apart.
TEST(PortUse, ProcNetTcpTellsAListenerFromAnOutboundConnection) {
  const std::string v4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:733C 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n"
      "   1: 010012C6:733C 020012C6:73E0 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n"
      "   2: 010012C6:1F90 020012C6:73E0 01 00000000:00000000 00:00000000 00000000     0        0 3 1\n";
  const auto uses = net::parse_proc_net_tcp(v4, 29500, false);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_TRUE(uses[0].listening);
  EXPECT_EQ(uses[0].state, "LISTEN");
  EXPECT_FALSE(uses[1].listening);
  EXPECT_EQ(uses[1].state, "ESTABLISHED");
  EXPECT_EQ(uses[1].remote, "198.18.0.2:29664");
  const std::string v6 =
      "  sl  local_address                         remote_address                        st\n"
      "   0: 00000000000000000000000001000000:733C 00000000000000000000000000000000:0000 0A\n";
  const auto six = net::parse_proc_net_tcp(v6, 29500, true);
  ASSERT_EQ(six.size(), 1u);
  EXPECT_TRUE(six[0].listening);
  EXPECT_TRUE(net::parse_proc_net_tcp("header only\n", 29500, false).empty());
  const auto range = net::ephemeral_port_range();
  ASSERT_TRUE(range.has_value());  // every Linux has one
  EXPECT_LT(range->first, range->second);
}

// A job's rendezvous read from its sockets (ringmaster-cli watch): the
// kernel's row of a dual-stack SYN with its retransmissions and inode,
// and each outcome with the bootstrap's stage names and hint.
TEST(JobWatch, SocketsTellWhereEachRanksRendezvousStands) {
  const std::string v6 =
      "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
      "tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0000000000000000FFFF00000100007F:B1A2 0000000000000000FFFF00000100007F:7347 02 00000000:00000000 "
      "01:00000166 00000002     0        0 123456 2 0000000000000000 1000 0 0 2 -1\n";
  const auto rows = net::parse_tcp_table(v6, true);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, "SYN_SENT");
  EXPECT_EQ(rows[0].remote, "[::ffff:127.0.0.1]");
  EXPECT_EQ(rows[0].remote_port, 29511);
  EXPECT_EQ(rows[0].retransmits, 2);
  EXPECT_EQ(rows[0].inode, 123456u);
  const std::map<std::string, std::string> env = {
      {"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29500"}};
  const WatchedRank syn = read_rendezvous(7, env, {{"10.0.0.7:40000", "10.0.0.5:29500", 40000, 29500, "SYN_SENT", 3}});
  EXPECT_EQ(syn.rank, 2);
  EXPECT_EQ(syn.world_size, 4);
  EXPECT_EQ(syn.stage, Stage::store_connect);
  EXPECT_EQ(syn.outcome, "unanswered");
  EXPECT_EQ(syn.detail, "SYN to 10.0.0.5:29500 unanswered for at least 7 s (3 retransmissions)");
  EXPECT_NE(syn.hint.find("got no answer at all"), std::string::npos) << syn.hint;
  EXPECT_EQ(describe(syn).rfind("rank 2 (pid 7) STORE_CONNECT unanswered: SYN to 10.0.0.5:29500", 0), 0u)
      << describe(syn);
  const WatchedRank host = read_rendezvous(8, env,
                                           {{"0.0.0.0:29500", "0.0.0.0:0", 29500, 0, "LISTEN", 0},
                                            {"10.0.0.5:29500", "10.0.0.6:41000", 29500, 41000, "ESTABLISHED", 0},
                                            {"10.0.0.5:29500", "10.0.0.7:41001", 29500, 41001, "ESTABLISHED", 0}});
  EXPECT_EQ(host.outcome, "hosting");
  EXPECT_EQ(host.store_clients, 2);
  EXPECT_EQ(host.detail, "hosts the store on 0.0.0.0:29500 with 2 client connections");
  const WatchedRank in = read_rendezvous(9, env, {{"10.0.0.6:41000", "10.0.0.5:29500", 41000, 29500, "ESTABLISHED"}});
  EXPECT_EQ(in.outcome, "connected");
  EXPECT_EQ(in.stage, Stage::store_handshake);
  const WatchedRank none = read_rendezvous(10, env, {{"10.0.0.6:41000", "10.0.0.9:22", 41000, 22, "ESTABLISHED"}});
  EXPECT_EQ(none.outcome, "not_connected");
  EXPECT_EQ(none.stage, Stage::store_connect);
  EXPECT_TRUE(none.hint.empty());
  // Resets counted in the namespaces in the last seconds: with the
  // store's host seen listening, a rule rejects; without, refused.
  std::vector<WatchedRank> look = {host, none, in};
  read_resets(look, {{8, 3}, {10, 2}, {9, 5}});
  EXPECT_EQ(look[0].outcome, "hosting");
  EXPECT_EQ(look[2].outcome, "connected");
  EXPECT_EQ(look[1].outcome, "rejected");
  EXPECT_EQ(look[1].detail, "2 connects reset in the last seconds while rank 2 (pid 8) listens on MASTER_PORT 29500");
  EXPECT_NE(look[1].hint.find("a firewall rule rejects them"), std::string::npos) << look[1].hint;
  std::vector<WatchedRank> alone = {none, none};
  alone[1].pid = 11;
  read_resets(alone, {{10, 1}, {11, 0}});
  EXPECT_EQ(alone[0].outcome, "refused");
  EXPECT_NE(alone[0].hint.find("answered MASTER_PORT 29500 with a reset"), std::string::npos) << alone[0].hint;
  EXPECT_EQ(alone[1].outcome, "not_connected");  // nothing failed in its namespace
  // This process's own namespace has the counter.
  EXPECT_TRUE(failed_connects(::getpid()).has_value());
}

// Flight Recorder records as torch 2.15's debug server sends them (format
// 2.10, trimmed to the fields read): the rank behind named with the call
// it has not made; every rank in one call; bad replies named.
TEST(JobWatch, FlightRecordersReadTogetherNameTheRankBehind) {
  auto record = [](int last_enqueued, int last_completed) {
    std::string entries;
    for (int seq = 1; seq <= last_enqueued; ++seq) {
      entries += fmt::format(R"({}{{"collective_seq_id":{},"process_group":["0","default_pg"],)"
                             R"("profiling_name":"gloo:all_reduce","state":"scheduled","retired":{}}})",
                             seq == 1 ? "" : ",", seq, seq <= last_completed ? "true" : "false");
    }
    return fmt::format(R"({{"version":"2.10","entries":[{}],"pg_status":{{"0":{{"last_completed_collective":"{}",)"
                       R"("last_enqueued_collective":"{}","last_started_collective":"-1"}}}}}})",
                       entries, last_completed, last_enqueued);
  };
  const auto r0 = parse_flight_record(0, record(4, 3));
  ASSERT_TRUE(r0.error.empty()) << r0.error;
  ASSERT_EQ(r0.groups.size(), 1u);
  EXPECT_EQ(r0.groups[0].process_group, "0 (default_pg)");
  EXPECT_EQ(r0.groups[0].last_enqueued, 4);
  EXPECT_EQ(r0.calls.size(), 4u);
  const auto r1 = parse_flight_record(1, record(3, 3));
  const auto r2 = parse_flight_record(2, record(4, 3));
  EXPECT_EQ(read_wavefront({r0, r1, r2}),
            std::vector<std::string>{"process group 0 (default_pg): rank 1 has not called gloo:all_reduce #4 (ranks "
                                     "0, 2 have); its last call was gloo:all_reduce #3, completed"});
  EXPECT_EQ(
      read_wavefront({r0, r2}),
      std::vector<std::string>{
          "process group 0 (default_pg): every rank called gloo:all_reduce #4; ranks 0, 2 have not completed it"});
  const auto done = parse_flight_record(1, record(4, 4));
  EXPECT_EQ(read_wavefront({done}),
            std::vector<std::string>{
                "process group 0 (default_pg): every rank completed gloo:all_reduce #4; no rank is behind"});
  EXPECT_EQ(parse_flight_record(3, "<html>").error, "the Flight Recorder's reply is not JSON");
  EXPECT_NE(parse_flight_record(3, R"({"entries":[{"profiling_name":7}],"pg_status":{}})").error.find("torch's format"),
            std::string::npos);
  EXPECT_EQ(parse_flight_record(3, R"({"entries":[]})").error, "the Flight Recorder's reply has no pg_status");
  FlightRecord missing;
  missing.rank = 3;
  missing.error = "it published no debug server";
  EXPECT_EQ(read_wavefront({missing}),
            std::vector<std::string>{"rank 3: no Flight Recorder record (it published no debug server)"});
}

}  // namespace
}  // namespace ringmaster
