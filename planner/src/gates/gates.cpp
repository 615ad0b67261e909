// Gate evaluation: turns a model, a device and engine options into GateInputs per
// attention-layer group, runs the rule tables of gates_rules.cpp over them and adds
// the engine constraints that refuse start-up. Sources: docs/reference/gates.md.
#include "kvsight/join.hpp"
#include "kvsight/gates.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <tuple>

#include "gates_rules.hpp"
#include "kvsight/dtype.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"

namespace kvsight {

using gates_detail::Condition;
using gates_detail::Field;
using gates_detail::KernelRule;
using gates_detail::SplitMode;
using gates_detail::Test;

namespace {

std::string join_numbers(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out;
}

const char* field_name(Field field) {
  switch (field) {
    case Field::head_size:
      return "head_size";
    case Field::head_size_v:
      return "head_size_v";
    case Field::block_size:
      return "block_size";
    case Field::gqa_ratio:
      return "GQA ratio";
    case Field::max_seq_len:
      return "max_seq_len";
    case Field::sliding_window:
      return "sliding window";
    case Field::q_dtype:
      return "query dtype";
    case Field::kv_cache_dtype:
      return "kv_cache_dtype";
    case Field::alibi:
      return "ALiBi";
    case Field::sinks:
      return "attention sinks";
    case Field::padded_layout:
      return "stride-padded KV layout";
    case Field::compute_capability:
      return "compute capability";
    case Field::family:
      return "family";
    case Field::env:
      return "environment";
  }
  return "?";
}

std::int64_t number_of(Field field, const GateInput& in) {
  switch (field) {
    case Field::head_size:
      return in.head_size;
    case Field::head_size_v:
      return in.head_size_v;
    case Field::block_size:
      return in.block_size;
    case Field::gqa_ratio:
      return in.gqa_ratio;
    case Field::max_seq_len:
      return static_cast<std::int64_t>(in.max_seq_len);
    case Field::sliding_window:
      return static_cast<std::int64_t>(in.sliding_window);
    case Field::alibi:
      return in.alibi ? 1 : 0;
    case Field::sinks:
      return in.sinks ? 1 : 0;
    case Field::padded_layout:
      return in.padded_layout ? 1 : 0;
    case Field::compute_capability:
      return in.compute_capability;
    default:
      return 0;
  }
}

std::string string_of(Field field, const GateInput& in) {
  if (field == Field::q_dtype) return in.q_dtype;
  if (field == Field::kv_cache_dtype) return in.kv_cache_dtype;
  return std::to_string(number_of(field, in));
}

std::string capability_text(std::int64_t cc) {
  return std::to_string(cc / 10) + "." + std::to_string(cc % 10);
}

// kvsight also takes bf16 / fp16 for vLLM's bfloat16 / float16 (engines/vllm.cpp
// kv_cache_dtypes); an entry lists the engine's own spelling (gates.md).
std::string kv_type_spelling(const std::vector<std::string>& types, const std::string& kv) {
  if (std::find(types.begin(), types.end(), kv) != types.end()) return kv;
  if (kv == "bf16") return "bfloat16";
  if (kv == "fp16") return "float16";
  return kv;
}

std::string capability_range_text(const gates_detail::KvTypeEntry& entry) {
  if (entry.max_cc == INT64_MAX) return capability_text(entry.min_cc) + "+";
  if (entry.min_cc / 10 == entry.max_cc / 10) return std::to_string(entry.min_cc / 10) + ".x";
  return capability_text(entry.min_cc) + ".." + capability_text(entry.max_cc);
}

// Test::kv_types: the backend lists the KV type for this engine version and device
// (supported_kv_cache_dtypes / supports_kv_cache_dtype). Entries of other versions do not
// count; when none covers the version the rule was not read there and the test holds.
std::string check_kv_types(const Condition& c, const GateInput& in) {
  const std::uint64_t version = parse_engine_version(in.engine_version);
  const std::int64_t cc = in.compute_capability;
  std::vector<std::string> here;       // types accepted on this device
  std::vector<std::string> elsewhere;  // "9.x (FlashAttention 3)" where this type is accepted
  bool covered = false;
  for (const gates_detail::KvTypeEntry& entry : c.kv_types) {
    if (!entry.covers_version(version)) continue;
    covered = true;
    const std::string kv = kv_type_spelling(entry.types, in.kv_cache_dtype);
    const bool listed = std::find(entry.types.begin(), entry.types.end(), kv) != entry.types.end();
    if (entry.covers_device(cc)) {
      if (listed) return "";
      for (const std::string& type : entry.types)
        if (std::find(here.begin(), here.end(), type) == here.end()) here.push_back(type);
    } else if (listed) {
      elsewhere.push_back(capability_range_text(entry) + (entry.why.empty() ? "" : " (" + entry.why + ")"));
    }
  }
  if (!covered) return "";
  const std::string device = cc > 0 ? "compute capability " + capability_text(cc) : in.family;
  if (!elsewhere.empty()) {
    std::string where;
    for (std::size_t i = 0; i < elsewhere.size(); ++i) where += (i > 0 ? " or " : "") + elsewhere[i];
    return "kv_cache_dtype " + in.kv_cache_dtype + " needs compute capability " + where + "; this is " +
           capability_text(cc);
  }
  return "kv_cache_dtype " + in.kv_cache_dtype + " is not accepted on " + device +
         " (accepted: " + join_strings(here) + ")";
}

// Returns "" when the condition holds, else the reason naming condition and value.
std::string check(const Condition& c, const GateInput& in) {
  const std::string name = field_name(c.field);
  const std::int64_t value = number_of(c.field, in);
  const bool cc = c.field == Field::compute_capability;
  const std::string shown = cc ? capability_text(value) : std::to_string(value);
  switch (c.test) {
    case Test::one_of:
      if (std::find(c.numbers.begin(), c.numbers.end(), value) != c.numbers.end()) return "";
      if (c.numbers.size() == 1) return name + " " + shown + " is not " + std::to_string(c.numbers[0]);
      return name + " " + shown + " is not one of " + join_numbers(c.numbers);
    case Test::in_range:
      if (value >= c.numbers[0] && value <= c.numbers[1]) return "";
      if (cc) {
        return name + " " + shown + " is not in " + capability_text(c.numbers[0]) + ".." +
               capability_text(c.numbers[1]);
      }
      return name + " " + shown + " is not in " + std::to_string(c.numbers[0]) + ".." +
             std::to_string(c.numbers[1]);
    case Test::at_most:
      if (value <= c.numbers[0]) return "";
      return name + " " + shown + " is over " + std::to_string(c.numbers[0]);
    case Test::at_least:
      if (value >= c.numbers[0]) return "";
      return name + " " + shown + " is below " +
             (cc ? capability_text(c.numbers[0]) : std::to_string(c.numbers[0]));
    case Test::multiple_of:
      if (c.numbers[0] != 0 && value % c.numbers[0] == 0) return "";
      return name + " " + shown + " is not a multiple of " + std::to_string(c.numbers[0]);
    case Test::power_of_two:
      if (value > 0 && (value & (value - 1)) == 0) return "";
      return name + " " + shown + " is not a power of two";
    case Test::absent:
      if (value == 0) return "";
      if (c.field == Field::sliding_window) return "sliding window " + shown + " is set (must be none)";
      if (c.field == Field::padded_layout) {
        return "the KV layout is stride-padded (hybrid attention + recurrent model), which forces Triton";
      }
      if (c.field == Field::sinks) return "attention sinks are used (must be absent)";
      return name + " is used (must be absent)";
    case Test::str_one_of: {
      const std::string text = string_of(c.field, in);
      if (std::find(c.strings.begin(), c.strings.end(), text) != c.strings.end()) return "";
      if (c.strings.size() == 1) return name + " " + text + " is not " + c.strings[0];
      return name + " " + text + " is not one of " + join_strings(c.strings);
    }
    case Test::never:
      return c.label;
    case Test::kv_types:
      return check_kv_types(c, in);
    case Test::equals_head_size:
      if (in.head_size_v == in.head_size) return "";
      return "head_size_v " + std::to_string(in.head_size_v) + " is not head_size " +
             std::to_string(in.head_size);
  }
  return "";
}

// The rules of the input's engine that apply to its device family, layer kind (MLA or
// not) and engine version, in the engine's priority order.
std::vector<const KernelRule*> applicable_rules(const GateInput& input) {
  const std::uint64_t version = parse_engine_version(input.engine_version);
  std::vector<const KernelRule*> out;
  for (const KernelRule& rule : gates_detail::kernel_rules()) {
    if (rule.engine != input.engine || rule.mla != input.mla) continue;
    if (std::find(rule.families.begin(), rule.families.end(), input.family) == rule.families.end()) continue;
    if (version < rule.min_version || version >= rule.max_version) continue;
    out.push_back(&rule);
  }
  return out;
}

// When no kernel is admitted: "" unless some candidate was refused for its KV cache type
// alone, so the engine refuses the type on this device (vLLM: "No valid attention backend
// found ...", rocm.py adding "Supported kv_cache_dtype values: ..."). Else the refusal
// naming the type and what the device's backends take.
std::string kv_type_refusal(const GateInput& in, const std::vector<KernelVerdict>& verdicts,
                            const std::string& display) {
  const bool kv_alone = std::any_of(verdicts.begin(), verdicts.end(), [](const KernelVerdict& v) {
    return !v.reasons.empty() && std::all_of(v.reasons.begin(), v.reasons.end(), [](const std::string& r) {
      return r.rfind("kv_cache_dtype ", 0) == 0;
    });
  });
  if (!kv_alone) return "";
  const std::uint64_t version = parse_engine_version(in.engine_version);
  std::vector<std::string> accepted;
  for (const KernelRule* rule : applicable_rules(in)) {
    for (const Condition& c : rule->conditions) {
      if (c.test != Test::kv_types) continue;
      for (const gates_detail::KvTypeEntry& e : c.kv_types) {
        if (!e.covers_version(version) || !e.covers_device(in.compute_capability)) continue;
        for (const std::string& type : e.types)
          if (std::find(accepted.begin(), accepted.end(), type) == accepted.end()) accepted.push_back(type);
      }
    }
  }
  const std::string device = in.family + " " + in.arch;
  return display + " refuses kv_cache_dtype " + in.kv_cache_dtype + " on this device (" + device +
         "): no attention backend accepts it" +
         (accepted.empty() ? "" : "; accepted here: " + join_strings(accepted));
}

void decide_split(const KernelRule& rule, const GateInput& in, KernelVerdict& verdict) {
  switch (rule.split) {
    case SplitMode::never:
      verdict.splits_context = false;
      verdict.split_rule = "grid (num_seqs, num_kv_heads) = " + std::to_string(in.batch) + " x " +
                           std::to_string(in.kv_heads_per_rank) +
                           " programs, each walking the whole context serially (online softmax)";
      return;
    case SplitMode::always:
      verdict.splits_context = true;
      verdict.split_rule = "splits the context across programs (split-KV / partitions), then reduces";
      return;
    case SplitMode::triton_3d: {
      // triton_attn.py: seq_threshold_3D = MIN_LAUNCH_GRID_SIZE_2D (128) // num_kv_heads;
      // pure decode with num_seqs <= threshold takes the 3D kernel with 16 segments.
      const std::uint64_t threshold = 128 / std::max<std::uint32_t>(1, in.kv_heads_per_rank);
      verdict.splits_context = in.batch <= threshold;
      verdict.split_rule = verdict.splits_context
                               ? "3D split-KV kernel (16 softmax segments): pure decode with num_seqs " +
                                     std::to_string(in.batch) + " <= 128 / " +
                                     std::to_string(in.kv_heads_per_rank) + " = " + std::to_string(threshold)
                               : "2D kernel (no split): num_seqs " + std::to_string(in.batch) + " > 128 / " +
                                     std::to_string(in.kv_heads_per_rank) + " = " +
                                     std::to_string(threshold) + " (#48076)";
      return;
    }
    case SplitMode::paged_v1_v2: {
      // vllm/attention/ops/paged_attn.py: v1 when max_seq_len <= 8192 and (one
      // partition of 512, or num_seqs x num_heads > 512); else v2 (partitioned).
      const std::uint64_t partitions = (in.max_seq_len + 511) / 512;
      const bool v1 = in.max_seq_len <= 8192 && (partitions == 1 || in.batch * in.q_heads_per_rank > 512);
      verdict.splits_context = !v1;
      verdict.split_rule = v1 ? "paged_attention_v1 (grid heads x seqs, no split): max_seq_len <= 8192 and "
                                "(one partition or num_seqs x num_heads > 512)"
                              : "paged_attention_v2: partitions of 512 tokens, then a reduce";
      return;
    }
  }
}

std::uint32_t parse_compute_capability(const std::string& arch) {
  // "sm_90" -> 90, "sm_100" -> 100, "sm_120a" -> 120.
  if (arch.rfind("sm_", 0) != 0) return 0;
  std::uint32_t value = 0;
  for (std::size_t i = 3; i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i])); ++i) {
    value = value * 10 + static_cast<std::uint32_t>(arch[i] - '0');
  }
  return value;
}

