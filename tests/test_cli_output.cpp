// cli/output.hpp render_report in the terminal: labels left-aligned in one column, values
// in the next; preflight's report (values_left) starts every value at one column (issue #9).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "output.hpp"

namespace kvsight::cli {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

Report sample(bool values_left) {
  Report report;
  report.values_left = values_left;
  report.title = "title";
  report.sections.push_back(
      {"Node", {{"GPU", "NVIDIA H200 (sm_90)", "identity: nvml"}, {"catalog", "h200", ""}}});
  report.sections.push_back({"Verdict: PASS", {{"PASS", "no reason to hold back", ""}}});
  return report;
}

TEST(RenderReport, ValuesLeftStartInOneColumnAfterLeftAlignedLabels) {
  const std::vector<std::string> lines = lines_of(render_report(sample(true), Format::table));
  // title, "", "Node", 2 rows, "", "Verdict: PASS", 1 row.
  ASSERT_EQ(lines.size(), 8u);
  // The longest label is "catalog" (7 characters): "  " + label padded to 7 + "  " puts every
  // value at column 2 + 7 + 2 = 11.
  // Values padded to the widest (22, "no reason to hold back") where a note follows, so the
  // notes line up too: 22 - 19 = 3 spaces after "NVIDIA H200 (sm_90)", then 2.
  EXPECT_EQ(lines[3], "  GPU      NVIDIA H200 (sm_90)     identity: nvml");
  EXPECT_EQ(lines[4], "  catalog  h200");  // no note: no padding after the value
  EXPECT_EQ(lines[7], "  PASS     no reason to hold back");
  for (const std::size_t i : {3u, 4u, 7u}) EXPECT_NE(lines[i][11], ' ') << lines[i];
}

TEST(RenderReport, ValuesRightAlignedByDefault) {
  const std::vector<std::string> lines = lines_of(render_report(sample(false), Format::table));
  ASSERT_EQ(lines.size(), 8u);
  // The widest value is "no reason to hold back" (22): values end at column 11 + 22 = 33.
  EXPECT_EQ(lines[3], "  GPU         NVIDIA H200 (sm_90)  identity: nvml");
  EXPECT_EQ(lines[4], "  catalog                    h200");
  EXPECT_EQ(lines[7], "  PASS     no reason to hold back");
}

}  // namespace
}  // namespace kvsight::cli
