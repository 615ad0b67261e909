// Host side of the probes: shapes, inputs, rotation, timing statistics, the
// float64 reference check, sweeps and the bandwidth probe. Backends only
// allocate, copy and launch (backend.hpp).
//
// Method (after NVIDIA/nvbench and UoB-HPC/BabelStream): inputs are random
// (never zeros) and block tables are shuffled; one untimed check run on
// NaN-poisoned outputs is compared against float64; then, per kernel and per
// point, the last-level cache is flushed (GPUs), `warmup` untimed runs and
// `repeats` timed samples follow, each sample `launches_per_sample` launches back
// to back between one pair of events (the host's launch latency out of the
// figure), every launch on the next input set of one rotation that never
// restarts (not per kernel, not per point), so the bytes touched between two runs
// of the same set exceed twice the last-level cache; median, p10, p90 and spread
// = (p90 - p10) / median; bytes counted exactly from the shape. The stream probe
// reads the session's own K pool in the same run, and every point reports its
// bandwidth as a ratio to it (issue #15).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <thread>

#include "backend.hpp"
#include "fault_injection.hpp"
#include "half.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"
#include "kvsight/least_squares.hpp"
#include "kvsight/split_plan.hpp"
#include "parallel.hpp"

namespace kvsight::probes {
namespace {

using detail::Backend;
using detail::DeviceBuffer;
using detail::FaultKind;
using detail::FaultPlan;

constexpr std::uint64_t kMaxContext = 1ull << 24;  // block-table and token indices are int32
constexpr std::uint32_t kMaxBlockSize = 4096;
constexpr int kMaxBufferSets = 64;
// The cpu backend never takes more than this unless --max-mem names bytes.
constexpr std::uint64_t kCpuDefaultCap = 2ull << 30;

std::uint64_t element_bytes(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform values in [-1, 1) stored as fp16/bf16, chunks filled in parallel with
// per-chunk seeds (deterministic for any thread count).
void fill_random(std::vector<std::uint16_t>& out, bool bf16, std::uint64_t seed) {
  constexpr std::size_t kChunk = 1 << 20;
  const std::size_t chunks = (out.size() + kChunk - 1) / kChunk;
  detail::for_each_worker([&](unsigned worker, unsigned threads) {
    for (std::size_t chunk = worker; chunk < chunks; chunk += threads) {
      std::uint64_t state = seed ^ (0x632be59bd9b4e019ull * (chunk + 1));
      const std::size_t end = std::min(out.size(), (chunk + 1) * kChunk);
      for (std::size_t i = chunk * kChunk; i < end; ++i) {
        const float value = static_cast<float>(splitmix64(state) >> 40) * (1.0f / 8388608.0f) - 1.0f;
        out[i] = bf16 ? detail::float_to_bf16(value) : detail::float_to_fp16(value);
      }
    }
  });
}

double to_double(std::uint16_t bits, bool bf16) {
  return bf16 ? detail::bf16_to_float(bits) : detail::fp16_to_float(bits);
}

std::uint64_t memory_budget(const DeviceInfo& info, const ProbeOptions& options) {
  if (!(options.max_mem_fraction > 0.0 && options.max_mem_fraction <= 1.0)) {
    throw InputError("--max-mem",
                     "fraction must be in (0, 1]; got " + std::to_string(options.max_mem_fraction));
  }
  auto budget = static_cast<std::uint64_t>(options.max_mem_fraction * static_cast<double>(info.memory_free));
  if (options.max_mem_bytes > 0) budget = std::min(budget, options.max_mem_bytes);
  if (info.backend == "cpu" && options.max_mem_bytes == 0) budget = std::min(budget, kCpuDefaultCap);
  return budget;
}

std::string device_label(const DeviceInfo& info) {
  if (!info.cpu_kernel.empty()) return info.name + " (" + info.arch + "; kernel " + info.cpu_kernel + ")";
  return info.name + " (" + info.arch + ")";
}

void validate_options(const ProbeOptions& options) {
  if (options.repeats < 1 || options.repeats > 100000) {
    throw InputError("--repeats", std::to_string(options.repeats) + " out of range; allowed: 1..100000");
  }
  if (options.warmup < 0 || options.warmup > 100000) {
    throw InputError("--warmup", std::to_string(options.warmup) + " out of range; allowed: 0..100000");
  }
  if (options.splits > static_cast<std::uint32_t>(kernels::kMaxSplits))
    throw InputError("--splits", "allowed: 0 (auto) or 1..4096");
  if (options.launches_per_sample < 0 || options.launches_per_sample > 1000) {
    throw InputError("--launches", std::to_string(options.launches_per_sample) +
                                       " out of range; allowed: 0 (auto: 8 on GPUs, 1 on cpu) or 1..1000");
  }
}

// One set of inputs for many contexts: a pool of K/V blocks (random data),
// per-set query vectors, and per-context shuffled block tables carving disjoint
// block subsets out of the pool for each rotation set.
class Session {
 public:
  Session(Backend& backend, const AttentionShape& shape, std::uint64_t max_context,
          const ProbeOptions& options, FaultPlan& faults)
      : backend_(backend), shape_(shape), options_(options), faults_(faults), bf16_(shape.dtype == "bf16") {
    const DeviceInfo& info = backend_.info();
    const std::uint64_t budget = memory_budget(info, options_);
    const std::uint64_t row_elements = checked_mul(shape_.kv_heads, shape_.head_dim, "K/V row");
    block_elements_ = checked_mul(shape_.block_size, row_elements, "K/V block");
    const std::uint64_t block_kv_bytes =
        checked_mul(block_elements_, 2 * element_bytes(shape_.dtype), "K/V block");
    const std::uint64_t needed_blocks =
        checked_mul(shape_.batch, ceil_div(max_context, shape_.block_size), "blocks of the sweep");
    q_elements_ = checked_mul(checked_mul(shape_.batch, shape_.q_heads, "q"), shape_.head_dim, "q");
    const std::uint64_t out_bytes = checked_mul(q_elements_, 4, "out");
    // The split kernel's occupancy for this shape (the planner's input), and the
    // most splits any context of the session can get: one wave of slots.
    ctas_per_multiprocessor_ = backend_.attention_occupancy(shape_params());
    if (ctas_per_multiprocessor_ == 0) {
      throw DeviceError(info.backend + ": the split-KV kernel for head_dim " +
                        std::to_string(shape_.head_dim) + " and GQA " +
                        std::to_string(shape_.q_heads / shape_.kv_heads) + " cannot run on " + info.name +
                        " (occupancy 0: too much shared memory or registers)");
    }
    const SplitPlan widest = plan_splits(split_input(max_context));
    const std::uint32_t max_splits_any = options_.splits > 0
                                             ? options_.splits
                                             : static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
                                                   widest.slots / widest.programs, 1, kernels::kMaxSplits));
    const std::uint64_t partial_bytes =
        checked_mul(out_bytes, max_splits_any, "split-KV partials") +
        2 * checked_mul(q_elements_ / shape_.head_dim * max_splits_any, 4, "partials");
    const std::uint64_t table_bytes = checked_mul(needed_blocks, 4 * kMaxBufferSets, "block tables");
    // On the cpu backend the host copies kept for the reference (host_k_, host_v_, host_q_, host_tables_)
    // share memory with the buffers: counted twice (issue #14 item 6).
    const std::uint64_t copies = info.backend == "cpu" ? 2 : 1;
    const std::uint64_t fixed =
        out_bytes + partial_bytes +
        checked_mul(checked_add(table_bytes, checked_mul(q_elements_, 2 * kMaxBufferSets, "q"), "q"), copies,
                    "q") +
        4 * shape_.batch;
    const std::uint64_t needed = checked_add(
        fixed, checked_mul(checked_mul(needed_blocks, block_kv_bytes, "K/V"), copies, "K/V"), "memory");
    if (needed > budget) {
      throw InputError("--max-mem",
                       "this shape needs " + std::to_string(needed) + " bytes of device memory (K/V " +
                           std::to_string(needed_blocks * block_kv_bytes) + " for context " +
                           std::to_string(max_context) + " x batch " + std::to_string(shape_.batch) +
                           "), over the budget of " + std::to_string(budget) + " bytes on " + info.name +
                           "; lower --context/--batch or raise --max-mem");
    }
    // Pool: enough blocks for the largest context, and, where the budget
    // allows, enough for 2.5 x the last-level cache so short contexts rotate
    // through sets that do not fit in cache together.
    const std::uint64_t cache_blocks = ceil_div(info.last_level_cache * 5 / 2, block_kv_bytes);
    const std::uint64_t affordable = (budget - fixed) / (block_kv_bytes * copies);
    pool_blocks_ = std::min(std::max(needed_blocks, cache_blocks), affordable);
    pool_blocks_ = std::min<std::uint64_t>(pool_blocks_, std::numeric_limits<std::int32_t>::max());

    const std::uint64_t pool_elements = checked_mul(pool_blocks_, block_elements_, "K/V pool");
    host_k_.resize(pool_elements);
    host_v_.resize(pool_elements);
    host_q_.resize(q_elements_ * kMaxBufferSets);
    fill_random(host_k_, bf16_, options_.seed * 3 + 1);
    fill_random(host_v_, bf16_, options_.seed * 3 + 2);
    fill_random(host_q_, bf16_, options_.seed * 3 + 3);
    k_ = backend_.allocate(pool_elements * 2);
    v_ = backend_.allocate(pool_elements * 2);
    q_ = backend_.allocate(host_q_.size() * 2);
    backend_.upload(*k_, host_k_.data(), pool_elements * 2);
    backend_.upload(*v_, host_v_.data(), pool_elements * 2);
    backend_.upload(*q_, host_q_.data(), host_q_.size() * 2);
    tables_ = backend_.allocate(table_bytes);
    seq_lens_ = backend_.allocate(4 * shape_.batch);
    out_ = backend_.allocate(out_bytes);
    partial_out_ = backend_.allocate(checked_mul(out_bytes, max_splits_any, "partials"));
    partial_max_ = backend_.allocate(q_elements_ / shape_.head_dim * max_splits_any * 4);
    partial_sum_ = backend_.allocate(q_elements_ / shape_.head_dim * max_splits_any * 4);
    max_splits_ = max_splits_any;
  }

