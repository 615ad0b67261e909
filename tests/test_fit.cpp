// kvsight fit (issue #12): the configurations that serve N sequences of L tokens, with
// the expectations derived by hand below: Llama-3.1-8B, 64 sequences at 32K on H200,
// H100-SXM and L40S under vLLM.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "kvsight/app/fit.hpp"
#include "kvsight/app/plan.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/number_text.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

// Llama-3.1-8B (config.json): 32 layers, 32 attention heads, 8 KV heads, head_dim 128, bf16.
// KV per token = 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B.
constexpr std::uint64_t kBytesPerTokenBf16 = 2ull * 32 * 8 * 128 * 2;
static_assert(kBytesPerTokenBf16 == 131072);
// 32K = 32,768 tokens = 2,048 blocks of 16 exactly: one sequence = 32,768 x 131,072 B = 4 GiB.
constexpr std::uint64_t kContext = 32768;
constexpr std::uint64_t kSeqBf16 = kContext * kBytesPerTokenBf16;
static_assert(kSeqBf16 == 4ull << 30);
constexpr std::uint64_t kN = 64;  // 64 sequences: 256 GiB of KV at bf16 on one rank
// Per layer and token on one rank holding all 8 KV heads: 8 x 2 rows of 128 elements.
//   bf16:  128 x 2 B            = 256 B per row -> 4,096 B per layer-token
//   fp8:   128 x 1 B            = 128 B per row -> 2,048 B
//   nvfp4: 128 x 4 bit + 128/16 fp8 scales = 64 + 8 = 72 B per row -> 1,152 B
constexpr std::uint64_t kLayerTokenBf16 = 16 * 256, kLayerTokenFp8 = 16 * 128, kLayerTokenNvfp4 = 16 * 72;
// Catalog memory as vLLM sees it (planner/data/gpus.json) and vLLM's default
// gpu_memory_utilization 0.92 (docs/reference/overheads.md): the engine's budget.
constexpr double kH200 = 150023962624.0, kH100 = 85029027840.0, kL40S = 47695527936.0;
constexpr double kUtil = 0.92;
// Llama-3.1-8B weights at bf16: 8,030,261,248 parameters x 2 B (untied embeddings).
constexpr double kWeights = 8030261248.0 * 2;
// An upper bound on vLLM's runtime overheads (activation peak + non-torch + CUDA graphs)
// for an 8B model: every estimate in docs/reference/overheads.md is well below 10 GiB.
constexpr double kOverheadBound = 10.0 * 1024 * 1024 * 1024;

app::FitRequest llama_request(std::vector<std::string> dtypes = {"auto", "fp8", "nvfp4"}) {
  app::FitRequest request;
  request.model = "llama-3.1-8b";
  request.concurrency = kN;
  request.context = kContext;
  request.gpus = "h200,h100-sxm,l40s";
  request.kv_cache_dtypes = std::move(dtypes);
  return request;
}

// The KV cache types of every candidate, accepted and rejected, in order.
std::vector<std::string> searched_kv_types(const app::FitOutcome& outcome) {
  std::vector<std::string> searched;
  for (const auto* list : {&outcome.accepted, &outcome.rejected})
    for (const auto& c : *list) searched.push_back(c.kv_cache_dtype);
  return searched;
}

std::uint64_t layer_token_bytes(const std::string& dtype) {
  if (dtype == "fp8") return kLayerTokenFp8;
  if (dtype == "nvfp4") return kLayerTokenNvfp4;
  return kLayerTokenBf16;
}

// Layers on the heaviest pipeline stage: vLLM get_pp_indices gives each stage 32 / pp and
// the remainder one each to the stages before the last (PP 3: 10, 11, 11 -> 11).
std::uint64_t heaviest_stage_layers(std::uint32_t pp) { return 32 / pp + (32 % pp ? 1 : 0); }

