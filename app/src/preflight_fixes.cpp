// The fixes of preflight's reasons (kvsight/app/preflight.hpp attach_fixes, issue #23 item 2):
// each one a configuration the planner plans on the same device and under the same engine
// rules as the verdict (app/src/fit.cpp fit_configuration, the plan use case), kept only when
// the planner says it clears the reason, and spelled with the engine's own flag
// (Engine::flags). Rules and search grids: docs/reference/preflight.md "Fixes".
#include <algorithm>
#include <cmath>

#include "kvsight/app/fit.hpp"
#include "kvsight/app/preflight.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

// The fraction of device memory the engine budgets from, as it names it.
std::optional<OptionField> fraction_field(const Engine& engine) {
  for (const OptionField f : {OptionField::gpu_memory_utilization, OptionField::mem_fraction_static,
                              OptionField::free_gpu_memory_fraction})
    if (engine.reads(f)) return f;
  return std::nullopt;
}

class FixPlanner {
 public:
  FixPlanner(const PreflightFacts& facts, const FixInputs& in)
      : facts_(facts),
        in_(in),
        engine_(*in.engine),
        n_(facts.requested_concurrency.value_or(1)),
        length_(facts.max_model_len) {}

  // N sequences of `length` tokens under `options` on `device` (memory_bytes planned).
  FitCandidate plan(const EngineOptions& options, std::uint64_t n, std::uint64_t length, const GpuSpec& device,
                    const std::string& kv = "") const {
    FitRequest request;
    request.options = options;
    request.concurrency = n;
    request.context = length;
    try {
      return fit_configuration(request, in_.model, device, kv);
    } catch (const InputError& e) {  // the engine refuses the configuration: it is no fix
      FitCandidate refused;
      refused.reasons.push_back(e.what());
      return refused;
    }
  }
  FitCandidate plan(const EngineOptions& options) const { return plan(options, n_, length_, in_.device); }