  ProbePoint measure(const std::string& kernel, std::uint64_t context) {
    prepare(context);
    const bool split = kernel == "splitkv";
    kernels::PagedDecodeParams params = base_params();
    if (split) {
      std::uint64_t tokens_per_split = context;
      if (options_.splits > 0) {
        const std::uint64_t splits = std::min<std::uint64_t>({options_.splits, context, max_splits_});
        tokens_per_split = ceil_div(context, splits);
      } else {
        tokens_per_split = plan_splits(split_input(context)).tokens_per_split;
        tokens_per_split = std::max(tokens_per_split, ceil_div(context, max_splits_));
      }
      params.tokens_per_split = static_cast<int>(tokens_per_split);
      params.num_splits = static_cast<int>(ceil_div(context, tokens_per_split));
    }
    ProbePoint point;
    point.context = context;
    point.splits = static_cast<std::uint32_t>(params.num_splits);
    point.buffer_sets = sets_;
    point.ctas_per_multiprocessor = split ? ctas_per_multiprocessor_ : 0;
    point.error_bound = error_bound(shape_.dtype, context);
    AttentionShape shape = shape_;
    shape.context = context;
    point.bytes = attention_bytes(shape);
    const std::uint64_t cache = backend_.info().last_level_cache;
    point.cold = cache == 0 || static_cast<std::uint64_t>(sets_) * set_bytes_ >= 2 * cache;

    if (options_.check) {
      check(split, params, point);
      // A wrong result is a device fault, never a measurement: no time is taken.
      if (!point.correct) {
        throw DeviceError(backend_.info().backend + ": " + kernel + " result at context " +
                          std::to_string(context) +
                          " failed verification against the float64 reference: max relative error " +
                          (std::isfinite(point.max_error) ? std::to_string(point.max_error)
                                                          : std::string("non-finite output")) +
                          " > bound " + std::to_string(point.error_bound) + injected_);
      }
    }
    // Cold start for this kernel at this point: nothing the previous kernel or
    // point touched is left in the cache, and the rotation goes on from where it
    // stopped instead of restarting at set 0.
    backend_.flush_cache();
    for (int i = 0; i < options_.warmup; ++i) backend_.time_attention(split, for_set(params, next_set()));
    const int launches = launches_per_sample();
    point.launches_per_sample = launches;
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(options_.repeats));
    std::vector<kernels::PagedDecodeParams> batch(static_cast<std::size_t>(launches));
    StoppingCriterion stop(options_.stopping);
    const auto sampling_start = std::chrono::steady_clock::now();
    for (int i = 0; options_.stopping.enabled() ? !stop.done() : i < options_.repeats; ++i) {
      for (auto& launch : batch) launch = for_set(params, next_set());
      samples.push_back(backend_.time_attention_batch(split, batch) / launches);
      stop.add(samples.back(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - sampling_start).count());
    }
    point.noise = stop.status().noise;
    point.converged = options_.stopping.enabled() && stop.status().converged;
    point.samples = static_cast<int>(samples.size());
    const Timing timing = summarize(samples);
    point.time_us = timing.median_us;
    point.spread = timing.spread;
    point.gbps = timing.median_us > 0 ? static_cast<double>(point.bytes) / (timing.median_us * 1e3) : 0.0;
    return point;
  }