// Layer kinds as the gates output names them.
std::string kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::full_attention:
      return "full_attention";
    case LayerKind::sliding_window:
      return "sliding_window";
    case LayerKind::chunked_local:
      return "chunked_local";
    case LayerKind::mla:
      return "mla";
    default:
      return std::string(to_string(kind));
  }
}

}  // namespace

std::vector<std::string> gate_engines() {
  std::vector<std::string> names;
  for (const auto& engine : all_engines())
    if (engine->has_gate_rules()) names.push_back(engine->name());
  return names;
}

std::uint64_t parse_engine_version(const std::string& text) {
  if (text.empty()) return UINT64_MAX - 1;
  return read_engine_version(text).ordinal();
}

namespace {

std::vector<KernelVerdict> evaluate_rules(const GateInput& input) {
  std::vector<KernelVerdict> out;
  for (const KernelRule* applicable : applicable_rules(input)) {
    const KernelRule& rule = *applicable;
    KernelVerdict verdict;
    verdict.kernel = rule.kernel;
    verdict.name = rule.name;
    verdict.backend = rule.backend;
    verdict.source = rule.source;
    for (const Condition& condition : rule.conditions) {
      std::string reason = check(condition, input);
      // One reason per distinct failure (two rules on the same field can both fail).
      if (!reason.empty() &&
          std::find(verdict.reasons.begin(), verdict.reasons.end(), reason) == verdict.reasons.end()) {
        verdict.reasons.push_back(std::move(reason));
      }
    }
    verdict.admitted = verdict.reasons.empty();
    decide_split(rule, input, verdict);
    out.push_back(std::move(verdict));
  }
  return out;
}

void select_first_admitted(std::vector<KernelVerdict>& verdicts) {
  bool selected = false;
  for (KernelVerdict& verdict : verdicts) {
    verdict.selected = !selected && verdict.admitted;
    selected |= verdict.selected;
  }
}

// The candidates of one layer group in the engine's priority order, with what the
// engine's options turn off (llama.cpp -fa off), the first admitted one selected.
std::vector<KernelVerdict> engine_kernels(const Engine& engine, const GateInput& input,
                                          const EngineOptions& options) {
  std::vector<KernelVerdict> verdicts = evaluate_rules(input);
  engine.order_kernels(input, verdicts);
  for (KernelVerdict& verdict : verdicts) {
    const std::string off = engine.kernel_disabled_by(verdict.kernel, options);
    if (!off.empty() && verdict.admitted) {
      verdict.admitted = false;
      verdict.reasons.push_back(off);
    }
  }
  select_first_admitted(verdicts);
  return verdicts;
}

GateInput base_input(const Engine& engine, const ModelSpec& model, const GpuSpec& gpu,
                     const EngineOptions& options, const EngineDecision& decision) {
  GateInput base;
  base.engine = engine.name();
  base.engine_version = decision.version.text;
  base.family = gpu.family;
  base.arch = gpu.arch;
  base.compute_capability = parse_compute_capability(gpu.arch);
  base.q_dtype = canonical_torch_dtype(model.dtype, "torch_dtype");
  // The K cache's type as the engine reads it (llama.cpp: --cache-type-k).
  base.kv_cache_dtype = decision.kv_settings.front().value;
  base.block_size = decision.block.tokens;
  base.max_seq_len = decision.length.tokens;
  base.batch = std::max<std::uint64_t>(1, options.batch);
  // ALiBi (BLOOM, MPT) and attention sinks (gpt-oss): the model's family traits.
  base.alibi = model.traits.alibi;
  base.sinks = model.traits.attention_sinks;
  base.padded_layout = engine.padded_kv_layout(model);
  return base;
}

// Identical attention layers as one group each, in model order.
std::vector<LayerGroupGate> layer_groups(const Engine& engine, const ModelSpec& model, const GateInput& base,
                                         const EngineOptions& options) {
  const std::uint32_t q_per_rank = std::max<std::uint32_t>(1, model.num_attention_heads / options.tp);
  using Key = std::tuple<int, std::uint32_t, std::uint32_t, std::uint32_t, std::uint64_t>;
  std::map<Key, LayerGroupGate> groups;
  std::vector<Key> order;
  for (const LayerSpec& layer : model.layers) {
    if (!layer.is_attention()) continue;
    const Key key{static_cast<int>(layer.kind), layer.head_dim_k, layer.head_dim_v, layer.kv_heads,
                  layer.window};
    auto found = groups.find(key);
    if (found == groups.end()) {
      order.push_back(key);
      LayerGroupGate group;
      group.kind = kind_name(layer.kind);
      group.layer_kind = layer.kind;
      group.head_size = layer.head_dim_k;
      group.kv_heads_per_rank = kv_heads_per_rank(layer, options.tp);
      group.q_heads_per_rank = q_per_rank;
      group.window = (layer.kind == LayerKind::sliding_window || layer.kind == LayerKind::chunked_local)
                         ? layer.window
                         : 0;
      GateInput input = base;
      input.mla = layer.kind == LayerKind::mla;
      input.head_size = layer.head_dim_k;
      input.head_size_v = layer.head_dim_v == 0 ? layer.head_dim_k : layer.head_dim_v;
      input.kv_heads_per_rank = group.kv_heads_per_rank;
      input.q_heads_per_rank = q_per_rank;
      input.gqa_ratio = q_per_rank / std::max<std::uint32_t>(1, group.kv_heads_per_rank);
      input.sliding_window = group.window;
      group.kernels = engine_kernels(engine, input, options);
      for (const KernelVerdict& verdict : group.kernels) {
        if (verdict.selected) {
          group.selected = verdict.kernel;
          group.selected_name = verdict.name;
          group.splits_context = verdict.splits_context;
        }
      }
      if (group.selected.empty())
        group.kv_type_refusal = kv_type_refusal(input, group.kernels, engine.display_name());
      found = groups.emplace(key, std::move(group)).first;
    }
    ++found->second.layer_count;
  }
  std::vector<LayerGroupGate> out;
  for (const Key& key : order) out.push_back(groups.at(key));
  return out;
}

// Primary group: full attention (or MLA) with the most layers; else the largest.
const LayerGroupGate& primary_group(const std::vector<LayerGroupGate>& groups) {
  const LayerGroupGate* primary = nullptr;
  for (const LayerGroupGate& group : groups) {
    const bool global = group.kind == "full_attention" || group.kind == "mla";
    const bool primary_global = primary && (primary->kind == "full_attention" || primary->kind == "mla");
    if (!primary || (global && !primary_global) ||
        (global == primary_global && group.layer_count > primary->layer_count)) {
      primary = &group;
    }
  }
  return *primary;
}

// The refusal of a group no kernel admits: the engine's refusal of the KV cache type on
// this device when that is the reason (LayerGroupGate::kv_type_refusal), else the shape.
StartupCheck no_kernel_check(const LayerGroupGate& group, const std::string& display, const GpuSpec& gpu,
                             std::uint32_t block_size) {
  std::vector<std::string> refused;
  for (const KernelVerdict& verdict : group.kernels) refused.push_back(verdict.kernel);
  const std::string refused_text =
      refused.empty() ? " (none exists for this family)" : " (refused: " + join_strings(refused) + ")";
  const std::string& kv = group.kv_type_refusal;
  return {"an attention kernel admits the " + group.kind + " layers", false,
          !kv.empty() ? kv + refused_text
                      : "no " + display + " kernel on " + gpu.family + " admits head_size " +
                            std::to_string(group.head_size) + ", block_size " + std::to_string(block_size) +
                            refused_text,
          !kv.empty()
              ? "docs/reference/gates.md \"KV cache types per attention backend\"; see attention.refused"
              : "see attention.refused"};
}

}  // namespace

