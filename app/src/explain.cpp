// The explain use case (kvsight/app/explain.hpp).
#include "kvsight/app/explain.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double gib_of(std::uint64_t bytes) { return static_cast<double>(bytes) / kGiB; }

std::uint64_t bytes_of_gib(double gib) { return static_cast<std::uint64_t>(std::llround(gib * kGiB)); }

// The assumption an engine recorded under `name` ("activation peak"), if any.
const Assumption* find_assumption(const PlanResult& result, const std::string& name) {
  for (const Assumption& a : result.assumptions)
    if (a.name == name) return &a;
  return nullptr;
}

// The leading number of an assumption's value ("1.23 GiB (...)" -> 1.23).
std::optional<double> leading_number(const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  return v;
}

ExplainTerm make_term(std::string name, std::string replay, std::string unit, std::optional<double> logged,
                      std::optional<double> kvsight, std::string rule, bool implied = false) {
  ExplainTerm t;
  t.name = std::move(name);
  t.replay = std::move(replay);
  t.unit = std::move(unit);
  t.logged = logged;
  t.kvsight = kvsight;
  t.rule = std::move(rule);
  t.implied = implied;
  return t;
}

std::string two(double v) { return fixed_text(v, 2); }

PlanItem replay_plan(const ExplainRequest& request, const EngineOptions& options, const std::string& gpu) {
  PlanRequest plan;
  plan.models = request.model;
  plan.gpus = gpu;
  plan.options = options;
  plan.decode_warnings = false;
  PlanOutcome outcome = run_plan(plan);
  if (outcome.items.size() != 1)
    throw InputError("--model", "explain takes one model and at most one GPU, not a list");
  return outcome.items.front();
}

void add_memory_terms(const EngineLogFigures& f, const PlanItem& item, ExplainOutcome& out) {
  const PlanResult& r = item.result;
  const std::string replay = "GPU and flags";
  out.terms.push_back(make_term("weights per rank", replay, "GiB", f.weights_gib,
                                gib_of(r.weights.bytes_per_rank),
                                r.weights.method + " (override: --weights-gib)"));
  const Assumption* act = find_assumption(r, "activation peak");
  if (!act) act = find_assumption(r, "activations");
  const Assumption* nt = find_assumption(r, "non-torch memory");
  if (!nt) nt = find_assumption(r, "runtime overhead");
  if (!nt) nt = find_assumption(r, "start-up overhead");
  const Assumption* graphs = find_assumption(r, "CUDA graph memory");
  // vLLM 0.10-0.26 print the profile's terms; the logged torch peak increase is the activation
  // peak and the non-torch increase the non-torch memory (gpu_worker.py).
  if (act)
    out.terms.push_back(make_term("activation peak", replay, "GiB", f.activation_gib, leading_number(act->value),
                                  act->why + " (override: --activation-gib)"));
  // SGLang prints no overhead, but its pre-load snapshot implies one: what the runtime's total
  // had already lost before the weights (model_runner.py), with the total from --gpu.
  std::optional<double> logged_nt = f.non_torch_gib;
  bool nt_implied = false;
  if (!logged_nt && f.pre_load_free_gib && r.capacity && r.capacity->gpu_memory_bytes > 0) {
    logged_nt = gib_of(r.capacity->gpu_memory_bytes) - *f.pre_load_free_gib;
    nt_implied = true;
  }
  if (nt)
    out.terms.push_back(make_term(nt->name, replay, "GiB", logged_nt, leading_number(nt->value),
                                  nt->why + (nt_implied ? "; logged side = GPU total - \"Load weight begin\" free" : "") +
                                      " (override: --non-torch-gib)",
                                  nt_implied));
  // SGLang's Mamba state pool: the requests it holds (kvsight's figure leads its assumption).
  const Assumption* pool = find_assumption(r, "recurrent state pool");
  if (pool && f.state_slots)
    out.terms.push_back(make_term("recurrent state slots", replay, "requests",
                                  static_cast<double>(*f.state_slots), leading_number(pool->value), pool->why));
  // The graph memory the budget subtracts: vLLM's estimate, where the version subtracts one
  // (vllm-profile-terms.md); the capture itself comes after the KV cache is sized, so a version
  // that subtracts nothing is compared with nothing.
  const bool graphs_subtracted = graphs && leading_number(graphs->value).value_or(0.0) > 0.0;
  std::optional<double> logged_graphs;
  if (graphs_subtracted) logged_graphs = f.cuda_graph_estimate_gib ? f.cuda_graph_estimate_gib : f.cuda_graph_gib;
  if (graphs)
    out.terms.push_back(make_term("CUDA graph memory", replay, "GiB", logged_graphs, leading_number(graphs->value),
                                  graphs->why + " (override: --cuda-graph-gib)"));
  if (graphs && !graphs_subtracted && f.cuda_graph_gib)
    out.notes.push_back("the log's CUDA graphs (" + two(*f.cuda_graph_gib) +
                        " GiB) were captured after the KV cache was sized: not part of its budget");
  if (!r.capacity) return;
  const Capacity& c = *r.capacity;
  // What the log leaves for the overheads it does not print: the budget (total x
  // utilization when the log states both) less weights, graphs and the KV memory.
  if (f.available_kv_gib && f.weights_gib && act && nt) {
    const double requested = (f.total_gpu_gib && f.gpu_memory_utilization)
                                 ? *f.total_gpu_gib * *f.gpu_memory_utilization
                                 : gib_of(c.requested_bytes);
    const double implied = requested - *f.weights_gib - logged_graphs.value_or(0.0) - *f.available_kv_gib;
    // vLLM 0.27+ counts every byte the process consumed, the V2 runner's penalties state too.
    const Assumption* penalties = find_assumption(r, "V2 penalties state");
    const double penalties_gib = penalties ? leading_number(penalties->value).value_or(0.0) : 0.0;
    ExplainTerm rest = make_term(
        "activation + non-torch (implied)", replay, "GiB", implied,
        leading_number(act->value).value_or(0.0) + leading_number(nt->value).value_or(0.0) + penalties_gib,
        std::string("kvsight: activation peak + non-torch") + (penalties ? " + V2 penalties state" : "") +
            " (the terms above); logged side = budget " +
            two(requested) + " GiB - logged weights - " +
            (graphs_subtracted ? "logged graph estimate - " : "") + "logged KV memory" +
            ((f.total_gpu_gib && f.gpu_memory_utilization) ? " (budget from the log)"
                                                           : " (budget from the GPU catalog)"),
        true);
    out.terms.push_back(rest);
  }
  // vLLM logs a negative "Available KV cache memory" when the model does not fit (gpu_worker.py);
  // the plan's byte count stops at 0, so the replay compares the signed figure.
  const double available =
      c.available_kv_bytes == 0 ? c.available_kv_signed_gib : gib_of(c.available_kv_bytes);
  out.terms.push_back(make_term("available KV cache memory", replay, "GiB", f.available_kv_gib, available,
                                "budget " + two(gib_of(c.requested_bytes)) + " GiB - weights - overheads " +
                                    two(gib_of(c.overhead_bytes)) + " GiB (the terms above)"));
  std::optional<double> logged_tokens;
  if (f.kv_tokens) logged_tokens = static_cast<double>(*f.kv_tokens);
  out.terms.push_back(make_term("KV tokens", replay, "tokens", logged_tokens,
                                static_cast<double>(c.kv_tokens),
                                "available / page " + std::to_string(c.page_bytes) + " B x block size"));
}

