// The engine registry (make_engine, engine_names) and the helpers the engine
// budgets share (common.hpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "common.hpp"
#include "kvsight/ascii.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"

namespace kvsight {

// Defined in engine_<name>.cpp.
std::unique_ptr<Engine> make_vllm_engine();
std::unique_ptr<Engine> make_sglang_engine();
std::unique_ptr<Engine> make_trtllm_engine();
std::unique_ptr<Engine> make_llamacpp_engine();
std::unique_ptr<Engine> make_exllama_engine(int generation);

namespace {

// The one list of engines. A new engine is a file in planner/src/engines/ that
// implements Engine, plus one line here.
const std::vector<std::function<std::unique_ptr<Engine>()>>& registry() {
  static const std::vector<std::function<std::unique_ptr<Engine>()>> makers = {
      make_vllm_engine,
      make_sglang_engine,
      make_trtllm_engine,
      make_llamacpp_engine,
      [] { return make_exllama_engine(2); },
      [] { return make_exllama_engine(3); },
  };
  return makers;
}

}  // namespace

std::vector<std::unique_ptr<Engine>> all_engines() {
  std::vector<std::unique_ptr<Engine>> engines;
  for (const auto& make : registry()) engines.push_back(make());
  return engines;
}

std::vector<std::string> engine_names() {
  std::vector<std::string> names;
  for (const auto& engine : all_engines()) names.push_back(engine->name());
  return names;
}

std::unique_ptr<Engine> make_engine(const std::string& name) {
  const std::string key = ascii_lower(name);
  for (auto& engine : all_engines()) {
    if (key == engine->name()) return std::move(engine);
    for (const std::string& alias : engine->aliases())
      if (key == ascii_lower(alias)) return std::move(engine);
  }
  std::string allowed;
  for (const auto& engine : all_engines()) {
    allowed += (allowed.empty() ? "" : ", ") + engine->name();
    const auto aliases = engine->aliases();
    if (!aliases.empty()) {
      allowed += " (";
      for (std::size_t i = 0; i < aliases.size(); ++i) allowed += (i ? ", " : "") + aliases[i];
      allowed += ")";
    }
  }
  throw InputError("--engine", "unknown engine '" + name + "'; allowed: " + allowed);
}

void Engine::check_options(const EngineOptions& options) const {
  const std::vector<std::string> allowed = kv_cache_dtypes();
  for (const KvTypeSetting& setting : kv_cache_type_settings(options)) {
    if (std::find(allowed.begin(), allowed.end(), setting.value) != allowed.end()) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    throw InputError(option_field(setting.field).name, "'" + setting.value + "' is not a KV cache type of " +
                                                           display_name() + "; allowed: " + list);
  }
}

bool Engine::reads(OptionField field) const {
  const std::vector<EngineFlag> all = flags();
  return std::any_of(all.begin(), all.end(), [field](const EngineFlag& flag) { return flag.field == field; });
}

EngineVersion Engine::version(const EngineOptions& options) const {
  return parse_engine_version(options.engine_version.empty() ? default_version() : options.engine_version,
                              version_form(), display_name(), known_versions());
}

namespace engine_detail {

double check_fraction(double value, std::string_view flag) {
  if (!(value > 0.0 && value <= 1.0))
    throw InputError(std::string(flag), "is " + std::to_string(value) + "; allowed: a fraction in (0, 1]");
  return value;
}

std::uint64_t gib_to_bytes(double gib, std::string_view flag) {
  if (!(gib >= 0.0) || !std::isfinite(gib) || gib > 1.0e9)
    throw InputError(std::string(flag), "is " + std::to_string(gib) + " GiB; allowed: a size >= 0");
  return static_cast<std::uint64_t>(std::llround(gib * kGiB));
}

void check_common_options(const EngineOptions& options) {
  if (options.tp == 0) throw InputError("--tp", "is 0; allowed: a positive integer");
  if (options.pp == 0) throw InputError("--pp", "is 0; allowed: a positive integer");
  if (options.batch == 0) throw InputError("--batch", "is 0; allowed: a positive integer");
  if (options.gpu_memory_bytes && *options.gpu_memory_bytes == 0)
    throw InputError("--gpu-mem-gib", "is 0; allowed: a positive size");
}

void refuse_unused_overheads(const EngineOptions& options, const std::string& engine,
                             std::initializer_list<OverheadFlag> used) {
  struct Flag {
    OverheadFlag id;
    const char* name;
    const std::optional<double>& value;
  };
  const Flag flags[] = {{OverheadFlag::activation, "--activation-gib", options.overheads.activation_gib},
                        {OverheadFlag::non_torch, "--non-torch-gib", options.overheads.non_torch_gib},
                        {OverheadFlag::cuda_graph, "--cuda-graph-gib", options.overheads.cuda_graph_gib},
                        {OverheadFlag::kv_transfer, "--kv-transfer-gib", options.overheads.kv_transfer_gib}};
  const auto reads = [&](OverheadFlag id) { return std::find(used.begin(), used.end(), id) != used.end(); };
  for (const Flag& f : flags) {
    if (!f.value || reads(f.id)) continue;
    std::string allowed;
    for (const Flag& g : flags)
      if (reads(g.id)) allowed += std::string(g.name) + ", ";
    throw InputError(f.name, "is not used by " + engine +
                                 ": its budget has no term it would replace; allowed with " + engine + ": " +
                                 allowed + "--weights-gib");
  }
}

std::optional<std::string> newer_than_known_warning(const Engine& engine, const EngineVersion& version) {
  const std::vector<std::string> known = engine.known_versions();
  if (known.empty()) return std::nullopt;
  // The newest known is the largest, not necessarily the last listed or the default.
  EngineVersion newest;
  bool first = true;
  for (const std::string& text : known) {
    const EngineVersion v = parse_engine_version(text, engine.version_form(), engine.display_name(), known);
    if (first || v.ordinal() > newest.ordinal()) newest = v;
    first = false;
  }
  if (version.ordinal() <= newest.ordinal()) return std::nullopt;
  return engine.display_name() + " " + version.text + " is newer than the newest release whose rules kvsight "
         "knows (" + newest.text + "): planned with " + newest.text + "'s rules; re-check against " +
         version.text + "'s source";
}

std::optional<std::uint64_t> total_memory(const GpuSpec* gpu, const EngineOptions& options) {
  if (options.gpu_memory_bytes) return *options.gpu_memory_bytes;
  if (gpu != nullptr && gpu->memory_bytes > 0) return gpu->memory_bytes;
  return std::nullopt;
}

WeightsEstimate weights_for(const ModelSpec& model, const EngineOptions& options, Assumption& assumption) {
  WeightsEstimate w = estimate_weights(model, options.tp, options.pp);
  if (options.overheads.weights_gib) {
    // --weights-gib is the whole model; each of the tp x pp ranks holds an even share.
    const std::uint64_t bytes = gib_to_bytes(*options.overheads.weights_gib, "--weights-gib");
    const std::uint64_t ranks = std::uint64_t{options.tp} * options.pp;
    w.bytes = bytes;
    w.bytes_per_rank = ceil_div(bytes, ranks);
    w.exact = false;
    w.method =
        "given with --weights-gib (whole model, split evenly over " + std::to_string(ranks) + " ranks)";
    assumption = {"weights per rank", gib_text(w.bytes_per_rank), w.method};
  } else {
    assumption = {"weights per rank", gib_text(w.bytes_per_rank),
                  w.method.empty() ? "estimate_weights() from the config's shapes" : w.method};
  }
  return w;
}

StartupCheck tp_divides_heads_check(const ModelSpec& model, const EngineOptions& options,
                                    const std::string& display) {
  const std::uint32_t heads = model.num_attention_heads;
  const bool divides = heads == 0 || heads % options.tp == 0;
  return {"tensor parallel size divides attention heads", divides,
          "tp " + std::to_string(options.tp) + (divides ? " divides " : " does not divide ") +
              std::to_string(heads) + " attention heads" +
              (divides ? "" : ": " + display + " refuses to start"),
          "vllm/config/model.py verify_with_parallel_config; SGLang model_config.py (same check)"};
}

std::optional<StartupCheck> kv_heads_split_check(const ModelSpec& model, const EngineOptions& options) {
  const std::uint32_t kv = model.num_kv_heads;
  if (kv == 0 || model.mla) return std::nullopt;
  const std::uint32_t tp = options.tp;
  const bool ok = kv % tp == 0 || tp % kv == 0;
  std::string detail =
      ok ? (tp > kv ? "tp " + std::to_string(tp) + " > " + std::to_string(kv) +
                          " KV heads: each KV head replicated on " + std::to_string(tp / kv) +
                          " ranks (1 per rank)"
                    : std::to_string(kv) + " KV heads / tp " + std::to_string(tp) + " = " +
                          std::to_string(kv / tp) + " per rank")
         : "tp " + std::to_string(tp) + " and " + std::to_string(kv) + " KV heads: neither divides the other";
  return StartupCheck{"KV heads split or replicated evenly", ok, detail,
                      "vllm/model_executor/layers/linear.py QKVParallelLinear (divide)"};
}

BlockSizeChoice given_or_default_block(const EngineOptions& options, std::uint32_t default_tokens,
                                       const std::string& default_source, bool (*allowed)(std::uint32_t),
                                       const std::string& allowed_text) {
  if (!options.block_size) return {default_tokens, default_source};
  if (!allowed(*options.block_size))
    throw InputError("block_size",
                     "is " + std::to_string(*options.block_size) + "; allowed: " + allowed_text);
  return {*options.block_size, "--block-size"};
}

std::uint32_t heaviest_stage(const ModelSpec& model, const KvTypes& types, const EngineOptions& options) {
  std::uint32_t best = 0;
  std::uint64_t best_bytes = 0;
  for (std::uint32_t s = 0; s < options.pp; ++s) {
    const TokenFootprint f = token_footprint(model, types, options.tp, options.pp, s);
    const std::uint64_t bytes = f.bytes_per_token_all_layers + f.state_bytes_per_sequence;
    if (s == 0 || bytes > best_bytes) {
      best = s;
      best_bytes = bytes;
    }
  }
  return best;
}

}  // namespace engine_detail
}  // namespace kvsight
