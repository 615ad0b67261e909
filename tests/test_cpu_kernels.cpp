// The cpu backend's kernels one by one: every kernel this CPU runs (portable,
// avx2, avx512-bf16) against the float64 reference on the shapes of
// test_probe_kernels.cpp and on those that reach the multi-head tasks and the
// 1-3 head remainders of the vector kernels; a case per dtype computed by hand
// (fp16 subnormals, which F16C converts exactly); the portable kernel's vector
// fp16 widening against the scalar decode; the kernel each dtype gets,
// as `probe info` names it; the thread pool's refusal.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "../kernels/fp8_e4m3.hpp"
#include "../probes/src/backend.hpp"
#include "../probes/src/cpu_kernel.hpp"
#include "../probes/src/cpu_vec8.hpp"
#include "../probes/src/half.hpp"
#include "kvsight/error.hpp"
#include "kvsight/probes/probes.hpp"
#include "test_support.hpp"

// The widening tests call cpu_vec8.hpp's inline 8-lane functions directly;
// no Vec8 crosses a non-inlined call, so the AVX-vs-SSE ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {
namespace kp = kvsight::probes;
namespace kd = kvsight::probes::detail;
using kvsight::kernels::PagedDecodeParams;

// Every --cpu-kernel this CPU accepts besides auto.
std::vector<std::string> cpu_kernels() {
  std::vector<std::string> out = {"portable"};
  if (kd::cpu_has_avx2_f16c()) out.push_back("avx2");
  if (kd::cpu_has_avx512_bf16()) out.push_back("avx512-bf16");
  if (kd::cpu_has_avx512() && kd::cpu_has_avx2_f16c()) out.push_back("avx512-fp16");
  return out;
}

struct Shape {
  std::uint32_t head_dim, block_size, kv_heads, gqa, batch;
  std::uint64_t context;
};

// head_dim x block size of the existing variants, GQA 1..16 including the
// ratios whose last block of 4 query heads holds 1, 2 or 3 (5, 6, 7, 9, 10,
// 11), KV heads 1, 2, 4, 8 (tasks of 1, 2, 4, 8 heads), batches 1..4, contexts
// that end inside a tile at an odd token.
std::vector<Shape> shapes() {
  std::vector<Shape> out;
  const std::uint32_t gqas[] = {1, 5, 6, 7, 9, 10, 11, 16, 4, 3, 2, 8};
  const std::uint32_t kv[] = {8, 4, 2, 1};
  int i = 0;
  for (std::uint32_t head_dim : {64u, 128u, 256u}) {
    for (std::uint32_t block : {8u, 16u, 32u, 48u, 784u, 7u}) {
      // 784-token blocks take 2 KV heads at most: the pool stays a few MB and the test fast.
      const std::uint32_t kv_heads = block == 784 ? std::min(2u, kv[i % 4]) : kv[i % 4];
      // A task's heads x head_dim stays <= 2048 (heads_per_task_for) for any of these.
      out.push_back({head_dim, block, kv_heads, gqas[i % 12], 1 + static_cast<std::uint32_t>(i % 4),
                     2ull * block + 37});
      ++i;
    }
  }
  return out;
}

class EveryKernel : public ::testing::TestWithParam<Shape> {};