void add_capacity_terms(const EngineLogFigures& f, const PlanItem& item, const std::string& replay,
                        ExplainOutcome& out) {
  const PlanResult& r = item.result;
  if (!r.capacity) return;
  const Capacity& c = *r.capacity;
  const std::string blocks_rule = "floor(KV memory / page " + std::to_string(c.page_bytes) +
                                  " B), page = block " + std::to_string(r.kv.block_size) +
                                  " tokens x every layer of a KV cache group";
  if (f.num_gpu_blocks)
    out.terms.push_back(make_term("blocks", replay, "blocks", static_cast<double>(*f.num_gpu_blocks),
                                  static_cast<double>(c.num_blocks), blocks_rule));
  if (f.kv_tokens && replay == "given KV memory")
    out.terms.push_back(make_term("KV tokens", replay, "tokens", static_cast<double>(*f.kv_tokens),
                                  static_cast<double>(c.kv_tokens), blocks_rule + ", x block size"));
  if (f.kv_needed_gib && replay == "given KV memory")
    out.terms.push_back(make_term("KV needed at max_model_len", replay, "GiB", f.kv_needed_gib,
                                  gib_of(r.kv.bytes_per_sequence),
                                  "one sequence of max_model_len " + std::to_string(r.kv.context) +
                                      " tokens in whole blocks, every KV cache group"));
  if (f.estimated_max_model_len && replay == "given KV memory")
    out.terms.push_back(
        make_term("largest max_model_len", replay, "tokens", static_cast<double>(*f.estimated_max_model_len),
                  static_cast<double>(c.largest_max_model_len),
                  "the largest length whose blocks fit the KV memory (vLLM estimate_max_model_len)"));
  if (f.max_concurrency)
    out.terms.push_back(
        make_term("max concurrency", replay, "x", f.max_concurrency, c.max_concurrency,
                  "KV tokens / ceil(max_model_len / block) blocks per request at max_model_len " +
                      std::to_string(c.max_model_len)));
}

