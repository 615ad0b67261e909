// Gates: the KV cache types each attention backend takes on each device
// (docs/reference/gates.md "KV cache types per attention backend"). Every expected verdict
// is derived in the test from the cited engine source, never copied from kvsight's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "../planner/src/gates/gates_rules.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

using test::run_kvsight;

nlohmann::json gates_json(std::vector<std::string> args, int expected_exit) {
  args.insert(args.begin(), "gates");
  args.push_back("--format");
  args.push_back("json");
  const auto run = run_kvsight(args);
  EXPECT_EQ(run.exit_code, expected_exit) << run.err << run.out;
  return nlohmann::json::parse(run.out);
}

const nlohmann::json* refused(const nlohmann::json& attention, const std::string& kernel) {
  for (const auto& item : attention.at("refused"))
    if (item.at("kernel") == kernel) return &item;
  return nullptr;
}

bool any_reason_contains(const nlohmann::json& verdict, const std::string& text) {
  for (const auto& r : verdict.at("reasons"))
    if (r.get<std::string>().find(text) != std::string::npos) return true;
  return false;
}

// vLLM 0.33.0 on MI300X (gfx942): rocm_attn.py lists auto, float16, bfloat16, fp8,
// fp8_e4m3, fp8_e5m2; triton_attn.py adds the per-token-head types; AITER FA is off by
// default. None lists nvfp4, so rocm.py get_attn_backend_cls finds no valid backend and
// raises: start-up refused (exit 1), no kernel selected, and the error names the KV type.
TEST(GatesKvTypes, Nvfp4OnMi300xRefusedWithNoKernel) {
  const auto j = gates_json({"--model", "llama-3.1-8b", "--gpu", "mi300x", "--kv-cache-dtype", "nvfp4"}, 1);
  EXPECT_FALSE(j.at("can_start").get<bool>());
  const auto& attention = j.at("attention");
  EXPECT_TRUE(attention.at("selected").is_null()) << attention.dump(2);
  for (const std::string kernel :
       {"rocm_custom_paged_attention", "triton_paged_attention_2d", "triton_unified_attention"}) {
    const nlohmann::json* verdict = refused(attention, kernel);
    ASSERT_NE(verdict, nullptr) << kernel;
    EXPECT_TRUE(any_reason_contains(*verdict, "kv_cache_dtype nvfp4 is not accepted on gfx9"))
        << verdict->dump(2);
  }
  ASSERT_EQ(j.at("errors").size(), 1u) << j.at("errors").dump(2);
  const std::string error = j.at("errors")[0];
  EXPECT_NE(error.find("vLLM refuses kv_cache_dtype nvfp4 on this device (gfx9 gfx942)"), std::string::npos)
      << error;
  // What the ROCm backends take (rocm.py's "Supported kv_cache_dtype values" hint): fp8 yes.
  EXPECT_NE(error.find("fp8_e4m3"), std::string::npos) << error;
}

// H200 (sm_90), vLLM 0.33.0: cuda.py order FLASH_ATTN, FLASHINFER, TRITON_ATTN.
// flash_attn.py does not list nvfp4 -> refused; flashinfer.py supports_kv_cache_dtype takes
// plain nvfp4 on family 90 through _nvfp4_kv_on_fa2 -> FLASHINFER selected.
TEST(GatesKvTypes, Nvfp4OnH200SelectsFlashInfer) {
  const auto j = gates_json({"--model", "llama-3.1-8b", "--gpu", "h200", "--kv-cache-dtype", "nvfp4"}, 0);
  const auto& attention = j.at("attention");
  EXPECT_EQ(attention.at("selected"), "flashinfer");
  const nlohmann::json* fa = refused(attention, "flash_attn");
  ASSERT_NE(fa, nullptr) << attention.dump(2);
  EXPECT_TRUE(any_reason_contains(*fa, "kv_cache_dtype nvfp4 is not accepted on compute capability 9.0"))
      << fa->dump(2);
  // vLLM 0.31.0: flashinfer.py takes nvfp4 only on family 100 (TRT-LLM kernels), and
  // FLASH_ATTN / TRITON_ATTN never list it: no backend on sm_90 -> refused, exit 1.
  const auto old = gates_json(
      {"--model", "llama-3.1-8b", "--gpu", "h200", "--kv-cache-dtype", "nvfp4", "--engine-version", "0.31.0"},
      1);
  EXPECT_TRUE(old.at("attention").at("selected").is_null());
  // ... while B200 (sm_100) at 0.31.0 takes it on FLASHINFER (first on 10.x).
  const auto b200 = gates_json(
      {"--model", "llama-3.1-8b", "--gpu", "b200", "--kv-cache-dtype", "nvfp4", "--engine-version", "0.31.0"},
      0);
  EXPECT_EQ(b200.at("attention").at("selected"), "flashinfer");
}