  // The stream probe of this run: stream_read over the session's K pool (the
  // same memory the attention kernels read, no extra allocation), each sample
  // after a cache flush; checked exactly like run_bandwidth's.
  double stream_read_gbps() {
    const std::uint64_t bytes = k_->bytes() / 16 * 16;
    if (bytes == 0) return 0.0;
    auto parts = backend_.allocate(4ull * backend_.stream_read_parts());
    std::uint32_t expected = 0;
    for (std::uint64_t word = 0; word < bytes / 4; ++word)
      expected += static_cast<std::uint32_t>(host_k_[2 * word]) |
                  (static_cast<std::uint32_t>(host_k_[2 * word + 1]) << 16);
    std::vector<double> samples;
    for (int i = 0; i < options_.warmup + options_.repeats; ++i) {
      backend_.flush_cache();
      const double us = backend_.time_stream_read(*k_, bytes, *parts);
      if (i >= options_.warmup) samples.push_back(us);
    }
    std::vector<std::uint32_t> sums(backend_.stream_read_parts());
    backend_.download(sums.data(), *parts, sums.size() * 4);
    std::uint32_t total = 0;
    for (const auto sum : sums) total += sum;
    if (total != expected) {
      throw DeviceError(backend_.info().backend + ": stream read of the K pool failed verification: sum " +
                        std::to_string(total) + " != expected " + std::to_string(expected));
    }
    const double median = summarize(samples).median_us;
    return median > 0 ? static_cast<double>(bytes) / (median * 1e3) : 0.0;
  }

 private:
  // The fields the kernel instance depends on (dtype, head_dim, group, block size).
  kernels::PagedDecodeParams shape_params() const {
    kernels::PagedDecodeParams p;
    p.num_seqs = static_cast<int>(shape_.batch);
    p.num_kv_heads = static_cast<int>(shape_.kv_heads);
    p.q_per_kv = static_cast<int>(shape_.q_heads / shape_.kv_heads);
    p.head_dim = static_cast<int>(shape_.head_dim);
    p.block_size = static_cast<int>(shape_.block_size);
    p.dtype = bf16_ ? kernels::ElementType::bf16 : kernels::ElementType::fp16;
    return p;
  }
  SplitPlanInput split_input(std::uint64_t context) const {
    SplitPlanInput input;
    input.multiprocessors = backend_.info().multiprocessors;
    input.ctas_per_multiprocessor = ctas_per_multiprocessor_;
    input.batch = shape_.batch;
    input.kv_heads = shape_.kv_heads;
    input.context = context;
    return input;
  }
  int next_set() { return static_cast<int>(rotation_++ % static_cast<std::uint64_t>(sets_)); }
  int launches_per_sample() const {
    if (options_.launches_per_sample > 0) return options_.launches_per_sample;
    // GPUs: 8 launches per sample put the host's few microseconds of launch
    // latency under 1/8 of a 1K-context kernel's time; cpu: the timing is the
    // work itself, one launch per sample.
    return backend_.info().backend == "cpu" ? 1 : 8;
  }

