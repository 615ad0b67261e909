// Gates: the kernel an engine selects, every refusal reason, and start-up constraints.
// Expected values come from the engine rules quoted in docs/reference/gates.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kvsight/error.hpp"
#include "kvsight/gates.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

using test::run_kvsight;

nlohmann::json run_json(const std::vector<std::string>& args, int expected_exit = 0) {
  std::vector<std::string> full = args;
  full.push_back("--format");
  full.push_back("json");
  const auto run = run_kvsight(full);
  EXPECT_EQ(run.exit_code, expected_exit) << run.err << run.out;
  return nlohmann::json::parse(run.out);
}

const nlohmann::json* find_refused(const nlohmann::json& attention, const std::string& kernel) {
  for (const auto& item : attention.at("refused")) {
    if (item.at("kernel") == kernel) return &item;
  }
  return nullptr;
}

bool has_reason(const nlohmann::json& refused, const std::string& reason) {
  for (const auto& r : refused.at("reasons")) {
    if (r.get<std::string>() == reason) return true;
  }
  return false;
}

// A dense Llama-style config with head_dim 256 (32 heads would also do; 16 keeps it small).
const char* kHead256Config = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
  "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "num_hidden_layers": 4,
  "intermediate_size": 11008, "vocab_size": 32000, "max_position_embeddings": 8192,
  "torch_dtype": "bfloat16"})";

// The published case: Qwen3.6-27B, TP 2 on RX 7900 XT (gfx11). head_dim 256 and the
// hybrid block size 784 = 16 x 49 each refuse the RDNA custom kernel (head_size == 128,
// block_size == 16), and 784 is not a power of two (call site), so decode runs the
// Triton 2D fallback, which does not split the context.
TEST(Gates, Qwen36OnRdnaFallsBackToTriton2d) {
  const auto j =
      run_json({"gates", "--model", "qwen3.6-27b", "--gpu", "rx7900xt", "--engine", "vllm", "--tp", "2"});
  EXPECT_EQ(j.at("family"), "gfx11");
  EXPECT_EQ(j.at("block_size"), 784);
  const auto& attention = j.at("attention");
  EXPECT_EQ(attention.at("selected"), "triton_paged_attention_2d");
  EXPECT_FALSE(attention.at("splits_context").get<bool>());
  // 24 Q / 4 KV heads over TP 2: 12 Q and 2 KV per rank, GQA 6.
  EXPECT_EQ(attention.at("kv_heads_per_rank"), 2);
  EXPECT_EQ(attention.at("q_heads_per_rank"), 12);
  EXPECT_EQ(attention.at("layers"), 16);
  const nlohmann::json* custom = find_refused(attention, "rocm_custom_paged_attention");
  ASSERT_NE(custom, nullptr) << attention.dump(2);
  EXPECT_TRUE(has_reason(*custom, "head_size 256 is not 128")) << custom->dump(2);
  EXPECT_TRUE(has_reason(*custom, "block_size 784 is not 16")) << custom->dump(2);
  EXPECT_TRUE(has_reason(*custom, "block_size 784 is not a power of two")) << custom->dump(2);
  // GQA 6 is inside 3..16: not a reason.
  for (const auto& r : custom->at("reasons")) EXPECT_EQ(r.get<std::string>().find("GQA"), std::string::npos);
  EXPECT_TRUE(j.at("errors").empty());
}

