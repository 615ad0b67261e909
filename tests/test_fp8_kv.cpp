// fp8 E4M3 K/V (issue #27 item 4, --kv-dtype fp8_e4m3): the decode the kernels
// share (kernels/fp8_e4m3.hpp) and the reference's own one on hand-derived
// codes; the encoder that makes the inputs; every cpu kernel choice on fp8 K/V
// against a float64 reference written here (head_dim 64/128/256, GQA 1 and
// several > 1, no split, uneven and empty splits, block 16 and 7), and the same
// check failing with a wrong decode (bias 8); the probe path end to end:
// validation, bytes at 1 byte per K/V element, JSON, the kernel it names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../kernels/fp8_e4m3.hpp"
#include "../probes/src/backend.hpp"
#include "../probes/src/cpu_kernel.hpp"
#include "../probes/src/inputs.hpp"
#include "kvsight/error.hpp"
#include "kvsight/probes/probes.hpp"

namespace {
namespace kp = kvsight::probes;
namespace kd = kvsight::probes::detail;
using kvsight::kernels::fp8_e4m3_to_float;
using kvsight::kernels::PagedDecodeParams;

// Every --cpu-kernel this CPU accepts: each must run fp8 K/V (the SIMD ones by
// handing it to the portable kernel).
std::vector<std::string> cpu_kernels() {
  std::vector<std::string> out = {"auto", "portable"};
  if (kd::cpu_has_avx2_f16c()) out.push_back("avx2");
  if (kd::cpu_has_avx512_bf16()) out.push_back("avx512-bf16");
  if (kd::cpu_has_avx512() && kd::cpu_has_avx2_f16c()) out.push_back("avx512-fp16");
  return out;
}

// E4M3: s eeee mmm, bias 7; e = 0: m x 2^-9; else 2^(e - 7) x (1 + m / 8).
TEST(Fp8Decode, HandDerivedValues) {
  struct Case {
    std::uint8_t byte;
    double value;
  };
  const Case cases[] = {
      {0x38, 1.0},        // 0 0111 000: 2^(7-7) x 1
      {0x40, 2.0},        // 0 1000 000: 2^1 x 1
      {0x3c, 1.5},        // 0 0111 100: 1 + 4/8
      {0x44, 3.0},        // 0 1000 100: 2 x 1.5
      {0x7e, 448.0},      // 0 1111 110: 2^8 x (1 + 6/8) = 256 x 1.75, the largest finite
      {0x77, 240.0},      // 0 1110 111: 2^7 x 1.875
      {0x08, 1.0 / 64},   // 0 0001 000: 2^-6, the smallest normal
      {0x01, 1.0 / 512},  // 0 0000 001: 1 x 2^-9, the smallest subnormal
      {0x07, 7.0 / 512},  // 0 0000 111: 7 x 2^-9
      {0xb8, -1.0},       // 1 0111 000
      {0xfe, -448.0},     // 1 1111 110
      {0x00, 0.0},        // zero
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.byte));
    EXPECT_EQ(static_cast<double>(fp8_e4m3_to_float(c.byte)), c.value);
    EXPECT_EQ(kd::fp8_e4m3_to_double(c.byte), c.value);
  }
  // 0x80 is -0.0: equal to 0 but with the sign bit set.
  EXPECT_EQ(fp8_e4m3_to_float(0x80), 0.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_float(0x80)));
  EXPECT_TRUE(std::signbit(kd::fp8_e4m3_to_double(0x80)));
  // S 1111 111 is NaN (no infinities in e4m3fn).
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xff)));
  EXPECT_TRUE(std::isnan(kd::fp8_e4m3_to_double(0x7f)));
  EXPECT_TRUE(std::isnan(kd::fp8_e4m3_to_double(0xff)));
}

// The kernels' bit decode and the reference's arithmetic one agree on all 256
// codes; finite codes 0x00..0x7E increase strictly (so the encoder's order holds).
TEST(Fp8Decode, KernelAndReferenceDecodesAgreeOnEveryCode) {
  for (int byte = 0; byte < 256; ++byte) {
    const double reference = kd::fp8_e4m3_to_double(static_cast<std::uint8_t>(byte));
    const float kernel = fp8_e4m3_to_float(static_cast<std::uint32_t>(byte));
    if (std::isnan(reference)) {
      EXPECT_TRUE(std::isnan(kernel)) << byte;
      continue;
    }
    EXPECT_EQ(static_cast<double>(kernel), reference) << byte;
    EXPECT_EQ(std::signbit(kernel), std::signbit(reference)) << byte;
  }
  for (int byte = 1; byte <= 0x7e; ++byte) {
    EXPECT_LT(kd::fp8_e4m3_to_double(static_cast<std::uint8_t>(byte - 1)),
              kd::fp8_e4m3_to_double(static_cast<std::uint8_t>(byte)))
        << byte;
  }
}