std::uint32_t fewest_gpus(const app::FitOutcome& outcome, const std::string& gpu) {
  for (const app::FitCandidate& c : outcome.accepted)
    if (c.gpu == gpu) return c.gpu_count;  // accepted is sorted by GPU count
  return 0;
}

TEST(Fit, PerSequenceKvIsTheHandFormulaForEveryCandidate) {
  const app::FitOutcome outcome = app::run_fit(llama_request());
  std::vector<app::FitCandidate> all = outcome.accepted;
  all.insert(all.end(), outcome.rejected.begin(), outcome.rejected.end());
  std::size_t checked = 0;
  for (const app::FitCandidate& c : all) {
    if (c.tp == 3 || c.tp == 5 || c.tp == 6 || c.tp == 7) continue;  // refused, checked below
    // KV heads per rank: 8 / tp (tp <= 8 divides 8); layers per rank: the heaviest stage.
    const std::uint64_t expected =
        kContext * layer_token_bytes(c.kv_cache_dtype) / c.tp * heaviest_stage_layers(c.pp);
    EXPECT_EQ(c.bytes_per_sequence, expected)
        << c.gpu << " tp " << c.tp << " pp " << c.pp << " " << c.kv_cache_dtype;
    EXPECT_EQ(c.needed_kv_bytes, kN * expected);
    EXPECT_EQ(c.gpu_count, c.tp * c.pp);
    EXPECT_LE(c.gpu_count, 8u);
    ++checked;
  }
  // TP 1, 2, 4, 8 with PP up to 8 / TP: 8 + 4 + 2 + 1 = 15 (TP, PP) pairs; x 3 KV types x 3 GPUs.
  EXPECT_EQ(checked, 15u * 3 * 3);
  // Spot check: TP 1, bf16 -> 4 GiB per sequence, 256 GiB for 64.
  const auto it = std::find_if(all.begin(), all.end(), [](const app::FitCandidate& c) {
    return c.gpu == "h200" && c.tp == 1 && c.pp == 1 && c.kv_cache_dtype == "auto";
  });
  ASSERT_NE(it, all.end());
  EXPECT_EQ(it->bytes_per_sequence, 4ull << 30);
  EXPECT_EQ(it->needed_kv_bytes, 256ull << 30);
}

TEST(Fit, TpValuesTheEngineRefusesAreRejectedWithTheReason) {
  const app::FitOutcome outcome = app::run_fit(llama_request({"auto"}));
  for (const app::FitCandidate& c : outcome.accepted) {
    // 32 attention heads: vLLM starts only when TP divides them (1, 2, 4, 8 up to 8 GPUs).
    EXPECT_EQ(32u % c.tp, 0u) << "tp " << c.tp << " accepted";
  }
  std::size_t refused = 0;
  for (const app::FitCandidate& c : outcome.rejected) {
    if (32u % c.tp == 0) continue;
    ++refused;
    ASSERT_FALSE(c.reasons.empty());
    EXPECT_NE(c.reasons.front().find("does not divide 32 attention heads"), std::string::npos)
        << c.reasons.front();
  }
  // TP 3 (PP 1, 2), 5, 6, 7 (PP 1): 5 pairs x 3 GPUs x 1 KV type.
  EXPECT_EQ(refused, 5u * 3);
}

