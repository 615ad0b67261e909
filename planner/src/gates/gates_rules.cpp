// The gate tables. Every rule names the engine file and version it was read from;
// docs/reference/gates.md summarizes them. Version numbers are encoded by
// parse_engine_version: major x 1e6 + minor x 1e3 + patch (0.9.0 -> 9000).
#include "gates_rules.hpp"

namespace kvsight::gates_detail {

namespace {

constexpr std::uint64_t v(std::uint64_t major, std::uint64_t minor, std::uint64_t patch) {
  return major * 1000000 + minor * 1000 + patch;
}

// vLLM PR #17004 (2025-04) opened the custom kernel to RDNA and raised gfx9's
// max_seq_len from 32768 to 128 x 1024; first released in 0.9.0 (approximate, the
// release is inferred from the PR date; gates.md).
constexpr std::uint64_t kVllmPr17004 = v(0, 9, 0);
// vLLM V1 engine default from 0.8.0 on CUDA; V0 backends (XFORMERS -> paged_attention
// v1/v2) before (gates.md "vLLM CUDA paged_attention v1 / v2 (older engine versions)").
constexpr std::uint64_t kVllmV1Default = v(0, 8, 0);

const std::vector<std::string> kRocm = {"gfx9", "gfx10", "gfx11", "gfx12"};
const std::vector<std::string> kCuda = {"cuda"};
const std::vector<std::string> kAll = {"cuda", "gfx9", "gfx10", "gfx11", "gfx12"};

Condition no_sliding() { return {Field::sliding_window, Test::absent, {}, {}, ""}; }
Condition half_q() { return {Field::q_dtype, Test::str_one_of, {}, {"fp16", "bf16"}, ""}; }

// ------------------------------------------------------------ KV cache types per backend
// docs/reference/gates.md "KV cache types per attention backend": the lists below are the
// backends' supported_kv_cache_dtypes / supports_kv_cache_dtype read in the vLLM wheels
// 0.12.0 .. 0.33.0, the SGLang 0.5.5 wheel and the TensorRT-LLM docs. A "from" version is
// the first wheel read that shows the fact; versions before the first entry were not read.
using gates_detail::KvTypeEntry;
constexpr std::int64_t kAnyCc = INT64_MAX;

Condition kv_types(std::vector<KvTypeEntry> entries) {
  Condition c{Field::kv_cache_dtype, Test::kv_types, {}, {}, ""};
  c.kv_types = std::move(entries);
  return c;
}

// vLLM 0.12.0 / 0.14.0 / 0.16.0 / 0.20.0 / 0.22.0 / 0.28.0 wheels: where the lists change.
constexpr std::uint64_t kV012 = v(0, 12, 0), kV016 = v(0, 16, 0), kV020 = v(0, 20, 0), kV022 = v(0, 22, 0),
                        kV026 = v(0, 26, 0), kV028 = v(0, 28, 0), kV032 = v(0, 32, 0);

// FLASH_ATTN (flash_attn.py supports_kv_cache_dtype; fa_utils.py flash_attn_supports_fp8 /
// flash_attn_supports_kv_cache_dtype). Before 0.12.0 not re-read: the earlier rule (auto, fp8
// with FlashAttention 3 on 9.x) is kept. 0.12-0.16: any "fp8*" with FA3 on 9.x; 0.20: any
// quantized type with FA3 on 9.x; 0.22-0.26: fp8 / fp8_e4m3 with FA3 on 9.x; 0.28+: also
// FlashAttention 4 on 10.x (fp8_e5m2 never).
Condition vllm_flash_attn_kv() {
  const std::vector<std::string> half = {"auto", "float16", "bfloat16"};
  const std::vector<std::string> fp8 = {"fp8", "fp8_e4m3", "fp8_e5m2"};
  const std::vector<std::string> fp8_e4m3 = {"fp8", "fp8_e4m3"};
  return kv_types({
      {{"auto"}, 0, kAnyCc, 0, kV016, ""},
      {fp8, 90, 99, 0, kV020, "FlashAttention 3"},
      {{"auto", "bfloat16"}, 0, kAnyCc, kV016, kV020, ""},
      {half, 0, kAnyCc, kV020, UINT64_MAX, ""},
      {{"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_per_token_head", "int8_per_token_head"},
       90,
       99,
       kV020,
       kV022,
       "FlashAttention 3"},
      {fp8_e4m3, 90, 99, kV022, UINT64_MAX, "FlashAttention 3"},
      {fp8_e4m3, 100, 109, kV028, UINT64_MAX, "FlashAttention 4"},
  });
}

// FLASHINFER (flashinfer.py supported_kv_cache_dtypes, supports_kv_cache_dtype,
// _nvfp4_kv_on_fa2): nvfp4 from 0.22.0 on 10.x (the TRT-LLM gen kernels; 0.24.0 raises
// "--kv-cache-dtype nvfp4 requires sm100f" elsewhere), nvfp4_4over6 from 0.28.0 (10.x), and
// from 0.32.0 plain nvfp4 on 8.x, 9.x and 12.x through FlashInfer's FA2 path.
Condition vllm_flashinfer_kv() {
  const std::vector<std::string> base = {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"};
  return kv_types({
      {{"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}, 0, kAnyCc, kV012, kV016, ""},
      {{"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"}, 0, kAnyCc, kV016, kV020, ""},
      {base, 0, kAnyCc, kV020, UINT64_MAX, ""},
      {{"nvfp4"}, 100, 109, kV022, kV028, "TRT-LLM attention kernels"},
      {{"nvfp4", "nvfp4_4over6"}, 100, 109, kV028, UINT64_MAX, "TRT-LLM attention kernels"},
      {{"nvfp4"}, 80, 99, kV032, UINT64_MAX, "FlashInfer FA2 path"},
      {{"nvfp4"}, 120, 129, kV032, UINT64_MAX, "FlashInfer FA2 path"},
  });
}

// TRITON_ATTN (triton_attn.py supported_kv_cache_dtypes), every device.
Condition vllm_triton_attn_kv() {
  const std::vector<std::string> v020 = {"auto",
                                         "float16",
                                         "bfloat16",
                                         "fp8",
                                         "fp8_e4m3",
                                         "fp8_e5m2",
                                         "int8_per_token_head",
                                         "fp8_per_token_head"};
  // v0.28 adds int4_per_token_head. Built whole, not by push_back on a copy: GCC 12 reports
  // a false -Warray-bounds on that pattern in some builds (non-unity, long source paths).
  const std::vector<std::string> v028 = {"auto",     "float16",  "bfloat16", "fp8",
                                         "fp8_e4m3", "fp8_e5m2", "int8_per_token_head",
                                         "fp8_per_token_head", "int4_per_token_head"};
  return kv_types({
      {{"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}, 0, kAnyCc, kV012, kV016, ""},
      {{"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"}, 0, kAnyCc, kV016, kV020, ""},
      {v020, 0, kAnyCc, kV020, kV028, ""},
      {v028, 0, kAnyCc, kV028, UINT64_MAX, ""},
  });
}

// ROCM_ATTN, ROCM_AITER_FA, ROCM_AITER_UNIFIED_ATTN (rocm_attn.py, rocm_aiter_fa.py,
// rocm_aiter_unified_attn.py supported_kv_cache_dtypes; ROCM_ATTN's list is empty, so takes
// anything at selection, before 0.20.0): no nvfp4, no per-token-head types.
Condition vllm_rocm_kv() {
  return kv_types(
      {{{"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"}, 0, kAnyCc, kV020, UINT64_MAX, ""}});
}

// FLASHMLA (mla/flashmla.py) and TRITON_MLA (mla/triton_mla.py): fp8_e5m2 in neither.
Condition vllm_flashmla_kv() {
  return kv_types({
      {{"auto", "fp8", "fp8_e4m3"}, 0, kAnyCc, kV012, kV016, ""},
      {{"auto", "bfloat16", "fp8", "fp8_e4m3"}, 0, kAnyCc, kV016, kV020, ""},
      {{"auto", "float16", "bfloat16", "fp8", "fp8_e4m3"}, 0, kAnyCc, kV020, UINT64_MAX, ""},
  });
}
Condition vllm_triton_mla_kv() {
  return kv_types({
      {{"auto"}, 0, kAnyCc, kV012, kV016, ""},
      {{"auto", "bfloat16"}, 0, kAnyCc, kV016, kV020, ""},
      {{"auto", "float16", "bfloat16", "fp8", "fp8_e4m3"}, 0, kAnyCc, kV020, UINT64_MAX, ""},
  });
}

std::vector<KernelRule> build_rules() {
  std::vector<KernelRule> rules;

  // ---------------------------------------------------------------- vLLM, ROCm
  // vllm/platforms/rocm.py use_rocm_custom_paged_attention (read at main, 2026; the
  // same conditions as vLLM 0.23.1 quoted in issue #50264) and its call site
  // vllm/v1/attention/ops/chunked_prefill_paged_decode.py (is_pow2 and
  // has_native_kv_cache_layout force Triton). Partition size 256: the custom
  // kernel splits the context (csrc/rocm/attention.cu).
  const std::string rocm_src =
      "vllm/platforms/rocm.py use_rocm_custom_paged_attention + "
      "vllm/v1/attention/ops/chunked_prefill_paged_decode.py (vLLM 0.23.1 .. 0.33.0, re-read in the 0.33.0 "
      "wheel; "
      "PR #17004, issue #50264)";
  rules.push_back({"vllm",
                   "rocm_custom_paged_attention",
                   "ROCm custom paged attention (paged_attention_rocm)",
                   "ROCM_ATTN",
                   {"gfx9"},
                   kVllmPr17004,
                   UINT64_MAX,
                   false,
                   SplitMode::always,
                   {no_sliding(),
                    half_q(),
                    {Field::head_size, Test::one_of, {64, 128}, {}, ""},
                    {Field::block_size, Test::one_of, {16, 32}, {}, ""},
                    {Field::gqa_ratio, Test::in_range, {1, 16}, {}, ""},
                    {Field::max_seq_len, Test::at_most, {128 * 1024}, {}, ""},
                    {Field::sinks, Test::absent, {}, {}, ""},
                    {Field::block_size, Test::power_of_two, {}, {}, ""},
                    {Field::padded_layout, Test::absent, {}, {}, ""},
                    vllm_rocm_kv()},
                   rocm_src});
  // RDNA branch. GQA 3..16 is a speed heuristic from May 2025, not a capability
  // limit (#50603 measured the custom kernel 2-6x faster than the fallback at GQA 1-2).
  rules.push_back({"vllm",
                   "rocm_custom_paged_attention",
                   "ROCm custom paged attention (paged_attention_rocm)",
                   "ROCM_ATTN",
                   {"gfx11", "gfx12"},
                   kVllmPr17004,
                   UINT64_MAX,
                   false,
                   SplitMode::always,
                   {no_sliding(),
                    half_q(),
                    {Field::head_size, Test::one_of, {128}, {}, ""},
                    {Field::block_size, Test::one_of, {16}, {}, ""},
                    {Field::gqa_ratio, Test::in_range, {3, 16}, {}, ""},
                    {Field::max_seq_len, Test::at_most, {128 * 1024}, {}, ""},
                    {Field::alibi, Test::absent, {}, {}, ""},
                    {Field::kv_cache_dtype, Test::str_one_of, {}, {"auto"}, ""},
                    {Field::sinks, Test::absent, {}, {}, ""},
                    {Field::block_size, Test::power_of_two, {}, {}, ""},
                    {Field::padded_layout, Test::absent, {}, {}, ""},
                    vllm_rocm_kv()},
                   rocm_src});
  // Before PR #17004: gfx9 only, max_seq_len <= 32768; RDNA never.
  const std::string rocm_old_src =
      "vllm/platforms/rocm.py use_rocm_custom_paged_attention before PR #17004 (vLLM < 0.9.0, approximate)";
  rules.push_back({"vllm",
                   "rocm_custom_paged_attention",
                   "ROCm custom paged attention (paged_attention_rocm)",
                   "ROCM_ATTN",
                   {"gfx9"},
                   0,
                   kVllmPr17004,
                   false,
                   SplitMode::always,
                   {no_sliding(),
                    half_q(),
                    {Field::head_size, Test::one_of, {64, 128}, {}, ""},
                    {Field::block_size, Test::one_of, {16, 32}, {}, ""},
                    {Field::gqa_ratio, Test::in_range, {1, 16}, {}, ""},
                    {Field::max_seq_len, Test::at_most, {32768}, {}, ""},
                    {Field::block_size, Test::power_of_two, {}, {}, ""},
                    vllm_rocm_kv()},
                   rocm_old_src});
  rules.push_back({"vllm",
                   "rocm_custom_paged_attention",
                   "ROCm custom paged attention (paged_attention_rocm)",
                   "ROCM_ATTN",
                   {"gfx11", "gfx12"},
                   0,
                   kVllmPr17004,
                   false,
                   SplitMode::always,
                   {{Field::family,
                     Test::never,
                     {},
                     {},
                     "RDNA (gfx11/gfx12) never gets the custom kernel before PR #17004 (vLLM < 0.9.0)"}},
                   rocm_old_src});
  // gfx10 (RDNA2): neither ON_GFX9 nor ON_GFX1X (which checks "gfx11", "gfx12").
  rules.push_back({"vllm",
                   "rocm_custom_paged_attention",
                   "ROCm custom paged attention (paged_attention_rocm)",
                   "ROCM_ATTN",
                   {"gfx10"},
                   0,
                   UINT64_MAX,
                   false,
                   SplitMode::always,
                   {{Field::family,
                     Test::never,
                     {},
                     {},
                     "family gfx10 is neither gfx9 (gfx90a/gfx942/gfx950) nor gfx11/gfx12"}},
                   rocm_src});
  // The fallback: Triton kernel_paged_attention_2d, grid (num_seqs, num_kv_heads),
  // each program walks the whole context (chunked_prefill_paged_decode.py). The
  // ROCM_ATTN backend accepts any multiple of 16 (rocm_attn.py get_kv_cache_shape,
  // get_supported_kernel_block_sizes MultipleOf(16), PR #31380).
  rules.push_back({"vllm",
                   "triton_paged_attention_2d",
                   "Triton kernel_paged_attention_2d (ROCm fallback)",
                   "ROCM_ATTN",
                   kRocm,
                   0,
                   UINT64_MAX,
                   false,
                   SplitMode::never,
                   {{Field::block_size, Test::multiple_of, {16}, {}, ""},
                    {Field::head_size, Test::one_of, {32, 64, 80, 96, 128, 160, 192, 224, 256, 512}, {}, ""},
                    vllm_rocm_kv()},
                   "vllm/v1/attention/ops/chunked_prefill_paged_decode.py kernel_paged_attention_2d; "
                   "vllm/v1/attention/backends/rocm_attn.py get_supported_head_sizes (main, 2026)"});
  // AITER flash attention: only with VLLM_ROCM_USE_AITER=1 (default off), gfx9.
  rules.push_back(
      {"vllm",
       "rocm_aiter_fa",
       "AITER flash attention (ROCM_AITER_FA)",
       "ROCM_AITER_FA",
       kRocm,
       0,
       UINT64_MAX,
       false,
       SplitMode::always,
       {{Field::env, Test::never, {}, {}, "VLLM_ROCM_USE_AITER is off by default"}},
       "vllm/platforms/rocm.py _get_backend_priorities (rocm_aiter_ops.is_mha_enabled) (main, 2026)"});

  // ---------------------------------------------------------------- vLLM, CUDA
  // FlashAttention (V1): vllm/v1/attention/backends/flash_attn.py: head_size % 8 == 0
  // and <= 256, compute capability >= 8.0, block_size a multiple of 16 (gates.md).
  // Decode splits the KV (flash_attn num_splits / FA3 scheduler metadata).
  rules.push_back(
      {"vllm",
       "flash_attn",
       "FlashAttention (flash_attn_varlen_func, paged KV)",
       "FLASH_ATTN",
       kCuda,
       kVllmV1Default,
       UINT64_MAX,
       false,
       SplitMode::always,
       {{Field::compute_capability, Test::at_least, {80}, {}, ""},
        {Field::head_size, Test::multiple_of, {8}, {}, ""},
        {Field::head_size, Test::at_most, {256}, {}, ""},
        {Field::block_size, Test::multiple_of, {16}, {}, ""},
        {Field::q_dtype, Test::str_one_of, {}, {"fp16", "bf16"}, ""},
        vllm_flash_attn_kv()},
       "vllm/v1/attention/backends/flash_attn.py supports_head_size / supports_kv_cache_dtype, "
       "fa_utils.py flash_attn_supports_kv_cache_dtype (KV types read in 0.12.0 .. 0.33.0; gates.md)"});
  // FlashInfer: head sizes 64/128/256, block sizes 16/32/64 (gates.md); decode
  // splits the KV (BatchDecodeWithPagedKVCache partition-kv). supports_compute_capability:
  // 7.5 .. 12.1, raised to 8.0 .. 12.1 by 0.26.0 (FlashInfer broken on SM75, its issue 3620).
  for (const bool sm80_floor : {false, true}) {
    rules.push_back({"vllm",
                     "flashinfer",
                     "FlashInfer (BatchDecodeWithPagedKVCache)",
                     "FLASHINFER",
                     kCuda,
                     sm80_floor ? kV026 : kVllmV1Default,
                     sm80_floor ? UINT64_MAX : kV026,
                     false,
                     SplitMode::always,
                     {{Field::compute_capability, Test::in_range, {sm80_floor ? 80 : 75, 121}, {}, ""},
                      {Field::head_size, Test::one_of, {64, 128, 256}, {}, ""},
                      {Field::block_size, Test::one_of, {16, 32, 64}, {}, ""},
                      vllm_flashinfer_kv()},
                     "vllm/v1/attention/backends/flashinfer.py supports_compute_capability / "
                     "supports_kv_cache_dtype (KV types read in 0.12.0 .. 0.33.0; gates.md)"});
  }
  // ------------------------------------------------ vLLM, Triton unified (both)
  // TRITON_ATTN backend: vllm/v1/attention/backends/triton_attn.py: 3D split-KV
  // kernel for pure decode when num_seqs <= seq_threshold_3D = MIN_LAUNCH_GRID_SIZE_2D
  // (128) // num_kv_heads, NUM_PAR_SOFTMAX_SEGMENTS = 16; 2D otherwise (#48076).
  rules.push_back(
      {"vllm",
       "triton_unified_attention",
       "Triton unified attention (2D / 3D split-KV)",
       "TRITON_ATTN",
       kAll,
       kVllmV1Default,
       UINT64_MAX,
       false,
       SplitMode::triton_3d,
       {{Field::block_size, Test::multiple_of, {16}, {}, ""}, vllm_triton_attn_kv()},
       "vllm/v1/attention/backends/triton_attn.py + ops/triton_unified_attention.py (main, 2026; #48076; KV "
       "types read in 0.12.0 .. 0.33.0)"});

  // V0 (< 0.8.0): FLASH_ATTN for CC >= 8.0 and its head sizes, else XFORMERS with
  // the CUDA paged_attention v1/v2 kernels for decode.
  rules.push_back({"vllm",
                   "flash_attn",
                   "FlashAttention (V0, flash_attn_with_kvcache)",
                   "FLASH_ATTN",
                   kCuda,
                   0,
                   kVllmV1Default,
                   false,
                   SplitMode::always,
                   {{Field::compute_capability, Test::at_least, {80}, {}, ""},
                    {Field::head_size, Test::one_of, {32, 64, 96, 128, 160, 192, 224, 256}, {}, ""},
                    {Field::block_size, Test::multiple_of, {16}, {}, ""},
                    {Field::q_dtype, Test::str_one_of, {}, {"fp16", "bf16"}, ""},
                    {Field::kv_cache_dtype, Test::str_one_of, {}, {"auto"}, ""}},
                   "vllm/attention/backends/flash_attn.py + selector.py (V0, < 0.8.0)"});
  // csrc/attention/paged_attention_v{1,2}.cu: head sizes 32..256, block sizes 8/16/32,
  // v1 when max_seq_len <= 8192 and (one partition or num_seqs x num_heads > 512),
  // else v2 with PARTITION_SIZE 512 and a reduce (vllm/attention/ops/paged_attn.py).
  rules.push_back(
      {"vllm",
       "cuda_paged_attention",
       "CUDA paged_attention v1/v2 (XFORMERS decode)",
       "XFORMERS",
       kCuda,
       0,
       kVllmV1Default,
       false,
       SplitMode::paged_v1_v2,
       {{Field::head_size, Test::one_of, {32, 64, 80, 96, 112, 120, 128, 192, 256}, {}, ""},
        {Field::block_size, Test::one_of, {8, 16, 32}, {}, ""}},
       "csrc/attention/paged_attention_v1.cu, paged_attention_v2.cu, vllm/attention/ops/paged_attn.py "
       "(V0, < 0.8.0)"});

  // ---------------------------------------------------------------- vLLM, MLA
  // MLA layers: FlashMLA on Hopper/Blackwell with block 64 (overheads.md: MLA
  // backends force 64), Triton MLA everywhere (decode splits: num_kv_splits).
  rules.push_back({"vllm",
                   "flashmla",
                   "FlashMLA",
                   "FLASHMLA",
                   kCuda,
                   kVllmV1Default,
                   UINT64_MAX,
                   true,
                   SplitMode::always,
                   // supports_compute_capability: capability.major in [9, 10] (0.12.0 .. 0.33.0).
                   {{Field::compute_capability, Test::in_range, {90, 109}, {}, ""},
                    {Field::block_size, Test::one_of, {64}, {}, ""},
                    vllm_flashmla_kv()},
                   "vllm/v1/attention/backends/mla/flashmla.py supports_compute_capability / "
                   "supported_kv_cache_dtypes (0.12.0 .. 0.33.0)"});
  rules.push_back(
      {"vllm",
       "triton_mla",
       "Triton MLA (decode_attention, num_kv_splits)",
       "TRITON_MLA",
       kAll,
       0,
       UINT64_MAX,
       true,
       SplitMode::always,
       {vllm_triton_mla_kv()},
       "vllm/v1/attention/backends/mla/triton_mla.py supported_kv_cache_dtypes (0.12.0 .. 0.33.0)"});

  // ---------------------------------------------------------------- llama.cpp
  // ggml/src/ggml-cuda/fattn.cu ggml_cuda_get_best_fattn_kernel (ggml-org/llama.cpp
  // master, 2026; the HIP build compiles the same file): K head sizes 40, 64, 72, 80,
  // 96, 112, 128, 256 with V == K; 192 (V 128), 320 (V 256), 512, 576 (V 512) only
  // with the GQA optimisation. K/V types f16, f32, bf16, q4_0, q8_0 (q4_1/q5_0/q5_1
  // need GGML_CUDA_FA_ALL_QUANTS). The vec/tile/mma kernels split the KV across
  // parallel blocks and combine (launch_fattn), so the context is split.
  rules.push_back(
      {"llamacpp",
       "llamacpp_flash_attn",
       "llama.cpp FlashAttention (fattn vec/tile/mma)",
       "-fa",
       kAll,
       0,
       UINT64_MAX,
       false,
       SplitMode::always,
       {{Field::head_size, Test::one_of, {40, 64, 72, 80, 96, 112, 128, 192, 256, 320, 512, 576}, {}, ""},
        {Field::kv_cache_dtype, Test::str_one_of, {}, {"f16", "f32", "bf16", "q4_0", "q8_0"}, ""}},
       "ggml/src/ggml-cuda/fattn.cu ggml_cuda_get_best_fattn_kernel (llama.cpp master, 2026)"});
  // Without FlashAttention: KQ = mul_mat(K, Q), soft_max, KQV = mul_mat(V, KQ): matrix
  // products parallel over the context (src/llama-graph.cpp build_attn_mha).
  rules.push_back({"llamacpp",
                   "llamacpp_mul_mat_attention",
                   "llama.cpp attention without FA (mul_mat + soft_max)",
                   "-fa off",
                   kAll,
                   0,
                   UINT64_MAX,
                   false,
                   SplitMode::always,
                   {},
                   "src/llama-graph.cpp build_attn_mha (llama.cpp master, 2026)"});

  // ---------------------------------------------------------------- SGLang
  // python/sglang/srt/server_args.py default attention_backend (at that level): fa3 on
  // Hopper (CC 9.x), flashinfer on other CUDA GPUs, aiter on gfx9 (MI300), triton
  // otherwise. The Triton decode kernel splits (num_kv_splits,
  // python/sglang/srt/layers/attention/triton_ops/decode_attention.py).
  rules.push_back(
      {"sglang",
       "sglang_fa3",
       "SGLang fa3 backend",
       "fa3",
       kCuda,
       0,
       UINT64_MAX,
       false,
       SplitMode::always,
       {{Field::compute_capability, Test::in_range, {90, 99}, {}, ""},
        {Field::head_size, Test::at_most, {256}, {}, ""},
        // server_args.py _handle_attention_backend_compatibility (0.5.5): fa3 with fp8_e5m2
        // logs "FlashAttention3 only supports fp8_e4m3 if using FP8" and switches to triton.
        kv_types({{{"auto", "bf16", "bfloat16", "fp8_e4m3", "fp4_e2m1"}, 0, kAnyCc, 0, UINT64_MAX, ""}})},
       "python/sglang/srt/server_args.py, layers/attention/flashattention_backend.py (2025-2026; KV types "
       "0.5.5)"});
  rules.push_back(
      {"sglang",
       "sglang_flashinfer",
       "SGLang flashinfer backend",
       "flashinfer",
       kCuda,
       0,
       UINT64_MAX,
       false,
       SplitMode::always,
       {{Field::compute_capability, Test::at_least, {75}, {}, ""},
        {Field::head_size, Test::one_of, {64, 128, 256}, {}, ""},
        // On Hopper fa3 is the default; its fp8_e5m2 fallback is triton, not
        // flashinfer (server_args.py 0.5.5), so e5m2 is not taken here on 9.x.
        kv_types({{{"auto", "bf16", "bfloat16", "fp8_e4m3", "fp4_e2m1"}, 0, kAnyCc, 0, UINT64_MAX, ""},
                  {{"fp8_e5m2"}, 0, 89, 0, UINT64_MAX, "not Hopper"},
                  {{"fp8_e5m2"}, 100, kAnyCc, 0, UINT64_MAX, "not Hopper"}})},
       "python/sglang/srt/server_args.py, layers/attention/flashinfer_backend.py (2025-2026; KV "
       "types 0.5.5)"});
  rules.push_back(
      {"sglang",
       "sglang_aiter",
       "SGLang aiter backend",
       "aiter",
       {"gfx9"},
       0,
       UINT64_MAX,
       false,
       SplitMode::always,
       {{Field::head_size, Test::one_of, {64, 128, 256}, {}, ""}},
       "python/sglang/srt/server_args.py (HIP default), layers/attention/aiter_backend.py (2025-2026)"});
  rules.push_back({"sglang",
                   "sglang_triton",
                   "SGLang triton backend (decode_attention, num_kv_splits)",
                   "triton",
                   kAll,
                   0,
                   UINT64_MAX,
                   false,
                   SplitMode::always,
                   {},
                   "python/sglang/srt/layers/attention/triton_ops/decode_attention.py (2025-2026)"});

  // ---------------------------------------------------------------- SGLang, MLA
  // get_default_attn_backend for MLA models (arg_groups/model_override_base.py, 0.5.23): fa3 on
  // Hopper (CUDA >= 12.3), flashinfer on SM100, triton elsewhere; on HIP aiter when the model has
  // 16 or 128 KV heads per TP rank, else triton (kvsight has no gate field for the config's KV
  // heads per rank, so HIP is planned with triton). Before these rules no SGLang kernel took MLA
  // layers and DeepSeek V3 on an H200 was reported as refused (issue #28).
  rules.push_back({"sglang",
                   "sglang_fa3_mla",
                   "SGLang fa3 backend (MLA)",
                   "fa3",
                   kCuda,
                   0,
                   UINT64_MAX,
                   true,
                   SplitMode::always,
                   {{Field::compute_capability, Test::in_range, {90, 99}, {}, ""},
                    kv_types({{{"auto", "bf16", "bfloat16", "fp8_e4m3"}, 0, kAnyCc, 0, UINT64_MAX, ""}})},
                   "python/sglang/srt/arg_groups/model_override_base.py get_default_attn_backend (MLA: fa3 "
                   "on Hopper), layers/attention/flashattention_backend.py (0.5.23)"});
  rules.push_back({"sglang",
                   "sglang_flashinfer_mla",
                   "SGLang flashinfer backend (MLA)",
                   "flashinfer",
                   kCuda,
                   0,
                   UINT64_MAX,
                   true,
                   SplitMode::always,
                   {{Field::compute_capability, Test::in_range, {100, 109}, {}, ""}},
                   "python/sglang/srt/arg_groups/model_override_base.py get_default_attn_backend (MLA: "
                   "flashinfer on SM100), layers/attention/flashinfer_mla_backend.py (0.5.23)"});
  rules.push_back({"sglang",
                   "sglang_triton_mla",
                   "SGLang triton backend (MLA decode, num_kv_splits)",
                   "triton",
                   kAll,
                   0,
                   UINT64_MAX,
                   true,
                   SplitMode::always,
                   {},
                   "python/sglang/srt/arg_groups/model_override_base.py get_default_attn_backend (MLA: "
                   "triton elsewhere), layers/attention/triton_backend.py (0.5.23)"});

  // ---------------------------------------------------------------- TensorRT-LLM

  // TensorRT-LLM KV cache types (kvsight: auto, fp8, int8, nvfp4): the docs' hardware
  // support matrix (docs/source/features/quantization.md) marks the FP8 KV cache supported
  // on Ampere, Ada, Hopper and Blackwell (no SM89 floor) and NVFP4 only on Blackwell; an
  // NVFP4 KV cache is admitted from compute capability 10.0 (gates.md; the enforcing code
  // path was not found in the sources read).
  const Condition trtllm_kv = kv_types({{{"auto", "fp8", "int8"}, 0, kAnyCc, 0, UINT64_MAX, ""},
                                        {{"nvfp4"}, 100, kAnyCc, 0, UINT64_MAX, "Blackwell FP4"}});
  // At the level its public docs support: XQA for GQA/MQA decode, else masked
  // multi-head attention with multi-block mode on (splits long contexts).
  rules.push_back(
      {"trtllm",
       "trtllm_xqa",
       "TensorRT-LLM XQA decode kernel",
       "xqa",
       kCuda,
       0,
       UINT64_MAX,
       false,
       SplitMode::always,
       {{Field::compute_capability, Test::at_least, {80}, {}, ""},
        {Field::head_size, Test::one_of, {64, 128, 256}, {}, ""},
        {Field::gqa_ratio, Test::at_least, {2}, {}, ""},
        trtllm_kv},
       "cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/ (XQA), docs gpt-attention.md; KV "
       "types docs features/quantization.md"});
  rules.push_back({"trtllm",
                   "trtllm_mmha",
                   "TensorRT-LLM masked multi-head attention (multi-block mode)",
                   "mmha",
                   kCuda,
                   0,
                   UINT64_MAX,
                   false,
                   SplitMode::always,
                   {trtllm_kv},
                   "cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/, docs gpt-attention.md "
                   "(multi_block_mode); KV types docs features/quantization.md"});
  return rules;
}

}  // namespace

const std::vector<KernelRule>& kernel_rules() {
  static const std::vector<KernelRule> rules = build_rules();
  return rules;
}

}  // namespace kvsight::gates_detail
