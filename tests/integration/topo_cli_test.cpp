// ringmaster-cli topo as a user runs it: show, matrix, export and rings on
// the AWS files, this machine's discovery, and a bad file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "process.h"

namespace ringmaster {
namespace {

const std::string kDir = RINGMASTER_TOPOLOGY_DIR;

struct Run {
  int code;
  std::string out;
};

Run cli(std::vector<std::string> args) {
  args.insert(args.begin(), RINGMASTER_CLI);
  auto child = testing_support::spawn(args, {});
  child.finish();
  return {child.exit_code(), child.output};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TopoCli, ShowAndMatrixOfTheP4dFile) {
  const auto show = cli({"topo", "show", "--file", kDir + "/p4d-24xl-topo.xml"});
  ASSERT_EQ(show.code, 0);
  EXPECT_TRUE(contains(show.out, "declared by " + kDir + "/p4d-24xl-topo.xml: 2 packages, 8 GPUs, 4 NICs")) << show.out;
  EXPECT_TRUE(contains(show.out, "GPU7 0000:a0:1d.0 [10de:20b0]")) << show.out;
  const auto matrix = cli({"topo", "matrix", "--file", kDir + "/p4d-24xl-topo.xml"});
  ASSERT_EQ(matrix.code, 0);
  EXPECT_TRUE(contains(matrix.out, "NIC0    PIX     PIX     PHB     PHB     SYS")) << matrix.out;
  EXPECT_TRUE(contains(matrix.out, "Legend:")) << matrix.out;
}

TEST(TopoCli, G5FilledFromSysfs) {
  const auto run = cli({"topo", "matrix", "--file", kDir + "/g5.48xl-topo.xml", "--sysfs",
                        std::string(RINGMASTER_TEST_DATA_DIR) + "/sysfs-g5.48xlarge"});
  ASSERT_EQ(run.code, 0);
  EXPECT_TRUE(contains(run.out, "GPU7    ")) << run.out;
  EXPECT_TRUE(contains(run.out, "NIC0: 0000:00:15.0")) << run.out;
}

TEST(TopoCli, ExportLoadsBack) {
  const std::string xml = ::testing::TempDir() + "cli-export.xml";
  const std::string json = ::testing::TempDir() + "cli-export.json";
  ASSERT_EQ(
      cli({"topo", "export", "--file", kDir + "/p4d-24xl-topo.xml", "--nccl-file", xml, "--json-file", json}).code, 0);
  const auto again = cli({"topo", "show", "--file", xml});
  ASSERT_EQ(again.code, 0);
  EXPECT_TRUE(contains(again.out, "2 packages, 8 GPUs, 4 NICs")) << again.out;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["origin"], "declared");
  EXPECT_EQ(j["matrix"]["devices"].size(), 12u);
}

TEST(TopoCli, ThisMachineShowsItsNic) {
  const auto run = cli({"topo", "show"});
  ASSERT_EQ(run.code, 0);
  EXPECT_TRUE(contains(run.out, "Topology from hwloc discovery of")) << run.out;
  EXPECT_TRUE(contains(run.out, "NIC0")) << run.out;
  EXPECT_TRUE(contains(run.out, "[discovered]")) << run.out;
}

TEST(TopoCli, RingsForSixteenNodes) {
  const auto run = cli({"topo", "rings", "--file", kDir + "/p4d-24xl-topo.xml", "--nodes", "16", "--channels", "4"});
  ASSERT_EQ(run.code, 0);
  EXPECT_TRUE(contains(run.out, "# 16 nodes, 128 ranks, 4 channels")) << run.out;
  EXPECT_TRUE(contains(run.out, "Channel 00 : 0 2 3 4 5 6 7 1 8 ")) << run.out;
  EXPECT_TRUE(contains(run.out, "(nodes left and entered via NIC3)")) << run.out;
  EXPECT_TRUE(contains(run.out, "Tree 01 : tree 1")) << run.out;
}

TEST(TopoCli, BadFileIsNamed) {
  const std::string bad = ::testing::TempDir() + "cli-bad.xml";
  std::ofstream(bad) << "<system version=\"1\">\n<cpu>\n<pci class=\"0x030200\"/>\n</cpu>\n</system>\n";
  const auto run = cli({"topo", "show", "--file", bad});
  EXPECT_EQ(run.code, 2);  // bad input: a usage error (docs/cli.md); the message goes to stderr
  EXPECT_TRUE(run.out.empty()) << run.out;
  // The message names the file, the line and what was wrong there.
  auto child = testing_support::spawn({RINGMASTER_CLI, "topo", "show", "--file", bad}, {}, /*with_stderr=*/true);
  child.finish();
  EXPECT_NE(child.output.find(bad + ":3: <pci> without a busid"), std::string::npos) << child.output;
}

// An element this reader does not know is a warning on stderr naming the
// file and line; the tree is still shown, and the exit code is 0.
TEST(TopoCli, UnknownElementIsAWarningNotARefusal) {
  const std::string file = ::testing::TempDir() + "cli-unknown.xml";
  std::ofstream(file) << "<system version=\"1\">\n<cpu numaid=\"0\">\n<pcie/>\n</cpu>\n</system>\n";
  auto child = testing_support::spawn({RINGMASTER_CLI, "topo", "show", "--file", file}, {}, /*with_stderr=*/true);
  child.finish();
  EXPECT_EQ(child.exit_code(), 0) << child.output;
  EXPECT_NE(child.output.find("warning: " + file + ":3: element <pcie> inside <cpu> not known"), std::string::npos)
      << child.output;
  EXPECT_NE(child.output.find("Package 0"), std::string::npos) << child.output;
}

}  // namespace
}  // namespace ringmaster
