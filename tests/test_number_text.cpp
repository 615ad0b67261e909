// kvsight/number_text.hpp: the formatter the CLI, the use cases and the decode model print with.
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

TEST(NumberText, CommasEveryThreeDigitsFromTheRight) {
  EXPECT_EQ(commas_text(0), "0");
  EXPECT_EQ(commas_text(999), "999");     // three digits: no separator
  EXPECT_EQ(commas_text(1000), "1,000");  // four: one
  EXPECT_EQ(commas_text(131072), "131,072");
  EXPECT_EQ(commas_text(4831838208ull), "4,831,838,208");
  // 2^64 - 1 = 18446744073709551615: 20 digits, 6 separators.
  EXPECT_EQ(commas_text(18446744073709551615ull), "18,446,744,073,709,551,615");
}

TEST(NumberText, CommasFixedSeparatesTheWholePartOnly) {
  // cliff.md's "10,095.188 us": 10095 -> "10,095", then ".188".
  EXPECT_EQ(commas_fixed_text(10095.188, 3), "10,095.188");
  EXPECT_EQ(commas_fixed_text(356.664, 3), "356.664");  // three whole digits: no separator
  EXPECT_EQ(commas_fixed_text(1234567.5, 1), "1,234,567.5");
  EXPECT_EQ(commas_fixed_text(-1234.5, 1), "-1,234.5");  // the sign stays in front
  EXPECT_EQ(commas_fixed_text(1234.0, 0), "1,234");      // no decimals, no point
}

TEST(NumberText, RoundTripIsTheShortestExactDecimal) {
  EXPECT_EQ(round_trip_text(356.664), "356.664");
  EXPECT_EQ(round_trip_text(0.1), "0.1");  // not 0.1000000000000000055511151231257827
  EXPECT_EQ(round_trip_text(2.0), "2");    // no trailing ".0"
  EXPECT_EQ(round_trip_text(-4.25), "-4.25");
  // 1/3 needs 17 significant digits to read back as the same double.
  EXPECT_EQ(std::stod(round_trip_text(1.0 / 3.0)), 1.0 / 3.0);
  EXPECT_EQ(round_trip_text(1.0 / 3.0), "0.3333333333333333");
}

}  // namespace
}  // namespace kvsight
