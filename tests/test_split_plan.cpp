// The split planner (kvsight/split_plan.hpp) that the probes and the decode model
// share. Expected splits derived by hand for H200 (132 SMs) and RX 7900 XT (84 CUs)
// shapes; the occupancies are inputs here (what the runtime would report for the
// split kernel), so each case shows its own arithmetic.
#include <gtest/gtest.h>

#include "kvsight/decode_model.hpp"
#include "kvsight/split_plan.hpp"

namespace {
using kvsight::plan_splits;
using kvsight::SplitPlan;
using kvsight::SplitPlanInput;

SplitPlan plan(std::uint32_t sms, std::uint32_t ctas, std::uint64_t batch, std::uint32_t kv_heads,
               std::uint64_t context) {
  SplitPlanInput input;
  input.multiprocessors = sms;
  input.ctas_per_multiprocessor = ctas;
  input.batch = batch;
  input.kv_heads = kv_heads;
  input.context = context;
  return plan_splits(input);
}

TEST(SplitPlan, H200HeadlineShape) {
  // H200: 132 SMs x 4 CTAs = 528 slots; batch 4 x 8 KV heads = 32 programs -> floor(528 / 32) = 16.
  // 32768 / 16 = 2048 tokens (a multiple of 32, >= 256) -> 16 splits of 2048.
  const SplitPlan p = plan(132, 4, 4, 8, 32768);
  EXPECT_EQ(p.programs, 32u);
  EXPECT_EQ(p.slots, 528u);
  EXPECT_EQ(p.splits, 16u);
  EXPECT_EQ(p.tokens_per_split, 2048u);
  // At 16384: 16384 / 16 = 1024 tokens -> 16 splits. At 4096: 4096 / 16 = 256 -> 16 splits of 256.
  EXPECT_EQ(plan(132, 4, 4, 8, 16384).splits, 16u);
  EXPECT_EQ(plan(132, 4, 4, 8, 4096).tokens_per_split, 256u);
  // At 2048: 2048 / 16 = 128 < 256 -> 256 tokens, ceil(2048 / 256) = 8 splits.
  EXPECT_EQ(plan(132, 4, 4, 8, 2048).splits, 8u);
  // At 1024: 4 splits; at 256 or less: no split.
  EXPECT_EQ(plan(132, 4, 4, 8, 1024).splits, 4u);
  EXPECT_EQ(plan(132, 4, 4, 8, 256).splits, 1u);
}

TEST(SplitPlan, H200CliffShape) {
  // Cliff shape (reference/cliff.md, per rank): batch 1 x 2 KV heads = 2 programs. At occupancy 2 (hd256):
  // 264 slots -> floor(264 / 2) = 132 splits; ceil(32768 / 132) = 249 -> rounded up to the 32-token tile
  // 256 -> ceil(32768 / 256) = 128 splits of 256.
  const SplitPlan p = plan(132, 2, 1, 2, 32768);
  EXPECT_EQ(p.splits, 128u);
  EXPECT_EQ(p.tokens_per_split, 256u);
  // 128 x 256 = 32768 covers the context, 127 x 256 = 32512 does not: no split is empty.
  EXPECT_GT(static_cast<std::uint64_t>(p.splits) * p.tokens_per_split, 32768u - p.tokens_per_split);
}

TEST(SplitPlan, Rx7900xtShapes) {
  // RX 7900 XT: 84 CUs x 2 = 168 slots. Cliff shape, 2 programs: floor(168 / 2) = 84; ceil(32768 / 84) =
  // 391 -> tile multiple 13 x 32 = 416 -> ceil(32768 / 416) = 79 splits (78 x 416 = 32448 < 32768).
  const SplitPlan cliff = plan(84, 2, 1, 2, 32768);
  EXPECT_EQ(cliff.splits, 79u);
  EXPECT_EQ(cliff.tokens_per_split, 416u);
  // Batch 4 x 8 KV heads = 32 programs: floor(168 / 32) = 5; ceil(32768 / 5) = 6554 -> 205 x 32 = 6560 ->
  // ceil(32768 / 6560) = 5 splits.
  const SplitPlan headline = plan(84, 2, 4, 8, 32768);
  EXPECT_EQ(headline.splits, 5u);
  EXPECT_EQ(headline.tokens_per_split, 6560u);
  // Batch 8 x 8 = 64 programs: floor(168 / 64) = 2 splits of 16384.
  EXPECT_EQ(plan(84, 2, 8, 8, 32768).splits, 2u);
  // Batch 32 x 8 = 256 programs >= 168 slots: the device is full, no split, one split of the whole context.
  const SplitPlan full = plan(84, 2, 32, 8, 32768);
  EXPECT_EQ(full.splits, 1u);
  EXPECT_EQ(full.tokens_per_split, 32768u);
}

TEST(SplitPlan, LimitsAndDegenerateInputs) {
  // 1000 SMs x 32 CTAs, one program, 2^24 tokens: 32000 slots -> capped at 4096 splits; 2^24 / 4096 = 4096
  // tokens each.
  const SplitPlan wide = plan(1000, 32, 1, 1, 1u << 24);
  EXPECT_EQ(wide.splits, 4096u);
  EXPECT_EQ(wide.tokens_per_split, 4096u);
  // Unknown device figures (0 SMs, occupancy 0) count as 1: one slot, no split.
  EXPECT_EQ(plan(0, 0, 1, 1, 32768).splits, 1u);
  // Context 0: one split that covers at least one token (the launcher wants tokens_per_split >= 1).
  const SplitPlan empty = plan(132, 4, 1, 1, 0);
  EXPECT_EQ(empty.splits, 1u);
  EXPECT_EQ(empty.tokens_per_split, 1u);
}

// The decode model splits with the same planner: a split kernel group at batch 4
// x 8 KV heads on 132 SMs. Calibration default 2 programs per SM: 264 slots / 32
// programs = 8 splits of 32768 / 8 = 4096 tokens. With a probe's occupancy of 4:
// 528 / 32 = 16 splits.
TEST(SplitPlan, DecodeModelUsesThePlanner) {
  kvsight::DecodeScenario scenario;
  scenario.batch = 4;
  scenario.calibration.concurrent_programs = 132;
  kvsight::DecodeLayerGroup group;
  group.kv_heads_per_rank = 8;
  group.splits_context = true;
  EXPECT_EQ(scenario.calibration.ctas_per_multiprocessor, 2u);
  EXPECT_EQ(kvsight::split_count(scenario, group, 32768, false), 8u);
  scenario.calibration.ctas_per_multiprocessor = 4;
  EXPECT_EQ(kvsight::split_count(scenario, group, 32768, false), 16u);
  EXPECT_EQ(kvsight::split_count(scenario, group, 32768, false), plan(132, 4, 4, 8, 32768).splits);
}

}  // namespace