std::vector<KernelVerdict> evaluate_kernels(const GateInput& input) {
  // The engine's defaults: no option turns a kernel off.
  return engine_kernels(*make_engine(input.engine), input, EngineOptions{});
}

GateResult select_kernels(const Engine& engine, const ModelSpec& model, const GpuSpec& gpu,
                          const EngineOptions& options, const EngineDecision& decision) {
  if (options.tp == 0) throw InputError("tensor_parallel_size", "is 0; allowed: a positive integer");
  GateResult result;
  result.engine = engine.name();
  // The default is the newest known release except where an engine keeps an older one
  // (vLLM 0.33.0 while 0.34.0 is known, issue #28).
  const std::vector<std::string> known_versions = engine.known_versions();
  const bool default_is_newest = known_versions.empty() || known_versions.back() == decision.version.text;
  result.engine_version = decision.version_given ? decision.version.text
                          : default_is_newest
                              ? decision.version.text + " (newest known; --engine-version)"
                              : decision.version.text + " (default; " + known_versions.back() +
                                    " is known too; --engine-version)";
  result.family = gpu.family;
  result.tp = options.tp;
  result.block_size = decision.block.tokens;
  result.block_size_source = decision.block.source;
  // max_seq_len at run time is the batch's longest sequence; the gate is evaluated at
  // the longest the engine admits: the decision's max_model_len.
  result.max_seq_len = decision.length.tokens;

  const GateInput base = base_input(engine, model, gpu, options, decision);
  result.groups = layer_groups(engine, model, base, options);
  result.primary = primary_group(result.groups);

  // Constraints: the engine's own start-up checks (TP divides heads, KV heads split evenly,
  // vendor, max_model_len within the model's maximum), then the kernel-dependent ones.
  result.constraints = decision.checks;
  for (StartupCheck& check : engine.kernel_checks(result, decision))
    result.constraints.push_back(std::move(check));
  for (const LayerGroupGate& group : result.groups)
    if (group.selected.empty())
      result.constraints.push_back(no_kernel_check(group, decision.engine_display, gpu, result.block_size));
  for (const StartupCheck& check : result.constraints)
    if (!check.ok) result.errors.push_back(check.name + ": " + check.detail);

  const std::vector<std::string> known = engine.known_versions();
  if (decision.version_given && !known.empty()) {
    const EngineVersion newest =
        parse_engine_version(known.back(), engine.version_form(), decision.engine_display, known);
    if (decision.version.ordinal() > newest.ordinal())
      result.notes.push_back("engine version " + decision.version.text + " is newer than the rules (" +
                             newest.text + "): re-check against its source");
  }
  result.notes.push_back("max_seq_len is the batch's longest sequence at run time; evaluated here at " +
                         std::to_string(result.max_seq_len) + " (" + decision.length.source + ")");
  for (std::string& note : engine.gate_notes(gpu, options)) result.notes.push_back(std::move(note));
  return result;
}

GateResult evaluate_gates(const ModelSpec& model, const GpuSpec& gpu, const EngineOptions& options) {
  return *decide_with_gates(*make_engine(options.engine), model, gpu, options).gates;
}

}  // namespace kvsight
