// vLLM 0.34.0 (issue #28 item 5): block size 64 by default, the extensible KV cache sized
// from memory measured after warmup, utilization 1.0 under it, the lines it prints, and the
// warning for a version newer than every engine's known rules. Every expected number is
// derived here from the shapes and the rules in docs/reference/formulas.md
// ("vLLM 0.34: the extensible KV cache").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "../planner/src/engines/vllm_stages.hpp"
#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight {
namespace {

constexpr std::uint64_t kGiBBytes = 1024ull * 1024ull * 1024ull;

bool has_line(const PlanResult& r, const std::string& line) {
  return std::find(r.engine_log.begin(), r.engine_log.end(), line) != r.engine_log.end();
}

bool has_warning_with(const PlanResult& r, const std::string& text) {
  return std::any_of(r.warnings.begin(), r.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}


TEST(Vllm034, KnownButNotTheDefault) {
  const auto engine = make_engine("vllm");
  const std::vector<std::string> known = engine->known_versions();
  EXPECT_EQ(known.back(), "0.34.0");
  // The default stays 0.33.0 (docs/reference/engine-versions.md "Default version").
  EXPECT_EQ(engine->default_version(), "0.33.0");
  EngineOptions o;
  EXPECT_EQ(vllm_block_size(llama31_8b(), o), 16u);
  EXPECT_EQ(engine->plan(llama31_8b(), nullptr, o).engine_version, "0.33.0");
}

TEST(Vllm034, DefaultBlockSize64AndUserValueKept) {
  // config/cache.py 0.34.0: DEFAULT_BLOCK_SIZE = 64; FLASH_ATTN (MultipleOf(16)) keeps it.
  EngineOptions o;
  o.engine_version = "0.34.0";
  EXPECT_EQ(vllm_block_size(llama31_8b(), o), 64u);
  o.block_size = 16;
  EXPECT_EQ(vllm_block_size(llama31_8b(), o), 16u);
  // MLA: 64 is a multiple of FLASH_ATTN_MLA's 16 and FlashMLA's 64: it stands.
  o.block_size.reset();
  EXPECT_EQ(vllm_block_size(deepseek_v3_shape(), o), 64u);
  o.kv_cache_dtype = "fp8";
  EXPECT_EQ(vllm_block_size(deepseek_v3_shape(), o), 64u);
}

TEST(Vllm034, HybridBlockAlignsToTheLargerDefault) {
  // _align_hybrid_block_size (platforms/interface.py 0.34.0): alignment = max(the backend's
  // smallest kernel block 16, cache block size), now 64 by default.
  // Per rank at TP 2: state = conv (10,240 / 2) x 3 x 2 B + ssm 24 x 128 x 128 x 4 B
  //                         = 30,720 + 1,572,864 = 1,603,584 B
  // attention per token per layer = 2 heads x (256 + 256) x 2 B = 2,048 B
  // 0.33: 16 x ceil(1,603,584 / (16 x 2,048)) = 16 x ceil(48.94) = 16 x 49 = 784
  // 0.34: 64 x ceil(1,603,584 / (64 x 2,048)) = 64 x ceil(12.23) = 64 x 13 = 832
  const std::uint64_t state = 5120 * 3 * 2 + 24 * 128 * 128 * 4;
  const std::uint64_t per_token = 2 * (256 + 256) * 2;
  ASSERT_EQ(state, 1603584u);
  const std::uint64_t block_033 = 16 * ((state + 16 * per_token - 1) / (16 * per_token));
  const std::uint64_t block_034 = 64 * ((state + 64 * per_token - 1) / (64 * per_token));
  ASSERT_EQ(block_033, 784u);
  ASSERT_EQ(block_034, 832u);
  EngineOptions o;
  o.tp = 2;
  o.engine_version = "0.33.0";
  EXPECT_EQ(vllm_block_size(qwen36_27b_shape(), o), block_033);
  o.engine_version = "0.34.0";
  EXPECT_EQ(vllm_block_size(qwen36_27b_shape(), o), block_034);
  // --block-size 16 brings the alignment back to 16, and so the 0.33 block.
  o.block_size = 16;
  EXPECT_EQ(vllm_block_size(qwen36_27b_shape(), o), block_033);
}

TEST(Vllm034, Llama8bOnH200ExtensibleBudget) {
  const ModelSpec model = resolve_model("llama-3.1-8b");
  const GpuSpec& gpu = find_gpu("h200");
  EngineOptions o;
  o.engine_version = "0.34.0";
  const PlanResult r = make_engine("vllm")->plan(model, &gpu, o);
  ASSERT_TRUE(r.capacity.has_value());
  // Total as torch reports it (gpus.json h200): 150,023,962,624 B; utilization 1.0 under the
  // extensible KV cache, so requested = total.
  const std::uint64_t total = 150023962624ull;
  ASSERT_EQ(gpu.memory_bytes, total);
  EXPECT_EQ(r.capacity->requested_bytes, total);
  // Weights: 8,030,261,248 parameters x 2 B (formulas.md "Published vectors").
  const std::uint64_t weights = 8030261248ull * 2;
  ASSERT_EQ(r.weights.bytes_per_rank, weights);
  // Scheduler: >= 70 GiB and not an A100, API server: T 8192, S 1024.
  // Terms read from 0.34's code (docs/reference/vllm-profile-terms.md):
  //   dummy sampler, V2 warm-up pass with FlashInfer on an H200: 1,024 x 128,256 x 14 B
  //     = 1,838,678,016, above the forward 8192 x (3 x 14,336 + 4 x 4,096) x 2 B = 973,078,528;
  //   activation peak = 1,838,678,016 + 0.15 GiB (161,061,273.6) -> 1,999,739,289 B;
  //   CUDA graphs, the estimate's floor: 512 tokens of the forward (973,078,528 / 8192 x 512 =
  //     60,817,408) + (51 - 1 + 51 - 1) x 1 MiB = 165,675,008 B;
  //   V2 penalties state: 1,024 x 128,256 x 4 + 1,024 x 4,008 x 4 = 541,753,344 B.
  ASSERT_EQ(8192ull * (3 * 14336 + 4 * 4096) * 2, 973078528ull);
  const std::uint64_t act = 1024ull * 128256 * 14 + 161061273ull;
  ASSERT_EQ(act, 1999739289ull);
  const std::uint64_t graphs = 973078528ull / 8192 * 512 + 100 * 1024 * 1024;
  ASSERT_EQ(graphs, 165675008ull);
  const std::uint64_t penalties = 1024ull * 128256 * 4 + 1024ull * 4008 * 4;
  ASSERT_EQ(penalties, 541753344ull);
  const std::uint64_t non_torch = 107374182ull;  // 0.1 GiB at TP 1, truncated to bytes
  // The profile's reservation ("Available KV cache memory"): total - weights - every term
  //   = 150,023,962,624 - 16,060,522,496 - 1,999,739,289 - 107,374,182 - 165,675,008 - 541,753,344
  //   = 131,148,898,305 B
  const std::uint64_t reserved = total - weights - act - non_torch - graphs - penalties;
  ASSERT_EQ(reserved, 131148898305ull);
  // Measured after warmup (measure_kv_cache_bytes): transient = act + graphs = 2,165,414,297;
  // margin = max(1 GiB, 0.75 x transient = 1,624,060,722); 0.5 GiB in use at start-up.
  //   by budget = total - (weights + non-torch + graphs + penalties)               = 133,148,637,594
  //   by device = total - 0.5 GiB - (weights + non-torch + graphs + penalties) - margin = 130,987,705,960
  //   available = min(...) - transient = 130,987,705,960 - 2,165,414,297 = 128,822,291,663 B
  const std::uint64_t transient = act + graphs;
  const std::uint64_t margin = transient / 4 * 3 + transient % 4 * 3 / 4;
  ASSERT_EQ(margin, 1624060722ull);
  const std::uint64_t used = weights + non_torch + graphs + penalties;
  const std::uint64_t by_budget = total - used;
  const std::uint64_t by_device = total - kGiBBytes / 2 - used - margin;
  const std::uint64_t available = std::min(by_budget, by_device) - transient;
  ASSERT_EQ(available, 128822291663ull);
  EXPECT_EQ(r.capacity->available_kv_bytes, available);
  // Blocks of 64 tokens x 131,072 B = 8 MiB: 128,822,291,663 // 8,388,608 = 15,356.
  EXPECT_EQ(r.kv.block_size, 64u);
  const std::uint64_t page = 64ull * 131072;
  EXPECT_EQ(r.capacity->num_blocks, available / page);
  EXPECT_EQ(available / page, 15356u);
  // One request of 131,072 tokens = 2,048 blocks: concurrency 15,356 / 2,048 = 7.498x;
  // tokens = int(7.498046875 x 131,072) = 982,784.
  EXPECT_NEAR(r.capacity->max_concurrency, 15356.0 / 2048.0, 1e-9);
  EXPECT_EQ(r.capacity->kv_tokens, 982784u);
  // The lines 0.34 prints: the reservation, the measured size, the capacity.
  EXPECT_TRUE(has_line(r, "Available KV cache memory: 122.14 GiB"));  // 131,148,898,305 / 2^30
  EXPECT_TRUE(has_line(r, "Extended KV cache to 15356 blocks (119.97 GiB)."));  // 15,356 x 8 MiB
  EXPECT_TRUE(has_line(r, "GPU KV cache size: 982,784 tokens"));
  // The same model at 0.33: utilization 0.92, block 16, no margin or start-up term:
  //   ceil(total x 0.92) - weights - act - non-torch - graphs - penalties = 119,146,981,296 B.
  o.engine_version = "0.33.0";
  const PlanResult old = make_engine("vllm")->plan(model, &gpu, o);
  ASSERT_TRUE(old.capacity.has_value());
  const std::uint64_t old_available =
      static_cast<std::uint64_t>(std::ceil(static_cast<double>(total) * 0.92)) - weights - act - non_torch - graphs -
      penalties;
  ASSERT_EQ(old_available, 119146981296ull);
  EXPECT_EQ(old.capacity->available_kv_bytes, old_available);
  EXPECT_EQ(old.kv.block_size, 16u);
}

// The terms of Llama8bOnH200ExtensibleBudget: activation 1,999,739,289, graphs 165,675,008,
// penalties 541,753,344, non-torch 107,374,182 B.
constexpr std::uint64_t kLlamaH200Act = 1999739289ull, kLlamaH200Graphs = 165675008ull,
                        kLlamaH200Penalties = 541753344ull, kLlamaH200NonTorch = 107374182ull;

TEST(Vllm034, GivenUtilizationCapsTheMeasuredBudget) {
  // --gpu-memory-utilization 0.80 under the extensible cache: requested = ceil(total x 0.80)
  // and the by-budget term wins: requested - (weights + non-torch + graphs + penalties) - transient.
  const ModelSpec model = resolve_model("llama-3.1-8b");
  const GpuSpec& gpu = find_gpu("h200");
  EngineOptions o;
  o.engine_version = "0.34.0";
  o.vllm.gpu_memory_utilization = 0.80;
  const PlanResult r = make_engine("vllm")->plan(model, &gpu, o);
  ASSERT_TRUE(r.capacity.has_value());
  const std::uint64_t requested = static_cast<std::uint64_t>(std::ceil(150023962624.0 * 0.80));
  const std::uint64_t expected = requested - (8030261248ull * 2 + kLlamaH200NonTorch + kLlamaH200Graphs +
                                              kLlamaH200Penalties) -
                                 (kLlamaH200Act + kLlamaH200Graphs);
  EXPECT_EQ(r.capacity->requested_bytes, requested);
  EXPECT_EQ(r.capacity->available_kv_bytes, expected);
}

TEST(Vllm034, RefusalNamesTheExtensibleCache) {
  // Utilization 0.2: ceil(150,023,962,624 x 0.2) = 30,004,792,525 - (weights + non-torch + graphs
  // + penalties 16,875,325,030) - transient 2,165,414,297 = 10,964,053,198 B = 1,307 blocks of
  // 8 MiB = 83,648 tokens < 131,072: refused, with 0.34's hint (kv_cache_planning.py
  // _more_kv_cache_memory_hint, after warmup, utilization below 1.0).
  const ModelSpec model = resolve_model("llama-3.1-8b");
  const GpuSpec& gpu = find_gpu("h200");
  EngineOptions o;
  o.engine_version = "0.34.0";
  o.vllm.gpu_memory_utilization = 0.2;
  const PlanResult r = make_engine("vllm")->plan(model, &gpu, o);
  ASSERT_TRUE(r.capacity.has_value());
  EXPECT_FALSE(r.capacity->fits);
  const std::uint64_t expected = 30004792525ull -
                                 (8030261248ull * 2 + kLlamaH200NonTorch + kLlamaH200Graphs + kLlamaH200Penalties) -
                                 (kLlamaH200Act + kLlamaH200Graphs);
  ASSERT_EQ(expected, 10964053198ull);
  EXPECT_EQ(r.capacity->num_blocks, expected / (64ull * 131072));
  EXPECT_TRUE(std::any_of(r.engine_log.begin(), r.engine_log.end(), [](const std::string& l) {
    return l.find("within `gpu_memory_utilization`=0.2; increase it (with the extensible KV cache it "
                  "defaults to 1.0)") != std::string::npos;
  }));
}

TEST(Vllm034, KvCacheMemoryBytesTurnsItOff) {
  // _resolve_extensible_kv_cache: kv_cache_memory_bytes sizes the cache itself.
  EngineOptions o;
  o.engine_version = "0.34.0";
  o.vllm.kv_cache_memory_bytes = 1000ull * 64 * 131072;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity.has_value());
  EXPECT_EQ(r.capacity->num_blocks, 1000u);
  EXPECT_TRUE(std::none_of(r.engine_log.begin(), r.engine_log.end(),
                           [](const std::string& l) { return l.rfind("Extended KV cache", 0) == 0; }));
}

TEST(Vllm034, ExplainReadsTheMeasuredSize) {
  // The measured size follows the reservation in the log and replaces it.
  const EngineLogFigures f = read_engine_log(
      "INFO [gpu_worker.py:796] Available KV cache memory: 123.61 GiB\n"
      "INFO [extensible_kv_cache.py:680] Memory after warmup: 122.65 GiB free, 0.00 GiB committed to "
      "the KV cache, 1.06 GiB kept for transient activations (1.06 GiB allocated at peak, 0.00 GiB of "
      "torch reservation growth); 15629 KV cache blocks (122.10 GiB) fit within the requested 139.72 GiB. "
      "Torch may reserve up to 2.10 GiB.\n"
      "INFO [extensible_kv_cache.py:540] Extended KV cache to 15629 blocks (122.10 GiB).\n");
  ASSERT_TRUE(f.available_kv_gib.has_value());
  EXPECT_DOUBLE_EQ(*f.available_kv_gib, 122.10);
  ASSERT_TRUE(f.num_gpu_blocks.has_value());
  EXPECT_EQ(*f.num_gpu_blocks, 15629u);
}

TEST(EngineVersions, NewerThanKnownWarnsForEveryEngine) {
  // The rules compare with at_least, so a newer release is planned with the newest known
  // release's rules; the plan says so.
  EngineOptions o;
  o.engine_version = "0.35.0";
  const PlanResult v = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_TRUE(has_warning_with(v, "vLLM 0.35.0 is newer than the newest release whose rules kvsight knows "
                                  "(0.34.0): planned with 0.34.0's rules"));
  o.engine_version = "0.34.0";
  const PlanResult known = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_FALSE(has_warning_with(known, "is newer than the newest release"));
  for (const std::string engine : {"sglang", "trtllm", "exllamav2", "exllamav3", "llamacpp"}) {
    const auto e = make_engine(engine);
    EngineOptions n;
    n.engine = engine;
    n.engine_version = engine == "llamacpp" ? "b99999" : "99.0.0";
    const PlanResult r = e->plan(llama31_8b(), nullptr, n);
    EXPECT_TRUE(has_warning_with(r, "is newer than the newest release whose rules kvsight knows")) << engine;
    n.engine_version = e->known_versions().back();
    const PlanResult k = e->plan(llama31_8b(), nullptr, n);
    EXPECT_FALSE(has_warning_with(k, "is newer than the newest release")) << engine;
  }
}

}  // namespace
}  // namespace kvsight