// Round to nearest, ties to the even code, saturating at 448 (vLLM's
// __NV_SATFINITE); every finite code round-trips.
TEST(Fp8Encode, RoundsToNearestEvenAndSaturates) {
  for (int byte = 0; byte < 256; ++byte) {
    if ((byte & 0x7f) == 0x7f) continue;
    const float value = static_cast<float>(kd::fp8_e4m3_to_double(static_cast<std::uint8_t>(byte)));
    EXPECT_EQ(kd::float_to_fp8_e4m3(value), byte) << byte;
  }
  EXPECT_EQ(kd::float_to_fp8_e4m3(1.0625f), 0x38);    // midway 1 (0x38) and 1.125 (0x39): even 0x38
  EXPECT_EQ(kd::float_to_fp8_e4m3(1.1875f), 0x3a);    // midway 1.125 (0x39) and 1.25 (0x3A): even 0x3A
  EXPECT_EQ(kd::float_to_fp8_e4m3(1.07f), 0x39);      // above the midway 1.0625: up
  EXPECT_EQ(kd::float_to_fp8_e4m3(0x1.8p-9f), 0x02);  // 1.5 x 2^-9, midway codes 1 and 2: even 2
  EXPECT_EQ(kd::float_to_fp8_e4m3(0x1p-10f), 0x00);   // 0.5 x 2^-9, midway 0 and 1: even 0
  EXPECT_EQ(kd::float_to_fp8_e4m3(0x1.fp-7f), 0x08);  // 7.75 x 2^-9 rounds up to 8 x 2^-9 = 2^-6 = 0x08
  EXPECT_EQ(kd::float_to_fp8_e4m3(460.0f), 0x7e);     // past 448: saturated, never the NaN 0x7F
  EXPECT_EQ(kd::float_to_fp8_e4m3(1e6f), 0x7e);
  EXPECT_EQ(kd::float_to_fp8_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(kd::float_to_fp8_e4m3(-1.0f), 0xb8);
}

// A paged fp8 cache built by hand, run through the backend directly (so the
// split geometry, empty splits included, is the test's choice), checked
// against a float64 reference computed here with a given byte decode.
struct Case {
  int head_dim, block_size, kv_heads, gqa, context;
  bool bf16_q;
};

class Fp8Cache {
 public:
  explicit Fp8Cache(const Case& c) : c_(c) {
    const int blocks = (c.context + c.block_size - 1) / c.block_size;
    pool_blocks_ = blocks + 3;  // spare blocks hold data no table points at
    table_.resize(static_cast<std::size_t>(blocks));
    std::vector<std::int32_t> permutation(static_cast<std::size_t>(pool_blocks_));
    std::iota(permutation.begin(), permutation.end(), 0);
    std::mt19937 generator(static_cast<std::uint32_t>(c.head_dim * 131 + c.context));
    std::shuffle(permutation.begin(), permutation.end(), generator);
    std::copy_n(permutation.begin(), blocks, table_.begin());
    const std::size_t elements =
        static_cast<std::size_t>(pool_blocks_) * c.block_size * c.kv_heads * c.head_dim;
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    k_.resize(elements);
    v_.resize(elements);
    // Values in [-1, 1) (K) and [-0.5, 0.5) (V) at scale amax / 448, as the probe's inputs.
    for (std::size_t i = 0; i < elements; ++i) {
      k_[i] = kd::float_to_fp8_e4m3(uniform(generator) / k_scale_);
      v_[i] = kd::float_to_fp8_e4m3(0.5f * uniform(generator) / v_scale_);
    }
    q_.resize(static_cast<std::size_t>(c.kv_heads * c.gqa * c.head_dim));
    for (auto& x : q_)
      x = c.bf16_q ? kd::float_to_bf16(uniform(generator)) : kd::float_to_fp16(uniform(generator));
  }

  // The backend's output for a split geometry (splits 1: the no-split kernel).
  std::vector<float> run(const std::string& cpu_kernel, int splits, int tokens_per_split) const {
    auto backend = kd::cpu_open(2, cpu_kernel);
    auto upload = [&](const void* data, std::uint64_t bytes) {
      auto buffer = backend->allocate(bytes);
      backend->upload(*buffer, data, bytes);
      return buffer;
    };
    const std::size_t heads = static_cast<std::size_t>(c_.kv_heads * c_.gqa);
    const std::int32_t length = c_.context;
    auto k = upload(k_.data(), k_.size());
    auto v = upload(v_.data(), v_.size());
    auto q = upload(q_.data(), q_.size() * 2);
    auto table = upload(table_.data(), table_.size() * 4);
    auto lengths = upload(&length, 4);
    const std::vector<float> nan(heads * static_cast<std::size_t>(splits * c_.head_dim),
                                 std::numeric_limits<float>::quiet_NaN());
    auto out = upload(nan.data(), heads * c_.head_dim * 4);
    auto partial_out = upload(nan.data(), nan.size() * 4);
    auto partial_max = upload(nan.data(), heads * splits * 4);
    auto partial_sum = upload(nan.data(), heads * splits * 4);
    PagedDecodeParams p;
    p.q = q->data();
    p.k_cache = k->data();
    p.v_cache = v->data();
    p.block_tables = static_cast<const std::int32_t*>(table->data());
    p.seq_lens = static_cast<const std::int32_t*>(lengths->data());
    p.out = static_cast<float*>(out->data());
    p.partial_out = static_cast<float*>(partial_out->data());
    p.partial_max = static_cast<float*>(partial_max->data());
    p.partial_sum = static_cast<float*>(partial_sum->data());
    p.num_seqs = 1;
    p.num_kv_heads = c_.kv_heads;
    p.q_per_kv = c_.gqa;
    p.head_dim = c_.head_dim;
    p.block_size = c_.block_size;
    p.max_blocks_per_seq = static_cast<int>(table_.size());
    p.num_splits = splits;
    p.tokens_per_split = tokens_per_split;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c_.head_dim)));
    p.dtype = c_.bf16_q ? kvsight::kernels::ElementType::bf16 : kvsight::kernels::ElementType::fp16;
    p.kv_type = kvsight::kernels::KvType::fp8_e4m3;
    p.k_scale = k_scale_;
    p.v_scale = v_scale_;
    backend->time_attention(splits > 1, p);
    std::vector<float> result(heads * c_.head_dim);
    backend->download(result.data(), *out, result.size() * 4);
    return result;
  }

  // softmax(q . k x k_scale / sqrt(d)) . (v x v_scale) in double, bytes read with decode.
  std::vector<double> reference(const std::function<double(std::uint8_t)>& decode) const {
    const std::size_t heads = static_cast<std::size_t>(c_.kv_heads * c_.gqa);
    std::vector<double> out(heads * c_.head_dim, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c_.head_dim));
    for (std::size_t head = 0; head < heads; ++head) {
      const int kv_head = static_cast<int>(head) / c_.gqa;
      std::vector<double> scores(static_cast<std::size_t>(c_.context));
      for (int t = 0; t < c_.context; ++t) {
        const std::size_t row = offset(t, kv_head);
        double dot = 0;
        for (int d = 0; d < c_.head_dim; ++d) {
          const std::uint16_t bits = q_[head * c_.head_dim + d];
          dot += kd::to_double(bits, c_.bf16_q) * decode(k_[row + d]) * k_scale_;
        }
        scores[t] = dot * scale;
      }
      const double top = *std::max_element(scores.begin(), scores.end());
      double total = 0;
      for (int t = 0; t < c_.context; ++t) {
        const double weight = std::exp(scores[t] - top);
        total += weight;
        const std::size_t row = offset(t, kv_head);
        for (int d = 0; d < c_.head_dim; ++d)
          out[head * c_.head_dim + d] += weight * decode(v_[row + d]) * v_scale_;
      }
      for (int d = 0; d < c_.head_dim; ++d) out[head * c_.head_dim + d] /= total;
    }
    return out;
  }

 private:
  std::size_t offset(int token, int kv_head) const {
    const std::size_t block =
        static_cast<std::size_t>(table_[static_cast<std::size_t>(token / c_.block_size)]);
    return ((block * c_.block_size + token % c_.block_size) * c_.kv_heads + kv_head) * c_.head_dim;
  }
  Case c_;
  int pool_blocks_ = 0;
  float k_scale_ = kd::kFp8KeyAmax / kd::kFp8Max;
  float v_scale_ = kd::kFp8ValueAmax / kd::kFp8Max;
  std::vector<std::int32_t> table_;
  std::vector<std::uint8_t> k_, v_;
  std::vector<std::uint16_t> q_;
};