TEST(Fit, FewestGpusPerKindMatchTheHandDerivation) {
  const app::FitOutcome outcome = app::run_fit(llama_request());
  ASSERT_EQ(outcome.verdict, app::Verdict::ok);
  // H200, 1 GPU: budget 0.92 x 150.02e9 = 138.02e9 B, minus 16.06e9 of weights = 121.96e9.
  //   bf16 needs 256 GiB = 274.9e9 > the whole GPU; fp8 128 GiB = 137.4e9 > 121.96e9;
  //   nvfp4 64 x 32,768 x 1,152 x 32 = 77.31e9 <= 121.96e9 - 10 GiB of overheads = 111.2e9.
  EXPECT_LT(kH200 * kUtil - kWeights, double(kN * kContext * kLayerTokenFp8 * 32));
  EXPECT_LE(double(kN * kContext * kLayerTokenNvfp4 * 32), kH200 * kUtil - kWeights - kOverheadBound);
  EXPECT_EQ(fewest_gpus(outcome, "h200"), 1u);
  // H100-SXM, 1 GPU: 0.92 x 85.03e9 - 16.06e9 = 62.17e9 < 77.31e9 (nvfp4): nothing.
  //   2 GPUs, TP 2 nvfp4: 38.65e9 per rank <= 78.23e9 - 8.03e9 (half the weights) - 10 GiB = 59.46e9.
  EXPECT_LT(kH100 * kUtil - kWeights, double(kN * kContext * kLayerTokenNvfp4 * 32));
  EXPECT_LE(double(kN * kContext * kLayerTokenNvfp4 * 32 / 2), kH100 * kUtil - kWeights / 2 - kOverheadBound);
  EXPECT_EQ(fewest_gpus(outcome, "h100-sxm"), 2u);
  // L40S: 1 GPU: 0.92 x 47.70e9 = 43.88e9 < 77.31e9. 2 GPUs (TP 2 or PP 2): 38.65e9 per rank
  //   > 43.88e9 - 8.03e9 (the heaviest rank holds at least half the weights) = 35.85e9.
  //   4 GPUs, TP 4 nvfp4: 19.33e9 <= 43.88e9 - 4.02e9 - 10 GiB = 29.13e9: at most 4.
  EXPECT_LT(kL40S * kUtil - kWeights / 2, double(kN * kContext * kLayerTokenNvfp4 * 32 / 2));
  EXPECT_LE(double(kN * kContext * kLayerTokenNvfp4 * 32 / 4), kL40S * kUtil - kWeights / 4 - kOverheadBound);
  const std::uint32_t l40s = fewest_gpus(outcome, "l40s");
  EXPECT_GE(l40s, 3u);
  EXPECT_LE(l40s, 4u);
  // So the first configuration is the only one-GPU one: one H200 with an NVFP4 cache.
  ASSERT_FALSE(outcome.accepted.empty());
  const app::FitCandidate& best = outcome.accepted.front();
  EXPECT_EQ(best.gpu, "h200");
  EXPECT_EQ(best.gpu_count, 1u);
  EXPECT_EQ(best.kv_cache_dtype, "nvfp4");
  EXPECT_EQ(outcome.accepted[1].gpu_count, 2u);
}

TEST(Fit, AtBf16OneH200NeedsThreeGpusAsPipelineStages) {
  const app::FitOutcome outcome = app::run_fit(llama_request({"auto"}));
  // 2 GPUs: 128 GiB = 137.4e9 per rank > 138.02e9 - 8.03e9 = 129.99e9.
  EXPECT_GT(double(kN * kSeqBf16 / 2), kH200 * kUtil - kWeights / 2);
  // 3 GPUs: TP 3 is refused (32 heads); PP 3 holds at most 11 layers per stage:
  //   64 x 32,768 x 4,096 x 11 = 94.49e9 <= 138.02e9 - (11/32 of the weights + 2.1e9 of
  //   embeddings and LM head = 7.62e9) - 10 GiB = 119.66e9.
  const double stage_weights = kWeights * 11 / 32 + 2.0 * 128256 * 4096 * 2;
  EXPECT_LE(double(kN * kContext * kLayerTokenBf16 * 11), kH200 * kUtil - stage_weights - kOverheadBound);
  EXPECT_EQ(fewest_gpus(outcome, "h200"), 3u);
  const auto first_h200 = std::find_if(outcome.accepted.begin(), outcome.accepted.end(),
                                       [](const app::FitCandidate& c) { return c.gpu == "h200"; });
  ASSERT_NE(first_h200, outcome.accepted.end());
  EXPECT_EQ(first_h200->tp, 1u);
  EXPECT_EQ(first_h200->pp, 3u);
  EXPECT_EQ(first_h200->needed_kv_bytes, 94489280512ull);  // = 64 x 32,768 x 4,096 x 11
}