  kernels::PagedDecodeParams base_params() const {
    kernels::PagedDecodeParams p;
    p.q = q_->data();
    p.k_cache = k_->data();
    p.v_cache = v_->data();
    p.block_tables = static_cast<const std::int32_t*>(tables_->data());
    p.seq_lens = static_cast<const std::int32_t*>(seq_lens_->data());
    p.out = static_cast<float*>(out_->data());
    p.partial_out = static_cast<float*>(partial_out_->data());
    p.partial_max = static_cast<float*>(partial_max_->data());
    p.partial_sum = static_cast<float*>(partial_sum_->data());
    p.num_seqs = static_cast<int>(shape_.batch);
    p.num_kv_heads = static_cast<int>(shape_.kv_heads);
    p.q_per_kv = static_cast<int>(shape_.q_heads / shape_.kv_heads);
    p.head_dim = static_cast<int>(shape_.head_dim);
    p.block_size = static_cast<int>(shape_.block_size);
    p.max_blocks_per_seq = static_cast<int>(blocks_per_seq_);
    p.num_splits = 1;
    p.tokens_per_split = 0;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape_.head_dim)));
    p.dtype = bf16_ ? kernels::ElementType::bf16 : kernels::ElementType::fp16;
    return p;
  }

  kernels::PagedDecodeParams for_set(kernels::PagedDecodeParams p, int set) const {
    p.q = static_cast<const std::uint16_t*>(q_->data()) + q_elements_ * static_cast<std::uint64_t>(set);
    p.block_tables = static_cast<const std::int32_t*>(tables_->data()) +
                     static_cast<std::uint64_t>(set) * shape_.batch * blocks_per_seq_;
    return p;
  }

  // Block tables and sequence lengths for this context (all sets).
  void prepare(std::uint64_t context) {
    if (context == prepared_context_) return;
    blocks_per_seq_ = ceil_div(context, shape_.block_size);
    const std::uint64_t per_set = shape_.batch * blocks_per_seq_;
    const std::uint64_t set_bytes =
        checked_mul(per_set, block_elements_ * 2 * element_bytes(shape_.dtype), "set");
    set_bytes_ = set_bytes;
    // One set more than 2 x cache / set: the set a launch reads was last read
    // `sets_` launches ago, with at least 2 x the cache read in between.
    const std::uint64_t by_cache = ceil_div(2 * backend_.info().last_level_cache, set_bytes) + 1;
    sets_ = static_cast<int>(
        std::clamp<std::uint64_t>(std::min(by_cache, pool_blocks_ / per_set), 1, kMaxBufferSets));
    // A shuffled permutation of the pool: consecutive logical blocks land on
    // random physical blocks, as in a serving engine after churn.
    std::vector<std::int32_t> permutation(pool_blocks_);
    std::iota(permutation.begin(), permutation.end(), 0);
    std::mt19937_64 generator(options_.seed ^ (context * 0x9e3779b97f4a7c15ull));
    std::shuffle(permutation.begin(), permutation.end(), generator);
    host_tables_.assign(permutation.begin(),
                        permutation.begin() + static_cast<std::ptrdiff_t>(per_set * sets_));
    backend_.upload(*tables_, host_tables_.data(), host_tables_.size() * 4);
    const std::vector<std::int32_t> lengths(shape_.batch, static_cast<std::int32_t>(context));
    backend_.upload(*seq_lens_, lengths.data(), lengths.size() * 4);
    prepared_context_ = context;
  }

  // float64 reference for set 0 at the prepared context, cached per context.
  const std::vector<double>& reference() {
    if (reference_context_ == prepared_context_) return reference_;
    const std::uint64_t context = prepared_context_;
    const std::uint32_t group = shape_.q_heads / shape_.kv_heads;
    const std::uint32_t head_dim = shape_.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    reference_.assign(q_elements_, 0.0);
    const std::uint64_t heads = static_cast<std::uint64_t>(shape_.batch) * shape_.q_heads;
    detail::for_each_worker([&](unsigned worker, unsigned threads) {
      std::vector<double> scores(context);  // bad_alloc here reaches the caller, not std::terminate
      std::vector<double> q(head_dim);
      for (std::uint64_t head = worker; head < heads; head += threads) {
        const std::uint64_t seq = head / shape_.q_heads;
        const std::uint64_t kv_head = head % shape_.q_heads / group;
        for (std::uint32_t d = 0; d < head_dim; ++d) q[d] = to_double(host_q_[head * head_dim + d], bf16_);
        double max_score = -std::numeric_limits<double>::infinity();
        for (std::uint64_t t = 0; t < context; ++t) {
          const std::uint64_t offset = row_offset(seq, t, kv_head);
          double dot = 0;
          for (std::uint32_t d = 0; d < head_dim; ++d) dot += q[d] * to_double(host_k_[offset + d], bf16_);
          scores[t] = dot * scale;
          max_score = std::max(max_score, scores[t]);
        }
        double total = 0;
        double* out = reference_.data() + head * head_dim;
        for (std::uint64_t t = 0; t < context; ++t) {
          const double weight = std::exp(scores[t] - max_score);
          total += weight;
          const std::uint64_t offset = row_offset(seq, t, kv_head);
          for (std::uint32_t d = 0; d < head_dim; ++d)
            out[d] += weight * to_double(host_v_[offset + d], bf16_);
        }
        for (std::uint32_t d = 0; d < head_dim; ++d) out[d] /= total;
      }
    });
    reference_context_ = context;
    return reference_;
  }

  std::uint64_t row_offset(std::uint64_t seq, std::uint64_t token, std::uint64_t kv_head) const {
    const std::uint64_t block =
        static_cast<std::uint64_t>(host_tables_[seq * blocks_per_seq_ + token / shape_.block_size]);
    return (block * shape_.block_size + token % shape_.block_size) * shape_.kv_heads * shape_.head_dim +
           kv_head * shape_.head_dim;
  }

  void check(bool split, const kernels::PagedDecodeParams& params, ProbePoint& point) {
    const std::vector<float> poison_out(q_elements_, std::numeric_limits<float>::quiet_NaN());
    backend_.upload(*out_, poison_out.data(), poison_out.size() * 4);
    if (split) {
      const std::vector<float> poison(partial_out_->bytes() / 4, std::numeric_limits<float>::quiet_NaN());
      backend_.upload(*partial_out_, poison.data(), partial_out_->bytes());
      backend_.upload(*partial_max_, poison.data(), partial_max_->bytes());
      backend_.upload(*partial_sum_, poison.data(), partial_sum_->bytes());
    }
    backend_.time_attention(split, for_set(params, 0));
    std::vector<float> out(q_elements_);
    backend_.download(out.data(), *out_, out.size() * 4);
    injected_.clear();
    if (faults_.hit(FaultKind::verify)) {
      // |reference| < 1 (a softmax average of values in [-1, 1)): +1 is always over the bound.
      out[0] += 1.0f;
      injected_ = faults_.note();
    }
    const std::vector<double>& expected = reference();
    double max_reference = 0, max_difference = 0;
    bool finite = true;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!std::isfinite(out[i])) finite = false;
      max_reference = std::max(max_reference, std::abs(expected[i]));
      max_difference = std::max(max_difference, std::abs(static_cast<double>(out[i]) - expected[i]));
    }
    point.max_error =
        finite ? max_difference / std::max(max_reference, 1e-30) : std::numeric_limits<double>::infinity();
    point.correct = finite && point.max_error <= error_bound(shape_.dtype, prepared_context_);
  }

  Backend& backend_;
  AttentionShape shape_;
  ProbeOptions options_;
  FaultPlan& faults_;
  std::string injected_;  // note of an injected verify fault for this check, else empty
  bool bf16_;
  std::uint64_t block_elements_ = 0, q_elements_ = 0, pool_blocks_ = 0, blocks_per_seq_ = 0;
  std::uint64_t max_splits_ = 1;
  std::uint32_t ctas_per_multiprocessor_ = 1;
  std::uint64_t set_bytes_ = 0;
  std::uint64_t rotation_ = 0;  // launches so far: the input set of the next one is rotation_ % sets_
  std::uint64_t prepared_context_ = 0, reference_context_ = 0;
  int sets_ = 1;
  std::vector<std::uint16_t> host_k_, host_v_, host_q_;
  std::vector<std::int32_t> host_tables_;
  std::vector<double> reference_;
  std::unique_ptr<DeviceBuffer> k_, v_, q_, tables_, seq_lens_, out_, partial_out_, partial_max_,
      partial_sum_;
};