TEST(Gates, Qwen36TableNamesReasons) {
  const auto run = run_kvsight({"gates", "--model", "qwen3.6-27b", "--gpu", "rx7900xt", "--tp", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("head_size 256 is not 128"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("SELECTED"), std::string::npos);
}

// Llama-3.1-8B on gfx1100: head 128, block 16, GQA 32 / 8 = 4 in 3..16, bf16, no
// sliding window, max_position_embeddings 131072 <= 128 x 1024: the custom kernel,
// which partitions the context (256-token partitions).
TEST(Gates, Llama8bOnRdnaGetsCustomKernel) {
  const auto j = run_json({"gates", "--model", "llama-3.1-8b", "--gpu", "rx7900xt"});
  const auto& attention = j.at("attention");
  EXPECT_EQ(attention.at("selected"), "rocm_custom_paged_attention");
  EXPECT_TRUE(attention.at("splits_context").get<bool>());
  EXPECT_EQ(attention.at("head_size"), 128);
  EXPECT_EQ(attention.at("block_size"), 16);
  EXPECT_EQ(attention.at("gqa_ratio"), 4);
  EXPECT_EQ(find_refused(attention, "rocm_custom_paged_attention"), nullptr);
}

// gfx9 admits head sizes 64 and 128 only.
TEST(Gates, Head256RefusedOnMi300x) {
  const std::string dir = test::temp_dir("gates-head256");
  test::write_file(dir + "/config.json", kHead256Config);
  const auto j = run_json({"gates", "--model", dir + "/config.json", "--gpu", "mi300x"});
  EXPECT_EQ(j.at("family"), "gfx9");
  const auto& attention = j.at("attention");
  EXPECT_EQ(attention.at("selected"), "triton_paged_attention_2d");
  const nlohmann::json* custom = find_refused(attention, "rocm_custom_paged_attention");
  ASSERT_NE(custom, nullptr);
  EXPECT_TRUE(has_reason(*custom, "head_size 256 is not one of 64, 128")) << custom->dump(2);
  // Block 16 is allowed on gfx9 (16 or 32): not a reason.
  EXPECT_EQ(custom->at("reasons").size(), 1u) << custom->dump(2);
}

TEST(Gates, Gemma2OnMi300xRefusedForHeadSizeAndWindow) {
  const auto j = run_json({"gates", "--model", "gemma-2-9b", "--gpu", "mi300x"});
  const auto& attention = j.at("attention");
  EXPECT_EQ(attention.at("layer_kind"), "full_attention");
  const nlohmann::json* custom = find_refused(attention, "rocm_custom_paged_attention");
  ASSERT_NE(custom, nullptr);
  EXPECT_TRUE(has_reason(*custom, "head_size 256 is not one of 64, 128"));
  // The sliding-window layers (window 4096) are a second group, refused for the window too.
  bool saw_sliding = false;
  for (const auto& group : attention.at("layer_groups")) {
    if (group.at("layer_kind") != "sliding_window") continue;
    saw_sliding = true;
    const nlohmann::json* c = find_refused(group, "rocm_custom_paged_attention");
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(has_reason(*c, "sliding window 4096 is set (must be none)")) << c->dump(2);
  }
  EXPECT_TRUE(saw_sliding);
}

// 32 attention heads, TP 3: 32 % 3 = 2, vLLM refuses to start -> exit 1, errors[].
TEST(Gates, TpNotDividingHeadsRefusesStartup) {
  const auto j = run_json({"gates", "--model", "llama-3.1-8b", "--gpu", "rx7900xt", "--tp", "3"}, 1);
  ASSERT_FALSE(j.at("errors").empty());
  EXPECT_NE(j.at("errors")[0].get<std::string>().find("tp 3 does not divide 32 attention heads"),
            std::string::npos)
      << j.at("errors").dump();
  EXPECT_FALSE(j.at("can_start").get<bool>());
}

TEST(Gates, TensorRtLlmOnAmdRefused) {
  const auto j = run_json({"gates", "--model", "llama-3.1-8b", "--gpu", "rx7900xt", "--engine", "trtllm"}, 1);
  EXPECT_FALSE(j.at("errors").empty());
}

TEST(Gates, BadInputExitsTwo) {
  EXPECT_EQ(
      run_kvsight({"gates", "--model", "llama-3.1-8b", "--gpu", "rx7900xt", "--engine", "nope"}).exit_code,
      2);
  EXPECT_EQ(run_kvsight({"gates", "--model", "llama-3.1-8b", "--gpu", "rx7900xt", "--engine-version", "x.y"})
                .exit_code,
            2);
  EXPECT_EQ(run_kvsight({"gates", "--model", "llama-3.1-8b", "--gpu", "no-such-gpu"}).exit_code, 2);
}

// H200 (sm_90): vLLM V1 prefers FlashAttention (CC >= 8.0, head 128 % 8 == 0, <= 256,
// block 16 a multiple of 16), which splits the KV at decode.
TEST(Gates, Llama8bOnH200GetsFlashAttention) {
  const auto j = run_json({"gates", "--model", "llama-3.1-8b", "--gpu", "h200"});
  EXPECT_EQ(j.at("family"), "cuda");
  EXPECT_EQ(j.at("attention").at("selected"), "flash_attn");
  EXPECT_TRUE(j.at("attention").at("splits_context").get<bool>());
  const auto s = run_json({"gates", "--model", "llama-3.1-8b", "--gpu", "h200", "--engine", "sglang"});
  EXPECT_EQ(s.at("attention").at("selected"), "sglang_fa3");
}

// llama.cpp FlashAttention has no head size 100 (fattn.cu), and a quantized V cache
// needs FlashAttention (llama-context.cpp): start-up refused, exit 1.
TEST(Gates, LlamaCppQuantizedVCacheNeedsFlashAttention) {
  const std::string dir = test::temp_dir("gates-head100");
  test::write_file(dir + "/config.json", R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 3200,
    "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 100, "num_hidden_layers": 2,
    "intermediate_size": 8640, "vocab_size": 32000, "max_position_embeddings": 4096,
    "torch_dtype": "float16"})");
  const auto ok =
      run_json({"gates", "--model", dir + "/config.json", "--gpu", "rx7900xt", "--engine", "llamacpp"});
  EXPECT_EQ(ok.at("attention").at("selected"), "llamacpp_mul_mat_attention");
  const nlohmann::json* fa = find_refused(ok.at("attention"), "llamacpp_flash_attn");
  ASSERT_NE(fa, nullptr);
  EXPECT_TRUE(
      has_reason(*fa, "head_size 100 is not one of 40, 64, 72, 80, 96, 112, 128, 192, 256, 320, 512, 576"))
      << fa->dump(2);
  const auto refused = run_json({"gates", "--model", dir + "/config.json", "--gpu", "rx7900xt", "--engine",
                                 "llamacpp", "--cache-type-v", "q8_0"},
                                1);
  EXPECT_FALSE(refused.at("errors").empty());
}

// ----------------------------------------------------------- rule tables directly

GateInput rdna_input() {
  GateInput in;
  in.engine = "vllm";
  in.family = "gfx11";
  in.q_dtype = "bf16";
  in.kv_cache_dtype = "auto";
  in.head_size = 128;
  in.head_size_v = 128;
  in.block_size = 16;
  in.q_heads_per_rank = 32;
  in.kv_heads_per_rank = 8;
  in.gqa_ratio = 4;
  in.max_seq_len = 8192;
  return in;
}

const KernelVerdict& verdict_of(const std::vector<KernelVerdict>& verdicts, const std::string& kernel) {
  auto it = std::find_if(verdicts.begin(), verdicts.end(),
                         [&](const KernelVerdict& v) { return v.kernel == kernel; });
  if (it == verdicts.end()) throw std::runtime_error("no verdict for " + kernel);
  return *it;
}

TEST(GateRules, RdnaEveryReasonNamed) {
  GateInput in = rdna_input();
  in.head_size = 256;
  in.head_size_v = 256;
  in.block_size = 784;
  in.gqa_ratio = 2;
  in.kv_cache_dtype = "fp8";
  in.max_seq_len = 262144;
  in.alibi = true;
  const auto verdicts = evaluate_kernels(in);
  const KernelVerdict& custom = verdict_of(verdicts, "rocm_custom_paged_attention");
  EXPECT_FALSE(custom.admitted);
  const std::vector<std::string> expected = {"head_size 256 is not 128",
                                             "block_size 784 is not 16",
                                             "GQA ratio 2 is not in 3..16",
                                             "max_seq_len 262144 is over 131072",
                                             "ALiBi is used (must be absent)",
                                             "kv_cache_dtype fp8 is not auto",
                                             "block_size 784 is not a power of two"};
  for (const std::string& reason : expected) {
    EXPECT_NE(std::find(custom.reasons.begin(), custom.reasons.end(), reason), custom.reasons.end())
        << reason;
  }
  EXPECT_EQ(custom.reasons.size(), expected.size());
  EXPECT_TRUE(verdict_of(verdicts, "triton_paged_attention_2d").selected);
}

TEST(GateRules, CustomKernelBeforePr17004NeverOnRdna) {
  GateInput in = rdna_input();
  in.engine_version = "0.8.5";
  const auto verdicts = evaluate_kernels(in);
  const KernelVerdict& custom = verdict_of(verdicts, "rocm_custom_paged_attention");
  EXPECT_FALSE(custom.admitted);
  ASSERT_EQ(custom.reasons.size(), 1u);
  EXPECT_NE(custom.reasons[0].find("PR #17004"), std::string::npos);
  in.engine_version = "0.9.0";
  EXPECT_TRUE(verdict_of(evaluate_kernels(in), "rocm_custom_paged_attention").selected);
}

TEST(GateRules, Gfx9OldVersionMaxSeqLen32K) {
  GateInput in = rdna_input();
  in.family = "gfx9";
  in.engine_version = "0.8.0";
  in.max_seq_len = 65536;
  const auto verdicts = evaluate_kernels(in);
  const KernelVerdict& custom = verdict_of(verdicts, "rocm_custom_paged_attention");
  EXPECT_EQ(custom.reasons, std::vector<std::string>{"max_seq_len 65536 is over 32768"});
}

// Unified attention 3D when num_seqs <= 128 / num_kv_heads (triton_attn.py): with
// 2 KV heads the threshold is 64.
TEST(GateRules, TritonUnifiedSplitsOnlyForSmallBatches) {
  GateInput in = rdna_input();
  in.kv_heads_per_rank = 2;
  in.batch = 64;
  EXPECT_TRUE(verdict_of(evaluate_kernels(in), "triton_unified_attention").splits_context);
  in.batch = 65;
  EXPECT_FALSE(verdict_of(evaluate_kernels(in), "triton_unified_attention").splits_context);
}

// V0 paged attention: v1 (no split) when max_seq_len <= 8192 and (one 512-token
// partition or num_seqs x num_heads > 512); else v2.
TEST(GateRules, CudaPagedV1V2) {
  GateInput in = rdna_input();
  in.family = "cuda";
  in.compute_capability = 75;  // T4: FlashAttention (>= 8.0) refused
  in.engine_version = "0.7.3";
  in.max_seq_len = 512;  // one partition -> v1
  auto verdicts = evaluate_kernels(in);
  EXPECT_EQ(verdict_of(verdicts, "flash_attn").reasons,
            std::vector<std::string>{"compute capability 7.5 is below 8.0"});
  EXPECT_TRUE(verdict_of(verdicts, "cuda_paged_attention").selected);
  EXPECT_FALSE(verdict_of(verdicts, "cuda_paged_attention").splits_context);
  in.max_seq_len = 4096;  // 8 partitions, 1 x 32 heads <= 512 -> v2
  EXPECT_TRUE(verdict_of(evaluate_kernels(in), "cuda_paged_attention").splits_context);
  in.batch = 17;  // 17 x 32 = 544 > 512 -> v1
  EXPECT_FALSE(verdict_of(evaluate_kernels(in), "cuda_paged_attention").splits_context);
}

TEST(GateRules, CudaV1PrefersFlashAttention) {
  GateInput in = rdna_input();
  in.family = "cuda";
  in.compute_capability = 90;
  const auto verdicts = evaluate_kernels(in);
  EXPECT_TRUE(verdict_of(verdicts, "flash_attn").selected);
  in.head_size = 320;  // > 256 and not a FlashInfer size: Triton unified is next
  in.head_size_v = 320;
  const auto more = evaluate_kernels(in);
  EXPECT_EQ(verdict_of(more, "flash_attn").reasons, std::vector<std::string>{"head_size 320 is over 256"});
  EXPECT_TRUE(verdict_of(more, "triton_unified_attention").selected);
}

// flash_attn.py supports_kv_cache_dtype -> fa_utils.py flash_attn_supports_kv_cache_dtype
// (vLLM 0.33.0): fp8 only with FA3 on family 90 or FA4 on family 100; then FlashInfer.
// (The reason's wording changed with the data-driven KV-type condition; the verdict did not.)
TEST(GateRules, FlashAttentionFp8NeedsHopper) {
  GateInput in = rdna_input();
  in.family = "cuda";
  in.compute_capability = 89;  // Ada
  in.kv_cache_dtype = "fp8";
  const auto verdicts = evaluate_kernels(in);
  EXPECT_EQ(verdict_of(verdicts, "flash_attn").reasons,
            std::vector<std::string>{"kv_cache_dtype fp8 needs compute capability 9.x (FlashAttention 3) or "
                                     "10.x (FlashAttention 4); this is 8.9"});
  EXPECT_TRUE(verdict_of(verdicts, "flashinfer").selected);
  in.compute_capability = 90;
  EXPECT_TRUE(verdict_of(evaluate_kernels(in), "flash_attn").selected);
}

// vllm/platforms/cuda.py: Blackwell (10.x) puts FlashInfer first.
TEST(GateRules, BlackwellPrefersFlashInfer) {
  GateInput in = rdna_input();
  in.family = "cuda";
  in.compute_capability = 100;
  const auto verdicts = evaluate_kernels(in);
  EXPECT_EQ(verdicts.front().kernel, "flashinfer");
  EXPECT_TRUE(verdict_of(verdicts, "flashinfer").selected);
  EXPECT_FALSE(verdict_of(verdicts, "flash_attn").selected);
}

TEST(GateRules, VersionParsing) {
  EXPECT_EQ(parse_engine_version("0.23.1"), 23001u);
  EXPECT_EQ(parse_engine_version("0.27.1.dev5"), 27001u);
  EXPECT_EQ(parse_engine_version("v0.9"), 9000u);
  EXPECT_THROW(parse_engine_version("banana"), InputError);
}

}  // namespace
}  // namespace kvsight
