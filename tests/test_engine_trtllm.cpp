// TensorRT-LLM budget: 0.9 of the free memory, 32-token blocks, its log lines.
#include <gtest/gtest.h>

#include <string>

#include "kvsight/budget.hpp"
#include "engine_fixtures.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
namespace {

constexpr std::uint64_t kMiB = 1024ull * 1024ull;
constexpr std::uint64_t kGiB = 1024ull * kMiB;

TEST(Trtllm, BlocksFromTheFreeFraction) {
  // 80 GiB - (15 weights + 1 activations + 0.5 runtime) = 63.5 GiB free;
  // 0.9 x 63.5 = 57.15 GiB; block = 32 tokens x 131,072 B = 4 MiB;
  // blocks = floor(57.15 GiB / 4 MiB) = floor(57.15 x 256) = floor(14630.4) = 14630.
  EngineOptions o;
  o.gpu_memory_bytes = 80 * kGiB;
  o.overheads.weights_gib = 15.0;
  o.overheads.activation_gib = 1.0;
  o.overheads.non_torch_gib = 0.5;
  const PlanResult r = make_engine("trtllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.kv.block_size, 32u);
  EXPECT_EQ(r.capacity->page_bytes, 4 * kMiB);
  EXPECT_EQ(r.capacity->num_blocks, 14630u);
  EXPECT_EQ(r.capacity->kv_tokens, 14630u * 32u);
  // 131,072 tokens = 4096 blocks per sequence.
  EXPECT_NEAR(r.capacity->max_concurrency, 14630.0 / 4096.0, 1e-12);
  const std::string log = joined(r.engine_log);
  EXPECT_NE(log.find("Number of blocks in KV cache primary pool: 14630"), std::string::npos) << log;
  EXPECT_NE(log.find("Number of tokens per block: 32."), std::string::npos);
  // 14630 x 4 MiB = 57.1484 GiB
  EXPECT_NE(log.find("Allocated 57.15 GiB for max tokens in paged KV cache (468160)."), std::string::npos)
      << log;
  EXPECT_NE(log.find("total: 80.00 GiB, available: 63.50 GiB"), std::string::npos) << log;
}

TEST(Trtllm, FractionAndBlockSizeAreOptions) {
  EngineOptions o;
  o.gpu_memory_bytes = 80 * kGiB;
  o.overheads.weights_gib = 15.0;
  o.overheads.activation_gib = 1.0;
  o.overheads.non_torch_gib = 0.5;
  o.trtllm.free_gpu_memory_fraction = 0.5;  // 31.75 GiB
  o.block_size = 64;                 // 8 MiB blocks -> floor(31.75 x 128) = 4064
  const PlanResult r = make_engine("trtllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(r.capacity->num_blocks, 4064u);
  o.trtllm.free_gpu_memory_fraction = 1.2;
  try {
    make_engine("trtllm")->plan(llama31_8b(), nullptr, o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--free-gpu-memory-fraction");
  }
}

}  // namespace
}  // namespace kvsight
