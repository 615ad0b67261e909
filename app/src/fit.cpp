// The fit use case (kvsight/app/fit.hpp): every (GPU kind, TP, PP, KV cache type, block
// size) a search grid offers, each planned by the plan use case under the engine's own
// rules; the ones that hold N sequences of L tokens, fewest GPUs first, then most
// headroom; every other one with the reason it fails. docs/reference/fleet.md "fit".
#include "kvsight/app/fit.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "kvsight/app/engine_setup.hpp"
#include "kvsight/app/plan.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

// Upper bound of --max-gpus: a search grid of TP x PP pairs, each planned per GPU kind,
// KV type and block size, must stay a sub-second search (docs/reference/fleet.md).
constexpr std::uint32_t kMaxGpusLimit = 64;

// Which option fields the engine reads (its registration, Engine::flags): fit searches
// only what the engine has, and states the request in the engine's own terms.
struct EngineReads {
  bool tp = false, pp = false, block = false, kv_dtype = false, cache_k = false, cache_v = false;
  bool max_model_len = false, ctx_size = false, parallel = false;
};

EngineReads engine_reads(const Engine& engine) {
  EngineReads reads;
  for (const EngineFlag& flag : engine.flags()) {
    switch (flag.field) {
      case OptionField::tensor_parallel_size:
        reads.tp = true;
        break;
      case OptionField::pipeline_parallel_size:
        reads.pp = true;
        break;
      case OptionField::block_size:
        reads.block = true;
        break;
      case OptionField::kv_cache_dtype:
        reads.kv_dtype = true;
        break;
      case OptionField::cache_type_k:
        reads.cache_k = true;
        break;
      case OptionField::cache_type_v:
        reads.cache_v = true;
        break;
      case OptionField::max_model_len:
        reads.max_model_len = true;
        break;
      case OptionField::ctx_size:
        reads.ctx_size = true;
        break;
      case OptionField::parallel:
        reads.parallel = true;
        break;
      default:
        break;
    }
  }
  return reads;
}

// N sequences of L tokens in the engine's own options. --batch / --context are the plan
// use case's request (the fits test is max concurrency >= batch, plan.cpp). An engine with
// a max_model_len option serves sequences of up to L tokens; one with slots (llama.cpp
// --parallel) serves N slots; one sized by a token pool (llama.cpp --ctx-size n_ctx shared
// by the slots, ExLlama cache_size) needs N x L cells (docs/reference/fleet.md "fit").
EngineOptions request_options(const FitRequest& request, const EngineReads& reads) {
  EngineOptions options = request.options;
  options.batch = request.concurrency;
  options.context = request.context;
  if (reads.max_model_len) options.max_model_len = static_cast<std::int64_t>(request.context);
  if (reads.parallel) {
    if (request.concurrency > UINT32_MAX)
      throw InputError("--concurrency", "is " + std::to_string(request.concurrency) +
                                            "; allowed: at most 4294967295 slots for this engine");
    store_option(options, OptionField::parallel, request.concurrency);
  }
  if (reads.ctx_size)
    store_option(options, OptionField::ctx_size,
                 checked_mul(request.concurrency, request.context, "--concurrency x --context"));
  return options;
}

void set_kv_dtype(EngineOptions& options, const EngineReads& reads, const std::string& dtype) {
  if (reads.kv_dtype) store_option(options, OptionField::kv_cache_dtype, dtype);
  if (reads.cache_k) store_option(options, OptionField::cache_type_k, dtype);
  if (reads.cache_v) store_option(options, OptionField::cache_type_v, dtype);
}

std::string engine_kv_default(const Engine& engine, const EngineOptions& options) {
  return engine.kv_cache_type_settings(options).front().value;
}