TEST_P(EveryKernel, BothAlgorithmsBothDtypesMatchFloat64) {
  const Shape s = GetParam();
  for (const char* dtype : {"bf16", "fp16"}) {
    kp::AttentionShape shape;
    shape.head_dim = s.head_dim;
    shape.block_size = s.block_size;
    shape.kv_heads = s.kv_heads;
    shape.q_heads = s.kv_heads * s.gqa;
    shape.batch = s.batch;
    shape.context = s.context;
    shape.dtype = dtype;
    kp::ProbeOptions options;
    options.repeats = 1;
    options.warmup = 0;
    options.max_mem_bytes = 8 * kp::attention_bytes(shape) + (8u << 20);
    options.max_mem_fraction = 0.9;
    options.threads = 2;
    for (const std::string& cpu_kernel : cpu_kernels()) {
      options.cpu_kernel = cpu_kernel;
      for (const char* kernel : {"nosplit", "splitkv"}) {
        // 5 splits of ceil(context / 5) tokens: uneven, the last one short.
        options.splits = std::string(kernel) == "splitkv" ? 5 : 0;
        SCOPED_TRACE(cpu_kernel + " " + kernel + " " + dtype);
        const kp::AttentionResult r = kp::run_attention("cpu", kernel, shape, options);
        EXPECT_TRUE(r.point.correct) << "max error " << r.point.max_error;
        EXPECT_LE(r.point.max_error, kp::error_bound(dtype, shape.context));
      }
    }
  }
}

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return "hd" + std::to_string(s.head_dim) + "_bs" + std::to_string(s.block_size) + "_kv" +
         std::to_string(s.kv_heads) + "_gqa" + std::to_string(s.gqa) + "_b" + std::to_string(s.batch);
}

INSTANTIATE_TEST_SUITE_P(Cpu, EveryKernel, ::testing::ValuesIn(shapes()), shape_name);

// By hand: one sequence, 2 KV heads x 2 query heads, head_dim 128, 37 tokens
// in blocks of 16 (block table [2, 0, 1]); K = 0 everywhere, so every score is
// 0, every weight exp(0) = 1 and the output is the mean of V over the tokens.
// V of token t is the same value u_t in every dimension of both heads:
//  fp16: u_t = (t % 3 + 1) x 2^-24, the subnormals 0x0001..0x0003;
//        tokens 0..36 give t % 3 = 0 13 times, 1 12 times, 2 12 times, so
//        mean = (13 x 1 + 12 x 2 + 12 x 3) / 37 x 2^-24 = 73/37 x 2^-24.
//  bf16: u_t = t % 3 + 1 (0x3f80, 0x4000, 0x4040): mean 73/37.
// Split-KV with 3 splits of 16 tokens (16, 16, 5) gives the same.
TEST(CpuKernelsByHand, MeanOfValuesWhenScoresAreEqual) {
  constexpr int kHeadDim = 128, kBlock = 16, kTokens = 37, kKvHeads = 2, kGqa = 2;
  const std::int32_t table[3] = {2, 0, 1};
  for (const bool bf16 : {false, true}) {
    const std::uint16_t bits[3] = {static_cast<std::uint16_t>(bf16 ? 0x3f80 : 0x0001),
                                   static_cast<std::uint16_t>(bf16 ? 0x4000 : 0x0002),
                                   static_cast<std::uint16_t>(bf16 ? 0x4040 : 0x0003)};
    const double expected = 73.0 / 37.0 * (bf16 ? 1.0 : std::ldexp(1.0, -24));
    for (const std::string& kernel : cpu_kernels()) {
      for (const int splits : {1, 3}) {
        SCOPED_TRACE(kernel + (bf16 ? " bf16" : " fp16") + " splits " + std::to_string(splits));
        auto backend = kd::cpu_open(2, kernel);
        const std::size_t row = kKvHeads * kHeadDim;
        std::vector<std::uint16_t> k(3 * kBlock * row, 0), v(3 * kBlock * row, 0);
        for (int t = 0; t < kTokens; ++t) {
          const std::size_t base = (static_cast<std::size_t>(table[t / kBlock]) * kBlock + t % kBlock) * row;
          for (std::size_t e = 0; e < row; ++e) v[base + e] = bits[t % 3];
        }
        // q = 1 in every dimension (K = 0 makes it irrelevant, but not NaN).
        std::vector<std::uint16_t> q(kKvHeads * kGqa * kHeadDim, bf16 ? 0x3f80 : 0x3c00);
        const std::int32_t lengths[1] = {kTokens};
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
        const std::size_t heads = kKvHeads * kGqa;
        const std::vector<float> nan(heads * 3 * kHeadDim, std::numeric_limits<float>::quiet_NaN());
        auto out = upload(nan.data(), heads * kHeadDim * 4);
        auto partial_out = upload(nan.data(), nan.size() * 4);
        auto partial_max = upload(nan.data(), heads * 3 * 4);
        auto partial_sum = upload(nan.data(), heads * 3 * 4);
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
        p.num_kv_heads = kKvHeads;
        p.q_per_kv = kGqa;
        p.head_dim = kHeadDim;
        p.block_size = kBlock;
        p.max_blocks_per_seq = 3;
        p.num_splits = splits;
        p.tokens_per_split = splits > 1 ? 16 : 0;
        p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
        p.dtype = bf16 ? kvsight::kernels::ElementType::bf16 : kvsight::kernels::ElementType::fp16;
        backend->time_attention(splits > 1, p);
        std::vector<float> result(heads * kHeadDim);
        backend->download(result.data(), *out, result.size() * 4);
        // 37 fp32 additions of values < 4 units: relative error <= 37 x 2^-24 ~ 2.2e-6.
        for (std::size_t i = 0; i < result.size(); ++i) {
          ASSERT_NEAR(result[i], expected, 3e-6 * expected) << "element " << i;
        }
      }
    }
  }
}

