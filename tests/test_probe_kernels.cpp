// The cpu backend's two paged-decode algorithms (nosplit; split-KV + reduce):
// a case computed by hand, then every kernel variant (head_dim x block size,
// including non-power-of-two runtime blocks, both dtypes, several GQA ratios,
// both algorithms) against the float64 reference on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../kernels/fast_divider.hpp"
#include "../probes/src/backend.hpp"
#include "../probes/src/cpu_kernel.hpp"
#include "kvsight/error.hpp"
#include "kvsight/probes/probes.hpp"

namespace {
namespace kp = kvsight::probes;
using kvsight::kernels::PagedDecodeParams;

// The cpu kernels this machine runs: the portable one always, the AVX2 one
// and the AVX-512 BF16 one where the CPU has them (auto picks them there, so
// all are tested).
std::vector<std::string> cpu_kernels() {
  std::vector<std::string> out = {"portable"};
  if (kvsight::probes::detail::cpu_has_avx2_f16c()) out.push_back("avx2");
  if (kvsight::probes::detail::cpu_has_avx512_bf16()) out.push_back("avx512-bf16");
  if (kvsight::probes::detail::cpu_has_avx512() && kvsight::probes::detail::cpu_has_avx2_f16c())
    out.push_back("avx512-fp16");
  return out;
}

// Softmax over three tokens by hand. head_dim 64, scale 1/8, block size 2,
// block table [5, 2] (token 0, 1 -> block 5; token 2 -> block 2) in a pool of 8
// blocks whose other blocks hold NaN, so reading any of them would show.
// q head 0 = e0, q head 1 = 2 e0; k_t = c_t e0 with c = (0, 8, 16): scores of
// head 0 are (0, 1, 2), of head 1 (0, 2, 4). v_t = t + 1 in every dimension, so
// out_head0 = (1 + 2e + 3e^2) / (1 + e + e^2), out_head1 = (1 + 2e^2 + 3e^4) / (1 + e^2 + e^4).
class HandCase : public ::testing::Test {
 protected:
  static constexpr int kHeadDim = 64;
  static constexpr int kBlock = 2;
  static constexpr int kPool = 8;
  static constexpr std::uint16_t kNaN = 0x7fc0;  // bf16 quiet NaN

