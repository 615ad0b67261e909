#pragma once
// Calibration of the decode model (kvsight/decode_model.hpp): the per-device kernel
// constants it predicts with (KernelCalibration), and the probe sweeps they are fitted
// from as typed structs (Calibration). In-process, app/ fills a Calibration from the
// probes' results (probes::SweepResult) and hands it to fit_calibration; JSON is only
// the file format (`kvsight probe sweep --format json`, `cliff --calibration FILE`),
// read by one module, planner/src/decode/calibration_json.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvsight/gpu.hpp"

namespace kvsight {

// Per-device kernel constants.
struct KernelCalibration {
  std::string source;                     // where every number below comes from
  double call_overhead_us = 0;            // t0: per-call time at zero context (launch + fixed work)
  double per_program_gbps = 0;            // streaming rate of ONE program of the no-split kernel, GB/s (1e9)
  double achieved_bandwidth_gbps = 0;     // what a kernel that fills the device reaches, GB/s
  double reduce_us = 0;                   // split-KV reduce per call
  std::uint32_t concurrent_programs = 0;  // programs the device runs at once (one per CU/SM)
  // Split-kernel programs one CU/SM holds, the split planner's occupancy input
  // (kvsight/split_plan.hpp). 2: PR #45916 targets 2 x the multiprocessor count
  // (reference in docs/reference/kernels.md); a probe sweep carries its kernel's own.
  std::uint32_t ctas_per_multiprocessor = 2;
  // The measured shape the per-program rate came from (bytes per token per program).
  double calibrated_bytes_per_token_per_program = 0;
};

// One measured point of a probe sweep: the context, the median time of one call, and
// the bandwidth it reached.
struct CalibrationPoint {
  std::uint64_t context = 0;  // tokens per sequence
  double time_us = 0;         // one call, microseconds
  double gbps = 0;            // bytes moved / time, 1e9 bytes per second
};

// One kernel's sweep at one shape.
struct CalibrationSweep {
  std::string where;          // for messages: the sweep's path in a file ("$.nosplit"), or its kernel
  std::string backend = "?";  // cpu, cuda, hip
  std::string device = "?";
  std::uint32_t head_dim = 0;  // of the probe shape
  std::uint32_t kv_heads = 0;  // of the probe shape
  std::uint32_t batch = 1;     // of the probe shape: batch x kv_heads programs per call
  std::string dtype = "bf16";  // bf16, fp16, fp32 (the K/V element)
  std::vector<CalibrationPoint> points;
  std::uint32_t ctas_per_multiprocessor = 0;  // splitkv: the occupancy its split plan used; 0 = not said
};

// The probe results the decode model is calibrated from.
struct Calibration {
  std::string origin;                       // the file, or "this node's probes"
  std::optional<CalibrationSweep> nosplit;  // required: t0 and the per-program rate
  std::optional<CalibrationSweep> splitkv;  // optional: the fill-device bandwidth
};

// The fit (planner/src/decode/decode_model.cpp): the no-split sweep's least-squares line
// gives t0 (intercept) and the per-program rate (bytes per token per program / slope);
// the best split-KV point, if any, the fill-device bandwidth. Throws
// InputError("--calibration", ...) when the sweeps give no finite, positive fit.
KernelCalibration fit_calibration(const Calibration& calibration, const GpuSpec& gpu);

// The file format (planner/src/decode/calibration_json.cpp): `kvsight probe sweep
// --format json` output (one sweep, or an object/array holding several, found wherever
// nested) to a Calibration. Depth-limited parse; every value type- and range-checked;
// throws InputError("--calibration", ...) naming the field by its path ($.points[1].time_us).
Calibration calibration_from_json(const std::string& json_text, const std::string& origin);

// calibration_from_json, then fit_calibration.
KernelCalibration calibration_from_probe_json(const std::string& json_text, const std::string& origin,
                                              const GpuSpec& gpu);

}  // namespace kvsight
