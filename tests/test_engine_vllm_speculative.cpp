// vLLM --speculative-config: the drafter's attention layers take KV beside the target's
// (gpu_model_runner.py get_kv_cache_spec, 0.33.0), EAGLE drafters share the target's
// embeddings and lm_head, MTP layers come from the target's config
// (docs/reference/speculative.md). Expected figures by hand.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"
#include "kvsight/model.hpp"
#include "kvsight/speculative.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

constexpr std::uint64_t kGiB = 1024ull * 1024 * 1024;

// yuhuili/EAGLE-LLaMA3.1-Instruct-8B's shape: one Llama decoder layer of the target's size.
const char* kEagleConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
  "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
  "max_position_embeddings": 2048, "torch_dtype": "float16", "tie_word_embeddings": false})";

EngineOptions with_spec(const std::string& json) {
  EngineOptions o;
  o.engine_version = "0.33.0";
  o.max_model_len = 8192;
  o.vllm.kv_cache_memory_bytes = 10 * kGiB;
  o.vllm.speculative = parse_speculative_config(json);
  return o;
}

TEST(VllmSpeculative, EagleDraftLayerTakesKvBesideTheTarget) {
  // Target: 32 layers x 2 (K, V) x 8 heads x 128 x 2 B = 131,072 B per token; the EAGLE layer
  // adds 4,096: 135,168 B per token, a block of 16 tokens 2,162,688 B.
  // 10 GiB = 10,737,418,240 B / 2,162,688 = 4,964.8 -> 4,964 blocks = 79,424 tokens
  // (without the drafter: / 2,097,152 = 5,120 blocks = 81,920 tokens: -3.05 %).
  EngineOptions o = with_spec(R"({"method": "eagle", "model": "x", "num_speculative_tokens": 3})");
  o.vllm.speculative->draft = std::make_shared<const ModelSpec>(parse_hf_config(kEagleConfig, "eagle.json"));
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(r.kv.bytes_per_token, 135168u);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->kv_tokens, 79424u);
  EngineOptions plain = o;
  plain.vllm.speculative.reset();
  EXPECT_EQ(make_engine("vllm")->plan(llama31_8b(), nullptr, plain).capacity->kv_tokens, 81920u);
}

TEST(VllmSpeculative, EagleWeightsAreOneLayerAndTheFcWithoutEmbeddings) {
  // One layer: q 4096^2 + k, v 1024 x 4096 each + o 4096^2 = 41,943,040; MLP 3 x 4096 x
  // 14,336 = 176,160,768; two norms 8,192: 218,112,000 params x 2 B = 436,224,000 B. The fc
  // Linear(2 x 4096, 4096) adds 33,554,432 x 2 B = 67,108,864 B: 503,332,864 B (0.469 GiB);
  // embeddings and lm_head are the target's (shared). Within 1 % (the estimator's norms).
  EngineOptions o = with_spec(R"({"method": "eagle", "model": "x", "num_speculative_tokens": 3})");
  o.vllm.speculative->draft = std::make_shared<const ModelSpec>(parse_hf_config(kEagleConfig, "eagle.json"));
  const PlanResult with = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EngineOptions plain = o;
  plain.vllm.speculative.reset();
  const PlanResult without = make_engine("vllm")->plan(llama31_8b(), nullptr, plain);
  const double added = static_cast<double>(with.weights.bytes_per_rank - without.weights.bytes_per_rank);
  EXPECT_NEAR(added, 503332864.0, 0.01 * 503332864.0);
}

TEST(VllmSpeculative, MtpLayerOfDeepSeekV3IsOneMoreMlaLayer) {
  // deepseek-v3: 61 MLA layers of (512 + 64) x 2 B = 1,152 B per token, num_nextn_predict_layers
  // 1: 62 x 1,152 = 71,424 B per token with the MTP drafter.
  const ModelSpec v3 = resolve_model("deepseek-v3");
  ASSERT_EQ(v3.mtp_layers, 1u);
  EngineOptions o = with_spec(R"({"method": "deepseek_mtp", "num_speculative_tokens": 1})");
  const PlanResult r = make_engine("vllm")->plan(v3, nullptr, o);
  EXPECT_EQ(r.kv.bytes_per_token, 71424u);
  o.vllm.speculative.reset();
  EXPECT_EQ(make_engine("vllm")->plan(v3, nullptr, o).kv.bytes_per_token, 61u * 1152u);
}