// A100 (sm_80): FlashAttention 2 there; flash_attn_supports_kv_cache_dtype is true only
// with FA3 on family 90 or FA4 on family 100 -> FLASH_ATTN refused. FLASHINFER (8.0 ..
// 12.1) lists fp8 -> selected (cuda.py order: FLASH_ATTN, FLASHINFER, ...).
TEST(GatesKvTypes, Fp8OnA100SkipsFlashAttention) {
  const auto j = gates_json({"--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--kv-cache-dtype", "fp8"}, 0);
  const auto& attention = j.at("attention");
  EXPECT_EQ(attention.at("selected"), "flashinfer");
  const nlohmann::json* fa = refused(attention, "flash_attn");
  ASSERT_NE(fa, nullptr);
  EXPECT_EQ(
      fa->at("reasons"),
      nlohmann::json::array({"kv_cache_dtype fp8 needs compute capability 9.x (FlashAttention 3) or 10.x "
                             "(FlashAttention 4); this is 8.0"}));
}

// H200 (sm_90): FA3 is the default there (fa_utils.py get_flash_attn_version) and takes
// fp8 -> FLASH_ATTN, first in cuda.py's order. fp8_e5m2 is refused by
// flash_attn_supports_kv_cache_dtype outright, so it goes to FLASHINFER, which lists it.
TEST(GatesKvTypes, Fp8OnH200SelectsFlashAttention) {
  const auto j = gates_json({"--model", "llama-3.1-8b", "--gpu", "h200", "--kv-cache-dtype", "fp8"}, 0);
  EXPECT_EQ(j.at("attention").at("selected"), "flash_attn");
  EXPECT_EQ(refused(j.at("attention"), "flash_attn"), nullptr);
  const auto e5m2 =
      gates_json({"--model", "llama-3.1-8b", "--gpu", "h200", "--kv-cache-dtype", "fp8_e5m2"}, 0);
  EXPECT_EQ(e5m2.at("attention").at("selected"), "flashinfer");
}

