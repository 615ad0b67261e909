// The preflight verdict (kvsight/app/preflight.hpp): a pure function of the facts.
// Each rule and threshold is listed with its source in docs/reference/preflight.md
// "Verdict rules".
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kvsight/app/preflight.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

PreflightReason reason(std::string code, std::string severity, std::string message, nlohmann::json figures) {
  return PreflightReason{std::move(code), std::move(severity), std::move(message), std::move(figures), {}};
}

const DecodeFacts* decode_at(const PreflightFacts& facts, std::uint64_t context) {
  for (const DecodeFacts& d : facts.decode) {
    if (d.context == context) return &d;
  }
  return nullptr;
}

}  // namespace

std::vector<PreflightReason> judge_preflight(const PreflightFacts& facts, const PreflightRules& rules) {
  std::vector<PreflightReason> out;
  const std::optional<CapacityFacts>& judged = facts.judged_capacity();
  // Where capacity was judged: the memory free now, or (no GPU) the target's catalog total.
  const std::string where = facts.survey.no_gpu
                                ? "in " + facts.target_gpu + "'s " +
                                      (judged ? gib_text(judged->gpu_memory_bytes) : std::string("?")) +
                                      " (catalog total: no GPU on this node)"
                                : "in the " + (judged ? gib_text(judged->gpu_memory_bytes) : std::string("?")) +
                                      " free now";

  // 1. The engine would refuse to start: TP does not divide heads, a kernel gate, ...
  for (const std::string& refusal : facts.refusals) {
    out.push_back(reason("engine_refuses_start", "FAIL", facts.engine + " would refuse to start: " + refusal,
                         {{"engine", facts.engine}, {"refusal", refusal}}));
  }
  // 2. vLLM's own start-up check on the memory free now (formulas.md step 1). Not on
  //    the CPU stand-in: that check is the GPU worker's.
  if (facts.engine_requested_bytes && facts.free_now && !facts.survey.no_gpu &&
      facts.free_now->gpu_memory_bytes < *facts.engine_requested_bytes) {
    const std::uint64_t free = facts.free_now->gpu_memory_bytes, requested = *facts.engine_requested_bytes;
    out.push_back(reason("free_memory_below_requested", "FAIL",
                         facts.engine + " would refuse to start: free memory " + gib_text(free) +
                             " < requested " + gib_text(requested) + " (total x gpu_memory_utilization)",
                         {{"free_bytes", free}, {"requested_bytes", requested}}));
  }
  // 3. The model does not fit: in the memory free now, or (no GPU) in the target's total.
  if (judged && !judged->capacity.fits) {
    const Capacity& c = judged->capacity;
    out.push_back(reason("model_does_not_fit", "FAIL",
                         "one sequence of " + commas_text(facts.max_model_len) + " tokens needs " +
                             gib_text(judged->bytes_per_sequence) + " of KV; " + facts.engine + " leaves " +
                             gib_text(c.available_kv_bytes) + " for KV " + where,
                         {{"gpu_memory_bytes", judged->gpu_memory_bytes},
                          {"available_kv_bytes", c.available_kv_bytes},
                          {"bytes_per_sequence", judged->bytes_per_sequence},
                          {"max_concurrency", c.max_concurrency},
                          {"max_model_len", facts.max_model_len},
                          {"largest_max_model_len", c.largest_max_model_len}}));
  }
  // 4. Fewer than N sequences fit at the requested length.
  if (judged && judged->capacity.fits && facts.requested_concurrency &&
      judged->capacity.max_concurrency + 1e-9 < static_cast<double>(*facts.requested_concurrency)) {
    const Capacity& c = judged->capacity;
    out.push_back(reason("concurrency_does_not_fit", "FAIL",
                         std::to_string(*facts.requested_concurrency) + " sequences of " +
                             commas_text(facts.max_model_len) + " tokens do not fit " + where +
                             ": max concurrency " + fixed_text(c.max_concurrency, 2) + " (" +
                             gib_text(judged->bytes_per_sequence) + " each, " +
                             gib_text(c.available_kv_bytes) + " for KV)",
                         {{"requested_concurrency", *facts.requested_concurrency},
                          {"max_concurrency", c.max_concurrency},
                          {"max_model_len", facts.max_model_len},
                          {"bytes_per_sequence", judged->bytes_per_sequence},
                          {"available_kv_bytes", c.available_kv_bytes}}));
  }
  // 5. A probe's float64 reference check failed: a device fault, never a figure.
  for (const ProbeFacts& p : facts.probes) {
    if (!p.reference_ok) {
      out.push_back(reason("probe_reference_failed", "FAIL",
                           p.probe_kernel + " at context " + std::to_string(p.context) +
                               " failed its float64 reference check: " + p.error,
                           {{"kernel", p.kernel},
                            {"probe_kernel", p.probe_kernel},
                            {"context", p.context},
                            {"max_abs_error", std::isfinite(p.max_error) ? nlohmann::json(p.max_error)
                                                                         : nlohmann::json(nullptr)}}));
    }
  }
  // No GPU: the probes ran on the CPU and capacity was judged for the target GPU's catalog
  // total (issue #23 item 1): a WARN, so a clean machine without a GPU still exits 0.
  if (facts.survey.no_gpu) {
    out.push_back(reason("no_gpu", "WARN",
                         "no GPU found on this node: the probes ran on the CPU and capacity is judged for " +
                             facts.target_gpu + " (" +
                             (judged ? gib_text(judged->gpu_memory_bytes) : std::string("?")) +
                             ", its catalog total)",
                         {{"target_gpu", facts.target_gpu}, {"backend", facts.survey.backend}}));
  }
  // 6. The engine's kernel does not split the context and 32K decode is K x slower than 1K.
  if (!facts.splits_context) {
    const DecodeFacts* short_ctx = decode_at(facts, rules.cliff_short_context);
    const DecodeFacts* long_ctx = decode_at(facts, rules.cliff_long_context);
    if (short_ctx && long_ctx && short_ctx->engine_path.ms_per_token > 0) {
      const double ratio = long_ctx->engine_path.ms_per_token / short_ctx->engine_path.ms_per_token;
      if (ratio > rules.cliff_growth_limit) {
        out.push_back(reason("decode_cliff", "WARN",
                             facts.kernel + " does not split the context: decode at " +
                                 std::to_string(rules.cliff_long_context) + " tokens is predicted " +
                                 fixed_text(ratio, 2) + "x slower than at " +
                                 std::to_string(rules.cliff_short_context) + " (" +
                                 fixed_text(long_ctx->engine_path.ms_per_token, 2) + " vs " +
                                 fixed_text(short_ctx->engine_path.ms_per_token, 2) + " ms/token; split-KV " +
                                 fixed_text(long_ctx->split.ms_per_token, 2) + " ms/token at " +
                                 std::to_string(rules.cliff_long_context) + ")",
                             {{"kernel", facts.kernel},
                              {"ms_per_token_short", short_ctx->engine_path.ms_per_token},
                              {"ms_per_token_long", long_ctx->engine_path.ms_per_token},
                              {"split_ms_per_token_long", long_ctx->split.ms_per_token},
                              {"ratio", ratio},
                              {"limit", rules.cliff_growth_limit}}));
      }
    }
  }
  // 7. Bandwidth below 80% of the catalog peak.
  if (facts.bandwidth && facts.bandwidth->catalog_peak_bytes_per_s &&
      *facts.bandwidth->catalog_peak_bytes_per_s > 0) {
    const double measured = facts.bandwidth->measured_bytes_per_s;
    const double peak = *facts.bandwidth->catalog_peak_bytes_per_s;
    const double ratio = measured / peak;
    if (ratio < rules.bandwidth_ratio_floor) {
      out.push_back(
          reason("bandwidth_below_peak", "WARN",
                 "measured " + fixed_text(measured / 1e12, 2) + " TB/s is " + fixed_text(ratio * 100, 0) +
                     "% of the catalog's " + fixed_text(peak / 1e12, 2) + " TB/s (below " +
                     fixed_text(rules.bandwidth_ratio_floor * 100, 0) + "%)",
                 {{"measured_bytes_per_s", measured}, {"peak_bytes_per_s", peak}, {"ratio", ratio}}));
    }
  }
  // 8. Memory already held by other processes.
  for (const probes::DeviceRecord& d : facts.survey.devices) {
    if (d.memory_used_by_others_bytes && *d.memory_used_by_others_bytes > 0) {
      out.push_back(reason("memory_held_by_others", "WARN",
                           "device " + std::to_string(d.index) + " (" + d.name + "): other processes hold " +
                               gib_text(*d.memory_used_by_others_bytes) + " (" +
                               std::to_string(d.processes.size()) + " listed, source " + d.sources.processes +
                               ")",
                           {{"device", d.index},
                            {"used_by_others_bytes", *d.memory_used_by_others_bytes},
                            {"processes", d.processes.size()}}));
    }
  }
  // 9. A figure whose samples did not meet the stopping rule's noise bound.
  if (facts.bandwidth && !facts.bandwidth->converged) {
    out.push_back(reason(
        "measurement_not_converged", "WARN",
        "bandwidth: relative noise " + fixed_text(facts.bandwidth->noise * 100, 2) + "% after " +
            std::to_string(facts.bandwidth->samples) + " samples did not meet the bound",
        {{"figure", "bandwidth"}, {"noise", facts.bandwidth->noise}, {"samples", facts.bandwidth->samples}}));
  }
  for (const ProbeFacts& p : facts.probes) {
    if (p.measured && p.reference_ok && !p.converged) {
      out.push_back(
          reason("measurement_not_converged", "WARN",
                 p.kernel + " (" + p.probe_kernel + ") at " + std::to_string(p.context) +
                     ": relative noise " + fixed_text(p.noise * 100, 2) + "% after " +
                     std::to_string(p.samples) + " samples did not meet the bound",
                 {{"figure", p.kernel}, {"context", p.context}, {"noise", p.noise}, {"samples", p.samples}}));
    }
  }
  // 10. The decode step predicted from this node's calibration against the step built from
  //     the node's own measured kernel time, at each measured context.
  for (const DecodeFacts& d : facts.decode) {
    if (!d.measured_engine_ms || !(*d.measured_engine_ms > 0)) continue;
    const double predicted = d.engine_path.ms_per_token, measured = *d.measured_engine_ms;
    const double gap = std::fabs(predicted - measured) / measured;
    if (gap <= rules.prediction_gap_limit) continue;
    const ProbeFacts* probe = nullptr;
    for (const ProbeFacts& p : facts.probes)
      if (p.context == d.context && p.kernel == "engine_path") probe = &p;
    const bool noisy = probe && probe->measured && !probe->converged;
    out.push_back(reason(
        "prediction_disagrees", "WARN",
        "decode at " + commas_text(d.context) + " tokens: predicted " + fixed_text(predicted, 2) +
            " ms/token, measured " + fixed_text(measured, 2) + " (" + fixed_text(gap * 100, 0) +
            " % apart, bound " + fixed_text(rules.prediction_gap_limit * 100, 0) + " %): " +
            (noisy ? "the measurement did not converge (noise " + fixed_text(probe->noise * 100, 0) +
                         " %): a busy host"
                   : "the kernel's time is not linear in the context on this device (caches at short "
                     "contexts, or another path): the measured column is this node's figure"),
        {{"context", d.context},
         {"predicted_ms", predicted},
         {"measured_ms", measured},
         {"gap", gap},
         {"limit", rules.prediction_gap_limit},
         {"measurement_converged", !noisy}}));
  }
  std::stable_sort(out.begin(), out.end(), [](const PreflightReason& a, const PreflightReason& b) {
    return a.severity == "FAIL" && b.severity != "FAIL";
  });
  return out;
}

std::string verdict_of(const std::vector<PreflightReason>& reasons) {
  std::string verdict = "PASS";
  for (const PreflightReason& r : reasons) {
    if (r.severity == "FAIL") return "FAIL";
    verdict = "WARN";
  }
  return verdict;
}

int preflight_exit_code(const std::string& verdict, const std::string& fail_on) {
  if (verdict == "FAIL") return 1;
  if (verdict == "WARN" && fail_on == "warn") return 1;
  return 0;
}

}  // namespace kvsight::app
