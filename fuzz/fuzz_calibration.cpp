// Fuzzes the --calibration reader (kvsight::calibration_from_probe_json), which
// reads `kvsight probe sweep --format json` output that users copy between
// machines. InputError is the expected outcome for bad bytes; an accepted file
// must give finite, positive kernel constants (a NaN or 0 GB/s would print a
// confident wrong decode curve). Inputs up to 256 KiB (scripts/fuzz.sh) reach the
// depth limit and deep walks (issue #14).
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"

using namespace kvsight;
using kvsight::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  GpuSpec gpu;
  gpu.id = "fuzz";
  gpu.multiprocessors = 84;
  gpu.bandwidth_gbps = 800;
  KernelCalibration c;
  try {
    c = calibration_from_probe_json(text, "fuzz-sweep.json", gpu);
  } catch (const InputError&) {
    return 0;
  }
  require(std::isfinite(c.per_program_gbps) && c.per_program_gbps > 0, "per-program rate not finite and positive");
  require(std::isfinite(c.call_overhead_us) && c.call_overhead_us >= 0, "call overhead not finite and >= 0");
  require(std::isfinite(c.achieved_bandwidth_gbps) && c.achieved_bandwidth_gbps > 0,
          "achieved bandwidth not finite and positive");
  // decode_model.cpp kMaxCalibrationGbps: no accepted file claims more (gbps: 1e300, issue #14).
  require(c.achieved_bandwidth_gbps <= 100000.0, "achieved bandwidth above 100,000 GB/s accepted");
  require(std::isfinite(c.reduce_us) && c.reduce_us >= 0, "reduce time not finite and >= 0");
  require(std::isfinite(c.calibrated_bytes_per_token_per_program) && c.calibrated_bytes_per_token_per_program > 0,
          "bytes per token per program not finite and positive");
  require(c.concurrent_programs > 0, "0 concurrent programs");
  return 0;
}
