// vLLM's planning stages (planner/src/engines/vllm_stages.hpp), each tested on its own:
// per-layer spec, grouping, per-stage projection, scheduler limits, memory budget, blocks,
// minimum over workers, memory check, max-length search, report. Every expected number is
// derived here from the shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "../planner/src/engines/vllm_stages.hpp"
#include "engine_fixtures.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
namespace {

using namespace vllm;

constexpr std::uint64_t kMiB = 1024ull * 1024ull;
constexpr double kGiBd = 1024.0 * 1024.0 * 1024.0;

Version version(int major, int minor, int patch = 0) {
  Version v;
  v.major = major;
  v.minor = minor;
  v.patch = patch;
  v.text = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  return v;
}

ModelSpec gemma2_like() {
  // 4 layers alternating sliding (W 4096) / full, 8 KV heads x 256, bf16.
  ModelSpec m = llama31_8b();
  m.layers.clear();
  for (int i = 0; i < 4; ++i)
    m.layers.push_back(i % 2 == 0 ? attn(LayerKind::sliding_window, 8, 256, 4096)
                                  : attn(LayerKind::full_attention, 8, 256));
  return m;
}

TEST(VllmStageSpecs, OneSpecPerKvLayerWithItsPage) {
  ModelSpec m = gemma2_like();
  LayerSpec none;
  none.kind = LayerKind::none;  // a layer without attention: no spec
  m.layers.push_back(none);
  const KvTypes types = resolve_kv_types(m, "auto");
  const auto specs = layer_cache_specs(m, types, 1, 16);
  ASSERT_EQ(specs.size(), 4u);
  // per token per layer 2 x 8 x 256 x 2 B = 8,192; page 16 x 8,192 = 131,072
  EXPECT_EQ(specs[0].spec.kind, SpecKind::sliding);
  EXPECT_EQ(specs[0].spec.window, 4096u);
  EXPECT_EQ(specs[1].spec.kind, SpecKind::full);
  EXPECT_EQ(specs[1].spec.bytes_per_token, 2u * 8 * 256 * 2);
  EXPECT_EQ(specs[1].spec.page_bytes, 16u * 8192);
  // TP 4: 2 heads per rank -> 2 x 2 x 256 x 2 = 2,048 B per token
  EXPECT_EQ(layer_cache_specs(m, types, 4, 16)[1].spec.bytes_per_token, 2048u);
  // A sliding layer without a window is refused, naming the layer.
  m.layers[0].window = 0;
  try {
    layer_cache_specs(m, types, 1, 16);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "layers[0].window");
  }
}

TEST(VllmStageGrouping, UniformSpecIsOneGroup) {
  const ModelSpec m = llama31_8b();
  const Layout l = group_kv_cache_specs(layer_cache_specs(m, resolve_kv_types(m, "auto"), 1, 16), 32);
  ASSERT_EQ(l.groups.size(), 1u);
  EXPECT_EQ(l.group_size, 32u);
  EXPECT_FALSE(l.uniform_type);
  EXPECT_EQ(l.padding_layers, 0u);
}

TEST(VllmStageGrouping, SevenSlidingThreeFullGivesPaddingLayers) {
  // 7 sliding + 3 full: 7 >= 1.5 x 3 -> group size 3; sliding fills ceil(7/3) = 3 groups
  // (9 slots, 2 padding), full 1 group: 4 groups, layers[i::3] to sliding group i.
  ModelSpec m = llama31_8b();
  m.layers.clear();
  for (int i = 0; i < 7; ++i) m.layers.push_back(attn(LayerKind::sliding_window, 8, 128, 1024));
  for (int i = 0; i < 3; ++i) m.layers.push_back(attn(LayerKind::full_attention, 8, 128));
  const Layout l = group_kv_cache_specs(layer_cache_specs(m, resolve_kv_types(m, "auto"), 1, 16), 10);
  ASSERT_EQ(l.groups.size(), 4u);
  EXPECT_EQ(l.group_size, 3u);
  EXPECT_EQ(l.padding_layers, 2u);
  EXPECT_EQ(l.groups[0].layers, (std::vector<std::uint32_t>{0, 3, 6}));
  EXPECT_EQ(l.groups[1].layers, (std::vector<std::uint32_t>{1, 4}));
  EXPECT_EQ(l.groups[3].layers, (std::vector<std::uint32_t>{7, 8, 9}));
}