double interpolate(const std::vector<double>& sorted, double fraction) {
  const double position = fraction * static_cast<double>(sorted.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(position));
  const std::size_t upper = std::min(lower + 1, sorted.size() - 1);
  const double weight = position - static_cast<double>(lower);
  return sorted[lower] * (1.0 - weight) + sorted[upper] * weight;
}

}  // namespace

void validate_shape(const AttentionShape& shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128 && shape.head_dim != 256) {
    throw InputError("--head-dim", std::to_string(shape.head_dim) + " not supported; allowed: 64, 128, 256");
  }
  if (shape.block_size < 1 || shape.block_size > kMaxBlockSize) {
    throw InputError("--block-size",
                     std::to_string(shape.block_size) +
                         " not supported; allowed: 8, 16, 32 (compiled instances) or any other "
                         "size 1..4096 (runtime path, e.g. 784)");
  }
  if (shape.kv_heads < 1 || shape.kv_heads > 1024) {
    throw InputError("--kv-heads", std::to_string(shape.kv_heads) + " out of range; allowed: 1..1024");
  }
  if (shape.q_heads < shape.kv_heads || shape.q_heads % shape.kv_heads != 0 ||
      shape.q_heads / shape.kv_heads > static_cast<std::uint32_t>(kernels::kMaxGqa)) {
    throw InputError("--q-heads",
                     std::to_string(shape.q_heads) + " with " + std::to_string(shape.kv_heads) +
                         " KV heads; allowed: a multiple of --kv-heads with q_heads / kv_heads in 1..16");
  }
  if (shape.batch < 1 || shape.batch > 4096) {
    throw InputError("--batch", std::to_string(shape.batch) + " out of range; allowed: 1..4096");
  }
  if (shape.context < 1 || shape.context > kMaxContext) {
    throw InputError("--context", std::to_string(shape.context) + " out of range; allowed: 1..16777216");
  }
  if (shape.dtype != "bf16" && shape.dtype != "fp16") {
    throw InputError("--dtype", "'" + shape.dtype + "' not supported; allowed: bf16, fp16");
  }
}