TEST(Fit, OrderIsFewestGpusThenLeastLossyThenMostHeadroom) {
  const app::FitOutcome outcome = app::run_fit(llama_request());
  ASSERT_GT(outcome.accepted.size(), 2u);
  for (std::size_t i = 1; i < outcome.accepted.size(); ++i) {
    const auto& a = outcome.accepted[i - 1];
    const auto& b = outcome.accepted[i];
    ASSERT_LE(a.gpu_count, b.gpu_count);
    if (a.gpu_count == b.gpu_count) {
      // bf16 (16 bits: full) before fp8 (8 bits) before nvfp4 (4 bits), whatever the headroom.
      ASSERT_LE(a.kv_tier, b.kv_tier) << a.kv_cache_dtype << " before " << b.kv_cache_dtype;
      if (a.kv_tier == b.kv_tier) {
        EXPECT_GE(a.headroom, b.headroom);
      }
    }
  }
  // The tier follows the stored bits: auto = the model's bf16 (16), fp8 (8), nvfp4 (4).
  const std::map<std::string, KvQualityTier> tiers{
      {"auto", KvQualityTier::full}, {"fp8", KvQualityTier::eight_bit}, {"nvfp4", KvQualityTier::low_bit}};
  for (const auto& c : outcome.accepted) {
    const auto tier = tiers.find(c.kv_cache_dtype);
    if (tier != tiers.end()) {
      EXPECT_EQ(c.kv_tier, tier->second) << c.kv_cache_dtype;
    }
  }
  for (const auto& c : outcome.accepted) {
    // Headroom = KV available / KV needed - 1 >= 0 for a configuration that fits, and at
    // least the spare share of sequences (max concurrency counts whole blocks only).
    EXPECT_DOUBLE_EQ(c.headroom, double(c.available_kv_bytes) / double(c.needed_kv_bytes) - 1.0);
    EXPECT_GE(c.headroom + 1e-12, c.max_concurrency / 64.0 - 1.0);
    EXPECT_GE(c.headroom, 0.0);
    EXPECT_GE(c.available_kv_bytes, c.needed_kv_bytes);
    EXPECT_TRUE(c.reasons.empty());
  }
  for (const auto& c : outcome.rejected) EXPECT_FALSE(c.reasons.empty());
}

TEST(Fit, EachCandidateIsThePlanUseCaseForTheSameOptions) {
  const app::FitOutcome outcome = app::run_fit(llama_request({"fp8"}));
  std::size_t compared = 0;
  for (const app::FitCandidate& c : outcome.rejected) {
    if (!(c.gpu == "h100-sxm" && c.tp == 2 && c.pp == 1)) continue;
    app::PlanRequest plan;
    plan.models = "llama-3.1-8b";
    plan.gpus = "h100-sxm";
    plan.options.tp = 2;
    plan.options.kv_cache_dtype = "fp8";
    plan.options.batch = kN;
    plan.options.context = kContext;
    plan.options.max_model_len = static_cast<std::int64_t>(kContext);
    const app::PlanOutcome planned = app::run_plan(plan);
    ASSERT_EQ(planned.items.size(), 1u);
    ASSERT_TRUE(planned.items[0].result.capacity.has_value());
    EXPECT_EQ(c.available_kv_bytes, planned.items[0].result.capacity->available_kv_bytes);
    EXPECT_EQ(c.fits, planned.items[0].fits);
    // 64 x 1 GiB per rank (fp8, 4 KV heads per rank) = 64 GiB needed.
    EXPECT_EQ(c.needed_kv_bytes, 64ull << 30);
    ASSERT_FALSE(c.reasons.empty());
    EXPECT_NE(c.reasons.front().find("64 sequences of 32768 tokens need 64.00 GiB"), std::string::npos)
        << c.reasons.front();
    ++compared;
  }
  EXPECT_EQ(compared, 1u);
}

