// SGLang budget: mem_fraction_static defaults, the token pool, MLA cells.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
namespace {

constexpr std::uint64_t kGiB = 1024ull * 1024ull * 1024ull;

const Assumption* find(const PlanResult& r, const std::string& name) {
  for (const auto& a : r.assumptions)
    if (a.name == name) return &a;
  return nullptr;
}

TEST(Sglang, TokenPoolOnAn80GiBDevice) {
  // 80 GiB = 81,920 MiB < 90 x 1024: reserved = 9.5 + (tp x pp = 1) / 2 = 10 GiB;
  // mem_fraction_static = round((81920 - 10240) / 81920, 3) = 0.875.
  // Start-up overhead 0.5 GiB: free at start 79.5 GiB, after 15 GiB of weights 64.5 GiB;
  // rest = 64.5 - 79.5 x (1 - 0.875) = 64.5 - 9.9375 = 54.5625 GiB.
  // cell = 8 heads x (128 + 128) x 32 layers x 2 B = 131,072 B -> 54.5625 x 8192 = 446,976 tokens.
  EngineOptions o;
  o.engine = "sglang";
  o.gpu_memory_bytes = 80 * kGiB;
  o.overheads.weights_gib = 15.0;
  o.overheads.non_torch_gib = 0.5;
  const PlanResult r = make_engine("sglang")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  ASSERT_NE(find(r, "mem_fraction_static"), nullptr);
  EXPECT_EQ(find(r, "mem_fraction_static")->value, "0.875");
  EXPECT_EQ(r.kv.bytes_per_token_all_layers, 131072u);
  EXPECT_EQ(r.capacity->kv_tokens, 446976u);
  EXPECT_NEAR(r.capacity->max_concurrency, 446976.0 / 131072.0, 1e-12);
  EXPECT_TRUE(r.capacity->fits);
  // K buffer: (446,976 + 1 page) x 32 layers x 8 x 128 x 2 B = 27.28 GiB; 0.5.23 (the default
  // version) prints the pool's torch dtype first (memory_pool.py _finalize_allocation_log).
  EXPECT_NE(
      joined(r.engine_log)
          .find("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 446976, K size: 27.28 GB, V size: 27.28 GB"),
      std::string::npos)
      << joined(r.engine_log);
}

TEST(Sglang, OlderReleasesKeyTheFractionOnTp) {
  EngineOptions o;
  o.engine_version = "0.4.6";
  o.tp = 2;
  o.gpu_memory_bytes = 80 * kGiB;
  o.overheads.weights_gib = 7.5;
  const PlanResult r = make_engine("sglang")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(find(r, "mem_fraction_static")->value, "0.870");
  o.tp = 8;
  EXPECT_EQ(find(make_engine("sglang")->plan(llama31_8b(), nullptr, o), "mem_fraction_static")->value,
            "0.810");
  // Given fractions are checked.
  o.sglang.mem_fraction_static = 0.0;
  EXPECT_THROW(make_engine("sglang")->plan(llama31_8b(), nullptr, o), InputError);
}

// A gated delta-net state: 16 key / 48 value heads of 128, conv kernel 4, conv state bf16.
RecurrentSpec gdn_16x48(const std::string& ssm_dtype) {
  RecurrentSpec rs;
  rs.kind = RecurrentKind::gated_delta_net;
  rs.d_conv = 4;
  rs.key_head_dim = 128;
  rs.num_key_heads = 16;
  rs.value_head_dim = 128;
  rs.num_value_heads = 48;
  rs.conv_dtype = "bf16";
  rs.ssm_dtype = ssm_dtype;
  return rs;
}

TEST(Sglang, HybridCarvesTheStatePoolFirst) {
  // 8 layers: 2 full attention (4 KV heads x 256) + 6 gated delta-net (bf16 conv, fp32 ssm):
  // state per layer = 10240 x 3 x 2 + 48 x 128 x 128 x 4 = 3,207,168 B; 6 layers = 19,243,008 B.
  ModelSpec m = llama31_8b();
  m.recurrent = gdn_16x48("fp32");
  m.layers.clear();
  for (int i = 0; i < 8; ++i) {
    LayerSpec l;
    l.kind = i % 4 == 3 ? LayerKind::full_attention : LayerKind::recurrent;
    l.kv_heads = 4;
    l.head_dim_k = l.head_dim_v = 256;
    m.layers.push_back(l);
  }
  const double state = 6.0 * 3207168.0;
  EngineOptions o;
  o.gpu_memory_bytes = 80 * kGiB;
  o.overheads.weights_gib = 15.0;
  o.overheads.non_torch_gib = 0.5;
  o.engine_version = "0.5.2";     // state slots as reported; 0.5.23 below adds one
  o.sglang.mem_fraction_static = 0.875;  // rest = 54.5625 GiB as in the test above
  const double rest = 54.5625 * static_cast<double>(kGiB);
  const auto slots = static_cast<std::uint64_t>(rest * 0.9 / 1.9 / state);
  const auto kv = static_cast<std::uint64_t>(rest - static_cast<double>(slots) * state);
  const PlanResult r = make_engine("sglang")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->available_kv_bytes, kv);
  // cell = 2 layers x 4 heads x 512 x 2 B = 8,192 B
  EXPECT_EQ(r.capacity->kv_tokens, kv / 8192);
  // 0.5.23 solves for the slots with MambaPool's padding slot inside the budget:
  // (budget - state) // state slots, slots + 1 states carved.
  o.engine_version = "0.5.23";
  const auto slots23 = static_cast<std::uint64_t>((rest * 0.9 / 1.9 - state) / state);
  ASSERT_EQ(slots23, slots - 1);  // the budget is not an exact multiple of the state here
  const auto kv23 = static_cast<std::uint64_t>(rest - static_cast<double>(slots23 + 1) * state);
  const PlanResult r23 = make_engine("sglang")->plan(m, nullptr, o);
  EXPECT_EQ(r23.capacity->available_kv_bytes, kv23);
  ASSERT_NE(find(r23, "recurrent state pool"), nullptr);
  EXPECT_EQ(find(r23, "recurrent state pool")->value.rfind(std::to_string(slots23) + " slots", 0), 0u);
  // With the radix cache off and --max-running-requests 48: 48 slots, 49 states carved.
  o.sglang.disable_radix_cache = true;
  o.sglang.max_running_requests = 48;
  EXPECT_EQ(make_engine("sglang")->plan(m, nullptr, o).capacity->available_kv_bytes,
            static_cast<std::uint64_t>(rest - 49.0 * state));
  // --max-running-requests alone keeps the memory-share rule.
  o.sglang.disable_radix_cache = false;
  EXPECT_EQ(make_engine("sglang")->plan(m, nullptr, o).capacity->available_kv_bytes, kv23);
}

