// The attention probes: sweeps of one or more kernels over contexts on one session of
// inputs, and one kernel at one context (probes.hpp run_sweeps, run_sweep, run_attention).
#include <algorithm>

#include "backend.hpp"
#include "fault_injection.hpp"
#include "kvsight/error.hpp"
#include "kvsight/probes/probes.hpp"
#include "run_setup.hpp"
#include "session.hpp"
#include "statistics.hpp"

namespace kvsight::probes {

using detail::FaultPlan;

std::vector<SweepResult> run_sweeps(const std::string& backend_name, const std::vector<std::string>& kernels,
                                    AttentionShape shape, const std::vector<std::uint64_t>& contexts,
                                    const ProbeOptions& options) {
  if (contexts.empty())
    throw InputError("--contexts", "empty; give at least one context, e.g. 512,1024,4096");
  for (const auto& kernel : kernels) validate_kernel(kernel);
  detail::validate_options(options);
  for (const std::uint64_t context : contexts) {
    shape.context = context;
    validate_shape(shape);
  }
  shape.context = contexts.front();
  FaultPlan faults;  // outlives the backend and the session's buffers
  auto backend = detail::guard_backend(detail::open_backend(backend_name, options), faults);
  detail::Session session(*backend, shape, *std::max_element(contexts.begin(), contexts.end()), options,
                          faults);
  std::vector<SweepResult> results;
  for (const auto& kernel : kernels) {
    SweepResult result;
    result.backend = backend->info().backend;
    result.device = detail::device_label(backend->info());
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
    detail::fit_sweep(result);
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

}  // namespace kvsight::probes
