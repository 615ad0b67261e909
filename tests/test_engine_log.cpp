// The engine start-up log reader on excerpts of public logs (tests/fixtures/logs/, each file
// names its source). Expected figures are the ones printed in those logs.
#include <gtest/gtest.h>

#include <string>

#include "kvsight/engine_log.hpp"
#include "log_fixtures.hpp"

namespace kvsight {
namespace {

TEST(EngineLog, VllmV0ProfilingLineFromIssue10517) {
  const EngineLogFigures f = read_engine_log(test::fixture_text("vllm-10517-20k.log"));
  EXPECT_EQ(f.engine, "vllm");
  ASSERT_TRUE(f.total_gpu_gib && f.available_kv_gib && f.gpu_memory_utilization && f.weights_gib);
  EXPECT_DOUBLE_EQ(*f.total_gpu_gib, 23.58);
  EXPECT_DOUBLE_EQ(*f.available_kv_gib, 3.81);
  EXPECT_DOUBLE_EQ(*f.gpu_memory_utilization, 0.90);
  EXPECT_DOUBLE_EQ(*f.weights_gib, 14.9888);
  EXPECT_EQ(f.num_gpu_blocks.value_or(0), 1952u);
  EXPECT_EQ(f.max_model_len.value_or(0), 20000u);
  EXPECT_DOUBLE_EQ(f.max_concurrency.value_or(0), 1.56);
  EXPECT_EQ(f.matched_lines.size(), 4u);  // the 3 comment lines are not figures
}

TEST(EngineLog, VllmV1BlocksFromPr12569) {
  const EngineLogFigures f = read_engine_log(test::fixture_text("vllm-pr12569.log"));
  EXPECT_EQ(f.num_gpu_blocks.value_or(0), 1381u);
  EXPECT_EQ(f.max_model_len.value_or(0), 2048u);
  EXPECT_DOUBLE_EQ(f.max_concurrency.value_or(0), 10.79);
  EXPECT_DOUBLE_EQ(f.weights_gib.value_or(0), 67.7229);
  EXPECT_FALSE(f.available_kv_gib);
}

TEST(EngineLog, VllmTokensWithCommas) {
  const EngineLogFigures a = read_engine_log(test::fixture_text("vllm-21348.log"));
  EXPECT_DOUBLE_EQ(a.available_kv_gib.value_or(0), 8.11);
  EXPECT_EQ(a.kv_tokens.value_or(0), 178880u);
  const EngineLogFigures b = read_engine_log(test::fixture_text("vllm-pr13596.log"));
  EXPECT_EQ(b.kv_tokens.value_or(0), 2042016u);
  EXPECT_EQ(b.max_model_len.value_or(0), 2048u);
  EXPECT_DOUBLE_EQ(b.max_concurrency.value_or(0), 997.08);
}

TEST(EngineLog, SglangPoolLine) {
  const EngineLogFigures f = read_engine_log(test::fixture_text("sglang-21348.log"));
  EXPECT_EQ(f.engine, "sglang");
  EXPECT_EQ(f.kv_tokens.value_or(0), 367404u);
  EXPECT_DOUBLE_EQ(f.kv_size_gib.value_or(0), 8.23 + 8.23);
}

TEST(EngineLog, CombinedLineOfNewerVllmAndNegativeMemory) {
  // 0.28+ prints tokens and concurrency on one line; a model that does not fit logs a
  // negative available memory.
  const EngineLogFigures f = read_engine_log(
      "Available KV cache memory: -1.25 GiB\n"
      "GPU KV cache size: 72,817 tokens, Maximum concurrency for 32,768 tokens per request: 2.22x\n");
  EXPECT_DOUBLE_EQ(f.available_kv_gib.value_or(0), -1.25);
  EXPECT_EQ(f.kv_tokens.value_or(0), 72817u);
  EXPECT_EQ(f.max_model_len.value_or(0), 32768u);
  EXPECT_DOUBLE_EQ(f.max_concurrency.value_or(0), 2.22);
}

TEST(EngineLog, UnknownTextGivesNoFigures) {
  const EngineLogFigures f = read_engine_log("hello\n\n# a comment\nGPU KV cache size: lots\n");
  EXPECT_EQ(f.engine, "");
  EXPECT_FALSE(f.kv_tokens);
  EXPECT_TRUE(f.matched_lines.empty());
}

}  // namespace
}  // namespace kvsight