void validate_kernel(const std::string& kernel) {
  if (kernel != "nosplit" && kernel != "splitkv") {
    throw InputError("--kernel", "'" + kernel + "' unknown; allowed: nosplit, splitkv");
  }
}

std::uint64_t attention_bytes(const AttentionShape& shape) {
  const std::uint64_t elem = element_bytes(shape.dtype);
  const std::uint64_t kv = checked_mul(
      checked_mul(
          checked_mul(checked_mul(shape.context, shape.kv_heads, "K/V bytes"), shape.head_dim, "K/V bytes"),
          2 * elem, "K/V bytes"),
      shape.batch, "K/V bytes");
  const std::uint64_t tables =
      checked_mul(shape.batch, ceil_div(shape.context, shape.block_size) * 4, "tables");
  const std::uint64_t lengths = 4ull * shape.batch;
  const std::uint64_t q =
      checked_mul(static_cast<std::uint64_t>(shape.batch) * shape.q_heads, shape.head_dim * elem, "q");
  const std::uint64_t out =
      checked_mul(static_cast<std::uint64_t>(shape.batch) * shape.q_heads, shape.head_dim * 4ull, "out");
  return checked_add(checked_add(checked_add(kv, tables, "bytes"), lengths + q, "bytes"), out, "bytes");
}

// Relative error bound of the float64 check, from the fp32 accumulation
// (docs/reference/kernels.md "Check bound"). Inputs are exact in both dtypes (the
// reference reads the same 16-bit values), so the error is that of fp32
// arithmetic: the output is a softmax-weighted sum over `context` tokens whose
// rounding errors add as a random walk, about u x sqrt(n) relative (u = 2^-24),
// n = context + 128 (the head_dim-long dot products and the online-softmax
// rescales); x 16 for the exp and rescale roundings and headroom. At 32K tokens
// that is 16 x 2^-24 x sqrt(32896) = 1.7e-4; a dropped or repeated 32-token tile
// moves the output by about 1.4 / sqrt(context) relative (7.7e-3 at 32K), far
// above it up to about 1.5M tokens.
double error_bound(const std::string& dtype, std::uint64_t context) {
  (void)dtype;
  return 16.0 * 0x1p-24 * std::sqrt(static_cast<double>(context) + 128.0);
}

Timing summarize(std::vector<double> samples) {
  if (samples.empty()) throw InputError("samples", "no timing samples");
  std::sort(samples.begin(), samples.end());
  Timing t;
  t.repeats = static_cast<int>(samples.size());
  t.min_us = samples.front();
  t.median_us = interpolate(samples, 0.5);
  t.p10_us = interpolate(samples, 0.1);
  t.p90_us = interpolate(samples, 0.9);
  t.spread = t.median_us > 0 ? (t.p90_us - t.p10_us) / t.median_us : 0.0;
  return t;
}

double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y) {
  return kvsight::least_squares_slope(x, y);  // the planner's one fit
}

namespace detail {
std::unique_ptr<Backend> open_backend(const std::string& name, const ProbeOptions& options) {
  if (name == "cpu") return cpu_open(options.threads, options.cpu_kernel);
  if (name == "cuda") return cuda_open(0);
  if (name == "hip") return hip_open(0);
  if (name == "auto") {
    if (const BackendInfo cuda = cuda_discover(); !cuda.devices.empty()) return cuda_open(0);
    if (const BackendInfo hip = hip_discover(); !hip.devices.empty()) return hip_open(0);
    return cpu_open(options.threads, options.cpu_kernel);
  }
  throw InputError("--backend", "'" + name + "' unknown; allowed: auto, cpu, cuda, hip");
}
}  // namespace detail