// int4_per_token_head (issue #28): vLLM 0.28+ lists it in vllm/config/cache.py CacheDType and
// only TRITON_ATTN takes it (triton_attn.py supported_kv_cache_dtypes, 0.33), so on H200 that
// kernel is selected; 0.26 had no such type. Its page (triton_attn.py customize_spec): per head
// and token (128 // 2 + 128 // 2) x 1 B + 2 fp32 scales = 136 B; Llama 3.1 8B: 32 layers x 8 KV
// heads x 136 B = 34,816 B per token.
TEST(GatesKvTypes, Int4PerTokenHeadGoesToTritonFrom028) {
  const auto j =
      gates_json({"--model", "llama-3.1-8b", "--gpu", "h200", "--kv-cache-dtype", "int4_per_token_head"}, 0);
  EXPECT_EQ(j.at("attention").at("selected"), "triton_unified_attention");
  const auto run = run_kvsight({"plan", "--model", "llama-3.1-8b", "--kv-cache-dtype", "int4_per_token_head",
                                "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["kv"]["bytes_per_token"].get<std::uint64_t>(), 32u * 8 * 136);
  (void)gates_json({"--model", "llama-3.1-8b", "--gpu", "h200", "--kv-cache-dtype", "int4_per_token_head",
                    "--engine-version", "0.26.0"},
                   1);
}

// SGLang with an MLA model (issue #28): get_default_attn_backend (arg_groups/model_override_base.py,
// 0.5.23) picks fa3 on Hopper, flashinfer on SM100 and triton elsewhere. Before, no SGLang rule
// took MLA layers and DeepSeek V3 on an H200 was "refused" (exit 1).
TEST(GatesKvTypes, SglangMlaBackendsByDevice) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"h200", "sglang_fa3_mla"}, {"b200", "sglang_flashinfer_mla"}, {"a100-80gb", "sglang_triton_mla"},
      {"mi300x", "sglang_triton_mla"}};
  for (const auto& [gpu, kernel] : cases) {
    const auto j = gates_json({"--engine", "sglang", "--model", "deepseek-v3", "--gpu", gpu, "--tp", "8"}, 0);
    EXPECT_EQ(j.at("attention").at("selected"), kernel) << gpu;
  }
  const auto run = run_kvsight({"plan", "--engine", "sglang", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

// MLA, DeepSeek-V3 on H200 (sm_90): mla/flashmla.py (major 9 or 10) lists auto, float16,
// bfloat16, fp8, fp8_e4m3 -> fp8 selects FLASHMLA. fp8_e5m2: neither FLASHMLA nor
// mla/triton_mla.py lists it -> no modeled MLA backend, start-up refused.
TEST(GatesKvTypes, MlaFp8AndE5m2OnH200) {
  const auto j = gates_json({"--model", "deepseek-v3", "--gpu", "h200", "--kv-cache-dtype", "fp8"}, 0);
  EXPECT_EQ(j.at("attention").at("layer_kind"), "mla");
  EXPECT_EQ(j.at("attention").at("selected"), "flashmla");
  const auto e5m2 =
      gates_json({"--model", "deepseek-v3", "--gpu", "h200", "--kv-cache-dtype", "fp8_e5m2"}, 1);
  EXPECT_TRUE(e5m2.at("attention").at("selected").is_null());
  const nlohmann::json* triton = refused(e5m2.at("attention"), "triton_mla");
  ASSERT_NE(triton, nullptr);
  EXPECT_TRUE(any_reason_contains(*triton, "kv_cache_dtype fp8_e5m2 is not accepted")) << triton->dump(2);
}

// TensorRT-LLM: the docs' hardware matrix puts NVFP4 on Blackwell only -> nvfp4 on H200
// refused (no kernel), on B200 (sm_100) XQA (Llama 32 / 8 = GQA 4 >= 2). FP8 KV is marked
// supported on Ampere -> A100 admits XQA with fp8.
TEST(GatesKvTypes, TensorRtLlmNvfp4NeedsBlackwell) {
  const auto h200 = gates_json(
      {"--model", "llama-3.1-8b", "--gpu", "h200", "--engine", "trtllm", "--kv-cache-dtype", "nvfp4"}, 1);
  EXPECT_TRUE(h200.at("attention").at("selected").is_null());
  ASSERT_FALSE(h200.at("errors").empty());
  EXPECT_NE(h200.at("errors")[0].get<std::string>().find("refuses kv_cache_dtype nvfp4"), std::string::npos)
      << h200.at("errors").dump(2);
  const auto b200 = gates_json(
      {"--model", "llama-3.1-8b", "--gpu", "b200", "--engine", "trtllm", "--kv-cache-dtype", "nvfp4"}, 0);
  EXPECT_EQ(b200.at("attention").at("selected"), "trtllm_xqa");
  const auto a100 = gates_json(
      {"--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--engine", "trtllm", "--kv-cache-dtype", "fp8"}, 0);
  EXPECT_EQ(a100.at("attention").at("selected"), "trtllm_xqa");
}

// SGLang 0.5.5 server_args.py: fa3 (Hopper default) with fp8_e5m2 switches to triton.
TEST(GatesKvTypes, SglangFa3E5m2GoesToTriton) {
  const auto j = gates_json(
      {"--model", "llama-3.1-8b", "--gpu", "h200", "--engine", "sglang", "--kv-cache-dtype", "fp8_e5m2"}, 0);
  EXPECT_EQ(j.at("attention").at("selected"), "sglang_triton");
}

// ------------------------------------------------- every GPU x every vLLM KV type
// The test's own reading of a rule's KV list at the newest version (the entries open at the
// top, max_version UINT64_MAX) for compute capability cc; bf16 / fp16 stand for vLLM's
// bfloat16 / float16 (gates.md). No entry for the newest version = not restricted.
bool rule_lists_kv_type(const gates_detail::KernelRule& rule, std::int64_t cc, const std::string& kv) {
  const std::string spelled = kv == "bf16" ? "bfloat16" : kv == "fp16" ? "float16" : kv;
  bool restricted = false;
  for (const gates_detail::Condition& c : rule.conditions) {
    if (c.test != gates_detail::Test::kv_types) continue;
    for (const gates_detail::KvTypeEntry& e : c.kv_types) {
      if (e.max_version != UINT64_MAX) continue;
      restricted = true;
      if (cc < e.min_cc || cc > e.max_cc) continue;
      if (std::find(e.types.begin(), e.types.end(), spelled) != e.types.end()) return true;
    }
  }
  return !restricted;
}

const gates_detail::KernelRule* newest_rule(const std::string& kernel, const std::string& family, bool mla) {
  for (const gates_detail::KernelRule& rule : gates_detail::kernel_rules())
    if (rule.engine == "vllm" && rule.kernel == kernel && rule.mla == mla && rule.max_version == UINT64_MAX &&
        std::find(rule.families.begin(), rule.families.end(), family) != rule.families.end())
      return &rule;
  return nullptr;
}

TEST(GatesKvTypes, HelperCanFail) {
  // flash_attn.py does not list nvfp4: the helper must say so on sm_90, and must accept fp8 there.
  const gates_detail::KernelRule* fa = newest_rule("flash_attn", "cuda", false);
  ASSERT_NE(fa, nullptr);
  EXPECT_FALSE(rule_lists_kv_type(*fa, 90, "nvfp4"));
  EXPECT_FALSE(rule_lists_kv_type(*fa, 80, "fp8"));
  EXPECT_TRUE(rule_lists_kv_type(*fa, 90, "fp8"));
}

TEST(GatesKvTypes, SelectedKernelListsTheKvTypeOnEveryCatalogGpu) {
  const std::unique_ptr<Engine> vllm = make_engine("vllm");
  std::size_t selected = 0, refused_groups = 0;
  for (const std::string model_id : {"llama-3.1-8b", "deepseek-v3"}) {
    const ModelSpec model = resolve_model(model_id);
    for (const GpuSpec& gpu : gpu_catalog()) {
      const std::int64_t cc = gpu.arch.rfind("sm_", 0) == 0 ? std::stoll(gpu.arch.substr(3)) : 0;
      for (const std::string& kv : vllm->kv_cache_dtypes()) {
        EngineOptions options;
        options.engine = "vllm";
        options.kv_cache_dtype = kv;
        if (kv == "fp8_ds_mla" && !model.mla) {
          // The decision refuses the type for the model before any device (resolve_kv_types).
          EXPECT_THROW(evaluate_gates(model, gpu, options), InputError);
          continue;
        }
        const GateResult result = evaluate_gates(model, gpu, options);
        for (const LayerGroupGate& group : result.groups) {
          const bool mla = group.layer_kind == LayerKind::mla;
          if (group.selected.empty()) {
            // Refused: then no rule of this family that is refused for the KV type alone lists it.
            for (const KernelVerdict& verdict : group.kernels) {
              const gates_detail::KernelRule* rule = newest_rule(verdict.kernel, gpu.family, mla);
              ASSERT_NE(rule, nullptr) << verdict.kernel;
              const bool kv_only =
                  !verdict.reasons.empty() &&
                  std::all_of(verdict.reasons.begin(), verdict.reasons.end(),
                              [](const std::string& r) { return r.rfind("kv_cache_dtype", 0) == 0; });
              if (kv_only) {
                EXPECT_FALSE(rule_lists_kv_type(*rule, cc, kv))
                    << gpu.id << " " << kv << " " << verdict.kernel;
              }
            }
            ++refused_groups;
            continue;
          }
          ++selected;
          const gates_detail::KernelRule* rule = newest_rule(group.selected, gpu.family, mla);
          ASSERT_NE(rule, nullptr) << group.selected;
          EXPECT_TRUE(rule_lists_kv_type(*rule, cc, kv)) << model_id << " on " << gpu.id << " (" << gpu.arch
                                                         << ") kv " << kv << " selected " << group.selected;
        }
      }
    }
  }
  // 2 models x every catalog GPU (23) x 13 types = 598 configurations, each with at least one group: both
  // branches must have run (nvfp4 on AMD is refused, auto on H200 is selected).
  EXPECT_GT(selected, 300u);
  EXPECT_GT(refused_groups, 20u);
}

}  // namespace
}  // namespace kvsight