  void run(int splits, int tokens_per_split) {
    for (const std::string& kernel : cpu_kernels()) {
      SCOPED_TRACE(kernel);
      run_with(kernel, splits, tokens_per_split);
    }
  }
  void run_with(const std::string& kernel, int splits, int tokens_per_split) {
    auto backend = kvsight::probes::detail::cpu_open(2, kernel);
    std::vector<std::uint16_t> k(kPool * kBlock * kHeadDim, kNaN), v(kPool * kBlock * kHeadDim, kNaN);
    const int rows[3] = {5 * kBlock + 0, 5 * kBlock + 1, 2 * kBlock + 0};
    const std::uint16_t c[3] = {0x0000, 0x4100, 0x4180};      // 0, 8, 16 in bf16
    const std::uint16_t value[3] = {0x3f80, 0x4000, 0x4040};  // 1, 2, 3
    for (int t = 0; t < 3; ++t) {
      for (int d = 0; d < kHeadDim; ++d) {
        k[rows[t] * kHeadDim + d] = d == 0 ? c[t] : 0;
        v[rows[t] * kHeadDim + d] = value[t];
      }
    }
    std::vector<std::uint16_t> q(2 * kHeadDim, 0);
    q[0] = 0x3f80;         // head 0: e0
    q[kHeadDim] = 0x4000;  // head 1: 2 e0
    const std::int32_t table[2] = {5, 2};
    const std::int32_t lengths[1] = {3};
    auto upload = [&](const void* data, std::uint64_t bytes) {
      auto buffer = backend->allocate(bytes);
      backend->upload(*buffer, data, bytes);
      return buffer;
    };
    auto k_buffer = upload(k.data(), k.size() * 2);
    auto v_buffer = upload(v.data(), v.size() * 2);
    auto q_buffer = upload(q.data(), q.size() * 2);
    auto table_buffer = upload(table, sizeof(table));
    auto length_buffer = upload(lengths, sizeof(lengths));
    const std::vector<float> nan(2 * kHeadDim * 4, std::numeric_limits<float>::quiet_NaN());
    auto out = upload(nan.data(), 2 * kHeadDim * 4);
    auto partial_out = upload(nan.data(), nan.size() * 4);
    auto partial_max = upload(nan.data(), 2 * 4 * 4);
    auto partial_sum = upload(nan.data(), 2 * 4 * 4);

    PagedDecodeParams p;
    p.q = q_buffer->data();
    p.k_cache = k_buffer->data();
    p.v_cache = v_buffer->data();
    p.block_tables = static_cast<const std::int32_t*>(table_buffer->data());
    p.seq_lens = static_cast<const std::int32_t*>(length_buffer->data());
    p.out = static_cast<float*>(out->data());
    p.partial_out = static_cast<float*>(partial_out->data());
    p.partial_max = static_cast<float*>(partial_max->data());
    p.partial_sum = static_cast<float*>(partial_sum->data());
    p.num_seqs = 1;
    p.num_kv_heads = 1;
    p.q_per_kv = 2;
    p.head_dim = kHeadDim;
    p.block_size = kBlock;
    p.max_blocks_per_seq = 2;
    p.num_splits = splits;
    p.tokens_per_split = tokens_per_split;
    p.scale = 0.125f;
    p.dtype = kvsight::kernels::ElementType::bf16;
    backend->time_attention(splits > 1, p);
    std::vector<float> result(2 * kHeadDim);
    backend->download(result.data(), *out, result.size() * 4);
    const double e = std::exp(1.0);
    const double head0 = (1 + 2 * e + 3 * e * e) / (1 + e + e * e);
    const double head1 = (1 + 2 * e * e + 3 * e * e * e * e) / (1 + e * e + e * e * e * e);
    for (int d = 0; d < kHeadDim; ++d) {
      ASSERT_NEAR(result[d], head0, 2e-6 * head0) << "head 0, dim " << d;
      ASSERT_NEAR(result[kHeadDim + d], head1, 2e-6 * head1) << "head 1, dim " << d;
    }
  }
};

TEST_F(HandCase, NoSplit) { run(1, 0); }
TEST_F(HandCase, SplitOneTokenEach) { run(3, 1); }
TEST_F(HandCase, SplitWithEmptyTail) { run(4, 1); }  // split 3 covers no token: m = -inf, l = 0
TEST_F(HandCase, SplitUneven) { run(2, 2); }
// Uneven and empty at once: [0, 2), [2, 3) and [4, 6) holds no token, so the
// reduce merges a short split and skips an empty one in the same call.
TEST_F(HandCase, SplitUnevenWithEmpty) { run(3, 2); }

struct Variant {
  std::uint32_t head_dim, block_size;
  std::string dtype;
  std::uint32_t gqa;
};

std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  const std::uint32_t gqas[] = {1, 4, 6, 16, 2, 8, 3};
  int i = 0;
  for (std::uint32_t head_dim : {64u, 128u, 256u}) {
    for (std::uint32_t block : {8u, 16u, 32u, 48u, 784u}) {
      for (const char* dtype : {"bf16", "fp16"}) out.push_back({head_dim, block, dtype, gqas[i++ % 7]});
    }
  }
  return out;
}

class EveryVariant : public ::testing::TestWithParam<Variant> {};

TEST_P(EveryVariant, BothAlgorithmsMatchFloat64) {
  const Variant v = GetParam();
  kp::AttentionShape shape;
  shape.head_dim = v.head_dim;
  shape.block_size = v.block_size;
  shape.kv_heads = 2;
  shape.q_heads = 2 * v.gqa;
  shape.batch = 2;
  // Crosses blocks and ends inside one: two whole blocks plus 5 tokens, at least 101.
  shape.context = std::max<std::uint64_t>(2ull * v.block_size + 5, 101);
  shape.dtype = v.dtype;
  kp::ProbeOptions options;
  options.repeats = 1;
  options.warmup = 0;
  options.max_mem_bytes = 4 * kp::attention_bytes(shape) + (4u << 20);
  options.max_mem_fraction = 0.9;
  options.threads = 2;  // with 2 sequences x 2 KV heads the AVX-512 kernel's split-KV tasks take both heads
  for (const std::string& cpu_kernel : cpu_kernels()) {
    options.cpu_kernel = cpu_kernel;
    for (const char* kernel : {"nosplit", "splitkv"}) {
      options.splits = std::string(kernel) == "splitkv" ? 3 : 0;  // the cpu's 2 threads alone would pick 1
      const kp::AttentionResult r = kp::run_attention("cpu", kernel, shape, options);
      EXPECT_TRUE(r.point.correct) << cpu_kernel << " " << kernel << " max error " << r.point.max_error;
      EXPECT_LE(r.point.max_error, kp::error_bound(v.dtype, shape.context));
      EXPECT_DOUBLE_EQ(r.point.error_bound, kp::error_bound(v.dtype, shape.context));
      EXPECT_EQ(r.point.splits, std::string(kernel) == "splitkv" ? 3u : 1u);
      EXPECT_EQ(r.point.bytes, kp::attention_bytes(shape));
    }
  }
}

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  return "hd" + std::to_string(info.param.head_dim) + "_bs" + std::to_string(info.param.block_size) + "_" +
         info.param.dtype + "_gqa" + std::to_string(info.param.gqa);
}

