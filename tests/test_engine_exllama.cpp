// exllamav2/v3 budget: cache modes, 256-token pages, the FP16 temporary, concurrency.
#include <gtest/gtest.h>

#include <string>

#include "kvsight/budget.hpp"
#include "engine_fixtures.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
namespace {

constexpr std::uint64_t kMiB = 1024ull * 1024ull;
constexpr std::uint64_t kGiB = 1024ull * kMiB;

std::uint64_t per_token(const std::string& engine, const std::string& mode) {
  EngineOptions o;
  o.exllama.cache_mode = mode;
  return make_engine(engine)->plan(llama31_8b(), nullptr, o).kv.bytes_per_token;
}

TEST(Exllama, CacheModesPerToken) {
  // d = 8 KV heads x 128 = 1024 per layer; 32 layers.
  EXPECT_EQ(per_token("exllamav2", "fp16"), 32u * 4u * 1024u);                 // 4d
  EXPECT_EQ(per_token("exllamav2", "q8"), 32u * 2176u);                        // 2.125d
  EXPECT_EQ(per_token("exllamav2", "q6"), 32u * 1664u);                        // 1.625d (K 8-bit, V 4-bit)
  EXPECT_EQ(per_token("exllamav2", "q4"), 32u * 1152u);                        // 1.125d
  EXPECT_EQ(per_token("exllamav3", "q6"), 32u * 1664u);                        // d (6 + 6)/8 + d/8 = 1.625d
  EXPECT_EQ(per_token("exllamav3", "q3"), 32u * (1024u * 6 / 8 + 1024u / 8));  // 0.875d = 896
  EXPECT_THROW(per_token("exllamav2", "q3"), InputError);
  EXPECT_THROW(per_token("exllamav2", "fp8"), InputError);
}

TEST(Exllama, PagesConcurrencyAndTheFp16Temporary) {
  // Q4 cache of 65,536 tokens: 65,536 x 36,864 B = 2.25 GiB; the exl2 FP16 temporary is one
  // layer at FP16 for the whole cache: 65,536 x 4,096 B = 256 MiB.
  EngineOptions o;
  o.exllama.cache_mode = "q4";
  o.exllama.cache_size = 65536;
  o.context = 8192;  // prompt + max_new: 32 pages of 256
  o.gpu_memory_bytes = 24 * kGiB;
  o.overheads.weights_gib = 5.0;
  o.overheads.activation_gib = 0.5;
  const PlanResult r = make_engine("exllamav2")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->num_blocks, 65536u / 256u);
  EXPECT_EQ(r.capacity->overhead_bytes, kGiB / 2 + 256 * kMiB);
  EXPECT_TRUE(r.capacity->fits);
  EXPECT_DOUBLE_EQ(r.capacity->max_concurrency, 256.0 / 32.0);
  // The cache is rounded up to whole pages.
  o.exllama.cache_size = 1000;
  EXPECT_EQ(make_engine("exllamav2")->plan(llama31_8b(), nullptr, o).capacity->kv_tokens, 1024u);
}

}  // namespace
}  // namespace kvsight
