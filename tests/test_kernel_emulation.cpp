// The CUDA paged-decode kernels' own source (kernels/paged_decode.cuh and
// warp_walker.cuh), run on the CPU through tests/simt_emulation.hpp, against a
// float64 reference computed here: both walks (warp-split and shared-tile), split
// and no split with the reduce, the compiled and the runtime block size, a runtime
// group below the template group, bf16 / fp16 q and fp8 K/V with scales, partial
// last chunks, empty splits and an empty sequence. Issue #24 item 2: the kernels
// are rewritten without a GPU in reach, and the GPU machines' device check
// (scripts/device-check.sh) is not a CI step.
#define KVS_SIMT_EMULATION "simt_emulation.hpp"
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../kernels/paged_decode.cuh"
#include "../probes/src/half.hpp"

namespace kvsight::kernels {
namespace {

using probes::detail::float_to_bf16;
using probes::detail::float_to_fp16;

// Values k / 32 for k in [-48, 48]: exact in bf16, fp16 and float, so the
// reference sees the very numbers the kernel reads (probes/src/half.hpp encodes them).
float draw(std::mt19937& rng) { return static_cast<float>(static_cast<int>(rng() % 97) - 48) / 32.0f; }

struct Case {
  int kv_heads = 1;
  int group = 1;
  int block_size = 16;
  std::vector<int> seq_lens;
  int tokens_per_split = 0;  // 0: no split
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

template <typename T>
constexpr bool is_half = std::is_same_v<T, kvs_half>;

// Runs one instance on a case; returns max |kernel - reference| / max |reference|.
template <typename T, typename KV, int HD, int GROUP, int BS>
double run(const Case& c) {
  constexpr bool fp8 = std::is_same_v<KV, kvs_fp8_e4m3>;
  std::mt19937 rng(1234u + static_cast<unsigned>(HD * 131 + GROUP * 7 + c.block_size));
  const int seqs = static_cast<int>(c.seq_lens.size());
  const int q_heads = c.kv_heads * c.group;
  int max_blocks = 1;
  for (const int len : c.seq_lens) max_blocks = std::max(max_blocks, (len + c.block_size - 1) / c.block_size);
  const int num_blocks = seqs * max_blocks + 3;
  const std::size_t cache_elements = static_cast<std::size_t>(num_blocks) * c.block_size * c.kv_heads * HD;

  // K/V as stored (16-bit or fp8 bytes) and as the reference reads them.
  std::vector<unsigned short> k16(cache_elements), v16(cache_elements);
  std::vector<unsigned char> k8(cache_elements), v8(cache_elements);
  std::vector<double> k_value(cache_elements), v_value(cache_elements);
  for (std::size_t i = 0; i < cache_elements; ++i) {
    if constexpr (fp8) {
      auto byte = [&] {
        unsigned char b;
        do b = static_cast<unsigned char>(rng() & 0xffu);
        while ((b & 0x7fu) == 0x7fu);  // not NaN
        return b;
      };
      k8[i] = byte();
      v8[i] = byte();
      k_value[i] = fp8_e4m3_to_float(k8[i]) * static_cast<double>(c.k_scale);
      v_value[i] = fp8_e4m3_to_float(v8[i]) * static_cast<double>(c.v_scale);
    } else {
      const float k = draw(rng), v = draw(rng);
      k16[i] = is_half<KV> ? float_to_fp16(k) : float_to_bf16(k);
      v16[i] = is_half<KV> ? float_to_fp16(v) : float_to_bf16(v);
      k_value[i] = k;
      v_value[i] = v;
    }
  }
  std::vector<unsigned short> q(static_cast<std::size_t>(seqs) * q_heads * HD);
  std::vector<double> q_value(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    const float value = draw(rng);
    q[i] = is_half<T> ? float_to_fp16(value) : float_to_bf16(value);
    q_value[i] = value;
  }
  // Block tables: a shuffled pool, so that consecutive blocks of a sequence are far apart.
  std::vector<int> pool(static_cast<std::size_t>(num_blocks));
  for (int b = 0; b < num_blocks; ++b) pool[static_cast<std::size_t>(b)] = b;
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<std::int32_t> tables(static_cast<std::size_t>(seqs) * max_blocks);
  for (std::size_t i = 0; i < tables.size(); ++i) tables[i] = pool[i];
  std::vector<std::int32_t> lens(c.seq_lens.begin(), c.seq_lens.end());

  const bool split = c.tokens_per_split > 0;
  int splits = 1;
  if (split) splits = std::max(1, (max_blocks * c.block_size + c.tokens_per_split - 1) / c.tokens_per_split);
  std::vector<float> out(static_cast<std::size_t>(seqs) * q_heads * HD, -7.0f);
  std::vector<float> partial_out(out.size() * static_cast<std::size_t>(splits));
  std::vector<float> partial_max(static_cast<std::size_t>(seqs) * q_heads * splits);
  std::vector<float> partial_sum(partial_max.size());

  PagedDecodeParams p;
  p.q = q.data();
  p.k_cache = fp8 ? static_cast<const void*>(k8.data()) : static_cast<const void*>(k16.data());
  p.v_cache = fp8 ? static_cast<const void*>(v8.data()) : static_cast<const void*>(v16.data());
  p.block_tables = tables.data();
  p.seq_lens = lens.data();
  p.out = out.data();
  p.partial_out = partial_out.data();
  p.partial_max = partial_max.data();
  p.partial_sum = partial_sum.data();
  p.num_seqs = seqs;
  p.num_kv_heads = c.kv_heads;
  p.q_per_kv = c.group;
  p.head_dim = HD;
  p.block_size = c.block_size;
  p.max_blocks_per_seq = max_blocks;
  p.num_splits = splits;
  p.tokens_per_split = split ? c.tokens_per_split : max_blocks * c.block_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(HD));
  p.k_scale = c.k_scale;
  p.v_scale = c.v_scale;
  const FastDivider divider(static_cast<std::uint32_t>(c.block_size));
  const dim3 grid{static_cast<unsigned>(c.kv_heads), static_cast<unsigned>(seqs),
                  static_cast<unsigned>(split ? splits : 1)};
  const std::size_t shared = decode_shared_bytes<KV, HD, GROUP>();
  if (split) {
    kvs_simt::launch(grid, kThreadsPerProgram, shared, paged_decode_splitkv<T, KV, HD, GROUP, BS>, p, divider);
    kvs_simt::launch(dim3{static_cast<unsigned>(q_heads), static_cast<unsigned>(seqs), 1}, kThreadsPerProgram, 0,
                     paged_decode_reduce<HD>, p);
  } else {
    kvs_simt::launch(grid, kThreadsPerProgram, shared, paged_decode_nosplit<T, KV, HD, GROUP, BS>, p, divider);
  }

