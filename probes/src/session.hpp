#pragma once
// One probe session (session.cpp): the inputs of a sweep on one backend, measured
// kernel by kernel and context by context.
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
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../kernels/paged_decode_params.hpp"
#include "backend.hpp"
#include "fault_injection.hpp"
#include "inputs.hpp"
#include "kvsight/probes/probes.hpp"
#include "kvsight/split_plan.hpp"

namespace kvsight::probes::detail {

// One set of inputs for many contexts: a pool of K/V blocks (random data),
// per-set query vectors, and per-context shuffled block tables carving disjoint
// block subsets out of the pool for each rotation set.
class Session {
 public:
  Session(Backend& backend, const AttentionShape& shape, std::uint64_t max_context,
          const ProbeOptions& options, FaultPlan& faults);

  ProbePoint measure(const std::string& kernel, std::uint64_t context);

  // The stream probe of this run: stream_read over the session's K pool (the
  // same memory the attention kernels read, no extra allocation), each sample
  // after a cache flush; checked exactly like run_bandwidth's.
  double stream_read_gbps();

 private:
  // The fields the kernel instance depends on (dtype, head_dim, group, block size).
  kernels::PagedDecodeParams shape_params() const;
  SplitPlanInput split_input(std::uint64_t context) const;
  int next_set() { return static_cast<int>(rotation_++ % static_cast<std::uint64_t>(sets_)); }
  int launches_per_sample() const;

  kernels::PagedDecodeParams base_params() const;

  kernels::PagedDecodeParams for_set(kernels::PagedDecodeParams p, int set) const;

  // Block tables and sequence lengths for this context (all sets).
  void prepare(std::uint64_t context);

  // float64 reference for set 0 at the prepared context, cached per context.
  const std::vector<double>& reference();

  std::uint64_t row_offset(std::uint64_t seq, std::uint64_t token, std::uint64_t kv_head) const;

  void check(bool split, const kernels::PagedDecodeParams& params, ProbePoint& point);

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
  KvPool host_k_, host_v_;
  std::vector<std::uint16_t> host_q_;
  std::vector<std::int32_t> host_tables_;
  std::vector<double> reference_;
  std::unique_ptr<DeviceBuffer> k_, v_, q_, tables_, seq_lens_, out_, partial_out_, partial_max_,
      partial_sum_;
};

}  // namespace kvsight::probes::detail