  // The largest length at which N sequences fit, by bisection (capacity falls as the
  // length grows): the engine's own answer to "what max_model_len fits".
  std::optional<PreflightFix> length_fix() const {
    if (length_ <= 1 || !plan(in_.options, n_, 1, in_.device).fits) return std::nullopt;
    std::uint64_t lo = 1, hi = length_;  // fits at lo, not at hi
    while (hi - lo > 1) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      (plan(in_.options, n_, mid, in_.device).fits ? lo : hi) = mid;
    }
    const FitCandidate at = plan(in_.options, n_, lo, in_.device);
    PreflightFix fix;
    fix.kind = "max_model_len";
    const std::string length_flag = engine_spelling(engine_, OptionField::max_model_len);
    const std::string ctx_flag = engine_spelling(engine_, OptionField::ctx_size);
    const std::string slots_flag = engine_spelling(engine_, OptionField::parallel);
    if (!length_flag.empty()) {
      fix.flag = length_flag + " " + std::to_string(lo);
    } else if (!ctx_flag.empty()) {
      // A token pool shared by the slots (llama.cpp n_ctx = slots x length, ExLlama's cache).
      fix.flag = ctx_flag + " " + std::to_string(lo * n_);
      if (!slots_flag.empty() && n_ > 1) fix.flag += " " + slots_flag + " " + std::to_string(n_);
    }
    fix.text = "the largest length at which " + std::to_string(n_) + (n_ == 1 ? " sequence fits: " : " sequences fit: ") +
               commas_text(lo) + " tokens (" + gib_text(at.available_kv_bytes) + " for KV, max concurrency " +
               fixed_text(at.max_concurrency, 2) + ")";
    fix.figures = {{"max_model_len", lo}, {"concurrency", n_}, {"available_kv_bytes", at.available_kv_bytes}};
    return fix;
  }

  // At most the sequences that fit run at once (the engine's request cap).
  std::optional<PreflightFix> concurrency_fix(double max_concurrency) const {
    const auto m = static_cast<std::uint64_t>(std::floor(max_concurrency + 1e-9));
    if (m == 0 || !plan(in_.options, m, length_, in_.device).fits) return std::nullopt;
    PreflightFix fix;
    fix.kind = "max_num_seqs";
    std::string cap = engine_spelling(engine_, OptionField::max_num_seqs);
    if (cap.empty()) cap = engine_spelling(engine_, OptionField::parallel);
    if (!cap.empty()) fix.flag = cap + " " + std::to_string(m);
    fix.text = std::to_string(m) + " sequences of " + commas_text(length_) + " tokens fit at once" +
               (cap.empty() ? " (" + engine_.display_name() + " has no cap kvsight knows: admit at most that many)"
                            : "");
    fix.figures = {{"max_num_seqs", m}, {"max_model_len", length_}};
    return fix;
  }

  // The least lossy KV cache type that fits and that the engine runs on this device (a type
  // its kernels refuse here is a refusal in the decision, so never offered).
  std::optional<PreflightFix> kv_type_fix(bool any_tier) const {
    const FitCandidate now = plan(in_.options);
    std::optional<FitCandidate> best;
    std::string best_type;
    for (const std::string& type : engine_.kv_cache_dtypes()) {
      const FitCandidate c = plan(in_.options, n_, length_, in_.device, type);
      if (!c.fits || c.kv_dtype_resolved == now.kv_dtype_resolved) continue;
      if (!any_tier && c.kv_tier <= now.kv_tier) continue;
      if (!best || c.kv_tier < best->kv_tier) {
        best = c;
        best_type = type;
      }
    }
    if (!best) return std::nullopt;
    PreflightFix fix;
    fix.kind = "kv_cache_dtype";
    std::string flags;
    for (const KvTypeSetting& setting : engine_.kv_cache_type_settings(in_.options)) {
      const std::string name = engine_spelling(engine_, setting.field);
      if (!name.empty()) flags += (flags.empty() ? "" : " ") + name + " " + best_type;
    }
    fix.flag = flags;
    fix.text = "KV stored as " + best->kv_dtype_resolved + " (" + kv_quality_tier_name(best->kv_tier) +
               "): max concurrency " + fixed_text(best->max_concurrency, 2) + " at " + commas_text(length_) +
               " tokens";
    fix.figures = {{"kv_cache_dtype", best_type},
                   {"stored_as", best->kv_dtype_resolved},
                   {"max_concurrency", best->max_concurrency}};
    return fix;
  }

  // The fewest GPUs (TP first, then PP) of this kind that serve it, up to the node's GPUs.
  std::optional<PreflightFix> parallelism_fix() const {
    const std::string tp_flag = engine_spelling(engine_, OptionField::tensor_parallel_size);
    if (tp_flag.empty()) return std::nullopt;
    const std::string pp_flag = engine_spelling(engine_, OptionField::pipeline_parallel_size);
    for (std::uint32_t gpus = 1; gpus <= in_.gpus_on_node; ++gpus) {
      for (std::uint32_t pp = 1; pp <= gpus; ++pp) {
        if (gpus % pp != 0 || (pp > 1 && pp_flag.empty())) continue;
        const std::uint32_t tp = gpus / pp;
        if (tp == in_.options.tp && pp == in_.options.pp) continue;
        EngineOptions o = in_.options;
        o.tp = tp;
        o.pp = pp;
        const FitCandidate c = plan(o);
        if (!c.fits) continue;
        PreflightFix fix;
        fix.kind = "parallelism";
        fix.flag = tp_flag + " " + std::to_string(tp) + (pp > 1 ? " " + pp_flag + " " + std::to_string(pp) : "");
        fix.text = std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") + " of this kind (TP " + std::to_string(tp) +
                   ", PP " + std::to_string(pp) + "): max concurrency " + fixed_text(c.max_concurrency, 2);
        fix.figures = {{"tensor_parallel_size", tp}, {"pipeline_parallel_size", pp}, {"gpus", gpus}};
        return fix;
      }
    }
    return std::nullopt;
  }

  // A block size the engine takes that clears a refusal (a kernel's block-size gate).
  std::optional<PreflightFix> block_fix() const {
    const std::string flag = engine_spelling(engine_, OptionField::block_size);
    if (flag.empty()) return std::nullopt;
    for (const std::uint32_t block : kFullBlockGrid) {
      if (block == 0 || (in_.options.block_size && *in_.options.block_size == block)) continue;
      EngineOptions o = in_.options;
      o.block_size = block;
      const FitCandidate c = plan(o);
      if (!c.fits) continue;
      PreflightFix fix;
      fix.kind = "block_size";
      fix.flag = flag + " " + std::to_string(block);
      fix.text = "blocks of " + std::to_string(c.block_size) + " tokens: max concurrency " +
                 fixed_text(c.max_concurrency, 2);
      fix.figures = {{"block_size", block}};
      return fix;
    }
    return std::nullopt;
  }

  // The smallest memory fraction (0.50-0.99 in steps of 0.01) at which it fits, or with
  // `largest` the largest that fits: vLLM asks for total x fraction and refuses to start above
  // the memory free now (formulas.md "vLLM V1 budget", step 1), so its fraction is also
  // bounded by free / total, and when that check failed the most KV is at the bound.
  std::optional<PreflightFix> fraction_fix(bool largest = false) const {
    const auto field = fraction_field(engine_);
    if (!field) return std::nullopt;
    GpuSpec device = in_.device;
    double ceiling = 0.99;
    if (engine_.needs_free_memory_for_budget(in_.options, &in_.device) && in_.device_total_bytes > 0) {
      device.memory_bytes = in_.device_total_bytes;
      ceiling = std::min(ceiling, std::floor(static_cast<double>(in_.free_bytes) /
                                             static_cast<double>(in_.device_total_bytes) * 100.0) /
                                      100.0);
    }
    const int low = 50, high = static_cast<int>(std::lround(ceiling * 100));
    for (int step = 0; step <= high - low; ++step) {
      const int hundredths = largest ? high - step : low + step;
      EngineOptions o = in_.options;
      const std::string value = fixed_text(hundredths / 100.0, 2);
      try {
        set_option(o, *field, value);
      } catch (const InputError&) {
        continue;
      }
      const FitCandidate c = plan(o, n_, length_, device);
      if (!c.fits) continue;
      PreflightFix fix;
      fix.kind = "memory_fraction";
      fix.flag = engine_spelling(engine_, *field) + " " + value;
      fix.text = std::string(largest ? "the largest fraction the memory free now allows: "
                                     : "the smallest fraction at which it fits: ") +
                 gib_text(c.available_kv_bytes) +
                 " for KV, max concurrency " + fixed_text(c.max_concurrency, 2);
      fix.figures = {{option_field(*field).name, hundredths / 100.0}, {"available_kv_bytes", c.available_kv_bytes}};
      return fix;
    }
    return std::nullopt;
  }

  // The memory other processes would have to free: the smallest free memory (to the MiB)
  // at which it fits, less what is free now. Not for an engine that budgets from the total
  // (vLLM): there the fraction is the lever, and free_memory_below_requested says the rest.
  std::optional<PreflightFix> free_memory_fix() const {
    if (facts_.survey.no_gpu || engine_.needs_free_memory_for_budget(in_.options, &in_.device)) return std::nullopt;
    const std::uint64_t free = in_.free_bytes, total = in_.device_total_bytes;
    if (total <= free) return std::nullopt;
    GpuSpec device = in_.device;
    device.memory_bytes = total;
    if (!plan(in_.options, n_, length_, device).fits) return std::nullopt;
    constexpr std::uint64_t kMiB = 1ull << 20;
    std::uint64_t lo = free / kMiB, hi = (total + kMiB - 1) / kMiB;  // not at lo, fits at hi
    while (hi - lo > 1) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      device.memory_bytes = std::min(total, mid * kMiB);
      (plan(in_.options, n_, length_, device).fits ? hi : lo) = mid;
    }
    return memory_to_free(std::min(total, hi * kMiB) - free);
  }

  PreflightFix memory_to_free(std::uint64_t bytes) const {
    PreflightFix fix;
    fix.kind = "free_memory";
    std::string holders;
    for (const probes::DeviceRecord& d : facts_.survey.devices)
      for (const probes::ProcessMemory& p : d.processes)
        holders += (holders.empty() ? "" : ", ") + ("pid " + std::to_string(p.pid) + " " + p.name + " " +
                                                     gib_text(p.used_bytes));
    fix.text = "free " + gib_text(bytes) + " of device memory" +
               (holders.empty() ? " (no process list on this node)" : " (held by " + holders + ")");
    fix.figures = {{"bytes_to_free", bytes}};
    return fix;
  }

  std::uint64_t n() const { return n_; }

 private:
  const PreflightFacts& facts_;
  const FixInputs& in_;
  const Engine& engine_;
  std::uint64_t n_, length_;
};