// Engines whose KV memory is not an input (SGLang, TensorRT-LLM, llama.cpp): the tokens the
// logged size holds at kvsight's bytes per token.
void add_size_terms(const EngineLogFigures& f, const PlanItem& item, ExplainOutcome& out) {
  const PlanResult& r = item.result;
  // The engine's own pool: SGLang's token pool and TensorRT-LLM's paged pool give every
  // attention layer a cell, sliding-window ones included (KvFigures::pool_bytes_per_token).
  const std::uint64_t cell = r.kv.pool_bytes_per_token;
  const double per_token = static_cast<double>(cell);
  if (per_token <= 0.0 || !f.kv_tokens) return;
  const std::optional<double> size = f.kv_size_gib ? f.kv_size_gib : f.available_kv_gib;
  if (!size) return;
  out.terms.push_back(
      make_term("KV tokens", "given KV memory", "tokens", static_cast<double>(*f.kv_tokens),
                std::floor(*size * kGiB / per_token),
                "logged KV size / " + std::to_string(cell) + " B per token (per rank, every layer)"));
  // A logged "#tokens: 0" (issue #25) implies no bytes per token: that term is left out, never
  // divided by zero.
  if (*f.kv_tokens == 0) {
    out.notes.push_back("the log holds 0 KV tokens: no bytes per token is implied");
    return;
  }
  out.terms.push_back(make_term("bytes per token (implied)", "given KV memory", "B",
                                *size * kGiB / static_cast<double>(*f.kv_tokens), per_token,
                                "the model's KV layers at the KV dtype, per rank"));
  out.terms.back().implied = true;
  // SGLang's Mamba pool holds max_mamba_cache_size + 1 slots (memory_pool.py MambaPool, 0.5.23):
  // the logged conv + ssm sizes over them against kvsight's state per request.
  if (f.state_slots && f.state_size_gib && r.kv.state_bytes_per_sequence > 0) {
    out.terms.push_back(make_term("state bytes per request (implied)", "given KV memory", "B",
                                  *f.state_size_gib * kGiB / static_cast<double>(*f.state_slots + 1),
                                  static_cast<double>(r.kv.state_bytes_per_sequence),
                                  "the recurrent layers' conv + ssm state per rank; logged side = conv + ssm "
                                  "size / (max_mamba_cache_size + 1)"));
    out.terms.back().implied = true;
  }
}

std::string figure_text(double v, const std::string& unit) {
  if (unit == "GiB" || unit == "x") return two(v);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.0f", v);
  return buffer;
}

void pick_largest(ExplainOutcome& out) {
  // Memory terms first (they explain the budget); else the largest relative difference.
  // The first comparable term is taken even when it agrees exactly, so a log that kvsight
  // reproduces still names the term compared.
  double best = -1.0;
  for (std::size_t i = 0; i < out.terms.size(); ++i) {
    const ExplainTerm& t = out.terms[i];
    if (t.unit != "GiB" || t.name == "available KV cache memory" || !t.difference()) continue;
    if (std::fabs(*t.difference()) > best) {
      best = std::fabs(*t.difference());
      out.largest = i;
    }
  }
  if (!out.largest || best == 0.0) {
    for (std::size_t i = 0; i < out.terms.size(); ++i) {
      const ExplainTerm& t = out.terms[i];
      if (!t.relative()) continue;
      if (std::fabs(*t.relative()) > best || !out.largest) {
        best = std::fabs(*t.relative());
        out.largest = i;
      }
    }
  }
  if (!out.largest) {
    out.largest_summary = "no term is both logged and computed: give --gpu to replay the budget";
    return;
  }
  const ExplainTerm& t = out.terms[*out.largest];
  const double d = *t.difference();
  std::string line = "largest difference: " + t.name + " (" + t.replay + "): kvsight " +
                     figure_text(*t.kvsight, t.unit) + " " + t.unit + " against " +
                     (t.implied ? "an implied " : "a logged ") + figure_text(*t.logged, t.unit) + " " +
                     t.unit + " (" + (d >= 0 ? "+" : "") + figure_text(d, t.unit) + " " + t.unit;
  if (t.relative())
    line += ", " + std::string(*t.relative() >= 0 ? "+" : "") + two(*t.relative() * 100.0) + " %";
  line += "); rule: " + t.rule;
  out.largest_summary = line;
}

}  // namespace

