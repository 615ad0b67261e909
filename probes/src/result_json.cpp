// The probes' results as JSON (probes.hpp to_json): the keys scripts and
// `cliff --calibration` read (planner/src/decode/calibration_json.cpp).
#include <cmath>
#include <nlohmann/json.hpp>

#include "kvsight/probes/probes.hpp"

namespace kvsight::probes {

void to_json(nlohmann::json& j, const AttentionShape& v) {
  j = {{"head_dim", v.head_dim}, {"block_size", v.block_size},
       {"kv_heads", v.kv_heads}, {"q_heads", v.q_heads},
       {"batch", v.batch},       {"context", v.context},
       {"dtype", v.dtype},       {"kv_dtype", stored_kv_dtype(v)}};
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