TEST(VllmStageProjection, PipelineStagesCountTheirOwnLayers) {
  // 32 layers at PP 3: 11, 11, 10; page 16 x 4,096 B = 65,536 B per layer.
  const ModelSpec m = llama31_8b();
  const Layout l = group_kv_cache_specs(layer_cache_specs(m, resolve_kv_types(m, "auto"), 1, 16), 32);
  const auto stages = project_stages(l, 32, 3);
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[0].layers.size(), 11u);
  EXPECT_EQ(stages[2].layers.size(), 10u);
  EXPECT_EQ(stages[0].block_bytes, 11u * 65536u);
  EXPECT_EQ(stages[2].block_bytes, 10u * 65536u);
}

TEST(VllmStageScheduler, DefaultsByDeviceAndClamps) {
  EngineOptions o;
  GpuSpec h100;
  h100.id = "h100";
  h100.name = "NVIDIA H100";
  // 80 GiB, API server: T 8192, S 1024; 24 GiB: T 2048, S 256.
  SchedulerLimits s = scheduler_limits(version(0, 11), o, 80ull * 1024 * kMiB, &h100, 32768);
  EXPECT_EQ(s.max_num_batched_tokens, 8192u);
  EXPECT_EQ(s.max_num_seqs, 1024u);
  s = scheduler_limits(version(0, 11), o, 24ull * 1024 * kMiB, nullptr, 32768);
  EXPECT_EQ(s.max_num_batched_tokens, 2048u);
  EXPECT_EQ(s.max_num_seqs, 256u);
  // T = min(S x max_model_len, T): 4 seqs x 100 tokens = 400 < 2048; S = min(S, T) = 4.
  o.vllm.max_num_seqs = 4;
  s = scheduler_limits(version(0, 11), o, 24ull * 1024 * kMiB, nullptr, 100);
  EXPECT_EQ(s.max_num_batched_tokens, 400u);
  EXPECT_EQ(s.max_num_seqs, 4u);
  o.vllm.max_num_seqs = 0;
  EXPECT_THROW(scheduler_limits(version(0, 11), o, std::nullopt, nullptr, 100), InputError);
}

TEST(VllmStageScheduler, V0LongContextTurnsChunkedPrefillOn) {
  // V0 (0.6-0.7): max_model_len > 32768 on CUDA without a sliding window -> chunked prefill
  // on, T = 2048 (arg_utils.py create_engine_config, config.py SchedulerConfig, 0.7.2);
  // otherwise T = max(max_model_len, 2048).
  EngineOptions o;
  GpuSpec cuda;
  cuda.id = "rtx4090";
  cuda.vendor = "nvidia";
  const auto total = 24ull * 1024 * kMiB;
  EXPECT_EQ(scheduler_limits(version(0, 7), o, total, &cuda, 131072).max_num_batched_tokens, 2048u);
  EXPECT_EQ(scheduler_limits(version(0, 6), o, total, &cuda, 32769).max_num_batched_tokens, 2048u);
  // 32768 is not "> 32K": T = max(32768, 2048) = 32768.
  EXPECT_EQ(scheduler_limits(version(0, 7), o, total, &cuda, 32768).max_num_batched_tokens, 32768u);
  // A sliding-window model keeps it off: T = 131072.
  EXPECT_EQ(scheduler_limits(version(0, 7), o, total, &cuda, 131072, true).max_num_batched_tokens, 131072u);
  // 0.7 leaves ROCm out; 0.6 does not.
  GpuSpec rocm = cuda;
  rocm.vendor = "amd";
  EXPECT_EQ(scheduler_limits(version(0, 7), o, total, &rocm, 131072).max_num_batched_tokens, 131072u);
  EXPECT_EQ(scheduler_limits(version(0, 6), o, total, &rocm, 131072).max_num_batched_tokens, 2048u);
  // V1 (0.8+) is unchanged: 24 GiB API server, T = 2048 whatever the length.
  EXPECT_EQ(scheduler_limits(version(0, 8), o, total, &cuda, 32768).max_num_batched_tokens, 2048u);
}

