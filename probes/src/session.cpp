// One probe session (session.hpp): inputs, rotation, cache-cold timing, the float64
// reference check and the stream probe of the run. Backends only allocate, copy and
// launch (backend.hpp).
#include "session.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "inputs.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"
#include "parallel.hpp"
#include "run_setup.hpp"
#include "splits.hpp"

namespace kvsight::probes::detail {

Session::Session(Backend& backend, const AttentionShape& shape, std::uint64_t max_context,
                 const ProbeOptions& options, FaultPlan& faults)
    : backend_(backend), shape_(shape), options_(options), faults_(faults), bf16_(shape.dtype == "bf16") {
  const DeviceInfo& info = backend_.info();
  const std::uint64_t budget = memory_budget(info, options_);
  const std::uint64_t row_elements = checked_mul(shape_.kv_heads, shape_.head_dim, "K/V row");
  block_elements_ = checked_mul(shape_.block_size, row_elements, "K/V block");
  const std::uint64_t block_kv_bytes =
      checked_mul(block_elements_, 2 * kv_element_bytes(shape_), "K/V block");
  const std::uint64_t needed_blocks =
      checked_mul(shape_.batch, ceil_div(max_context, shape_.block_size), "blocks of the sweep");
  q_elements_ = checked_mul(checked_mul(shape_.batch, shape_.q_heads, "q"), shape_.head_dim, "q");
  const std::uint64_t out_bytes = checked_mul(q_elements_, 4, "out");
  // The split kernel's occupancy for this shape (the planner's input), and the
  // most splits any context of the session can get: one wave of slots.
  ctas_per_multiprocessor_ = backend_.attention_occupancy(shape_params());
  if (ctas_per_multiprocessor_ == 0) {
    throw DeviceError(info.backend + ": the split-KV kernel for head_dim " + std::to_string(shape_.head_dim) +
                      " and GQA " + std::to_string(shape_.q_heads / shape_.kv_heads) + " cannot run on " +
                      info.name + " (occupancy 0: too much shared memory or registers)");
  }
  const SplitPlan widest = plan_splits(split_input(max_context));
  const std::uint32_t max_splits_any = session_max_splits(options_.splits, widest);
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
  host_k_.fill(shape_, pool_elements, kFp8KeyAmax, options_.seed * 3 + 1);
  host_v_.fill(shape_, pool_elements, kFp8ValueAmax, options_.seed * 3 + 2);
  host_q_.resize(q_elements_ * kMaxBufferSets);
  fill_random(host_q_, bf16_, options_.seed * 3 + 3);
  k_ = backend_.allocate(host_k_.bytes());
  v_ = backend_.allocate(host_v_.bytes());
  q_ = backend_.allocate(host_q_.size() * 2);
  backend_.upload(*k_, host_k_.data(), host_k_.bytes());
  backend_.upload(*v_, host_v_.data(), host_v_.bytes());
  backend_.upload(*q_, host_q_.data(), host_q_.size() * 2);
  tables_ = backend_.allocate(table_bytes);
  seq_lens_ = backend_.allocate(4 * shape_.batch);
  out_ = backend_.allocate(out_bytes);
  partial_out_ = backend_.allocate(checked_mul(out_bytes, max_splits_any, "partials"));
  partial_max_ = backend_.allocate(q_elements_ / shape_.head_dim * max_splits_any * 4);
  partial_sum_ = backend_.allocate(q_elements_ / shape_.head_dim * max_splits_any * 4);
  max_splits_ = max_splits_any;
}

ProbePoint Session::measure(const std::string& kernel, std::uint64_t context) {
  prepare(context);
  const bool split = kernel == "splitkv";
  kernels::PagedDecodeParams params = base_params();
  if (split) {
    const std::uint64_t tokens = tokens_per_split(options_.splits, split_input(context), max_splits_);
    params.tokens_per_split = static_cast<int>(tokens);
    params.num_splits = static_cast<int>(ceil_div(context, tokens));
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

double Session::stream_read_gbps() {
  const std::uint64_t bytes = k_->bytes() / 16 * 16;
  if (bytes == 0) return 0.0;
  auto parts = backend_.allocate(4ull * backend_.stream_read_parts());
  std::uint32_t expected = 0;
  const auto* pool = static_cast<const unsigned char*>(host_k_.data());
  for (std::uint64_t word = 0; word < bytes / 4; ++word) {
    std::uint32_t value = 0;
    std::memcpy(&value, pool + 4 * word, sizeof(value));  // the words the device sums, in its byte order
    expected += value;
  }
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

kernels::PagedDecodeParams Session::shape_params() const {
  kernels::PagedDecodeParams p;
  p.num_seqs = static_cast<int>(shape_.batch);
  p.num_kv_heads = static_cast<int>(shape_.kv_heads);
  p.q_per_kv = static_cast<int>(shape_.q_heads / shape_.kv_heads);
  p.head_dim = static_cast<int>(shape_.head_dim);
  p.block_size = static_cast<int>(shape_.block_size);
  p.dtype = bf16_ ? kernels::ElementType::bf16 : kernels::ElementType::fp16;
  p.kv_type = kv_is_fp8(shape_) ? kernels::KvType::fp8_e4m3 : kernels::KvType::same_as_q;
  return p;
}

SplitPlanInput Session::split_input(std::uint64_t context) const {
  SplitPlanInput input;
  input.multiprocessors = backend_.info().multiprocessors;
  input.ctas_per_multiprocessor = ctas_per_multiprocessor_;
  input.batch = shape_.batch;
  input.kv_heads = shape_.kv_heads;
  input.context = context;
  return input;
}

int Session::launches_per_sample() const {
  if (options_.launches_per_sample > 0) return options_.launches_per_sample;
  // GPUs: 8 launches per sample put the host's few microseconds of launch
  // latency under 1/8 of a 1K-context kernel's time; cpu: the timing is the
  // work itself, one launch per sample.
  return backend_.info().backend == "cpu" ? 1 : 8;
}

kernels::PagedDecodeParams Session::base_params() const {
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
  p.kv_type = kv_is_fp8(shape_) ? kernels::KvType::fp8_e4m3 : kernels::KvType::same_as_q;
  p.k_scale = host_k_.scale();
  p.v_scale = host_v_.scale();
  return p;
}

kernels::PagedDecodeParams Session::for_set(kernels::PagedDecodeParams p, int set) const {
  p.q = static_cast<const std::uint16_t*>(q_->data()) + q_elements_ * static_cast<std::uint64_t>(set);
  p.block_tables = static_cast<const std::int32_t*>(tables_->data()) +
                   static_cast<std::uint64_t>(set) * shape_.batch * blocks_per_seq_;
  return p;
}

void Session::prepare(std::uint64_t context) {
  if (context == prepared_context_) return;
  blocks_per_seq_ = ceil_div(context, shape_.block_size);
  const std::uint64_t per_set = shape_.batch * blocks_per_seq_;
  const std::uint64_t set_bytes = checked_mul(per_set, block_elements_ * 2 * kv_element_bytes(shape_), "set");
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

const std::vector<double>& Session::reference() {
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
        for (std::uint32_t d = 0; d < head_dim; ++d) dot += q[d] * host_k_.value(offset + d);
        scores[t] = dot * scale;
        max_score = std::max(max_score, scores[t]);
      }
      double total = 0;
      double* out = reference_.data() + head * head_dim;
      for (std::uint64_t t = 0; t < context; ++t) {
        const double weight = std::exp(scores[t] - max_score);
        total += weight;
        const std::uint64_t offset = row_offset(seq, t, kv_head);
        for (std::uint32_t d = 0; d < head_dim; ++d) out[d] += weight * host_v_.value(offset + d);
      }
      for (std::uint32_t d = 0; d < head_dim; ++d) out[d] /= total;
    }
  });
  reference_context_ = context;
  return reference_;
}

std::uint64_t Session::row_offset(std::uint64_t seq, std::uint64_t token, std::uint64_t kv_head) const {
  const std::uint64_t block =
      static_cast<std::uint64_t>(host_tables_[seq * blocks_per_seq_ + token / shape_.block_size]);
  return (block * shape_.block_size + token % shape_.block_size) * shape_.kv_heads * shape_.head_dim +
         kv_head * shape_.head_dim;
}

void Session::check(bool split, const kernels::PagedDecodeParams& params, ProbePoint& point) {
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

}  // namespace kvsight::probes::detail