PreflightFix action(std::string kind, std::string text) {
  PreflightFix fix;
  fix.kind = std::move(kind);
  fix.text = std::move(text);
  return fix;
}

void add(std::vector<PreflightFix>& fixes, std::optional<PreflightFix> fix) {
  if (fix) fixes.push_back(std::move(*fix));
}

// The engine's option that picks an attention backend which splits the context, when one
// is admitted at this shape on this device.
std::optional<PreflightFix> splitting_backend_fix(const FixInputs& in, const LayerGroupGate& primary) {
  for (const KernelVerdict& k : primary.kernels) {
    if (!k.admitted || k.selected || !k.splits_context || k.backend.empty()) continue;
    const std::string option = in.engine->attention_backend_option(in.engine->version(in.options), k.backend);
    if (option.empty()) return std::nullopt;
    PreflightFix fix;
    fix.kind = "attention_backend";
    fix.flag = option;
    fix.text = k.name + " splits the context at this shape on this device (" + k.split_rule + ")";
    fix.figures = {{"kernel", k.kernel}, {"backend", k.backend}};
    return fix;
  }
  return std::nullopt;
}

}  // namespace

void attach_fixes(std::vector<PreflightReason>& reasons, const PreflightFacts& facts, const FixInputs& in,
                  const GateResult* gates) {
  const FixPlanner planner(facts, in);
  const std::optional<CapacityFacts>& judged = facts.judged_capacity();
  for (PreflightReason& r : reasons) {
    std::vector<PreflightFix>& fixes = r.fixes;
    if (r.code == "model_does_not_fit" || r.code == "concurrency_does_not_fit") {
      if (r.code == "concurrency_does_not_fit" && judged)
        add(fixes, planner.concurrency_fix(judged->capacity.max_concurrency));
      add(fixes, planner.length_fix());
      add(fixes, planner.kv_type_fix(false));
      add(fixes, planner.parallelism_fix());
      add(fixes, planner.fraction_fix());
      add(fixes, planner.free_memory_fix());
      if (fixes.empty())
        fixes.push_back(action("action", "nothing on this node fits it: `kvsight fit --model " + in.model.id +
                                             " --concurrency " + std::to_string(planner.n()) + " --context " +
                                             std::to_string(facts.max_model_len) +
                                             "` lists the GPUs and TP that do"));
    } else if (r.code == "engine_refuses_start") {
      add(fixes, planner.parallelism_fix());
      add(fixes, planner.kv_type_fix(true));
      add(fixes, planner.block_fix());
      if (fixes.empty())
        fixes.push_back(action("action", "no TP/PP, KV cache type or block size of " +
                                             in.engine->display_name() +
                                             " clears it on this device: see the refusal and `kvsight gates`"));
    } else if (r.code == "free_memory_below_requested") {
      add(fixes, planner.fraction_fix(/*largest=*/true));
      const std::uint64_t free = r.figures.value("free_bytes", std::uint64_t{0});
      const std::uint64_t requested = r.figures.value("requested_bytes", std::uint64_t{0});
      if (requested > free) fixes.push_back(planner.memory_to_free(requested - free));
    } else if (r.code == "decode_cliff") {
      if (gates) add(fixes, splitting_backend_fix(in, gates->primary));
      if (fixes.empty())
        fixes.push_back(action("action", "no admitted kernel of " + in.engine->display_name() +
                                             " splits the context at this shape on this device: decode time "
                                             "grows with the context; keep contexts short or serve on a "
                                             "device whose kernel splits (`kvsight gates`, `kvsight cliff`)"));
    } else if (r.code == "no_gpu") {
      PreflightFix fix;
      fix.kind = "target_gpu";
      fix.flag = "--gpu ID";
      fix.text = "run on the GPU node to measure it; kvsight preflight --gpu names the GPU capacity is judged "
                 "for (now " + facts.target_gpu + "; `kvsight gpus` lists them)";
      fixes.push_back(fix);
    } else if (r.code == "measurement_not_converged") {
      fixes.push_back(action("action", "rerun when the host is idle; --full samples each figure longer"));
    } else if (r.code == "prediction_disagrees") {
      fixes.push_back(action("action", "read the measured column for this node; --full measures six contexts "
                                       "and calibrates on them"));
    } else if (r.code == "bandwidth_below_peak") {
      fixes.push_back(action("action", "check clocks and power cap (nvidia-smi -q -d CLOCK,POWER or rocm-smi "
                                       "--showclocks) and other work on the device, then rerun"));
    } else if (r.code == "memory_held_by_others") {
      const std::uint64_t held = r.figures.value("used_by_others_bytes", std::uint64_t{0});
      fixes.push_back(planner.memory_to_free(held));
    } else if (r.code == "probe_reference_failed") {
      fixes.push_back(action("action", "do not serve on this device: a probe kernel computed wrong attention; "
                                       "check ECC and row-remap state (nvidia-smi -q -d ECC,ROW_REMAPPER) "
                                       "and rerun"));
    }
  }
}

}  // namespace kvsight::app
