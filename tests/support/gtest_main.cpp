// The main of every GoogleTest binary here: runs the tests as gtest_main
// does, then tells ctest what it skipped, so a suite that ran nothing is
// never reported as passed. When nothing failed and a test skipped, it
// prints one line per skipped test,
//
//   ringmaster-skip: Suite.Name: <the reason given to GTEST_SKIP()>
//
// and exits 77, which ctest reads as "Skipped" (SKIP_RETURN_CODE, set by
// ringmaster_test). A failure wins over a skip: the exit is then 1.
// tests/skip_report.py collects these lines after a run.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

constexpr int kSkipped = 77;

// The message GTEST_SKIP() was given, on one line.
std::string skip_reason(const testing::TestResult& result) {
  for (int i = 0; i < result.total_part_count(); ++i) {
    const auto& part = result.GetTestPartResult(i);
    if (!part.skipped()) continue;
    std::string text = part.message();
    for (char& c : text)
      if (c == '\n') c = ' ';
    return text.empty() ? "(no reason given)" : text;
  }
  return "(no reason given)";
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc != 0) return rc;
  const auto& unit = *testing::UnitTest::GetInstance();
  if (unit.skipped_test_count() == 0) return 0;
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const auto& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const auto& info = *suite.GetTestInfo(t);
      if (!info.should_run() || !info.result()->Skipped()) continue;
      std::printf("ringmaster-skip: %s.%s: %s\n", suite.name(), info.name(), skip_reason(*info.result()).c_str());
    }
  }
  std::printf("ringmaster-skip: %d of %d tests skipped, none failed; exit %d tells ctest\n", unit.skipped_test_count(),
              unit.test_to_run_count(), kSkipped);
  std::fflush(stdout);
  return kSkipped;
}