std::string rejection_for_capacity(const FitRequest& request, const PlanItem& item) {
  const Capacity& c = *item.result.capacity;
  const std::uint64_t per_sequence = item.result.kv.bytes_per_sequence;
  if (c.available_kv_bytes == 0)
    return "no memory left for KV: weights " + gib_text(item.result.weights.bytes_per_rank) +
           " + overheads " + gib_text(c.overhead_bytes) + " per rank use the engine's budget of " +
           gib_text(c.requested_bytes);
  std::string need = "unknown (overflow)";
  try {
    need = gib_text(checked_mul(request.concurrency, per_sequence, "needed KV"));
  } catch (const OverflowError&) {
  }
  return std::to_string(request.concurrency) + " sequences of " + std::to_string(request.context) +
         " tokens need " + need + " of KV per rank (" + gib_text(per_sequence) + " each); the engine gives " +
         gib_text(c.available_kv_bytes) + ": max concurrency " + fixed_text(c.max_concurrency, 2);
}

FitCandidate evaluate(const FitRequest& request, const EngineSetup& setup, const ModelSpec& model,
                      const GpuSpec& gpu) {
  const EngineOptions& o = setup.options;
  FitCandidate candidate;
  candidate.gpu = gpu.id;
  candidate.tp = o.tp;
  candidate.pp = o.pp;
  candidate.gpu_count = o.tp * o.pp;
  candidate.block_size_requested = o.block_size.value_or(0);
  PlanItem item;
  try {
    item = plan_item(setup, model, &gpu, /*decode_warnings=*/false);
  } catch (const InputError& e) {
    // A configuration the engine's rules refuse for this model (a PP larger than the
    // layers, ...): a rejected candidate, with the engine's message.
    candidate.reasons.push_back(e.what());
    return candidate;
  }
  const PlanResult& r = item.result;
  candidate.block_size = r.kv.block_size;
  candidate.bytes_per_sequence = r.kv.bytes_per_sequence;
  candidate.weights_bytes_per_rank = r.weights.bytes_per_rank;
  try {
    candidate.needed_kv_bytes = checked_mul(request.concurrency, r.kv.bytes_per_sequence, "needed KV");
  } catch (const OverflowError&) {
    candidate.needed_kv_bytes = UINT64_MAX;
  }
  candidate.kv_dtype_resolved = item.decision.kv_types.k.name;
  candidate.kv_tier = item.decision.kv_tier;
  for (const std::string& refusal : item.decision.refusals)
    candidate.reasons.push_back(setup.engine->display_name() + " would refuse to start: " + refusal);
  if (r.capacity) {
    candidate.available_kv_bytes = r.capacity->available_kv_bytes;
    candidate.max_concurrency = r.capacity->max_concurrency;
    // Headroom in bytes, not in sequences: an engine whose concurrency is its slot count
    // (llama.cpp --parallel) reports N exactly whenever it fits; the KV bytes it leaves free
    // still say how much room there is. For vLLM the two agree up to block rounding.
    if (candidate.needed_kv_bytes > 0)
      candidate.headroom =
          static_cast<double>(candidate.available_kv_bytes) / static_cast<double>(candidate.needed_kv_bytes) -
          1.0;
    if (!item.fits) candidate.reasons.push_back(rejection_for_capacity(request, item));
  } else {
    candidate.reasons.push_back("the plan computed no capacity for " + gpu.id);
  }
  candidate.fits = item.verdict == Verdict::ok && candidate.reasons.empty();
  return candidate;
}

// The KV footprint a type gives this model, as the plan computes it (no GPU): two types
// with the same footprint ("bfloat16" and "auto" on a bf16 model) are one candidate.
using Footprint = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>;

Footprint footprint_of(const PlanResult& r) {
  return {r.kv.bytes_per_token, r.kv.bytes_per_token_all_layers, r.kv.state_bytes_per_sequence,
          r.kv.bytes_per_sequence};
}

// The message of an error without its "field: " prefix, to say it under another flag.
std::string without_field(const InputError& e) {
  const std::string what = e.what();
  const std::string prefix = e.field() + ": ";
  return !e.field().empty() && what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

}  // namespace