std::vector<SweepResult> run_sweeps(const std::string& backend_name, const std::vector<std::string>& kernels,
                                    AttentionShape shape, const std::vector<std::uint64_t>& contexts,
                                    const ProbeOptions& options) {
  if (contexts.empty())
    throw InputError("--contexts", "empty; give at least one context, e.g. 512,1024,4096");
  for (const auto& kernel : kernels) validate_kernel(kernel);
  validate_options(options);
  for (const std::uint64_t context : contexts) {
    shape.context = context;
    validate_shape(shape);
  }
  shape.context = contexts.front();
  FaultPlan faults;  // outlives the backend and the session's buffers
  auto backend = detail::guard_backend(detail::open_backend(backend_name, options), faults);
  Session session(*backend, shape, *std::max_element(contexts.begin(), contexts.end()), options, faults);
  std::vector<SweepResult> results;
  for (const auto& kernel : kernels) {
    SweepResult result;
    result.backend = backend->info().backend;
    result.device = device_label(backend->info());
    result.kernel = kernel;
    result.shape = shape;
    results.push_back(result);
  }
  for (const std::uint64_t context : contexts) {
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      ProbePoint point = session.measure(kernels[k], context);
      if (kernels[k] == "splitkv") results[k].ctas_per_multiprocessor = point.ctas_per_multiprocessor;
      if (options.progress) {
        options.progress(kernels[k] + " context " + std::to_string(context) + ": " +
                         std::to_string(point.time_us) + " us, " + std::to_string(point.gbps) + " GB/s" +
                         (point.correct ? "" : " (check FAILED)"));
      }
      results[k].points.push_back(point);
    }
  }
  // The stream probe of this run, after the kernels (an injected kernel fault
  // still hits the Nth attention launch), on the memory they read.
  const double stream_gbps = options.stream_reference ? session.stream_read_gbps() : 0.0;
  for (auto& result : results) {
    result.stream_read_gbps = stream_gbps;
    for (auto& point : result.points) {
      point.stream_read_gbps = stream_gbps;
      point.ratio_to_stream = stream_gbps > 0 ? point.gbps / stream_gbps : 0.0;
    }
    std::vector<double> x, y;
    for (const auto& point : result.points) {
      x.push_back(static_cast<double>(point.context));
      y.push_back(point.time_us);
    }
    result.slope_us_per_token = least_squares_slope(x, y);
    result.growth = y.front() > 0 ? y.back() / y.front() : 0.0;
  }
  return results;
}

SweepResult run_sweep(const std::string& backend, const std::string& kernel, AttentionShape shape,
                      const std::vector<std::uint64_t>& contexts, const ProbeOptions& options) {
  return run_sweeps(backend, {kernel}, shape, contexts, options).front();
}

AttentionResult run_attention(const std::string& backend, const std::string& kernel, AttentionShape shape,
                              const ProbeOptions& options) {
  SweepResult sweep = run_sweep(backend, kernel, shape, {shape.context}, options);
  AttentionResult result;
  result.backend = sweep.backend;
  result.device = sweep.device;
  result.kernel = kernel;
  result.shape = shape;
  result.point = sweep.points.front();
  result.repeats = options.repeats;
  result.warmup = options.warmup;
  result.stream_read_gbps = sweep.stream_read_gbps;
  return result;
}

BandwidthResult run_bandwidth(const std::string& backend_name, std::uint64_t bytes,
                              const ProbeOptions& options) {
  validate_options(options);
  FaultPlan faults;  // outlives the backend and its buffers
  auto backend = detail::guard_backend(detail::open_backend(backend_name, options), faults);
  const DeviceInfo& info = backend->info();
  const std::uint64_t budget = memory_budget(info, options);
  // cpu: the host source and the read-back copy share memory with the two buffers (issue #14 item 6).
  const std::uint64_t copies = info.backend == "cpu" ? 2 : 1;
  constexpr std::uint64_t kGranule = 1 << 20;
  if (bytes == 0) {
    // Far larger than the last-level cache (BabelStream's default arrays are
    // 2^25 doubles, 256 MiB each; nvbench flushes L2 between samples).
    bytes = std::max<std::uint64_t>(8 * info.last_level_cache, 256ull << 20);
    if (info.backend != "cpu") bytes = std::max<std::uint64_t>(bytes, 1ull << 30);
    bytes = std::min(bytes, budget / (2 * copies) / kGranule * kGranule);
  }
  bytes = bytes / kGranule * kGranule;
  if (bytes == 0 || bytes > budget / (2 * copies)) {
    throw InputError("--max-mem", std::string("the bandwidth probe needs two buffers of at least 1 MiB") +
                                      (copies > 1 ? " (and their two host copies)" : "") +
                                      " within the budget of " + std::to_string(budget) + " bytes");
  }
  std::vector<std::uint32_t> host(bytes / 4);
  std::uint64_t state = options.seed;
  std::uint32_t expected = 0;
  for (auto& word : host) {
    word = static_cast<std::uint32_t>(splitmix64(state));
    expected += word;
  }
  auto source = backend->allocate(bytes);
  auto destination = backend->allocate(bytes);
  auto parts = backend->allocate(4ull * backend->stream_read_parts());
  backend->upload(*source, host.data(), bytes);

  BandwidthResult result;
  result.backend = info.backend;
  result.device = device_label(info);
  result.buffer_bytes = bytes;
  result.read_bytes = bytes;
  result.copy_bytes = 2 * bytes;
  std::vector<double> read_samples, copy_samples;
  StoppingCriterion read_stop(options.stopping);
  const auto read_start = std::chrono::steady_clock::now();
  for (int i = 0; options.stopping.enabled() ? !read_stop.done() : i < options.warmup + options.repeats;
       ++i) {
    const double us = backend->time_stream_read(*source, bytes, *parts);
    if (i >= options.warmup) read_samples.push_back(us);
    if (i >= options.warmup)
      read_stop.add(us, std::chrono::duration<double>(std::chrono::steady_clock::now() - read_start).count());
  }
  result.read_noise = read_stop.status().noise;
  result.read_converged = options.stopping.enabled() && read_stop.status().converged;
  std::vector<std::uint32_t> sums(backend->stream_read_parts());
  backend->download(sums.data(), *parts, sums.size() * 4);
  std::uint32_t total = 0;
  for (const auto sum : sums) total += sum;
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    const double us = backend->time_stream_copy(*source, *destination, bytes);
    if (i >= options.warmup) copy_samples.push_back(us);
  }
  std::vector<std::uint32_t> copied(bytes / 4);
  backend->download(copied.data(), *destination, bytes);
  std::string injected;
  if (faults.hit(FaultKind::verify)) {
    copied[0] ^= 1u;
    injected = faults.note();
  }
  result.correct = total == expected && copied == host;
  if (!result.correct) {
    // Wrong data is a device fault, never a bandwidth figure.
    std::uint64_t differing = 0;
    for (std::size_t i = 0; i < copied.size(); ++i) differing += copied[i] != host[i] ? 1 : 0;
    throw DeviceError(info.backend + ": bandwidth result failed verification (exact, bound 0): read sum " +
                      std::to_string(total) + (total == expected ? " == " : " != ") + "expected " +
                      std::to_string(expected) + ", copy: " + std::to_string(differing) + " of " +
                      std::to_string(copied.size()) + " words differ" + injected);
  }
  result.read = summarize(read_samples);
  result.copy = summarize(copy_samples);
  result.read_gbps = static_cast<double>(result.read_bytes) / (result.read.median_us * 1e3);
  result.copy_gbps = static_cast<double>(result.copy_bytes) / (result.copy.median_us * 1e3);
  return result;
}

