// The bisection's decisions (tools/bisect.h) over measured groups: which
// groups each round measures and what the rounds name, for every slow
// node and every slow link of clusters of 2 to 64 nodes, within
// log2(nodes) + 2 rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "ringmaster/tools/bisect.h"

namespace ringmaster {
namespace {

std::vector<int> iota_nodes(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = i;
  return v;
}

// Runs the decisions against `busbw_of` (a group's busbw as a cluster with
// one fault would give it) until a verdict.
BisectReport bisect_with(int n, const std::function<double(const std::vector<int>&)>& busbw_of, double whole) {
  BisectSpec spec;
  spec.whole_busbw = whole;
  BisectReport report;
  for (int round = 1; round < 64; ++round) {
    const auto groups = next_bisect_groups(iota_nodes(n), report.rounds, spec, report.verdict);
    if (groups.empty()) return report;
    BisectRound r;
    r.round = round;
    for (const auto& g : groups)
      r.groups.push_back({g, busbw_of(g), false, {}});
    report.rounds.push_back(r);
  }
  ADD_FAILURE() << "no verdict in 64 rounds";
  return report;
}

bool has(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

int most_rounds(int n) {
  return static_cast<int>(std::floor(std::log2(n))) + 2;
}

TEST(Bisect, EightNodesOneSlowHostNamedInThreeRounds) {
  const auto report = bisect_with(
      8, [](const std::vector<int>& g) { return has(g, 5) ? 3.0 : 10.0; }, 3.0);
  ASSERT_EQ(report.rounds.size(), 3u);
  EXPECT_EQ(report.rounds[0].groups[0].nodes, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(report.rounds[0].groups[1].nodes, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(report.rounds[1].groups[0].nodes, (std::vector<int>{4, 5}));
  // The last round: each suspect with a cleared node of its own, and a
  // cleared pair, side by side.
  EXPECT_EQ(report.rounds[2].groups[0].nodes, (std::vector<int>{0, 4}));
  EXPECT_EQ(report.rounds[2].groups[1].nodes, (std::vector<int>{1, 5}));
  EXPECT_EQ(report.rounds[2].groups[2].nodes, (std::vector<int>{2, 3}));
  EXPECT_EQ(report.verdict.kind, BisectVerdict::Kind::node);
  EXPECT_EQ(report.verdict.node, 5);
  EXPECT_NE(report.verdict.text.find("node 5: with node 1 it reaches 3.00 GB/s, node 4 with node 0 10.00"),
            std::string::npos)
      << report.verdict.text;
}

TEST(Bisect, EverySlowNodeOfTwoToSixtyFourIsNamed) {
  for (int n = 3; n <= 64; ++n) {
    for (int slow = 0; slow < n; ++slow) {
      const auto report = bisect_with(
          n, [&](const std::vector<int>& g) { return has(g, slow) ? 2.0 : 9.0; }, 2.0);
      ASSERT_EQ(report.verdict.kind, BisectVerdict::Kind::node)
          << n << " nodes, slow " << slow << ": " << report.verdict.text;
      EXPECT_EQ(report.verdict.node, slow) << n << " nodes";
      EXPECT_LE(static_cast<int>(report.rounds.size()), most_rounds(n)) << n << " nodes, slow " << slow;
    }
  }
}

TEST(Bisect, EverySlowLinkIsNamedOrPlacedBetweenTheHalves) {
  // A link slows a group only when both its ends are in it.
  for (int n = 4; n <= 32; n += 3) {
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        const auto report = bisect_with(
            n, [&](const std::vector<int>& g) { return has(g, a) && has(g, b) ? 2.0 : 9.0; }, 2.0);
        EXPECT_LE(static_cast<int>(report.rounds.size()), most_rounds(n));
        const auto& v = report.verdict;
        if (v.kind == BisectVerdict::Kind::link) {
          EXPECT_EQ(std::make_pair(v.from, v.to), std::make_pair(a, b)) << n << " nodes: " << v.text;
        } else {
          ASSERT_EQ(v.kind, BisectVerdict::Kind::between) << n << " nodes, link " << a << "-" << b << ": " << v.text;
          EXPECT_TRUE((has(v.side_a, a) && has(v.side_b, b)) || (has(v.side_a, b) && has(v.side_b, a))) << v.text;
        }
      }
    }
  }
}

TEST(Bisect, AUniformClusterHasNoCulprit) {
  const auto report = bisect_with(
      8, [](const std::vector<int>&) { return 9.0; }, 8.5);
  ASSERT_EQ(report.rounds.size(), 1u);
  EXPECT_EQ(report.verdict.kind, BisectVerdict::Kind::none);
  EXPECT_NE(report.verdict.text.find("the cluster as a whole"), std::string::npos) << report.verdict.text;
}

TEST(Bisect, ThreeNodesEveryPair) {
  const auto node = bisect_with(
      3, [](const std::vector<int>& g) { return has(g, 2) ? 1.0 : 9.0; }, 1.0);
  ASSERT_EQ(node.rounds.size(), 1u);
  EXPECT_EQ(node.rounds[0].groups.size(), 3u);
  EXPECT_EQ(node.verdict.kind, BisectVerdict::Kind::node);
  EXPECT_EQ(node.verdict.node, 2);
  const auto link = bisect_with(
      3, [](const std::vector<int>& g) { return has(g, 0) && has(g, 2) ? 1.0 : 9.0; }, 1.0);
  EXPECT_EQ(link.verdict.kind, BisectVerdict::Kind::link);
  EXPECT_EQ(std::make_pair(link.verdict.from, link.verdict.to), std::make_pair(0, 2));
}

TEST(Bisect, TwoNodesCannotBeTold) {
  const auto report = bisect_with(
      2, [](const std::vector<int>&) { return 1.0; }, 1.0);
  EXPECT_TRUE(report.rounds.empty());
  EXPECT_EQ(report.verdict.kind, BisectVerdict::Kind::none);
  EXPECT_NE(report.verdict.text.find("link check"), std::string::npos);
}

TEST(Bisect, AGroupThatCouldNotRunIsSlow) {
  // Node 6's ranks never formed their group (busbw 0): it is searched.
  const auto report = bisect_with(
      8, [](const std::vector<int>& g) { return has(g, 6) ? 0.0 : 9.0; }, 1.0);
  EXPECT_EQ(report.verdict.kind, BisectVerdict::Kind::node);
  EXPECT_EQ(report.verdict.node, 6);
}

TEST(Bisect, RoundsThatDoNotFollowAreRefused) {
  BisectSpec spec;
  BisectVerdict verdict;
  std::vector<BisectRound> rounds = {{1, {{{0, 1}, 1, false, {}}}}};  // one group where halves were due
  EXPECT_TRUE(next_bisect_groups(iota_nodes(8), rounds, spec, verdict).empty());
  EXPECT_EQ(verdict.kind, BisectVerdict::Kind::none);
  EXPECT_NE(verdict.text.find("does not follow"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster
