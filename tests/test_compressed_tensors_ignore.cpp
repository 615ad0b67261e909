// compressed-tensors quantization_config.ignore (issue #28: "the compressed-tensors ignore list
// does not change the weight estimate"): the module patterns, matched as compressed-tensors does
// (utils/match.py: the name, or "re:" and Python's re.match), and the linears they keep at the
// model dtype. Expected bytes are derived here by hand.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "../planner/src/model/module_pattern.hpp"
#include "kvsight/error.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"

namespace kvsight {
namespace {

using hf_config::ModulePattern;

bool match(const std::string& entry, const std::string& name) {
  const auto p = ModulePattern::parse(entry);
  EXPECT_TRUE(p.has_value()) << entry;
  return p && p->matches(name);
}

TEST(ModulePattern, NamesAndPythonReMatch) {
  EXPECT_TRUE(match("lm_head", "lm_head"));
  EXPECT_FALSE(match("lm_head", "model.lm_head"));  // a name is matched whole
  EXPECT_TRUE(match("re:.*self_attn.*", "model.layers.3.self_attn.q_proj"));
  EXPECT_FALSE(match("re:.*self_attn.*", "model.layers.3.mlp.gate_proj"));
  // re.match anchors at the start only: a prefix suffices, `$` ends it.
  EXPECT_TRUE(match("re:model.layers.0", "model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(match("re:layers.0", "model.layers.0.mlp.down_proj"));
  EXPECT_TRUE(match("re:.*mlp.gate$", "model.layers.1.mlp.gate"));
  EXPECT_FALSE(match("re:.*mlp.gate$", "model.layers.1.mlp.gate_proj"));
  // Kimi-K2.5's list: dense MLPs, not the experts under mlp.experts.N.
  const std::string dense = "re:.*mlp\\.(gate|up|gate_up|down)_proj.*";
  EXPECT_TRUE(match(dense, "model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(match(dense, "model.layers.1.mlp.experts.7.down_proj"));
  EXPECT_FALSE(match(dense, "model.layers.1.mlp.shared_experts.down_proj"));
  EXPECT_TRUE(match("re:model\\.layers\\.[0-9]+\\.mlp\\.experts\\.\\d+\\.(?:up|down)_proj",
                    "model.layers.12.mlp.experts.3.up_proj"));
  EXPECT_TRUE(match("re:[^.]+\\.layers\\.1?[05]\\..*", "model.layers.15.self_attn.o_proj"));
  EXPECT_FALSE(match("re:[^.]+\\.layers\\.1?[05]\\..*", "model.layers.12.self_attn.o_proj"));
}

TEST(ModulePattern, OutsideTheSubsetIsNotParsedAndHostilePatternsStayLinear) {
  EXPECT_FALSE(ModulePattern::parse("re:a{2}"));          // counted repeat
  EXPECT_FALSE(ModulePattern::parse("re:(?=self_attn)"));  // lookahead
  EXPECT_FALSE(ModulePattern::parse("re:(abc"));          // unbalanced
  EXPECT_FALSE(ModulePattern::parse("re:[abc"));
  EXPECT_FALSE(ModulePattern::parse("re:*a"));
  EXPECT_FALSE(ModulePattern::parse("re:" + std::string(ModulePattern::kMaxPatternChars + 1, 'a')));
  // Exponential for a backtracking engine; the NFA's set of states keeps it linear.
  const auto p = ModulePattern::parse("re:(a*)*(a*)*(a*)*b");
  ASSERT_TRUE(p.has_value());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(p->matches(std::string(200, 'a')));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

// A two-layer Qwen3-MoE shape: hidden 64, 4 heads x 16 (2 KV heads), 4 experts of 32, every layer
// MoE, compressed-tensors int4 in groups of 32: 4 + 16 / 32 = 4.5 bits on the quantized linears.
std::string config(const std::string& ignore) {
  return R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2,
    "vocab_size": 100, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
    "tie_word_embeddings": false,
    "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"group_0":
      {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 32}}}, "ignore": )" +
         ignore + "}}";
}

WeightsEstimate weights_with(const std::string& ignore) {
  return estimate_weights(parse_hf_config(config(ignore), "ct-moe"));
}

TEST(CompressedTensorsIgnore, AttentionKeptAtTheModelDtype) {
  // Attention per layer: q 64 x 4 x 16 = 4,096; k + v 64 x 2 x 32 = 4,096; o 4 x 16 x 64 = 4,096:
  // 12,288; 2 layers 24,576 parameters at 2 B instead of 4.5 / 8 B: +24,576 x 1.4375 = +35,328 B.
  const WeightsEstimate base = weights_with(R"(["lm_head"])");
  const WeightsEstimate kept = weights_with(R"(["lm_head", "re:.*self_attn.*"])");
  EXPECT_EQ(kept.bytes - base.bytes, 35328u);
  EXPECT_NE(kept.method.find("keeps attention projections at bf16"), std::string::npos) << kept.method;
  // The experts: 4 x 3 x 64 x 32 = 24,576 per layer, 49,152 in all: +49,152 x 1.4375 = +70,656 B.
  const WeightsEstimate experts = weights_with(R"(["re:.*mlp\\.experts\\..*"])");
  EXPECT_EQ(experts.bytes - base.bytes, 70656u);
}

TEST(CompressedTensorsIgnore, PartOfAGroupOrOneLayerIsReportedNotApplied) {
  const WeightsEstimate base = weights_with(R"(["lm_head"])");
  for (const std::string ignore : {R"(["re:.*q_proj"])",                         // q of q/k/v/o
                                   R"(["model.layers.0.self_attn.q_proj"])",     // one module
                                   R"(["re:model.layers.0.self_attn.*"])"}) {    // one layer of two
    const WeightsEstimate w = weights_with(ignore);
    EXPECT_EQ(w.bytes, base.bytes) << ignore;
    EXPECT_NE(w.method.find("cover part of: attention projections"), std::string::npos) << w.method;
  }
  const WeightsEstimate unread = weights_with(R"(["re:.{3}"])");
  EXPECT_EQ(unread.bytes, base.bytes);
  EXPECT_NE(unread.method.find("1 outside the regex subset"), std::string::npos) << unread.method;
}

TEST(CompressedTensorsIgnore, ABadListNamesTheField) {
  EXPECT_THROW(weights_with(R"("lm_head")"), InputError);
  try {
    weights_with(R"(["lm_head", 7])");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("quantization_config.ignore[1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvsight
