// Exact fp16 / bf16 conversions of the cpu backend and the reference
// (probes/src/half.hpp). Expected bit patterns derived by hand from IEEE 754.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "../probes/src/half.hpp"

namespace {
using namespace kvsight::probes::detail;

TEST(ProbeHalf, Fp16KnownValues) {
  // 1.0 = 0 01111 0000000000 = 0x3c00; -2.0 = 1 10000 0... = 0xc000.
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(-2.0f), 0xc000);
  // Largest finite 65504 = (2 - 2^-10) * 2^15 = 0x7bff; 65520 is the halfway point to 2^16 and rounds to inf.
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);
  // Smallest subnormal 2^-24 = 0x0001; 2^-25 is halfway to zero and ties to even (zero).
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 x 2^-24 ties to even: 2
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even -> 1.0; 1 + 3 x 2^-11 -> 1 + 2^-9 (0x3c02).
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  EXPECT_EQ(fp16_to_float(0x3555), 0.333251953125f);  // 1.0101010101b x 2^-2 = 1365/4096
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(fp16_to_float(0xfc00)) && fp16_to_float(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(NAN))));
}

TEST(ProbeHalf, Bf16KnownValues) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);  // top half of 0x3f800000
  EXPECT_EQ(float_to_bf16(-3.0f), 0xc040);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 0x3f80; 1 + 3 x 2^-8 -> 1 + 2^-6 = 0x3f82.
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);  // 1.1001001b x 2 = 201/64
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST(ProbeHalf, EveryPatternRoundTrips) {
  // float -> half of half -> float must give the same bits for every non-NaN pattern.
  int checked = 0;
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) continue;  // fp16 NaN
    ASSERT_EQ(float_to_fp16(fp16_to_float(h)), h) << "fp16 " << bits;
    if (!((h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0)) {  // bf16 NaN
      ASSERT_EQ(float_to_bf16(bf16_to_float(h)), h) << "bf16 " << bits;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2046);  // 2 x (2^10 - 1) fp16 NaN patterns skipped
}

}  // namespace