TEST(Sglang, SsmStateIsFloat32UnlessTheConfigNamesItsDtype) {
  // configs/mamba_utils.py mamba2_state_dtype (0.5.23): the config's mamba_ssm_dtype, else float32;
  // the conv state in bfloat16. One gated delta-net layer, 16 key / 48 value heads of 128, conv 4:
  // conv (2 x 16 + 48) x 128 x 3 x 2 B = 61,440 B; ssm 48 x 128 x 128 x 4 B = 3,145,728 B.
  ModelSpec m = llama31_8b();
  m.recurrent = gdn_16x48("bf16");  // the model dtype, what vLLM takes without mamba_ssm_dtype
  m.layers.resize(2);
  m.layers[1].kind = LayerKind::recurrent;
  EngineOptions o;
  o.gpu_memory_bytes = 80 * kGiB;
  o.overheads.weights_gib = 15.0;
  const PlanResult r = make_engine("sglang")->plan(m, nullptr, o);
  EXPECT_EQ(r.kv.state_bytes_per_sequence, 61440u + 3145728u);
  // A config that names bfloat16 keeps it: 48 x 128 x 128 x 2 B.
  m.recurrent->ssm_dtype_from_config = true;
  EXPECT_EQ(make_engine("sglang")->plan(m, nullptr, o).kv.state_bytes_per_sequence, 61440u + 1572864u);
}

TEST(Sglang, MlaCellIsTheLatent) {
  // DeepSeek-V3: (512 + 64) x 61 layers x 2 B = 70,272 B per token, the same on every TP rank.
  ModelSpec m = llama31_8b();
  m.num_attention_heads = 128;
  m.mla = MlaSpec{512, 1536, 64, 128, 128};
  LayerSpec l;
  l.kind = LayerKind::mla;
  l.kv_heads = 1;
  l.head_dim_k = 576;
  m.layers.assign(61, l);
  EngineOptions o;
  o.tp = 8;
  const PlanResult r = make_engine("sglang")->plan(m, nullptr, o);
  EXPECT_EQ(r.kv.bytes_per_token_all_layers, 70272u);
  EXPECT_FALSE(r.capacity);
}

}  // namespace
}  // namespace kvsight
