// NCCL's INFO lines read back: each form as NCCL prints it (the format
// strings of src/graph/rings.cc, src/init.cc, src/transport/*.cc and
// src/enqueue.cc), with the "host:pid:tid [dev] NCCL INFO" prefix.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ringmaster/tools/nccl_log.h"

namespace ringmaster {
namespace {

// Four ranks on one node, two channels, as rank 0 and rank 1 write it.
constexpr const char* kLog = R"(node-1:4021:4021 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.5<0>
node-1:4021:4021 [0] NCCL INFO NCCL version 2.27.3+cuda12.9
node-1:4021:4058 [0] NCCL INFO Channel 00/02 : 0 1 2 3
node-1:4021:4058 [0] NCCL INFO Channel 01/02 : 0 3 2 1
node-1:4021:4058 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 3/-1/-1->0->-1
node-1:4022:4060 [1] NCCL INFO Trees [0] 2/-1/-1->1->0 [1] -1/-1/-1->1->2
node-1:4021:4058 [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
node-1:4021:4064 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node-1:4021:4064 [0] NCCL INFO Channel 01/0 : 0[0] -> 3[3] via P2P/IPC
node-1:4022:4066 [1] NCCL INFO Channel 00 : 1[1] -> 2[2] via SHM/direct/direct
node-1:4022:4066 [1] NCCL INFO Channel 01/0 : 1[1] -> 5[1] [send] via NET/AWS Libfabric/0/GDRDMA
node-1:4022:4066 [1] NCCL INFO Channel 01/0 : 5[1] -> 1[1] [receive] via NET/Socket/0
node-1:4021:4021 [0] NCCL INFO AllReduce: 8 Bytes -> Algo Tree proto LL channel{Lo..Hi}={0..0}
node-1:4021:4021 [0] NCCL INFO AllReduce: 1073741824 Bytes -> Algo Ring proto Simple channel{Lo..Hi}={0..1}
node-1:4021:4021 [0] NCCL INFO Channel 00/02 : 0 1 x 3
node-1:4021:4021 [0] NCCL WARN Channel 00/02 : 7 8
an unrelated line
)";

TEST(NcclLog, ReadsRingsTreesChannelsTransportsAndPicks) {
  const NcclDecisions d = read_nccl_log(kLog);
  EXPECT_EQ(d.version, "2.27.3+cuda12.9");
  EXPECT_EQ(d.lines_read, 15);                                             // the NCCL INFO lines, used or not
  EXPECT_EQ(d.warnings, std::vector<std::string>{"Channel 00/02 : 7 8"});  // a WARN line is a warning, never a ring
  EXPECT_EQ(summarize(d),
            "NCCL 2.27.3+cuda12.9, 2 coll channels, 2 rings, 4 tree links, transports P2P/CUMEM/read, P2P/IPC, "
            "SHM/direct/direct, NET/AWS Libfabric/0/GDRDMA, last pick AllReduce 1073741824 B -> "
            "Ring/Simple; 1 warning, the last: Channel 00/02 : 7 8");

  ASSERT_EQ(d.rings.size(), 2u);  // the line with "x" in it is not a ring
  EXPECT_EQ(d.rings[0].channel, 0);
  EXPECT_EQ(d.rings[0].channels, 2);
  EXPECT_EQ(d.rings[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(d.rings[1].ranks, (std::vector<int>{0, 3, 2, 1}));

  ASSERT_EQ(d.trees.size(), 4u);
  EXPECT_EQ(d.trees[0].rank, 0);
  EXPECT_EQ(d.trees[0].channel, 0);
  EXPECT_EQ(d.trees[0].children, std::vector<int>{1});
  EXPECT_EQ(d.trees[0].parent, -1);
  EXPECT_EQ(d.trees[2].rank, 1);
  EXPECT_EQ(d.trees[2].parent, 0);
  EXPECT_EQ(d.trees[3].children, std::vector<int>{});
  EXPECT_EQ(d.trees[3].parent, 2);

  EXPECT_EQ(d.coll_channels, 2);
  EXPECT_EQ(d.p2p_channels, 2);
  EXPECT_EQ(d.nvls_channels, 0);

  // The [receive] half of a network connection is the same connection.
  ASSERT_EQ(d.connections.size(), 4u);
  EXPECT_EQ(d.connections[0].transport, "P2P/CUMEM/read");
  EXPECT_EQ(d.connections[0].kind, "P2P");
  EXPECT_EQ(d.connections[0].from, 0);
  EXPECT_EQ(d.connections[0].to, 1);
  EXPECT_EQ(d.connections[2].transport, "SHM/direct/direct");
  EXPECT_EQ(d.connections[2].channel, 0);
  EXPECT_EQ(d.connections[3].kind, "NET");
  EXPECT_EQ(d.connections[3].transport, "NET/AWS Libfabric/0/GDRDMA");

  ASSERT_EQ(d.picks.size(), 2u);
  EXPECT_EQ(d.picks[0].collective, "AllReduce");
  EXPECT_EQ(d.picks[0].bytes, 8u);
  EXPECT_EQ(d.picks[0].algorithm, "Tree");
  EXPECT_EQ(d.picks[0].protocol, "LL");
  EXPECT_EQ(d.picks[1].bytes, 1073741824u);
  EXPECT_EQ(d.picks[1].channel_hi, 1);

  const auto json = nlohmann::json::parse(to_json(d));
  EXPECT_EQ(json["rings"][1]["ranks"], nlohmann::json({0, 3, 2, 1}));
  EXPECT_EQ(json["picks"][1]["algorithm"], "Ring");
  EXPECT_EQ(json["version"], "2.27.3+cuda12.9");
}

TEST(NcclLog, OddLinesAreSkippedNotMisread) {
  NcclDecisions d;
  for (const char* line : {"", "NCCL INFO", " NCCL INFO ", "x NCCL INFO Channel", "x NCCL INFO Channel 00/",
                           "x NCCL INFO Channel 00/02 :", "x NCCL INFO Channel 00/0 : 0[0] -> 1",
                           "x NCCL INFO Channel 00/0 : 0[0] -> 1[1] via ", "x NCCL INFO Trees [0] 1/-1->0->-1",
                           "x NCCL INFO Trees", "x NCCL INFO : 8 Bytes -> Algo Ring proto LL channel{Lo..Hi}={0..0}",
                           "x NCCL INFO AllReduce: 8 Bytes -> Algo Ring proto LL channel{Lo..Hi}={0..",
                           "x NCCL INFO 2 coll channels, 2 collnet"}) {
    EXPECT_FALSE(read_nccl_line(line, d)) << line;
  }
  EXPECT_TRUE(d.rings.empty());
  EXPECT_TRUE(d.trees.empty());
  EXPECT_TRUE(d.connections.empty());
  EXPECT_TRUE(d.picks.empty());
  EXPECT_EQ(d.coll_channels, 0);
}

}  // namespace
}  // namespace ringmaster