TEST(Fit, KvTypesWithTheSameFootprintAreSearchedOnce) {
  // vLLM's list: auto = bfloat16 = bf16 on a bf16 model; float16/fp16 the same 2 B; fp8 =
  // fp8_e4m3 = fp8_e5m2 = fp8_inc (1 B); fp8_ds_mla only for MLA models.
  app::FitRequest request = llama_request({"all"});
  request.gpus = "h200";
  request.max_gpus = 1;
  const app::FitOutcome outcome = app::run_fit(request);
  std::vector<std::string> searched = searched_kv_types(outcome);
  std::sort(searched.begin(), searched.end());
  // int8_per_token_head = fp8_per_token_head (1 B + 4 B scale per head); int4_per_token_head
  // (0.5 B + 4 B) and nvfp4 (0.5 B + an fp8 scale per 16) differ.
  EXPECT_EQ(searched, (std::vector<std::string>{"auto", "fp8", "fp8_per_token_head", "int4_per_token_head", "nvfp4"}));
  ASSERT_EQ(outcome.refused_options.size(), 1u);
  EXPECT_NE(outcome.refused_options[0].value.find("fp8_ds_mla"), std::string::npos);
  EXPECT_TRUE(outcome.lossy_kv_cache_dtypes.empty());
}

TEST(Fit, TheDefaultSearchKeepsTheModelsPrecision) {
  // No --kv-cache-dtypes: only the types that store >= 16 bits (auto = bf16 here, float16 /
  // fp16 the same 2 B); the 8-bit (fp8*, int8_per_token_head) and 4-bit (int4_per_token_head, nvfp4) caches are
  // left out and named.
  app::FitRequest request = llama_request({});
  request.gpus = "h200";
  request.max_gpus = 1;
  const app::FitOutcome outcome = app::run_fit(request);
  std::vector<std::string> searched = searched_kv_types(outcome);
  EXPECT_EQ(searched, (std::vector<std::string>{"auto"}));
  std::vector<std::string> lossy = outcome.lossy_kv_cache_dtypes;
  std::sort(lossy.begin(), lossy.end());
  EXPECT_EQ(lossy, (std::vector<std::string>{"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_per_token_head",
                                             "int4_per_token_head", "int8_per_token_head", "nvfp4"}));
}

TEST(Fit, BlockSizesTheEngineTakesAreSearchedWhenAsked) {
  app::FitRequest request = llama_request({"nvfp4"});
  request.gpus = "h200";
  request.max_gpus = 1;
  request.block_sizes = app::kFullBlockGrid;
  const app::FitOutcome outcome = app::run_fit(request);
  // vLLM's --block-size takes 1, 8, 16, 32, 64, 128, 256 (the default, 0, is 16), but on an
  // H200 an nvfp4 cache runs only on FlashInfer (flash_attn and triton_unified_attention do
  // not list nvfp4; gates.md "KV cache types per attention backend"), whose block sizes are
  // 16, 32 and 64: 1, 8, 128 and 256 leave no kernel, so the engine refuses them there.
  std::vector<std::uint32_t> blocks;
  for (const auto& c : outcome.accepted) blocks.push_back(c.block_size);
  std::sort(blocks.begin(), blocks.end());
  EXPECT_EQ(blocks, (std::vector<std::uint32_t>{16, 32, 64}));
  std::vector<std::uint32_t> refused;
  for (const auto& c : outcome.rejected) {
    refused.push_back(c.block_size);
    ASSERT_FALSE(c.reasons.empty());
    EXPECT_NE(c.reasons.front().find("an attention kernel admits"), std::string::npos) << c.reasons.front();
  }
  std::sort(refused.begin(), refused.end());
  EXPECT_EQ(refused, (std::vector<std::uint32_t>{1, 8, 128, 256}));
  // 32,768 is a multiple of every one of them: the same bytes per sequence for all.
  for (const auto& c : outcome.accepted) EXPECT_EQ(c.bytes_per_sequence, kContext * kLayerTokenNvfp4 * 32);
}