  // float64 reference: softmax(q . k x scale) . v per (sequence, query head); zeros
  // for an empty sequence (the kernels' convention).
  // Element offset of token t's K/V row for KV head kv of sequence s.
  auto row_of = [&](int s, int t, int kv) {
    const auto block = static_cast<std::size_t>(tables[static_cast<std::size_t>(s * max_blocks + t / c.block_size)]);
    return ((block * c.block_size + static_cast<std::size_t>(t % c.block_size)) * c.kv_heads + kv) * HD;
  };
  double worst = 0.0, largest = 0.0;
  for (int s = 0; s < seqs; ++s)
    for (int h = 0; h < q_heads; ++h) {
      const int kv = h / c.group;
      const int len = c.seq_lens[static_cast<std::size_t>(s)];
      std::vector<double> score(static_cast<std::size_t>(len));
      double top = -INFINITY;
      for (int t = 0; t < len; ++t) {
        const std::size_t row = row_of(s, t, kv);
        double dot = 0.0;
        for (int d = 0; d < HD; ++d)
          dot += q_value[(static_cast<std::size_t>(s) * q_heads + h) * HD + d] * k_value[row + d];
        score[static_cast<std::size_t>(t)] = dot / std::sqrt(static_cast<double>(HD));
        top = std::max(top, score[static_cast<std::size_t>(t)]);
      }
      double total = 0.0;
      std::vector<double> reference(HD, 0.0);
      for (int t = 0; t < len; ++t) {
        const double w = std::exp(score[static_cast<std::size_t>(t)] - top);
        total += w;
        const std::size_t row = row_of(s, t, kv);
        for (int d = 0; d < HD; ++d) reference[static_cast<std::size_t>(d)] += w * v_value[row + d];
      }
      for (int d = 0; d < HD; ++d) {
        const double expected = len > 0 ? reference[static_cast<std::size_t>(d)] / total : 0.0;
        const double got = out[(static_cast<std::size_t>(s) * q_heads + h) * HD + d];
        EXPECT_TRUE(std::isfinite(got)) << "seq " << s << " head " << h << " dim " << d;
        worst = std::max(worst, std::fabs(got - expected));
        largest = std::max(largest, std::fabs(expected));
      }
    }
  return worst / std::max(largest, 1e-30);
}

// fp32 accumulation of at most a few hundred products of exact inputs: ~1e-6 of the
// output's scale; 1e-4 leaves room for exp2f's few ulps and still catches a wrong
// index, head, row, scale or merge (each an error of order 1).
constexpr double kTolerance = 1e-4;

// The warp-split walk (headline instance): lengths 0 (empty sequence), 1, 37 (partial
// chunks) and 300 (every warp several chunks); splits of 96 tokens leave the empty
// sequence's and the short ones' later splits empty.
TEST(KernelEmulation, WarpWalkHeadlineInstanceSplitAndNoSplit) {
  static_assert(std::is_same_v<DecodeWalker<kvs_bf16, kvs_bf16, 128, 4, 16>, WarpWalker<kvs_bf16, kvs_bf16, 128, 4, 16>>);
  Case c{.kv_heads = 2, .group = 4, .block_size = 16, .seq_lens = {0, 1, 37, 300}, .tokens_per_split = 96};
  EXPECT_LT((run<kvs_bf16, kvs_bf16, 128, 4, 16>(c)), kTolerance);
  c.tokens_per_split = 0;
  EXPECT_LT((run<kvs_bf16, kvs_bf16, 128, 4, 16>(c)), kTolerance);
}

// The cliff's instance: group 6 on the group-8 template, head_dim 256 (one row per
// warp step), a runtime block size of 7 (the FastDivider path).
TEST(KernelEmulation, WarpWalkCliffInstanceRuntimeGroupAndBlockSize) {
  static_assert(std::is_same_v<DecodeWalker<kvs_bf16, kvs_bf16, 256, 8, 0>, WarpWalker<kvs_bf16, kvs_bf16, 256, 8, 0>>);
  const Case c{.kv_heads = 1, .group = 6, .block_size = 7, .seq_lens = {200, 9}, .tokens_per_split = 64};
  EXPECT_LT((run<kvs_bf16, kvs_bf16, 256, 8, 0>(c)), kTolerance);
}

// fp8 K/V at head_dim 64 (8 rows per warp step, 64-token chunks: 600 tokens give each
// warp two or three, so the per-chunk rescale is exercised) with both scales,
// and fp16 q and K/V at group 1 (no reduce-scatter step).
TEST(KernelEmulation, WarpWalkFp8ScalesAndFp16) {
  const Case fp8{.kv_heads = 3, .group = 2, .block_size = 16, .seq_lens = {600, 64}, .tokens_per_split = 0,
                 .k_scale = 0.5f, .v_scale = 2.0f};
  EXPECT_LT((run<kvs_bf16, kvs_fp8_e4m3, 64, 2, 16>(fp8)), kTolerance);
  const Case fp16{.kv_heads = 1, .group = 1, .block_size = 16, .seq_lens = {33}, .tokens_per_split = 32};
  EXPECT_LT((run<kvs_half, kvs_half, 128, 1, 16>(fp16)), kTolerance);
}

// Groups too large for the warp walk's registers keep the shared-tile walk: 16 with
// 16-bit K/V, 8 with fp8.
TEST(KernelEmulation, SharedTileWalkForLargeGroups) {
  static_assert(std::is_same_v<DecodeWalker<kvs_bf16, kvs_bf16, 64, 16, 16>, TileWalker<kvs_bf16, kvs_bf16, 64, 16, 16>>);
  static_assert(
      std::is_same_v<DecodeWalker<kvs_bf16, kvs_fp8_e4m3, 128, 8, 16>, TileWalker<kvs_bf16, kvs_fp8_e4m3, 128, 8, 16>>);
  const Case wide{.kv_heads = 1, .group = 16, .block_size = 16, .seq_lens = {70, 5}, .tokens_per_split = 32};
  EXPECT_LT((run<kvs_bf16, kvs_bf16, 64, 16, 16>(wide)), kTolerance);
  const Case fp8{.kv_heads = 2, .group = 7, .block_size = 16, .seq_lens = {45}, .tokens_per_split = 0,
                 .k_scale = 1.5f, .v_scale = 0.25f};
  EXPECT_LT((run<kvs_bf16, kvs_fp8_e4m3, 128, 8, 16>(fp8)), kTolerance);
}

// The dynamic shared memory the launcher asks for, derived by hand as
// scripts/kernel-report.sh and docs/reference/kernels.md state it.
TEST(KernelEmulation, SharedMemoryOfEachWalk) {
  // Warp-split, hd128 bf16: chunks of 8 x 512 / 256 = 16 rows; per warp 2 stages x (K, V) x 16 x 256 B
  // = 16,384 B + 2 x 16 row offsets x 8 B = 256 B; 4 warps = 66,560 B (more than the merged
  // 4 x 4 x 128 x 4 = 8,192 B sharing them); + 2 x 4 x 4 x 4 (warp max, sum) + 2 x 4 x 4 = 66,720.
  EXPECT_EQ((decode_shared_bytes<kvs_bf16, 128, 4>()), 66720u);
  // hd256, group 8: 8-row chunks, 4 x (16,384 + 128) = 66,048 + 2 x 4 x 8 x 4 + 2 x 8 x 4 = 66,368.
  EXPECT_EQ((decode_shared_bytes<kvs_bf16, 256, 8>()), 66368u);
  // fp8 hd64, group 2: 8 x 512 / 64 = 64-row chunks: 4 x (16,384 + 1,024) + 64 + 16 = 69,712.
  EXPECT_EQ((decode_shared_bytes<kvs_fp8_e4m3, 64, 2>()), 69712u);
  // Shared-tile, hd64 bf16 group 16: 2 x 2 x 32 x (128 + 16) = 18,432; q 16 x 64 x 4 = 4,096;
  // offsets 2 x 32 x 8 = 512; scores 16 x 32 x 4 = 2,048; 3 x 16 x 4 = 192 -> 25,280.
  EXPECT_EQ((decode_shared_bytes<kvs_bf16, 64, 16>()), 25280u);
}

}  // namespace
}  // namespace kvsight::kernels
