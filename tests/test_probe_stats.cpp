// Statistics, check bound, byte counts and shape validation of the probes, with
// numbers derived by hand in each test.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kvsight/error.hpp"
#include "kvsight/probes/probes.hpp"

namespace {
namespace kp = kvsight::probes;

TEST(ProbeStats, SummarizeInterpolatesPercentiles) {
  // Samples 1..10 (shuffled). Median = (5 + 6) / 2 = 5.5. p10: position 0.1 x 9 = 0.9 -> 1 + 0.9 x (2 - 1)
  // = 1.9. p90: position 8.1 -> 9 + 0.1 = 9.1. Spread = (9.1 - 1.9) / 5.5.
  const kp::Timing t = kp::summarize({7, 3, 10, 1, 5, 2, 9, 4, 8, 6});
  EXPECT_DOUBLE_EQ(t.median_us, 5.5);
  EXPECT_DOUBLE_EQ(t.p10_us, 1.9);
  EXPECT_DOUBLE_EQ(t.p90_us, 9.1);
  EXPECT_DOUBLE_EQ(t.min_us, 1.0);
  EXPECT_NEAR(t.spread, 7.2 / 5.5, 1e-12);
  EXPECT_EQ(t.repeats, 10);
  EXPECT_THROW(kp::summarize({}), kvsight::InputError);
}

TEST(ProbeStats, LeastSquaresSlope) {
  // y = 3x + 2 exactly -> 3. Points (0,0), (1,1), (2,4): mean x 1, mean y 5/3; sxy = (-1)(-5/3) + 0 +
  // (1)(7/3) = 4, sxx = 2 -> slope 2.
  EXPECT_DOUBLE_EQ(kp::least_squares_slope({1, 2, 3, 4}, {5, 8, 11, 14}), 3.0);
  EXPECT_DOUBLE_EQ(kp::least_squares_slope({0, 1, 2}, {0, 1, 4}), 2.0);
  EXPECT_DOUBLE_EQ(kp::least_squares_slope({5}, {1}), 0.0);
}

TEST(ProbeStats, ErrorBoundFollowsContext) {
  // 16 x 2^-24 x sqrt(context + 128): context 32768 -> sqrt(32896) = 181.37 -> 16 x 181.37 / 16777216 =
  // 1.7297e-4; context 896 -> sqrt(1024) = 32 -> 16 x 32 x 2^-24 = 2^-15 exactly.
  EXPECT_NEAR(kp::error_bound("bf16", 32768), 1.7297e-4, 1e-8);
  EXPECT_DOUBLE_EQ(kp::error_bound("fp16", 896), 0x1p-15);
  // A dropped 32-token tile at 32K moves the output by about 1.4 / sqrt(32768) = 7.7e-3: 40x the bound.
  EXPECT_LT(kp::error_bound("bf16", 32768) * 40, 1.4 / std::sqrt(32768.0));
}

TEST(ProbeStats, AttentionBytesCountedExactly) {
  kp::AttentionShape s;
  s.head_dim = 128;
  s.block_size = 16;
  s.kv_heads = 8;
  s.q_heads = 32;
  s.batch = 4;
  s.context = 32768;
  s.dtype = "bf16";
  // K+V: 32768 tokens x 8 heads x 128 x 2 bytes x 2 (K, V) x 4 seqs = 536,870,912.
  // Block table: 4 x (32768 / 16 = 2048) x 4 bytes = 32,768; seq lens 4 x 4 = 16.
  // q: 4 x 32 x 128 x 2 = 32,768; out (fp32): 4 x 32 x 128 x 4 = 65,536.
  EXPECT_EQ(kp::attention_bytes(s), 536870912ull + 32768 + 16 + 32768 + 65536);
  // Block 784, context 2000, batch 1, 2 KV / 12 Q, head_dim 256, fp16:
  // K+V 2000 x 2 x 256 x 2 x 2 = 4,096,000; table ceil(2000 / 784) = 3 blocks x 4 = 12; lens 4;
  // q 12 x 256 x 2 = 6,144; out 12 x 256 x 4 = 12,288.
  s = {256, 784, 2, 12, 1, 2000, "fp16"};
  EXPECT_EQ(kp::attention_bytes(s), 4096000ull + 12 + 4 + 6144 + 12288);
}

std::string error_of(const kp::AttentionShape& shape) {
  try {
    kp::validate_shape(shape);
  } catch (const kvsight::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ProbeStats, ValidateShapeNamesFlagAndAllowedValues) {
  kp::AttentionShape s;
  EXPECT_EQ(error_of(s), "");
  s.head_dim = 96;
  EXPECT_NE(error_of(s).find("--head-dim"), std::string::npos);
  EXPECT_NE(error_of(s).find("allowed: 64, 128, 256"), std::string::npos);
  s = {};
  s.q_heads = 12;
  s.kv_heads = 8;  // 12 % 8 != 0
  EXPECT_NE(error_of(s).find("--q-heads"), std::string::npos);
  s.q_heads = 17 * 8;  // GQA 17 > 16
  EXPECT_NE(error_of(s).find("1..16"), std::string::npos);
  s = {};
  s.dtype = "fp8";
  EXPECT_NE(error_of(s).find("allowed: bf16, fp16"), std::string::npos);
  s = {};
  s.block_size = 0;
  EXPECT_NE(error_of(s).find("--block-size"), std::string::npos);
  s = {};
  s.context = 0;
  EXPECT_NE(error_of(s).find("--context"), std::string::npos);
  EXPECT_THROW(kp::validate_kernel("flash"), kvsight::InputError);
}

}  // namespace