TEST(VllmStageBudget, RequestedMinusWeightsAndOverheads) {
  // 24 GiB x 0.90 = 21.6 GiB requested; weights 8 GiB; overheads 1 + 0.5 GiB given;
  // enforce-eager: no graph term. available = 21.6 - 8 - 1.5 = 12.1 GiB.
  EngineOptions o;
  o.overheads.activation_gib = 1.0;
  o.overheads.non_torch_gib = 0.5;
  o.vllm.enforce_eager = true;
  SchedulerLimits limits{2048, 256, ""};
  const std::uint64_t total = 24ull * 1024 * kMiB;
  const MemoryBudget b = memory_budget(version(0, 11), llama31_8b(), o, total, 8ull * 1024 * kMiB, limits);
  const auto requested = static_cast<std::uint64_t>(std::ceil(24.0 * kGiBd * 0.90));
  EXPECT_EQ(b.requested_bytes, requested);
  EXPECT_EQ(b.overhead_bytes, static_cast<std::uint64_t>(1.5 * kGiBd));
  EXPECT_EQ(b.available_bytes, requested - 8ull * 1024 * kMiB - static_cast<std::uint64_t>(1.5 * kGiBd));
  // Weights beyond the request: nothing left, and a warning.
  const MemoryBudget none =
      memory_budget(version(0, 11), llama31_8b(), o, total, 22ull * 1024 * kMiB, limits);
  EXPECT_EQ(none.available_bytes, 0u);
  EXPECT_FALSE(none.warnings.empty());
}

TEST(VllmStageBlocks, MinimumOverWorkersNamesTheRank) {
  // Stage block bytes 11, 11, 10 pages of 65,536 B; 1,000 x 11 pages of memory:
  // stages 0 and 1 hold 1,000 blocks, stage 2 1,100; the minimum is stage 0 (rank 0).
  std::vector<StageProjection> stages(3);
  stages[0].block_bytes = 11 * 65536;
  stages[1].block_bytes = 11 * 65536;
  stages[2].block_bytes = 10 * 65536;
  const std::uint64_t available = 1000ull * 11 * 65536;
  EXPECT_EQ(blocks_for_memory(available, stages[2].block_bytes), 1100u);
  EXPECT_EQ(blocks_for_memory(available, 0), 0u);
  const BlockPool p = min_blocks_over_workers(stages, available, 4);
  EXPECT_EQ(p.num_blocks, 1000u);
  EXPECT_EQ(p.page_bytes, 11u * 65536u);
  EXPECT_EQ(p.limiting_rank, 0u);
  // Stage 2 heavier: it limits, rank = stage 2 x TP 4 = 8.
  stages[2].block_bytes = 12 * 65536;
  EXPECT_EQ(min_blocks_over_workers(stages, available, 4).limiting_rank, 8u);
}

TEST(VllmStageCheck, NullBlockReservationMovesTheEdge) {
  // One group of 32 layers, page 2 MiB per block id, 100 blocks of memory: a length fits
  // while ceil(L / 16) <= 100 (L <= 1600), or <= 99 with the null block held back (L <= 1584).
  const ModelSpec m = llama31_8b();
  const Layout l = group_kv_cache_specs(layer_cache_specs(m, resolve_kv_types(m, "auto"), 1, 16), 32);
  const auto stages = project_stages(l, 32, 1);
  ASSERT_EQ(stages[0].block_bytes, 2 * kMiB);
  const std::uint64_t available = 100 * 2 * kMiB;
  EXPECT_TRUE(enough_kv_memory(l, stages, available, 1600, 2048, false, false));
  EXPECT_FALSE(enough_kv_memory(l, stages, available, 1601, 2048, false, false));
  EXPECT_FALSE(enough_kv_memory(l, stages, available, 1600, 2048, false, true));
  EXPECT_TRUE(enough_kv_memory(l, stages, available, 1584, 2048, false, true));
}