ExplainOutcome run_explain(const ExplainRequest& request) {
  ExplainOutcome out;
  out.figures = read_engine_log(request.log_text);
  const EngineLogFigures& f = out.figures;
  if (f.engine.empty())
    throw InputError("--log", request.log_name +
                                  " holds no start-up line kvsight reads (vLLM, SGLang, llama.cpp, "
                                  "TensorRT-LLM lines: docs/reference/engine-versions.md \"Log lines\")");
  if (request.model.empty())
    throw InputError("--model",
                     "is required: give the model the log came from (catalog id, HF id or config.json)");

  EngineOptions options = request.options;
  if (!request.engine_given) {
    options.engine = f.engine;
    out.inputs_from_log.push_back("engine " + f.engine + " (the lines the log holds)");
  } else if (options.engine != f.engine) {
    out.notes.push_back("the log's lines are " + f.engine + "'s; --engine " + options.engine + " replays it");
  }
  if (f.engine_version && options.engine_version.empty() && options.engine == f.engine) {
    options.engine_version = *f.engine_version;
    out.inputs_from_log.push_back("engine version " + *f.engine_version + " (the log's version line)");
  }
  if (f.tensor_parallel_size && options.tp == 1 && options.engine == f.engine) {
    // The logged value passes the same check as --tp (kvsight/engine_options.hpp set_option).
    try {
      set_option(options, OptionField::tensor_parallel_size, std::to_string(*f.tensor_parallel_size));
    } catch (const InputError& e) {
      throw InputError("--log", request.log_name + " line " + std::to_string(f.tensor_parallel_size_line) +
                                    " (\"non-default args\"): " + e.what());
    }
    out.inputs_from_log.push_back("tensor_parallel_size " + std::to_string(*f.tensor_parallel_size) +
                                  " (\"non-default args\")");
  }
  if (f.max_model_len && !options.max_model_len) {
    options.max_model_len = *f.max_model_len;
    out.inputs_from_log.push_back(
        "max_model_len " + std::to_string(*f.max_model_len) +
        " (\"Maximum concurrency for N tokens per request\" or \"non-default args\")");
  }
  if (f.gpu_memory_utilization && !options.vllm.gpu_memory_utilization) {
    options.vllm.gpu_memory_utilization = *f.gpu_memory_utilization;
    out.inputs_from_log.push_back("gpu_memory_utilization " + two(*f.gpu_memory_utilization) +
                                  " (V0 \"Memory profiling results\" or \"non-default args\")");
  }
  std::string gpu = request.gpu;
  if (gpu.empty() && !options.gpu_memory_bytes && f.total_gpu_gib) {
    options.gpu_memory_bytes = bytes_of_gib(*f.total_gpu_gib);
    out.inputs_from_log.push_back("GPU total " + two(*f.total_gpu_gib) + " GiB (V0 total_gpu_memory)");
  }
  const std::unique_ptr<Engine> engine = make_engine(options.engine);
  if (engine->name() == f.engine) engine->options_from_log(f, options, out.inputs_from_log);

  // Replay 1: the KV memory the log states, where the engine takes it as an option (vLLM
  // --kv-cache-memory-bytes replaces its whole budget, formulas.md step 2); else the logged
  // pool size over kvsight's bytes per token.
  EngineOptions given = options;
  given.gpu_memory_bytes.reset();
  const bool takes_memory = engine->reads(OptionField::kv_cache_memory_bytes);
  if (takes_memory && f.available_kv_gib && *f.available_kv_gib > 0.0) {
    store_option(given, OptionField::kv_cache_memory_bytes, bytes_of_gib(*f.available_kv_gib));
    out.given_memory = replay_plan(request, given, "");
    add_capacity_terms(f, *out.given_memory, "given KV memory", out);
  } else if (!takes_memory) {
    EngineOptions shape = options;
    shape.gpu_memory_bytes.reset();
    out.given_memory = replay_plan(request, shape, "");
    add_size_terms(f, *out.given_memory, out);
  }
  // Replay 2: GPU and flags only.
  if (!gpu.empty() || options.gpu_memory_bytes) {
    EngineOptions budget = options;
    budget.vllm.kv_cache_memory_bytes.reset();
    out.gpu_only = replay_plan(request, budget, gpu);
    add_memory_terms(f, *out.gpu_only, out);
    add_capacity_terms(f, *out.gpu_only, "GPU and flags", out);
  } else {
    out.notes.push_back(
        "no --gpu and no GPU total in the log: the budget (weights, overheads, available KV) "
        "is not replayed");
  }
  const PlanItem* any = out.gpu_only ? &*out.gpu_only : (out.given_memory ? &*out.given_memory : nullptr);
  out.engine = options.engine;
  if (any) {
    out.engine = any->result.engine;
    out.engine_version = any->result.engine_version;
  }
  pick_largest(out);
  return out;
}

}  // namespace kvsight::app
