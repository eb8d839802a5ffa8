// NCCL's RAS replies read back (tests/data/nccl_ras: the forms NCCL's user
// guide documents), and the client's side of RAS's text protocol against
// a peer that answers as NCCL's src/ras/client_support.cc does: a newer
// NCCL that takes SET FORMAT json, an older one that answers "ERROR:
// Unknown command" to it, and nothing listening. NCCL itself runs the
// same client in tests/device/check.sh where a GPU is.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "ringmaster/tools/nccl_ras.h"

namespace ringmaster {
namespace {

std::string fixture(const char* name) {
  std::ifstream in(std::string(RINGMASTER_TEST_DATA_DIR "/nccl_ras/") + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(NcclRas, TextReportsErrorsAndWarningsAreRead) {
  const RasStatus s = parse_ras_text(fixture("stopped_process.txt"));
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.format, "text");
  ASSERT_EQ(s.errors.size(), 2u);
  EXPECT_EQ(s.errors[0],
            "INCOMPLETE: Missing communicator data from 1 job process; Process 40712 on node 10.1.0.12 managing GPU 3");
  EXPECT_EQ(s.errors[1],
            "#0-0 (5d1c9e0a4f3b2a17) INCOMPLETE: Missing communicator data from 1 rank; The missing rank: 11");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0], "TIMEOUT: Encountered 2 communication timeouts while gathering communicator data");
  const auto lines = read_ras(s);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("RAS error: INCOMPLETE: ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[2].rfind("RAS warning: TIMEOUT: ", 0), 0u) << lines[2];
  // A healthy job's report: nothing to say.
  const RasStatus healthy = parse_ras_text(
      "Job summary\n===========\n\n    Nodes  Processes\n        4          8\n\nCommunicators... (0.00s)\n"
      "=============\n\nGroup     Comms\n    0         8   RUNNING      OK\n");
  EXPECT_TRUE(healthy.error.empty()) << healthy.error;
  EXPECT_TRUE(read_ras(healthy).empty());
  EXPECT_FALSE(parse_ras_text("ERROR: Unknown command STATUS\n").error.empty());
}

TEST(NcclRas, JsonNamesMissingDeadAndTheRanksBehind) {
  const RasStatus s = parse_ras_json(fixture("dead_and_behind.json"));
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.nccl_version, "2.29.1");
  ASSERT_EQ(s.communicators.size(), 2u);
  EXPECT_EQ(s.communicators[0].ranks.size(), 4u);
  EXPECT_EQ(s.timeouts, 2);
  const auto lines = read_ras(s);
  const std::vector<std::string> expected = {
      "communicator 0x6b21f0c3d9e84a55: rank 1 (pid 3302 on 10.1.0.11, GPU 1) is missing: unresponsive (RAS could "
      "not reach it)",
      "communicator 0x6b21f0c3d9e84a55: rank 3 (pid 4403 on 10.1.0.12, GPU 1) is considered dead (unreachable over "
      "RAS for 60 s)",
      "communicator 0x0c44a9e1b7f25d36: rank 4 (pid 4405 on 10.1.0.12, GPU 1) has an asynchronous error (ncclResult "
      "5)",
      "communicator 0x0c44a9e1b7f25d36: ranks 2, 5 have launched 4811 AllReduce, the furthest 4812",
      "RAS met 2 communication timeouts gathering the data"};
  EXPECT_EQ(lines, expected);
  EXPECT_FALSE(parse_ras_json("not json").error.empty());
  EXPECT_FALSE(parse_ras_json(R"({"communicators": [{"ranks": 3}]})").error.empty());
}

TEST(NcclRas, AddressesAsNcclRasAddrTakesThem) {
  EXPECT_EQ(ras_address(""), (std::pair<std::string, int>{"localhost", 28028}));
  EXPECT_EQ(ras_address("10.0.0.5:29999"), (std::pair<std::string, int>{"10.0.0.5", 29999}));
  EXPECT_EQ(ras_address("[fd77::5]:29999"), (std::pair<std::string, int>{"fd77::5", 29999}));
  EXPECT_EQ(ras_address("node-1"), (std::pair<std::string, int>{"node-1", 28028}));
  EXPECT_EQ(ras_address("node-1:http"), (std::pair<std::string, int>{"node-1", 28028}));
}

// A RAS port on loopback that answers one client as NCCL's server does;
// `json` says whether it takes SET FORMAT json (NCCL 2.28.7 and later).
struct RasPeer {
  int listener = -1;
  int port = 0;
  std::thread thread;
  std::string heard;

  RasPeer(bool json, std::string status) {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(listener, 1);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    thread = std::thread([this, json, status] {
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      std::string pending;
      char buf[512];
      for (bool done = false; !done;) {
        const ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        pending.append(buf, static_cast<std::size_t>(n));
        for (auto nl = pending.find('\n'); nl != std::string::npos && !done; nl = pending.find('\n')) {
          const std::string cmd = pending.substr(0, nl);
          pending.erase(0, nl + 1);
          heard += cmd + "\n";
          std::string reply;
          if (cmd.rfind("CLIENT PROTOCOL ", 0) == 0) {
            reply = "SERVER PROTOCOL 2\n";
          } else if (cmd.rfind("TIMEOUT ", 0) == 0) {
            reply = "OK\n";
          } else if (cmd == "SET FORMAT json" && json) {
            reply = "OK\n";
          } else if (cmd == "STATUS" || cmd == "VERBOSE STATUS") {
            reply = status;
            done = true;
          } else {
            reply = "ERROR: Unknown command " + cmd + "\n";
          }
          (void)::write(fd, reply.data(), reply.size());
        }
      }
      ::close(fd);
    });
  }
  void finish() {
    if (thread.joinable()) thread.join();
  }
  ~RasPeer() {
    finish();
    ::close(listener);
  }
};

TEST(NcclRas, ClientSpeaksRassProtocolJsonWhereTakenTextElse) {
  RasPeer newer(true, fixture("dead_and_behind.json"));
  const RasStatus json = query_ras("127.0.0.1", newer.port, std::chrono::seconds(5));
  newer.finish();
  EXPECT_TRUE(json.error.empty()) << json.error;
  EXPECT_EQ(json.format, "json");
  EXPECT_EQ(json.communicators.size(), 2u);
  EXPECT_EQ(newer.heard, "CLIENT PROTOCOL 2\nTIMEOUT 5\nSET FORMAT json\nVERBOSE STATUS\n");
  // An NCCL before 2.28.7: no JSON, the text report.
  RasPeer older(false, fixture("stopped_process.txt"));
  const RasStatus text = query_ras("127.0.0.1", older.port, std::chrono::seconds(5));
  older.finish();
  EXPECT_TRUE(text.error.empty()) << text.error;
  EXPECT_EQ(text.format, "text");
  EXPECT_EQ(text.errors.size(), 2u);
  // Nothing listening: said, with what turns RAS on.
  int closed_port = 0;
  {
    RasPeer gone(true, "");
    closed_port = gone.port;
    ::shutdown(gone.listener, SHUT_RDWR);  // its accept returns; nothing listens on the port any more
    gone.finish();
  }
  const RasStatus nothing = query_ras("127.0.0.1", closed_port, std::chrono::seconds(2));
  EXPECT_NE(nothing.error.find("cannot connect to NCCL's RAS port 127.0.0.1:" + std::to_string(closed_port)),
            std::string::npos)
      << nothing.error;
  EXPECT_EQ(read_ras(nothing), std::vector<std::string>{nothing.error});
}

}  // namespace
}  // namespace ringmaster