TEST(Fit, EnginesWithoutTensorParallelSearchOneGpu) {
  // llama.cpp reads no TP/PP option (it splits layers itself) and has no paged blocks:
  // one candidate per GPU and cache type. 4 sequences of 4K on one H200, f16: fits.
  app::FitRequest request;
  request.model = "llama-3.1-8b";
  request.concurrency = 4;
  request.context = 4096;
  request.gpus = "h200";
  request.options.engine = "llamacpp";
  request.kv_cache_dtypes = {"f16"};
  const app::FitOutcome outcome = app::run_fit(request);
  ASSERT_EQ(outcome.accepted.size(), 1u);
  EXPECT_EQ(outcome.accepted[0].tp, 1u);
  EXPECT_EQ(outcome.accepted[0].pp, 1u);
  EXPECT_TRUE(outcome.rejected.empty());
  // Its concurrency is the slot count (4 whenever it fits); the headroom is in bytes:
  // needed 4 x 4,096 x 131,072 B = 2 GiB; available >= 150.02e9 (no utilization cap) -
  // 16.06e9 of weights - 2 GiB (compute buffer + runtime, overheads.md) = 131.81e9 -> > 60x.
  EXPECT_EQ(outcome.accepted[0].needed_kv_bytes, 2ull << 30);
  EXPECT_GT(outcome.accepted[0].headroom,
            (150.02e9 - 16.06e9 - 2.0 * (1 << 30)) / double(2ull << 30) - 1.0 - 1e-9);
}

TEST(Fit, BadInputNamesTheFlag) {
  auto field_of = [](app::FitRequest request) {
    try {
      (void)app::run_fit(request);
    } catch (const InputError& e) {
      return e.field();
    }
    return std::string("(no error)");
  };
  app::FitRequest r = llama_request();
  r.concurrency = 0;
  EXPECT_EQ(field_of(r), "--concurrency");
  r = llama_request();
  r.context = 0;
  EXPECT_EQ(field_of(r), "--context");
  r = llama_request();
  r.gpus = "voodoo5";
  EXPECT_EQ(field_of(r), "--gpus");
  // Issue #25 class 6: `--gpus ""` searched every GPU, `h200,h200` gave duplicate rows.
  r = llama_request();
  r.gpus = "";
  EXPECT_EQ(field_of(r), "--gpus");
  r.gpus = "h200,l40s,h200";
  EXPECT_EQ(field_of(r), "--gpus");
  r = llama_request({"q4_0"});  // a llama.cpp type, not vLLM's
  EXPECT_EQ(field_of(r), "--kv-cache-dtypes");
  r = llama_request();
  r.block_sizes = {24};  // not in vllm/config/cache.py BlockSize
  EXPECT_EQ(field_of(r), "--block-sizes");
  r = llama_request();
  r.max_gpus = 0;
  EXPECT_EQ(field_of(r), "--max-gpus");
  r = llama_request();
  r.concurrency = UINT64_MAX;  // x 32,768 tokens x 131,072 B: far beyond 2^64 bytes
  EXPECT_EQ(field_of(r), "--concurrency");
}