// Each candidate is planned in time linear in the model's layers (the decision's weights, KV
// layout and kernel selection walk them: 120 ns per layer per candidate, measured on a
// 100,000-layer config, docs/reliability.md). A search of candidates x layers past
// kMaxLayerPlans (about 12 s there) is refused before it starts, naming the flags that narrow
// it, rather than running for minutes: the 49,280 candidates of every GPU x 64 GPUs x every
// block size on a 126-layer model (Llama 3.1 405B) are 6.2 x 10^6 layer plans, 16 times below.
constexpr std::uint64_t kMaxLayerPlans = 100'000'000;

void check_search_size(const FitRequest& request, const EngineReads& reads, const ModelSpec& model,
                       std::size_t gpus, std::size_t dtypes, std::size_t blocks) {
  std::uint64_t pairs = 0;  // (TP, PP) with TP x PP <= max_gpus, as the loops below walk them
  const std::uint32_t max_tp = reads.tp ? request.max_gpus : 1;
  for (std::uint32_t tp = 1; tp <= max_tp; ++tp) pairs += reads.pp ? request.max_gpus / tp : 1;
  const std::uint64_t candidates = pairs * gpus * std::max<std::size_t>(dtypes, 1) * std::max<std::size_t>(blocks, 1);
  const std::uint64_t layers = std::max<std::uint64_t>(model.num_layers(), 1);
  if (candidates > kMaxLayerPlans / layers)
    throw InputError("--max-gpus",
                     "the search is " + commas_text(candidates) + " candidates (" + std::to_string(gpus) + " GPU kind" +
                         (gpus == 1 ? "" : "s") + " x " + std::to_string(pairs) + " TP x PP pairs x " +
                         std::to_string(dtypes) + " KV type" + (dtypes == 1 ? "" : "s") + " x " +
                         std::to_string(blocks) + " block size" + (blocks == 1 ? "" : "s") + ") of a " +
                         commas_text(layers) + "-layer model, over fit's bound of " + commas_text(kMaxLayerPlans) +
                         " layer plans (about 12 s); allowed: at most " + commas_text(kMaxLayerPlans / layers) +
                         " candidates for this model: narrow it with --gpus, a smaller --max-gpus, --block-sizes "
                         "or --kv-cache-dtypes");
}