INSTANTIATE_TEST_SUITE_P(Cpu, EveryVariant, ::testing::ValuesIn(all_variants()), variant_name);

TEST(ProbeKernels, AutomaticSplitsAndSweep) {
  kp::AttentionShape shape{128, 16, 1, 4, 1, 0, "bf16"};
  kp::ProbeOptions options;
  options.repeats = 2;
  options.warmup = 1;
  options.threads = 2;
  options.max_mem_bytes = 16u << 20;
  // The planner (kvsight::plan_splits) with the cpu's occupancy 1: 2 threads x 1 = 2 slots for 1 sequence x
  // 1 KV head -> floor(2 / 1) = 2 splits. At 1000 tokens: ceil(1000 / 2) = 500 -> tile multiple 512 ->
  // ceil(1000 / 512) = 2 splits; at 2048: 1024 each, 2 splits.
  const auto results = kp::run_sweeps("cpu", {"nosplit", "splitkv"}, shape, {1000, 2048}, options);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].points[0].splits, 2u);
  EXPECT_EQ(results[1].points[1].splits, 2u);
  EXPECT_EQ(results[1].ctas_per_multiprocessor, 1u);
  EXPECT_EQ(results[1].points[1].ctas_per_multiprocessor, 1u);
  EXPECT_EQ(results[0].points[1].ctas_per_multiprocessor, 0u);  // nosplit has no split plan
  // The stream probe of the same run, and every point's ratio to it.
  ASSERT_GT(results[0].stream_read_gbps, 0.0);
  EXPECT_DOUBLE_EQ(results[0].stream_read_gbps, results[1].stream_read_gbps);
  for (const auto& r : results) {
    for (const auto& point : r.points) {
      EXPECT_DOUBLE_EQ(point.stream_read_gbps, r.stream_read_gbps);
      EXPECT_DOUBLE_EQ(point.ratio_to_stream, point.gbps / r.stream_read_gbps);
      EXPECT_EQ(point.launches_per_sample, 1);  // cpu: one launch per sample
    }
  }
  for (const auto& r : results) {
    ASSERT_EQ(r.points.size(), 2u);
    for (const auto& point : r.points) EXPECT_TRUE(point.correct) << r.kernel << " " << point.context;
    // K+V at 2048: 2048 x 1 x 128 x 2 x 2 = 1,048,576; table 128 x 4 = 512; lens 4; q 4 x 128 x 2 = 1,024;
    // out 4 x 128 x 4 = 2,048.
    EXPECT_EQ(r.points[1].bytes, 1048576ull + 512 + 4 + 1024 + 2048);
    EXPECT_DOUBLE_EQ(r.growth, r.points[1].time_us / r.points[0].time_us);
  }
}

// Tasks of the AVX-512 kernel: the largest divisor of the KV heads giving every
// thread two tasks (else 1), at most 2048 row elements per task.
TEST(ProbeKernels, HeadsPerTask) {
  using kvsight::probes::detail::heads_per_task_for;
  EXPECT_EQ(heads_per_task_for(8, 128, 4, 2), 8);   // 4 seqs x 1 split x 8/8 = 4 tasks >= 2 x 2
  EXPECT_EQ(heads_per_task_for(8, 128, 1, 2), 2);   // 8/8 = 1 and 8/4 = 2 tasks < 4; 8/2 = 4
  EXPECT_EQ(heads_per_task_for(32, 128, 1, 2), 8);  // 32 x 128 > 2048; 16 gives 2 tasks < 4; 8 gives 4
  EXPECT_EQ(heads_per_task_for(8, 256, 4, 2), 8);   // 8 x 256 = 2048 is allowed
  EXPECT_EQ(heads_per_task_for(16, 256, 4, 2), 8);  // 16 x 256 = 4096 > 2048
  EXPECT_EQ(heads_per_task_for(6, 128, 1, 2), 1);   // 6, 3, 2 heads give 1, 2, 3 tasks < 4
  EXPECT_EQ(heads_per_task_for(6, 128, 4, 2), 6);   // 4 x 1 = 4 tasks
  EXPECT_EQ(heads_per_task_for(6, 128, 3, 2), 3);   // 6 heads: 3 tasks < 4; 3 heads: 6
  EXPECT_EQ(heads_per_task_for(1, 128, 1, 16), 1);
}