// max |out - ref| / max |ref|: the probe's check (probes/src/session.cpp).
double relative_error(const std::vector<float>& out, const std::vector<double>& reference) {
  double top = 0, worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return std::numeric_limits<double>::infinity();
    top = std::max(top, std::abs(reference[i]));
    worst = std::max(worst, std::abs(static_cast<double>(out[i]) - reference[i]));
  }
  return worst / std::max(top, 1e-30);
}

double reference_decode(std::uint8_t byte) { return kd::fp8_e4m3_to_double(byte); }

class Fp8Kernels : public ::testing::TestWithParam<Case> {};

// Context 2 x block + 37 tokens: no split; 3 splits of 32 covering it unevenly
// (the last short); and splits of 32 with one more than needed, so the last
// covers no token (m = -inf, l = 0) and the reduce must skip it.
TEST_P(Fp8Kernels, EveryCpuKernelMatchesFloat64) {
  const Case c = GetParam();
  const Fp8Cache cache(c);
  const std::vector<double> expected = cache.reference(reference_decode);
  const double bound = kp::error_bound(c.bf16_q ? "bf16" : "fp16", static_cast<std::uint64_t>(c.context));
  const int tiles = (c.context + 31) / 32;
  struct Geometry {
    const char* name;
    int splits, tokens;
  };
  const Geometry geometries[] = {
      {"nosplit", 1, 0}, {"uneven splits", (tiles + 1) / 2, 64}, {"with an empty split", tiles + 1, 32}};
  for (const std::string& kernel : cpu_kernels()) {
    for (const Geometry& g : geometries) {
      SCOPED_TRACE(kernel + ", " + g.name);
      const double error = relative_error(cache.run(kernel, g.splits, g.tokens), expected);
      EXPECT_LE(error, bound);
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const int gqas[] = {1, 4, 6, 8, 16, 3};
  int i = 0;
  for (int head_dim : {64, 128, 256}) {
    for (int block : {16, 7}) {
      out.push_back({head_dim, block, 1 + i % 2, gqas[i % 6], 2 * block + 37 + 32 * (i % 3), i % 2 == 0});
      ++i;
    }
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "hd" + std::to_string(c.head_dim) + "_bs" + std::to_string(c.block_size) + "_kv" +
         std::to_string(c.kv_heads) + "_gqa" + std::to_string(c.gqa) + (c.bf16_q ? "_qbf16" : "_qfp16");
}

INSTANTIATE_TEST_SUITE_P(Cpu, Fp8Kernels, ::testing::ValuesIn(cases()), case_name);

// The check can fail: read the same bytes with bias 8 instead of 7 (every value
// halved: 2^(e - 8) x 1.m, m x 2^-10) and the kernels' output is far from that
// reference. Halved K changes every softmax weight and halved V halves the
// output, so the relative error is near 1/2 against a bound of 16 x 2^-24 x
// sqrt(101 + 128) = 1.4e-5.
TEST(Fp8CheckCanFail, Bias8DecodeFailsTheBound) {
  const Case c{128, 16, 2, 4, 101, true};
  const Fp8Cache cache(c);
  const auto bias8 = [](std::uint8_t byte) { return kd::fp8_e4m3_to_double(byte) / 2; };
  const std::vector<float> out = cache.run("portable", 1, 0);
  const double bound = kp::error_bound("bf16", 101);
  EXPECT_LE(relative_error(out, cache.reference(reference_decode)), bound);
  EXPECT_GT(relative_error(out, cache.reference(bias8)), 100 * bound);
}

kp::AttentionShape fp8_shape() {
  kp::AttentionShape shape;
  shape.head_dim = 128;
  shape.block_size = 16;
  shape.kv_heads = 2;
  shape.q_heads = 8;
  shape.batch = 2;
  shape.context = 300;
  shape.kv_dtype = "fp8_e4m3";
  return shape;
}

kp::ProbeOptions small_options() {
  kp::ProbeOptions options;
  options.repeats = 1;
  options.warmup = 0;
  options.threads = 2;
  options.max_mem_bytes = 64u << 20;
  options.max_mem_fraction = 0.9;
  return options;
}

// The probe path: inputs drawn and quantized by the session, the float64
// check inside run_attention, both algorithms, both q dtypes, every --cpu-kernel.
TEST(Fp8Probe, RunAttentionPassesItsCheckOnEveryKernel) {
  for (const char* dtype : {"bf16", "fp16"}) {
    kp::AttentionShape shape = fp8_shape();
    shape.dtype = dtype;
    kp::ProbeOptions options = small_options();
    for (const std::string& cpu_kernel : cpu_kernels()) {
      options.cpu_kernel = cpu_kernel;
      for (const char* kernel : {"nosplit", "splitkv"}) {
        options.splits = std::string(kernel) == "splitkv" ? 4 : 0;  // 4 x 75 tokens: tiles end mid-way
        SCOPED_TRACE(cpu_kernel + " " + kernel + " " + dtype);
        const kp::AttentionResult r = kp::run_attention("cpu", kernel, shape, options);
        EXPECT_TRUE(r.point.correct) << r.point.max_error;
        EXPECT_LE(r.point.max_error, kp::error_bound(dtype, shape.context));
        // The device label names the kernel fp8 K/V ran on: fp16's (AVX-512 F where the CPU has
        // it, else AVX2; every --cpu-kernel but portable implies AVX2), unless --cpu-kernel says
        // avx2 or portable.
        std::string fp8_kernel = "portable";
        if (cpu_kernel == "avx2") {
          fp8_kernel = "avx2";
        } else if (cpu_kernel != "portable") {
          fp8_kernel = kd::cpu_has_avx512() ? "avx512-fp16" : "avx2";
        }
        EXPECT_NE(r.device.find("fp8_e4m3 K/V: " + fp8_kernel), std::string::npos) << r.device;
        const nlohmann::json j = r;
        EXPECT_EQ(j["shape"]["kv_dtype"], "fp8_e4m3");
        EXPECT_EQ(j["shape"]["dtype"], dtype);
      }
    }
  }
}

// Bytes at 1 byte per K/V element (q stays 2, out 4). Shape: context 4096, 8 KV /
// 32 Q heads, head_dim 128, block 16, batch 1:
//   K + V = 4096 x 8 x 128 x 2 matrices x 1 B = 8,388,608 (bf16: 16,777,216)
//   block table = 4096 / 16 x 4 B = 1,024; sequence length 4; q = 32 x 128 x 2 = 8,192;
//   out = 32 x 128 x 4 = 16,384.
//   fp8: 8,388,608 + 1,024 + 4 + 8,192 + 16,384 = 8,414,212; bf16: 16,802,820.
TEST(Fp8Probe, BytesCountOneBytePerKvElement) {
  kp::AttentionShape shape;
  EXPECT_EQ(kp::attention_bytes(shape), 16802820u);
  shape.kv_dtype = "fp8_e4m3";
  EXPECT_EQ(kp::attention_bytes(shape), 8414212u);
  shape.kv_dtype = "auto";
  EXPECT_EQ(kp::attention_bytes(shape), 16802820u);
}

TEST(Fp8Probe, UnknownKvDtypeNamesTheFlag) {
  kp::AttentionShape shape = fp8_shape();
  shape.kv_dtype = "fp8";
  try {
    kp::run_attention("cpu", "splitkv", shape, small_options());
    FAIL() << "expected an InputError";
  } catch (const kvsight::InputError& e) {
    EXPECT_EQ(e.field(), "--kv-dtype");
    EXPECT_NE(std::string(e.what()).find("allowed: auto"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fp8_e4m3"), std::string::npos) << e.what();
  }
}

// "auto" keeps the 16-bit cache and records the dtype it resolved to.
TEST(Fp8Probe, AutoRecordsTheModelDtype) {
  kp::AttentionShape shape = fp8_shape();
  shape.kv_dtype = "auto";
  shape.dtype = "fp16";
  const nlohmann::json j = shape;
  EXPECT_EQ(j["kv_dtype"], "fp16");
}

}  // namespace