// The AVX2 and AVX-512 kernels' dense tile pass (touch_tile, on by vendor:
// dense_tile_reads_pay in cpu_backend.cpp) only loads the tile's rows before the
// compute: the task's state must come out bit for bit the same with it as without,
// whatever this CPU's vendor picks for the probes, for every row type of each
// kernel. The buffers are exact-size vectors, so under the sanitizers a pass that
// read past a row or the cache would fail here. Shape: 2 KV heads x GQA 5, head_dim
// 64, 51 tokens in blocks of 7 (8 blocks, the last tile 19 tokens), a shuffled table.
TEST(CpuKernelsDenseReads, SameStateWithAndWithoutTheDensePass) {
  if (!kd::cpu_has_avx2_f16c()) GTEST_SKIP() << "no AVX2 + F16C on this CPU";
  constexpr int kHeadDim = 64, kBlock = 7, kTokens = 51, kKvHeads = 2, kGqa = 5, kBlocks = 8;
  const std::int32_t table[kBlocks] = {5, 2, 7, 0, 3, 6, 1, 4};
  const std::int32_t lengths[1] = {kTokens};
  const std::size_t elements = static_cast<std::size_t>(kBlocks) * kBlock * kKvHeads * kHeadDim;
  using Attend = void (*)(const PagedDecodeParams&, int, int, int, int, int, kd::TaskState*, bool);
  struct Variant {
    const char* name;
    Attend attend;
    bool bf16_q, fp8_rows, runs_here;
  };
  const Variant variants[] = {
      {"avx2 bf16", kd::attend_avx2, true, false, true},
      {"avx2 fp16", kd::attend_avx2, false, false, true},
      {"avx2 fp8 beside bf16 q", kd::attend_avx2, true, true, true},
      {"avx2 fp8 beside fp16 q", kd::attend_avx2, false, true, true},
      {"avx512-bf16", kd::attend_avx512_bf16, true, false, kd::cpu_has_avx512_bf16()},
      {"avx512-fp16", kd::attend_avx512_fp16, false, false, kd::cpu_has_avx512()},
      {"avx512-fp16 fp8 beside bf16 q", kd::attend_avx512_fp16, true, true, kd::cpu_has_avx512()},
      {"avx512-fp16 fp8 beside fp16 q", kd::attend_avx512_fp16, false, true, kd::cpu_has_avx512()},
  };
  // Finite values of both signs: bf16 and fp16 in [1, 2) and fp8 codes 0x30..0x3F
  // (0.5 to 0.94) with the sign bit on every third element.
  std::vector<std::uint16_t> k16(elements), v16(elements), q(kKvHeads * kGqa * kHeadDim);
  std::vector<std::uint8_t> k8(elements), v8(elements);
  for (std::size_t i = 0; i < elements; ++i) {
    const auto sign = static_cast<std::uint16_t>(i % 3 == 0 ? 0x8000 : 0);
    k16[i] = static_cast<std::uint16_t>(sign | (0x3c00 + (i * 37) % 1024));
    v16[i] = static_cast<std::uint16_t>(sign | (0x3c00 + (i * 91) % 1024));
    k8[i] = static_cast<std::uint8_t>((sign >> 8) | (0x30 + (i * 5) % 16));
    v8[i] = static_cast<std::uint8_t>((sign >> 8) | (0x30 + (i * 11) % 16));
  }
  for (const Variant& variant : variants) {
    if (!variant.runs_here) continue;
    SCOPED_TRACE(variant.name);
    const bool bf16_rows = variant.bf16_q && !variant.fp8_rows;
    std::vector<std::uint16_t> k_bf16(elements), v_bf16(elements);
    for (std::size_t i = 0; i < elements; ++i) {  // bf16 in [1, 2): 0x3f80 + 7 mantissa bits
      k_bf16[i] = static_cast<std::uint16_t>((k16[i] & 0x8000) | (0x3f80 + (k16[i] & 0x7f)));
      v_bf16[i] = static_cast<std::uint16_t>((v16[i] & 0x8000) | (0x3f80 + (v16[i] & 0x7f)));
    }
    for (std::size_t i = 0; i < q.size(); ++i) {
      q[i] = static_cast<std::uint16_t>(variant.bf16_q ? 0x3f80 + i % 128 : 0x3c00 + (i * 13) % 1024);
    }
    PagedDecodeParams p;
    p.q = q.data();
    p.k_cache = variant.fp8_rows ? static_cast<const void*>(k8.data())
                                 : (bf16_rows ? static_cast<const void*>(k_bf16.data()) : k16.data());
    p.v_cache = variant.fp8_rows ? static_cast<const void*>(v8.data())
                                 : (bf16_rows ? static_cast<const void*>(v_bf16.data()) : v16.data());
    p.block_tables = table;
    p.seq_lens = lengths;
    p.num_seqs = 1;
    p.num_kv_heads = kKvHeads;
    p.q_per_kv = kGqa;
    p.head_dim = kHeadDim;
    p.block_size = kBlock;
    p.max_blocks_per_seq = kBlocks;
    p.scale = 0.125f;
    p.dtype = variant.bf16_q ? kvsight::kernels::ElementType::bf16 : kvsight::kernels::ElementType::fp16;
    p.kv_type = variant.fp8_rows ? kvsight::kernels::KvType::fp8_e4m3 : kvsight::kernels::KvType::same_as_q;
    std::vector<kd::TaskState> plain(kKvHeads), dense(kKvHeads);
    variant.attend(p, 0, 0, kKvHeads, 0, kTokens, plain.data(), false);
    variant.attend(p, 0, 0, kKvHeads, 0, kTokens, dense.data(), true);
    for (int h = 0; h < kKvHeads; ++h) {
      for (int g = 0; g < kGqa; ++g) {
        ASSERT_TRUE(std::isfinite(plain[h].running_sum[g]) && plain[h].running_sum[g] > 0.0f);
        EXPECT_EQ(std::bit_cast<std::uint32_t>(plain[h].running_max[g]),
                  std::bit_cast<std::uint32_t>(dense[h].running_max[g]));
        EXPECT_EQ(std::bit_cast<std::uint32_t>(plain[h].running_sum[g]),
                  std::bit_cast<std::uint32_t>(dense[h].running_sum[g]));
      }
      for (int i = 0; i < kGqa * kHeadDim; ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(plain[h].acc[i]),
                  std::bit_cast<std::uint32_t>(dense[h].acc[i]))
            << "KV head " << h << " element " << i;
      }
    }
  }
}