TEST(ProbeKernels, UnknownCpuKernelIsRefused) {
  kp::AttentionShape shape{64, 16, 1, 1, 1, 64, "bf16"};
  kp::ProbeOptions options;
  options.cpu_kernel = "avx9000";
  try {
    kp::run_attention("cpu", "nosplit", shape, options);
    FAIL() << "expected an InputError";
  } catch (const kvsight::InputError& e) {
    EXPECT_EQ(e.field(), "--cpu-kernel");
    EXPECT_NE(std::string(e.what()).find("allowed: auto, avx512-bf16, avx512-fp16, avx2, portable"),
              std::string::npos)
        << e.what();
  }
}

TEST(ProbeKernels, BandwidthIsCheckedExactly) {
  kp::ProbeOptions options;
  options.repeats = 2;
  options.warmup = 1;
  const kp::BandwidthResult r = kp::run_bandwidth("cpu", 4u << 20, options);
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.read_bytes, 4194304u);
  EXPECT_EQ(r.copy_bytes, 2u * 4194304u);  // read + write
  EXPECT_GT(r.read_gbps, 0.0);
}

TEST(ProbeKernels, MemoryBudgetIsEnforced) {
  kp::AttentionShape shape{128, 16, 8, 32, 4, 32768, "bf16"};  // 512 MiB of K/V
  kp::ProbeOptions options;
  options.max_mem_bytes = 64u << 20;
  try {
    kp::run_attention("cpu", "nosplit", shape, options);
    FAIL() << "expected an InputError";
  } catch (const kvsight::InputError& e) {
    EXPECT_EQ(e.field(), "--max-mem");
  }
}

// The division the kernels use for block sizes without an instance
// (kernels/fast_divider.hpp), checked against '/' and '%' for every divisor the
// probe allows (1..4096) at token counts around every multiple and at the ends of
// the 32-bit range.
TEST(ProbeKernels, FastDividerMatchesDivision) {
  using kvsight::kernels::FastDivider;
  for (std::uint32_t d = 1; d <= 4096; ++d) {
    const FastDivider divider(d);
    const std::uint32_t samples[] = {0u,    1u,       d - 1,          d,           d + 1,       2 * d - 1,
                                     2 * d, 1u << 24, (1u << 24) - 1, 0x7fffffffu, 0xfffffffeu, 0xffffffffu};
    for (const std::uint32_t n : samples) {
      std::uint32_t quotient = 0, remainder = 0;
      divider.divmod(n, quotient, remainder);
      ASSERT_EQ(quotient, n / d) << n << " / " << d;
      ASSERT_EQ(remainder, n % d) << n << " % " << d;
    }
    for (std::uint32_t n = 0; n < 3 * d + 7; n += 1 + d / 7)
      ASSERT_EQ(divider.divide(n), n / d) << n << " / " << d;
  }
  // 784 (the hybrid models' block): shift = ceil(log2 784) = 10; multiplier = floor(2^32 x (1024 - 784) /
  // 784)
  // + 1 = floor(1030792151040 / 784) + 1 = 1314785906 + 1.
  const FastDivider block_784(784);
  EXPECT_EQ(block_784.shift, 10u);
  EXPECT_EQ(block_784.multiplier, 1314785907u);
}