void to_json(nlohmann::json& j, const AttentionShape& v) {
  j = {{"head_dim", v.head_dim}, {"block_size", v.block_size}, {"kv_heads", v.kv_heads},
       {"q_heads", v.q_heads},   {"batch", v.batch},           {"context", v.context},
       {"dtype", v.dtype}};
}
void to_json(nlohmann::json& j, const DeviceInfo& v) {
  j = {{"backend", v.backend},
       {"index", v.index},
       {"name", v.name},
       {"arch", v.arch},
       {"memory_total", v.memory_total},
       {"memory_free", v.memory_free},
       {"multiprocessors", v.multiprocessors},
       {"last_level_cache", v.last_level_cache},
       {"clock_mhz", v.clock_mhz},
       {"memory_clock_mhz", v.memory_clock_mhz},
       {"memory_bus_bits", v.memory_bus_bits},
       {"wave_size", v.wave_size}};
  if (!v.cpu_kernel.empty()) j["cpu_kernel"] = v.cpu_kernel;
}
void to_json(nlohmann::json& j, const BackendInfo& v) {
  j = {{"name", v.name}, {"compiled", v.compiled}, {"status", v.status}, {"devices", v.devices}};
}
void to_json(nlohmann::json& j, const Timing& v) {
  j = {{"median_us", v.median_us}, {"p10_us", v.p10_us}, {"p90_us", v.p90_us},
       {"min_us", v.min_us},       {"spread", v.spread}, {"repeats", v.repeats}};
}
void to_json(nlohmann::json& j, const ProbePoint& v) {
  j = {{"context", v.context},
       {"time_us", v.time_us},
       {"spread", v.spread},
       {"bytes", v.bytes},
       {"gbps", v.gbps},
       {"correct", v.correct},
       {"max_error", std::isfinite(v.max_error) ? nlohmann::json(v.max_error) : nlohmann::json(nullptr)},
       {"error_bound", v.error_bound},
       {"splits", v.splits},
       {"ctas_per_multiprocessor", v.ctas_per_multiprocessor},
       {"buffer_sets", v.buffer_sets},
       {"cold", v.cold},
       {"launches_per_sample", v.launches_per_sample},
       {"stream_read_gbps", v.stream_read_gbps},
       {"ratio_to_stream", v.ratio_to_stream},
       {"noise", v.noise},
       {"converged", v.converged},
       {"samples", v.samples}};
}
void to_json(nlohmann::json& j, const AttentionResult& v) {
  j = {{"backend", v.backend}, {"device", v.device},   {"kernel", v.kernel},
       {"shape", v.shape},     {"repeats", v.repeats}, {"warmup", v.warmup}};
  nlohmann::json point = v.point;
  j.update(point);
}
void to_json(nlohmann::json& j, const SweepResult& v) {
  j = {{"backend", v.backend}, {"device", v.device},
       {"kernel", v.kernel},   {"shape", v.shape},
       {"points", v.points},   {"slope_us_per_token", v.slope_us_per_token},
       {"growth", v.growth},   {"stream_read_gbps", v.stream_read_gbps}};
  if (v.kernel == "splitkv") j["ctas_per_multiprocessor"] = v.ctas_per_multiprocessor;
}
void to_json(nlohmann::json& j, const BandwidthResult& v) {
  j = {{"backend", v.backend},
       {"device", v.device},
       {"buffer_bytes", v.buffer_bytes},
       {"buffer_sets", v.buffer_sets},
       {"read", v.read},
       {"copy", v.copy},
       {"read_bytes", v.read_bytes},
       {"copy_bytes", v.copy_bytes},
       {"read_gbps", v.read_gbps},
       {"copy_gbps", v.copy_gbps},
       {"gbps", v.read_gbps},
       {"correct", v.correct}};
}

}  // namespace kvsight::probes