// Issue #25 class 6: a 100,000-layer model with every GPU, --max-gpus 64 and every block size
// ran for minutes (49,280 candidates, each planned in time linear in the layers). The search
// is sized before it starts: every catalog GPU kind x 280 (TP, PP) pairs (sum over TP = 1..64 of
// floor(64 / TP)) x 1 KV type x 8 block sizes = 51,520 candidates with the 23 kinds of today x 100,000 layers, over the
// bound of 10^8 layer plans (1,000 candidates for this model): exit 2 naming the flags. One GPU
// kind up to 8 GPUs (20 pairs x 1 type x 1 block = 20 candidates) is searched.
TEST(FitCli, ASearchTooLargeForTheModelIsRefusedBeforeItStarts) {
  const std::string dir = test::temp_dir("fit-deep");
  test::write_file(dir + "/config.json",
                   R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
                       "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
                       "num_hidden_layers": 100000, "vocab_size": 1000, "max_position_embeddings": 4096,
                       "torch_dtype": "bfloat16"})");
  auto run = test::run_kvsight({"fit", "--model", dir, "--concurrency", "4", "--context", "4096",
                                "--block-sizes", "all", "--max-gpus", "64"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(run.out.empty());
  std::uint64_t pairs = 0;
  for (std::uint64_t tp = 1; tp <= 64; ++tp) pairs += 64 / tp;
  EXPECT_EQ(pairs, 280u);
  // Every catalog GPU kind (23 with GB10): kinds x 280 pairs x 1 KV type x 8 block sizes.
  const std::uint64_t kinds = gpu_catalog().size();
  EXPECT_EQ(kinds, 23u);
  const std::string candidates = commas_text(kinds * 280 * 8);
  EXPECT_EQ(candidates, "51,520");
  EXPECT_NE(run.err.find("--max-gpus: the search is " + candidates + " candidates (" + std::to_string(kinds) +
                         " GPU kinds x 280 TP x PP pairs x 1 KV type x 8 block sizes) of a 100,000-layer model"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("at most 1,000 candidates for this model: narrow it with --gpus"), std::string::npos)
      << run.err;
  run = test::run_kvsight({"fit", "--model", dir, "--concurrency", "4", "--context", "4096", "--gpus", "h200",
                           "--max-gpus", "8", "--format", "json"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["candidates_planned"].get<std::uint64_t>(), 20u);
}

TEST(FitCli, JsonExitCodesAndRefusedFlags) {
  auto run = test::run_kvsight({"fit", "--model", "llama-3.1-8b", "--concurrency", "64", "--context", "32K",
                                "--gpus", "h200,h100-sxm,l40s", "--kv-cache-dtypes", "auto,nvfp4", "--format",
                                "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["best"]["gpu"], "h200");
  EXPECT_EQ(j["best"]["kv_cache_dtype"], "nvfp4");
  // nvfp4, TP 1: 64 x 32,768 x 36,864 B (1,152 x 32 layers) = 77,309,411,328 B.
  EXPECT_EQ(j["best"]["needed_kv_bytes"].get<std::uint64_t>(), 64ull * 32768 * 36864);
  // 10,000 sequences of 128K at bf16 (5.24e9 per sequence per rank even at TP 8) fit nowhere.
  run = test::run_kvsight({"fit", "--model", "llama-3.1-8b", "--concurrency", "10000", "--context", "128K",
                           "--gpus", "l40s", "--kv-cache-dtypes", "auto"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.out.find("nothing fits"), std::string::npos);
  run = test::run_kvsight(
      {"fit", "--model", "llama-3.1-8b", "--concurrency", "64", "--context", "32K", "--tp", "2"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--tp"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("--max-gpus"), std::string::npos) << run.err;
  // CSV: one row per candidate, accepted first; 1 GPU kind x TP 1..8 with PP up to 8 / TP
  // (8 + 4 + 2 + 2 + 1 + 1 + 1 + 1 = 20 pairs) x 1 KV type = 20 rows after the header.
  run = test::run_kvsight({"fit", "--model", "llama-3.1-8b", "--concurrency", "64", "--context", "32K",
                           "--gpus", "h200", "--kv-cache-dtypes", "nvfp4", "--format", "csv"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("fits,gpu,tp,pp,gpus,kv_cache_dtype,kv_quality,block_size,", 0), 0u) << run.out;
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 21);
  EXPECT_EQ(run.out.find("\ntrue,h200,1,1,1,nvfp4,low-bit,16,1207959552,77309411328,"), run.out.find('\n'))
      << run.out;  // 32,768 x 36,864 B = 1,207,959,552 B per sequence; x 64 = 77,309,411,328
  run = test::run_kvsight({"fit", "--model", "llama-3.1-8b", "--concurrency", "-1", "--context", "32K"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--concurrency"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace kvsight
