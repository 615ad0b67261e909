// kvsight/number_text.hpp: the formatter the use cases and the decode model print with.
#include <gtest/gtest.h>

#include <string>

#include "kvsight/number_text.hpp"

namespace kvsight {
namespace {

TEST(NumberText, FixedDigitsAndGib) {
  EXPECT_EQ(fixed_text(3.14159, 2), "3.14");
  EXPECT_EQ(fixed_text(2.5, 0).size(), 1u);  // "2" or "3" by the C library's rounding; one digit
  EXPECT_EQ(fixed_text(1234.5678, 3), "1234.568");
  // 4,831,838,208 B / 2^30 = 4.5 exactly.
  EXPECT_EQ(gib_text(4831838208ull), "4.50 GiB");
  EXPECT_EQ(gib_text(1073741824ull, 1), "1.0 GiB");
}

TEST(NumberText, HugeValuesPrintWholeNotCut) {
  // 1e300 in %.0f is "1" followed by 300 digits (the nearest double's digits): 301 characters,
  // far beyond any fixed buffer; a cut would be a silently wrong number in a message.
  EXPECT_EQ(fixed_text(1e300, 0).size(), 301u);
  EXPECT_EQ(fixed_text(1e300, 2).size(), 304u);  // + ".00"
}

}  // namespace
}  // namespace kvsight