FitOutcome run_fit(const FitRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  if (request.concurrency == 0)
    throw InputError("--concurrency", "is 0; allowed: a positive number of sequences");
  if (request.context == 0) throw InputError("--context", "is 0; allowed: a positive number of tokens");
  if (request.context > static_cast<std::uint64_t>(INT64_MAX))
    throw InputError("--context",
                     "is " + std::to_string(request.context) + "; allowed: at most 2^63 - 1 tokens");
  if (request.max_gpus == 0 || request.max_gpus > kMaxGpusLimit)
    throw InputError("--max-gpus", "is " + std::to_string(request.max_gpus) + "; allowed: 1 to " +
                                       std::to_string(kMaxGpusLimit));

  // The engine as the request names it, checked once: an unknown engine or a bad
  // override is bad input (exit 2), never a rejected candidate.
  const EngineSetup base = setup_engine(request.options);
  const EngineReads reads = engine_reads(*base.engine);
  const ModelSpec model = resolve_model(request.model);
  std::vector<std::string> gpus;
  try {
    gpus = expand_gpu_list(request.gpus);  // "" (a typed --gpus "") is bad input, not "all"
  } catch (const InputError& e) {
    if (e.field() != "--gpu") throw;
    throw InputError("--gpus", without_field(e));
  }

  const EngineOptions asked = request_options(request, reads);
  FitOutcome outcome;
  outcome.engine = base.engine->name();
  outcome.engine_display = base.engine->display_name();
  outcome.model = model;
  outcome.concurrency = request.concurrency;
  outcome.context = request.context;
  outcome.max_gpus = request.max_gpus;
  outcome.gpus = gpus;
  {
    // The baseline (TP 1, PP 1, the engine's defaults, no GPU) outside any candidate: bad
    // input in the overrides or an overflowing request stops here with exit 2.
    const EngineSetup baseline = setup_engine(asked);
    try {
      const EngineDecision decision = decide(*baseline.engine, model, nullptr, baseline.options);
      outcome.engine_version = decision.version.text;
      (void)baseline.engine->budget(decision, model, nullptr, baseline.options);
    } catch (const OverflowError& e) {
      // N sequences of L tokens whose bytes do not fit in 64 bits: say it with fit's flags.
      throw OverflowError("--concurrency", std::to_string(request.concurrency) + " sequences of --context " +
                                               std::to_string(request.context) +
                                               " tokens overflow: " + e.what());
    }
  }

  // KV cache types: by default the engine's types that keep the model's precision (a user
  // asks what hardware serves the model, not how far its cache can be quantized); "all" =
  // every type the engine offers; else the requested list, checked against the engine's.
  // One type per distinct footprint.
  const bool default_search = request.kv_cache_dtypes.empty();
  const bool every_type = request.kv_cache_dtypes == std::vector<std::string>{"all"};
  std::vector<std::string> dtypes = every_type ? std::vector<std::string>{} : request.kv_cache_dtypes;
  if (dtypes.empty() && (reads.kv_dtype || reads.cache_k)) dtypes = base.engine->kv_cache_dtypes();
  if (dtypes.empty()) dtypes.push_back(engine_kv_default(*base.engine, asked));
  if (!default_search && !every_type) {
    for (const std::string& dtype : dtypes) {
      EngineOptions o = asked;
      set_kv_dtype(o, reads, dtype);
      try {
        base.engine->check_options(o);
      } catch (const InputError& e) {
        throw InputError("--kv-cache-dtypes", without_field(e));
      }
    }
  }
  std::vector<std::string> searched_dtypes;
  std::map<Footprint, std::string> seen_footprints;
  for (const std::string& dtype : dtypes) {
    EngineOptions o = asked;
    set_kv_dtype(o, reads, dtype);
    try {
      const EngineSetup setup = setup_engine(o);
      const EngineDecision decision = decide(*setup.engine, model, nullptr, setup.options);
      if (default_search && decision.kv_tier != KvQualityTier::full) {
        outcome.lossy_kv_cache_dtypes.push_back(dtype);
        continue;
      }
      const Footprint f = footprint_of(setup.engine->budget(decision, model, nullptr, setup.options));
      auto [it, inserted] = seen_footprints.emplace(f, dtype);
      if (!inserted) {
        outcome.duplicate_kv_cache_dtypes.push_back(dtype + " (same KV footprint as " + it->second + ")");
        continue;
      }
      searched_dtypes.push_back(dtype);
    } catch (const InputError& e) {
      outcome.refused_options.push_back({"kv cache type " + dtype, e.what()});
    }
  }

  // Block sizes: the grid (or the request), offered to the engine.
  std::vector<std::uint32_t> blocks = request.block_sizes.empty() ? kDefaultBlockGrid : request.block_sizes;
  if (!reads.block) blocks = {0};
  std::vector<std::uint32_t> searched_blocks;
  for (const std::uint32_t block : blocks) {
    if (std::find(searched_blocks.begin(), searched_blocks.end(), block) != searched_blocks.end()) continue;
    EngineOptions o = asked;
    if (block) o.block_size = block;
    try {
      (void)decide(*base.engine, model, nullptr, o);  // the engine refuses a block size it does not take
      searched_blocks.push_back(block);
    } catch (const InputError& e) {
      if (!request.block_sizes.empty()) throw InputError("--block-sizes", without_field(e));
      outcome.refused_options.push_back({"block size " + std::to_string(block), e.what()});
    }
  }

  const std::uint32_t max_tp = reads.tp ? request.max_gpus : 1;
  check_search_size(request, reads, model, gpus.size(), searched_dtypes.size(), searched_blocks.size());
  for (const std::string& gpu_id : gpus) {
    const GpuSpec& gpu = find_gpu(gpu_id);
    for (std::uint32_t tp = 1; tp <= max_tp; ++tp) {
      const std::uint32_t max_pp = reads.pp ? request.max_gpus / tp : 1;
      for (std::uint32_t pp = 1; pp <= max_pp; ++pp) {
        for (const std::string& dtype : searched_dtypes) {
          std::vector<std::uint32_t> effective_blocks;
          for (const std::uint32_t block : searched_blocks) {
            EngineOptions o = asked;
            o.tp = tp;
            o.pp = pp;
            set_kv_dtype(o, reads, dtype);
            if (block) o.block_size = block;
            const EngineSetup setup = setup_engine(o);
            FitCandidate candidate = evaluate(request, setup, model, gpu);
            candidate.kv_cache_dtype = dtype;
            ++outcome.candidates_planned;
            // Sizes the engine turns into the same block (vLLM's hybrid raise, MLA's
            // forced size, 16 = its default) are one configuration: the first is kept.
            const std::uint32_t key =
                candidate.block_size ? candidate.block_size : candidate.block_size_requested;
            if (std::find(effective_blocks.begin(), effective_blocks.end(), key) != effective_blocks.end())
              continue;
            effective_blocks.push_back(key);
            (candidate.fits ? outcome.accepted : outcome.rejected).push_back(std::move(candidate));
          }
        }
      }
    }
  }

  const auto dtype_rank = [&](const std::string& dtype) {
    return std::find(searched_dtypes.begin(), searched_dtypes.end(), dtype) - searched_dtypes.begin();
  };
  const auto gpu_rank = [&](const std::string& id) {
    return std::find(gpus.begin(), gpus.end(), id) - gpus.begin();
  };
  const auto tie = [&](const FitCandidate& a, const FitCandidate& b) {
    return std::make_tuple(gpu_rank(a.gpu), a.tp, a.pp, dtype_rank(a.kv_cache_dtype),
                           a.block_size_requested) <
           std::make_tuple(gpu_rank(b.gpu), b.tp, b.pp, dtype_rank(b.kv_cache_dtype), b.block_size_requested);
  };
  std::stable_sort(outcome.accepted.begin(), outcome.accepted.end(),
                   [&](const FitCandidate& a, const FitCandidate& b) {
                     if (a.gpu_count != b.gpu_count) return a.gpu_count < b.gpu_count;
                     if (a.kv_tier != b.kv_tier) return a.kv_tier < b.kv_tier;
                     if (a.headroom != b.headroom) return a.headroom > b.headroom;
                     return tie(a, b);
                   });
  std::stable_sort(outcome.rejected.begin(), outcome.rejected.end(),
                   [&](const FitCandidate& a, const FitCandidate& b) {
                     if (a.gpu_count != b.gpu_count) return a.gpu_count < b.gpu_count;
                     return tie(a, b);
                   });
  outcome.verdict = outcome.accepted.empty() ? Verdict::check_failed : Verdict::ok;
  outcome.search_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

FitCandidate fit_configuration(const FitRequest& request, const ModelSpec& model, const GpuSpec& gpu,
                               const std::string& kv_cache_dtype) {
  const EngineSetup base = setup_engine(request.options);
  const EngineReads reads = engine_reads(*base.engine);
  EngineOptions o = request_options(request, reads);
  if (!kv_cache_dtype.empty()) set_kv_dtype(o, reads, kv_cache_dtype);
  const EngineSetup setup = setup_engine(o);
  FitCandidate candidate = evaluate(request, setup, model, gpu);
  candidate.kv_cache_dtype = engine_kv_default(*setup.engine, setup.options);
  return candidate;
}

}  // namespace kvsight::app