// A kernel that drops or repeats one 32-token tile must fail the check: the cpu
// backend's output on table T is within error_bound of the float64 reference of T,
// and farther than the bound from the reference of T with one tile read twice or
// one tile left out. Shape: hd 64, GQA 1, block 16, 4096 tokens (256 blocks), one
// sequence.
TEST(ProbeKernels, CheckBoundCatchesRepeatedOrDroppedTile) {
  constexpr int kHeadDim = 64, kBlock = 16, kContext = 4096, kBlocks = kContext / kBlock;
  std::uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(state >> 40) / 8388608.0 - 1.0);  // [-1, 1)
  };
  auto bf16 = [](float value) {  // round to nearest even, as the probe stores inputs
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  };
  auto to_double = [](std::uint16_t bits) {
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
    float value = 0;
    std::memcpy(&value, &wide, 4);
    return static_cast<double>(value);
  };
  std::vector<std::uint16_t> k(kBlocks * kBlock * kHeadDim), v(k.size()), q(kHeadDim);
  for (auto& x : k) x = bf16(next());
  for (auto& x : v) x = bf16(next());
  for (auto& x : q) x = bf16(next());
  std::vector<std::int32_t> table(kBlocks);
  for (int b = 0; b < kBlocks; ++b) table[b] = (b * 97) % kBlocks;  // 97 is prime to 256: a permutation
  // float64 attention over the tokens a table lists (token t: block table[t / 16], row t % 16).
  auto reference = [&](const std::vector<std::int32_t>& blocks, int tokens) {
    std::vector<double> scores(tokens);
    double max_score = -1e300;
    for (int t = 0; t < tokens; ++t) {
      const std::size_t row = (static_cast<std::size_t>(blocks[t / kBlock]) * kBlock + t % kBlock) * kHeadDim;
      double dot = 0;
      for (int d = 0; d < kHeadDim; ++d) dot += to_double(q[d]) * to_double(k[row + d]);
      scores[t] = dot / 8.0;  // 1 / sqrt(64)
      max_score = std::max(max_score, scores[t]);
    }
    std::vector<double> out(kHeadDim, 0.0);
    double total = 0;
    for (int t = 0; t < tokens; ++t) {
      const std::size_t row = (static_cast<std::size_t>(blocks[t / kBlock]) * kBlock + t % kBlock) * kHeadDim;
      const double weight = std::exp(scores[t] - max_score);
      total += weight;
      for (int d = 0; d < kHeadDim; ++d) out[d] += weight * to_double(v[row + d]);
    }
    for (auto& x : out) x /= total;
    return out;
  };
  auto backend = kvsight::probes::detail::cpu_open(2, "portable");
  auto upload = [&](const void* data, std::uint64_t bytes) {
    auto buffer = backend->allocate(bytes);
    backend->upload(*buffer, data, bytes);
    return buffer;
  };
  auto k_buffer = upload(k.data(), k.size() * 2);
  auto v_buffer = upload(v.data(), v.size() * 2);
  auto q_buffer = upload(q.data(), q.size() * 2);
  auto table_buffer = upload(table.data(), table.size() * 4);
  const std::int32_t length = kContext;
  auto length_buffer = upload(&length, 4);
  auto out_buffer = backend->allocate(kHeadDim * 4);
  PagedDecodeParams p;
  p.q = q_buffer->data();
  p.k_cache = k_buffer->data();
  p.v_cache = v_buffer->data();
  p.block_tables = static_cast<const std::int32_t*>(table_buffer->data());
  p.seq_lens = static_cast<const std::int32_t*>(length_buffer->data());
  p.out = static_cast<float*>(out_buffer->data());
  p.num_seqs = 1;
  p.num_kv_heads = 1;
  p.q_per_kv = 1;
  p.head_dim = kHeadDim;
  p.block_size = kBlock;
  p.max_blocks_per_seq = kBlocks;
  p.scale = 0.125f;
  p.dtype = kvsight::kernels::ElementType::bf16;
  backend->time_attention(false, p);
  std::vector<float> out(kHeadDim);
  backend->download(out.data(), *out_buffer, kHeadDim * 4);
  auto relative_error = [&](const std::vector<double>& expected) {
    double max_reference = 0, max_difference = 0;
    for (int d = 0; d < kHeadDim; ++d) {
      max_reference = std::max(max_reference, std::abs(expected[d]));
      max_difference = std::max(max_difference, std::abs(out[d] - expected[d]));
    }
    return max_difference / max_reference;
  };
  const double bound = kp::error_bound("bf16", kContext);
  EXPECT_LE(relative_error(reference(table, kContext)), bound);
  // Tile 10 (tokens 320..351 = blocks 20, 21) read twice: blocks 20, 21 stand in for 22, 23 (tile 11).
  std::vector<std::int32_t> repeated = table;
  repeated[22] = table[20];
  repeated[23] = table[21];
  EXPECT_GT(relative_error(reference(repeated, kContext)), bound);
  // Tile 10 left out: the reference over the other 4064 tokens.
  std::vector<std::int32_t> dropped = table;
  dropped.erase(dropped.begin() + 20, dropped.begin() + 22);
  EXPECT_GT(relative_error(reference(dropped, kContext - 32)), bound);
}

}  // namespace