TEST(VllmSpeculative, NgramAddsNoKv) {
  const PlanResult r = make_engine("vllm")->plan(
      llama31_8b(), nullptr, with_spec(R"({"method": "ngram", "num_speculative_tokens": 4})"));
  EXPECT_EQ(r.kv.bytes_per_token, 131072u);
  EXPECT_EQ(r.capacity->kv_tokens, 81920u);
}

TEST(VllmSpeculative, BadConfigsNameTheKey) {
  auto field_of = [](const std::string& json) {
    try {
      (void)parse_speculative_config(json);
    } catch (const InputError& e) {
      return e.field();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(field_of("[1]"), "speculative_config");
  EXPECT_EQ(field_of(R"({"method": "eagle", "num_speculative_tokens": 2})"), "speculative_config.model");
  EXPECT_EQ(field_of(R"({"method": "medusa", "num_speculative_tokens": 2})"), "speculative_config.method");
  EXPECT_EQ(field_of(R"({"method": "mtp"})"), "speculative_config.num_speculative_tokens");
  EXPECT_EQ(field_of(R"({"method": "mtp", "num_speculative_tokens": 0})"),
            "speculative_config.num_speculative_tokens");
  EXPECT_EQ(field_of(R"({"method": "mtp", "num_speculative_tokens": 2.5})"),
            "speculative_config.num_speculative_tokens");
  EXPECT_EQ(field_of(R"({"model": "x", "num_speculative_tokens": 2})"), "speculative_config.method");
  EXPECT_EQ(field_of(R"({"method": "mtp", "num_speculative_tokens": 2})"), "accepted");
  // MTP on a model without MTP layers, and PP > 1, are refused by the engine.
  EngineOptions o = with_spec(R"({"method": "mtp", "num_speculative_tokens": 1})");
  EXPECT_THROW((void)make_engine("vllm")->plan(llama31_8b(), nullptr, o), InputError);
  o = with_spec(R"({"method": "ngram", "num_speculative_tokens": 1})");
  o.pp = 2;
  EXPECT_NO_THROW((void)make_engine("vllm")->plan(llama31_8b(), nullptr, o));  // no draft: PP is fine
  o = with_spec(R"({"method": "deepseek_mtp", "num_speculative_tokens": 1})");
  o.pp = 2;
  EXPECT_THROW((void)make_engine("vllm")->plan(resolve_model("deepseek-v3"), nullptr, o), InputError);
}

TEST(VllmSpeculative, CliReadsTheFlagAndTheDraftModel) {
  const std::string dir = test::temp_dir("eagle");
  test::write_file(dir + "/config.json", kEagleConfig);
  const auto ok = test::run_kvsight(
      {"plan", "--model", "llama-3.1-8b", "--kv-cache-memory-bytes", "10737418240", "--max-model-len", "8192",
       "--speculative-config", R"({"method":"eagle","model":")" + dir + R"(","num_speculative_tokens":3})"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("79,424"), std::string::npos) << ok.out;
  const auto missing =
      test::run_kvsight({"plan", "--model", "llama-3.1-8b", "--speculative-config",
                         R"({"method":"eagle","model":")" + dir + R"(/nope","num_speculative_tokens":3})"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("speculative_config.model"), std::string::npos) << missing.err;
  const auto bad = test::run_kvsight({"plan", "--model", "llama-3.1-8b", "--speculative-config", "{"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("speculative"), std::string::npos) << bad.err;
}

TEST(VllmSpeculative, HybridTargetKeepsOneStatePagePerSpeculativeToken) {
  // qwen3.6-27b: 48 gated delta-net + 16 full-attention layers; grouping takes group_size 16
  // (48 >= 1.5 x 16), so the state layers fill 48 / 16 = 3 groups. MambaSpec keeps 2 +
  // num_speculative_blocks pages per request in align mode (prefix caching, on by default in
  // 0.33): ngram with 3 speculative tokens adds 3 pages in each of the 3 state groups, 9 blocks
  // per sequence, and no draft layer.
  const ModelSpec m = resolve_model("qwen3.6-27b");
  EngineOptions o = with_spec(R"({"method": "ngram", "num_speculative_tokens": 3})");
  const PlanResult with = make_engine("vllm")->plan(m, nullptr, o);
  o.vllm.speculative.reset();
  const PlanResult without = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(with.kv.blocks_per_sequence, without.kv.blocks_per_sequence + 9);
  EXPECT_EQ(with.kv.bytes_per_token, without.kv.bytes_per_token);
}

}  // namespace
}  // namespace kvsight
