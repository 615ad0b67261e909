// The bandwidth probe (probes.hpp run_bandwidth): streaming read and copy, BabelStream
// style, checked exactly.
#include <algorithm>
#include <chrono>

#include "backend.hpp"
#include "fault_injection.hpp"
#include "inputs.hpp"
#include "kvsight/error.hpp"
#include "kvsight/probes/probes.hpp"
#include "run_setup.hpp"

namespace kvsight::probes {

using detail::FaultKind;
using detail::FaultPlan;

BandwidthResult run_bandwidth(const std::string& backend_name, std::uint64_t bytes,
                              const ProbeOptions& options) {
  detail::validate_options(options);
  FaultPlan faults;  // outlives the backend and its buffers
  auto backend = detail::guard_backend(detail::open_backend(backend_name, options), faults);
  const DeviceInfo& info = backend->info();
  const std::uint64_t budget = detail::memory_budget(info, options);
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
    word = static_cast<std::uint32_t>(detail::splitmix64(state));
    expected += word;
  }
  auto source = backend->allocate(bytes);
  auto destination = backend->allocate(bytes);
  auto parts = backend->allocate(4ull * backend->stream_read_parts());
  backend->upload(*source, host.data(), bytes);

  BandwidthResult result;
  result.backend = info.backend;
  result.device = detail::device_label(info);
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

}  // namespace kvsight::probes
