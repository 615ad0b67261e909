#pragma once
// Public API of the probes: paged-decode attention and bandwidth probes run on a
// backend (cpu, cuda, hip), timed like nvbench/BabelStream and checked against a
// float64 reference on the same inputs. Every function throws kvsight::InputError
// for bad shapes/flags (exit 2) and kvsight::DeviceError for runtime failures
// (exit 3); nothing else escapes.
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kvsight/least_squares.hpp"
#include "kvsight/probes/stopping_rule.hpp"

namespace kvsight::probes {

// One decode step of paged attention: batch sequences, each with `context`
// tokens of K/V in a paged cache [num_blocks, block_size, kv_heads, head_dim].
struct AttentionShape {
  std::uint32_t head_dim = 128;   // supported_head_dims_text(): the compiled instances
  std::uint32_t block_size = 16;  // supported_block_sizes_text(): 16 compiled, else the runtime path
  std::uint32_t kv_heads = 8;     // >= 1
  std::uint32_t q_heads = 32;     // multiple of kv_heads, GQA ratio q_heads / kv_heads in 1..16
  std::uint32_t batch = 1;        // sequences
  std::uint64_t context = 4096;   // tokens of KV per sequence, 1..2^24
  std::string dtype = "bf16";     // bf16 or fp16: q, and K/V unless kv_dtype says otherwise; output fp32
  // K/V cache dtype (--kv-dtype): "auto" = dtype; "fp8_e4m3" = fp8 E4M3 bytes with a
  // per-tensor k_scale / v_scale, dequantized in the kernel (vLLM --kv-cache-dtype fp8).
  std::string kv_dtype = "auto";
};

struct ProbeOptions {
  int repeats = 20;                 // timed runs (median, p10, p90 over them)
  int warmup = 3;                   // untimed runs first (first run dropped, as BabelStream)
  double max_mem_fraction = 0.5;    // share of free device memory the probe may take (0, 1]
  std::uint64_t max_mem_bytes = 0;  // absolute cap in bytes; 0 = none (cpu adds its own 2 GiB cap)
  bool check = true;                // compare against the float64 reference
  std::uint64_t seed = 20260729;    // random data and block tables
  std::uint32_t splits = 0;         // split-KV split count; 0 = kvsight::plan_splits (occupancy)
  std::uint32_t threads = 0;        // cpu backend threads; 0 = std::thread::hardware_concurrency()
  std::string cpu_kernel = "auto";  // cpu backend: auto | avx512-bf16 | avx512-fp16 | avx2 | portable
  int launches_per_sample = 0;      // launches per timed sample; 0 = auto (8 on GPUs, 1 on cpu)
  bool stream_reference = true;     // measure the stream probe on the session's K pool (ratio_to_stream)
  std::function<void(const std::string&)> progress;  // long sweeps report here (stderr in the CLI)
  StoppingRule stopping;  // enabled (max_noise > 0): sample until it says stop, instead of `repeats`
};

struct DeviceInfo {
  std::string backend;  // cpu, cuda, hip
  int index = 0;
  std::string name;
  std::string arch;                    // sm_90, gfx90a, x86_64
  std::uint64_t memory_total = 0;      // bytes
  std::uint64_t memory_free = 0;       // bytes
  std::uint32_t multiprocessors = 0;   // SMs / CUs (cpu: hardware threads)
  std::uint64_t last_level_cache = 0;  // bytes (L2 on GPUs, L3 on cpu); 0 = unknown
  double clock_mhz = 0;                // 0 = the runtime does not say
  double memory_clock_mhz = 0;
  std::uint32_t memory_bus_bits = 0;
  std::uint32_t wave_size = 0;  // 32 / 64; cpu: 1
  std::string cpu_kernel;       // cpu backend: the paged-decode kernel in use; empty on GPUs
};

struct BackendInfo {
  std::string name;       // cpu, cuda, hip
  bool compiled = false;  // false: "not compiled in this build"
  std::string status;     // "ok", "no device: <driver message>", "not compiled in this build"
  std::vector<DeviceInfo> devices;
};

// Every backend this build knows, with the devices it found. Never throws for a
// missing driver/device: that is reported in status.
std::vector<BackendInfo> list_backends();

// Statistics of repeated timings (microseconds).
struct Timing {
  double median_us = 0, p10_us = 0, p90_us = 0, min_us = 0;
  double spread = 0;  // (p90 - p10) / median
  int repeats = 0;
};
// Pure statistics helper (unit-tested): samples in microseconds, not empty.
Timing summarize(std::vector<double> samples_us);

struct ProbePoint {
  std::uint64_t context = 0;
  double time_us = 0;  // median
  double spread = 0;   // (p90 - p10) / median
  std::uint64_t bytes =
      0;            // K+V read for the context (at the K/V dtype's size) + block table + seq lens + q + out
  double gbps = 0;  // bytes / time, 1e9 bytes per second
  bool correct = false;                       // true only after the reference check passed
  double max_error = 0;                       // max |out - ref| / (max |ref| + eps) over all outputs
  double error_bound = 0;                     // the bound max_error was held to (error_bound(dtype, context))
  std::uint32_t splits = 1;                   // split count used (1 for nosplit)
  std::uint32_t ctas_per_multiprocessor = 0;  // split kernel occupancy the plan used (0 for nosplit)
  int buffer_sets = 1;                        // input sets rotated between repeats
  bool cold = false;            // buffer_sets x set bytes >= 2 x last-level cache (or the cache is unknown)
  int launches_per_sample = 1;  // launches timed back to back per sample
  double stream_read_gbps = 0;  // the stream probe of the same run (0: not measured)
  double ratio_to_stream = 0;   // gbps / stream_read_gbps
  double noise = 0;             // relative noise of the samples (stdev / mean, stopping_rule.hpp)
  bool converged = false;       // the stopping rule's bound was met (false when the rule is off)
  int samples = 0;              // timed samples taken
};

struct AttentionResult {
  std::string backend, device, kernel;  // kernel: nosplit | splitkv
  AttentionShape shape;
  ProbePoint point;
  int repeats = 0, warmup = 0;
  double stream_read_gbps = 0;  // the stream probe of the same run
};

struct SweepResult {
  std::string backend, device, kernel;
  AttentionShape shape;  // shape.context is the first context of the sweep
  std::vector<ProbePoint> points;
  double slope_us_per_token = 0;              // least squares of time_us against context
  double growth = 0;                          // last time / first time
  double stream_read_gbps = 0;                // the stream probe of the same run (K pool read)
  std::uint32_t ctas_per_multiprocessor = 0;  // splitkv: the kernel's occupancy the split plan used
};

struct BandwidthResult {
  std::string backend, device;
  std::uint64_t buffer_bytes = 0;  // per buffer
  int buffer_sets = 1;
  Timing read, copy;
  std::uint64_t read_bytes = 0;  // bytes moved per run
  std::uint64_t copy_bytes = 0;  // read + write
  double read_gbps = 0, copy_gbps = 0;
  bool correct = false;         // read sum and copy contents verified exactly
  double read_noise = 0;        // relative noise of the read samples (stopping_rule.hpp)
  bool read_converged = false;  // the stopping rule's bound was met for the read
};

// Validates a shape; throws InputError naming the flag (--head-dim, ...) and the allowed values.
void validate_shape(const AttentionShape& shape);
// What validate_shape takes, for messages and --help: "64, 128, 256" (the compiled head
// dims) and "16 (compiled instance) or any other size 1..4096 (runtime path, e.g. 784)".
std::string supported_head_dims_text();
std::string supported_block_sizes_text();
// The K/V dtype as stored: shape.dtype when kv_dtype is "auto", else kv_dtype.
std::string stored_kv_dtype(const AttentionShape& shape);
// Validates the kernel name: nosplit | splitkv.
void validate_kernel(const std::string& kernel);

// Split counts come from kvsight::plan_splits (kvsight/split_plan.hpp), fed with
// the split kernel's occupancy on the device.

// Bytes one decode call must move, counted exactly (see ProbePoint::bytes).
std::uint64_t attention_bytes(const AttentionShape& shape);

// backend: auto | cpu | cuda | hip (auto: cuda, then hip, then cpu).
AttentionResult run_attention(const std::string& backend, const std::string& kernel, AttentionShape shape,
                              const ProbeOptions& options);
SweepResult run_sweep(const std::string& backend, const std::string& kernel, AttentionShape shape,
                      const std::vector<std::uint64_t>& contexts, const ProbeOptions& options);
// Several kernels over the same inputs, side by side (one data set and one
// reference per context, shared by the kernels).
std::vector<SweepResult> run_sweeps(const std::string& backend, const std::vector<std::string>& kernels,
                                    AttentionShape shape, const std::vector<std::uint64_t>& contexts,
                                    const ProbeOptions& options);
// Relative error bound of the reference check at a context (derivation in probes/src/shape.cpp).
double error_bound(const std::string& dtype, std::uint64_t context);
// bytes: per buffer; 0 = a default far larger than the last-level cache (within max_mem).
BandwidthResult run_bandwidth(const std::string& backend, std::uint64_t bytes, const ProbeOptions& options);

// Least-squares slope of y against x: the planner's one fit (kvsight/least_squares.hpp).
using ::kvsight::least_squares_slope;

void to_json(nlohmann::json& j, const AttentionShape& v);
void to_json(nlohmann::json& j, const DeviceInfo& v);
void to_json(nlohmann::json& j, const BackendInfo& v);
void to_json(nlohmann::json& j, const Timing& v);
void to_json(nlohmann::json& j, const ProbePoint& v);
void to_json(nlohmann::json& j, const AttentionResult& v);
void to_json(nlohmann::json& j, const SweepResult& v);
void to_json(nlohmann::json& j, const BandwidthResult& v);

}  // namespace kvsight::probes