// The kernel each dtype gets, as probe info names it.
// The portable kernel's table-free fp16 widening (cpu_vec8.hpp) gives half.hpp's
// fp16_to_float bits on all 65,536 inputs (signed zeros, the 1,023 subnormals of
// each sign, infinities and NaN payloads included), each value in every lane.
TEST(CpuWidening, Fp16MatchesTheScalarDecodeOnEveryInput) {
  const auto bits = [](float v) { return std::bit_cast<std::uint32_t>(v); };
  for (std::uint32_t lane = 0; lane < 8; ++lane) {
    for (std::uint32_t value = 0; value < 65536; ++value) {
      std::uint16_t halves[8] = {};
      halves[lane] = static_cast<std::uint16_t>(value);
      const kd::Vec8 wide = kd::widen_fp16x8(halves);
      ASSERT_EQ(bits(wide[lane]), bits(kd::fp16_to_float(halves[lane])))
          << "fp16 0x" << std::hex << value << " in lane " << std::dec << lane;
    }
  }
  // By hand: the smallest subnormal is 2^-24, the largest 1023 x 2^-24, the largest finite
  // value (1 + 1023/1024) x 2^15 = 65504.
  const std::uint16_t some[8] = {0x0001, 0x03ff, 0x8000, 0x7c00, 0xfc00, 0x3c00, 0xc000, 0x7bff};
  const kd::Vec8 h = kd::widen_fp16x8(some);
  EXPECT_EQ(h[0], std::ldexp(1.0f, -24));
  EXPECT_EQ(h[1], 1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(bits(h[2]), 0x80000000u);
  EXPECT_EQ(h[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(h[4], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(h[5], 1.0f);
  EXPECT_EQ(h[6], -2.0f);
  EXPECT_EQ(h[7], 65504.0f);
}

// The AVX2 and AVX-512 kernels' fp8 E4M3 widening (through fp16, cpu_kernel_avx2.cpp
// widen16) gives the kernels' own decode (kernels/fp8_e4m3.hpp, which the GPUs and the
// portable kernel's table use) bit for bit on all 256 codes in every lane (16 for AVX2,
// 32 for AVX-512): both zeros, the 7 subnormals of each sign, the largest finite 448,
// and NaN (0x7F, 0xFF) as a NaN; the other lanes' zero bytes stay +0.
void check_fp8_widening(int lanes, void (*widen)(const std::uint8_t*, float*)) {
  const auto bits = [](float v) { return std::bit_cast<std::uint32_t>(v); };
  for (int lane = 0; lane < lanes; ++lane) {
    for (std::uint32_t code = 0; code < 256; ++code) {
      std::uint8_t bytes[32] = {};
      bytes[lane] = static_cast<std::uint8_t>(code);
      float out[32];
      widen(bytes, out);
      const float expected = kvsight::kernels::fp8_e4m3_to_float(code);
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(out[lane]))
            << "code 0x" << std::hex << code << " in lane " << std::dec << lane;
      } else {
        ASSERT_EQ(bits(out[lane]), bits(expected))
            << "code 0x" << std::hex << code << " in lane " << std::dec << lane << ": " << out[lane];
      }
      for (int other = 0; other < lanes; ++other) {
        if (other != lane) {
          ASSERT_EQ(bits(out[other]), 0u) << "lane " << other << " beside " << lane;
        }
      }
    }
  }
  // By hand (docs/reference/kernels.md "fp8 E4M3 K/V"): 0x01 = 1 x 2^-9, 0x07 = 7 x 2^-9,
  // 0x08 = 2^-6, 0x38 = 2^0, 0x7E = 2^8 x 1.75 = 448, 0xC0 = -2^(8 - 7) = -2, 0x80 = -0.
  const std::uint8_t some[32] = {0x01, 0x07, 0x08, 0x38, 0x7E, 0xC0, 0x80, 0x7F, 0xFF};
  float h[32];
  widen(some, h);
  EXPECT_EQ(h[0], std::ldexp(1.0f, -9));
  EXPECT_EQ(h[1], 7.0f * std::ldexp(1.0f, -9));
  EXPECT_EQ(h[2], std::ldexp(1.0f, -6));
  EXPECT_EQ(h[3], 1.0f);
  EXPECT_EQ(h[4], 448.0f);
  EXPECT_EQ(h[5], -2.0f);
  EXPECT_EQ(bits(h[6]), 0x80000000u);
  EXPECT_TRUE(std::isnan(h[7]));
  EXPECT_TRUE(std::isnan(h[8]));
}

TEST(CpuWidening, Fp8Avx2MatchesTheKernelsDecodeOnEveryCode) {
  if (!kd::cpu_has_avx2_f16c()) GTEST_SKIP() << "no AVX2 + F16C on this CPU";
  check_fp8_widening(16, kd::widen_fp8x16_avx2);
}

TEST(CpuWidening, Fp8Avx512MatchesTheKernelsDecodeOnEveryCode) {
  if (!kd::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 F/BW/DQ/VL on this CPU";
  check_fp8_widening(32, kd::widen_fp8x32_avx512);
}

TEST(CpuKernelChoice, EachDtypeNamesItsKernel) {
  const std::string portable = kd::cpu_open(1, "portable")->info().cpu_kernel;
  ASSERT_EQ(portable.rfind("bf16: portable", 0), 0u) << portable;
  EXPECT_NE(portable.find("; fp16: portable"), std::string::npos) << portable;
  // --cpu-kernel portable runs fp8 K/V on it too ("bf16: " is 6 characters).
  const std::string portable_name = portable.substr(6, portable.find(';') - 6);
  EXPECT_NE(portable.find("; fp8_e4m3 K/V: " + portable_name), std::string::npos) << portable;
  const std::string automatic = kd::cpu_open(1, "auto")->info().cpu_kernel;
  const bool avx2 = kd::cpu_has_avx2_f16c();
  if (!avx2) {
    EXPECT_EQ(automatic, portable);
  } else {
    // bf16 takes the BF16 extension where there is one; fp16 needs AVX-512 F/BW/DQ/VL only; fp8 K/V
    // take fp16's kernel (both widen through VCVTPH2PS).
    const std::string bf16 = kd::cpu_has_avx512_bf16() ? "avx512-bf16" : "avx2";
    const std::string fp16 = kd::cpu_has_avx512() ? "avx512-fp16" : "avx2";
    EXPECT_EQ(automatic, "bf16: " + bf16 + "; fp16: " + fp16 + "; fp8_e4m3 K/V: " + fp16 +
                             kvsight::test::expected_tile_reads_suffix());
  }
  if (avx2 && kd::cpu_has_avx512()) {
    EXPECT_NE(kd::cpu_open(1, "avx512-fp16")
                  ->info()
                  .cpu_kernel.find("; fp16: avx512-fp16; fp8_e4m3 K/V: avx512-fp16;"),
              std::string::npos);
  } else {
    try {
      kd::cpu_open(1, "avx512-fp16");
      FAIL() << "expected an InputError";
    } catch (const kvsight::InputError& e) {
      EXPECT_EQ(e.field(), "--cpu-kernel");
      EXPECT_NE(std::string(e.what()).find("needs AVX-512 F/BW/DQ/VL"), std::string::npos) << e.what();
    }
  }
  if (kd::cpu_has_avx2_f16c()) {
    EXPECT_EQ(kd::cpu_open(1, "avx2")->info().cpu_kernel,
              "bf16: avx2; fp16: avx2; fp8_e4m3 K/V: avx2" + kvsight::test::expected_tile_reads_suffix());
  } else {
    try {
      kd::cpu_open(1, "avx2");
      FAIL() << "expected an InputError";
    } catch (const kvsight::InputError& e) {
      EXPECT_EQ(e.field(), "--cpu-kernel");
    }
  }
  try {
    kd::cpu_open(1, "avx9000");
    FAIL() << "expected an InputError";
  } catch (const kvsight::InputError& e) {
    EXPECT_EQ(e.field(), "--cpu-kernel");
    EXPECT_NE(std::string(e.what()).find("allowed: auto, avx512-bf16, avx512-fp16, avx2, portable"),
              std::string::npos)
        << e.what();
  }
}

using kvsight::test::kSanitized;  // test_support.hpp: the rlimit and timing tests skip under sanitizers

// Threads the OS refuses: a child process with a 512 MiB address-space limit
// asks for 100000 threads (each reserves an 8 MiB stack by default, so at most
// ~64 fit); it must get a DeviceError naming --threads, not std::terminate.
TEST(CpuThreadPool, RefusedThreadsGiveAnErrorNotTerminate) {
  if (kSanitized) GTEST_SKIP() << "sanitizer runtime under an address-space limit";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit limit{512ull << 20, 512ull << 20};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(10);
    try {
      auto backend = kd::cpu_open(100000, "portable");
      _exit(11);  // all 100000 started: the limit did not bite
    } catch (const kvsight::DeviceError& e) {
      _exit(std::string(e.what()).find("--threads") != std::string::npos ? 0 : 12);
    } catch (...) {
      _exit(13);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// The cpu probe counts its host copies (kept for the reference check) against
// --max-mem. bf16, hd128, 8 KV heads, 16-token blocks, batch 1, context 4096:
// K + V = 4096 x 8 x 128 x 2 B x 2 = 16,777,216 B; block tables 256 blocks x
// 4 B x 64 sets = 65,536 B; q 32 x 128 x 2 B x 64 sets = 524,288 B. Counted
// once that is 17.4 MB (fits 24 MiB = 25,165,824 B); counted with the host
// copies it is 2 x 17,367,040 = 34,734,080 B plus out and partials: over
// 24 MiB, under 40 MiB.
TEST(CpuMemory, HostCopiesCountAgainstMaxMem) {
  kp::AttentionShape shape{128, 16, 8, 32, 1, 4096, "bf16"};
  kp::ProbeOptions options;
  options.repeats = 1;
  options.warmup = 0;
  options.threads = 2;
  options.max_mem_fraction = 1.0;
  options.max_mem_bytes = 24u << 20;
  try {
    kp::run_attention("cpu", "splitkv", shape, options);
    FAIL() << "expected an InputError";
  } catch (const kvsight::InputError& e) {
    EXPECT_EQ(e.field(), "--max-mem");
  }
  options.max_mem_bytes = 40u << 20;
  EXPECT_TRUE(kp::run_attention("cpu", "splitkv", shape, options).point.correct);
}

// Mapped bytes of this process (VmSize), for the address-space test.
std::uint64_t mapped_bytes() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof(line), status) != nullptr) {
    if (std::sscanf(line, "VmSize: %llu kB", &kib) == 1) break;
  }
  std::fclose(status);
  return kib * 1024;
}

// Under an address-space limit that leaves 256 MiB, a shape of 512 MiB of K/V
// (bf16, hd128, 8 KV heads, batch 4, context 32768: 32768 x 8 x 128 x 2 B x 2
// x 4 = 536,870,912 B) is refused up front with --max-mem named (exit 2), not
// a failed allocation mid-run (exit 3).
TEST(CpuMemory, AddressSpaceLimitIsRefusedUpFront) {
  if (kSanitized) GTEST_SKIP() << "sanitizer runtime under an address-space limit";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::uint64_t limit = mapped_bytes() + (256ull << 20);
    rlimit rl{limit, limit};
    if (mapped_bytes() == 0 || setrlimit(RLIMIT_AS, &rl) != 0) _exit(10);
    kp::AttentionShape shape{128, 16, 8, 32, 4, 32768, "bf16"};
    kp::ProbeOptions options;
    options.repeats = 1;
    options.warmup = 0;
    options.threads = 2;
    options.max_mem_bytes = 4ull << 30;
    try {
      kp::run_attention("cpu", "splitkv", shape, options);
      _exit(11);
    } catch (const kvsight::InputError& e) {
      _exit(e.field() == "--max-mem" ? 0 : 12);
    } catch (const kvsight::DeviceError&) {
      _exit(13);  // the allocation failed mid-run: what must not happen
    } catch (...) {
      _exit(14);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