TEST(VllmStageSearch, BinarySearchFindsTheEdge) {
  EXPECT_EQ(estimate_max_model_len([](std::uint64_t len) { return len <= 23648; }, 131072), 23648u);
  EXPECT_EQ(estimate_max_model_len([](std::uint64_t) { return true; }, 4096), 4096u);
  EXPECT_EQ(estimate_max_model_len([](std::uint64_t) { return false; }, 4096), 0u);
}

TEST(VllmStagePages, SlidingChunkedAndMambaPerRequest) {
  CacheSpec s;
  s.kind = SpecKind::sliding;
  s.window = 4096;
  s.block_size = 16;
  // ceil(min(4095 + 2048, 32768) / 16) + 1 = 384 + 1 = 385
  EXPECT_EQ(pages_per_request(s, 32768, 2048, false), 385u);
  // short request: ceil(100 / 16) + 1 = 8
  EXPECT_EQ(pages_per_request(s, 100, 2048, false), 8u);
  s.kind = SpecKind::chunked;
  s.window = 8192;
  // ceil(min(8192 + 8192, 131072) / 16) = 1024
  EXPECT_EQ(pages_per_request(s, 131072, 8192, false), 1024u);
  s.kind = SpecKind::mamba;
  EXPECT_EQ(pages_per_request(s, 131072, 8192, false), 1u);
  EXPECT_EQ(pages_per_request(s, 131072, 8192, true), 2u);
}

TEST(VllmStageReport, TokensLineByVersion) {
  // Two groups (sliding + full) of block 16, 1,000 blocks, 100 pages per request at 1,600:
  // concurrency 1000 / 100 = 10; 0.19: tokens = 1000 // 2 x 16 = 8,000; 0.20+: 10 x 1,600 = 16,000.
  Layout layout;
  Group g;
  g.spec.kind = SpecKind::full;
  g.spec.block_size = 16;
  layout.groups = {g, g};
  BlockPool pool{1000, 4 * kMiB, 0};
  const Version v19 = version(0, 19), v20 = version(0, 20);
  ReportInputs in;
  in.version = &v19;
  in.layout = &layout;
  in.pool = &pool;
  in.max_model_len = 1600;
  in.req_pages = 100;
  in.block_size = 16;
  in.available_bytes = 1000 * 4 * kMiB;
  in.available_gib_signed = 1000.0 * 4 / 1024;  // 3.90625 GiB
  in.fits = true;
  ReportFigures r = report_figures(in);
  EXPECT_NEAR(r.max_concurrency, 10.0, 1e-12);
  EXPECT_EQ(r.kv_tokens, 8000u);
  in.version = &v20;
  r = report_figures(in);
  EXPECT_EQ(r.kv_tokens, 16000u);
  EXPECT_NE(joined(r.engine_log).find("GPU KV cache size: 16,000 tokens"), std::string::npos)
      << joined(r.engine_log);
  // 1000 x 4 MiB = 3.90625 GiB -> "3.91"
  EXPECT_NE(joined(r.engine_log).find("Available KV cache memory: 3.91 GiB"), std::string::npos);
  // A model that does not fit: vLLM prints the negative difference (gpu_worker.py), not 0.00.
  in.available_gib_signed = -1.25;
  in.fits = false;
  EXPECT_NE(joined(report_figures(in).engine_log).find("Available KV cache memory: -1.25 GiB"),
            std::string::npos);
}

}  // namespace
}  // namespace kvsight
