// Reads a Hugging Face config.json into a ModelSpec: per-layer attention kinds,
// KV shapes, positional facts, dtype and quantization. Field semantics follow
// huggingface/transformers models/<type>/configuration_<type>.py and the way
// vLLM consumes them (vllm/config/model.py, vllm/model_executor/models/*.py).
// Every value the reader does not understand is an InputError naming the field;
// every default it assumes is recorded in ModelSpec::notes.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "config_reader.hpp"
#include "families.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/dtype.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"
#include "kvsight/model_resolver.hpp"

namespace kvsight {

namespace hf_config {

namespace {

// Allowed rope_scaling types (transformers modeling_rope_utils ROPE_INIT_FUNCTIONS,
// plus "su" (old longrope name) and "mrope" (Qwen2-VL)).
const std::set<std::string> kRopeTypes = {"default", "linear", "dynamic", "yarn",        "longrope",
                                          "llama3",  "su",     "mrope",   "proportional"};

// Fills the fields a config omits with the defaults of transformers' config class of its
// family (families.cpp: the Gemma 3 27B config.json has no vocab_size, rope_theta, ...), each
// said in a note. `type` is the text config's model_type.
void apply_class_defaults(json& text, std::string type, bool nested, std::vector<std::string>& notes) {
  const families::Family* family = &families::hf_family(type);
  if (nested && !family->text_config_type.empty()) {
    type = std::string(family->text_config_type);
    family = &families::hf_family(type);
  }
  const std::string prefix = nested ? "text_config." : "";
  for (const auto& d : family->class_defaults) {
    auto it = text.find(d.key);
    if (it != text.end() && !it->is_null()) continue;
    text[d.key] = json::parse(d.value);
    notes.push_back(prefix + d.key + " absent: transformers " + type + " default " + d.value);
  }
}

struct ParsedKinds {
  std::vector<LayerKind> kinds;
  RecurrentKind recurrent_kind = RecurrentKind::mamba2;
  bool has_recurrent = false;
};

LayerKind kind_from_layer_type(const std::string& value, const std::string& field, RecurrentKind& rkind,
                               bool& has_recurrent, const families::Family& family) {
  if (value == "full_attention" || value == "attention" || value == "global_attention")
    return LayerKind::full_attention;
  if (value == "sliding_attention" || value == "sliding_window" || value == "local_attention")
    return LayerKind::sliding_window;
  if (value == "chunked_attention") return LayerKind::chunked_local;
  if (value == "linear_attention") {
    has_recurrent = true;
    // The family's kind: MiniMax's lightning attention; everyone else, Qwen3-Next / Qwen3.5 /
    // Qwen3.6: gated delta-net (transformers qwen3_next).
    rkind = family.linear_attention;
    return LayerKind::recurrent;
  }
  if (value == "mamba" || value == "mamba2") {
    has_recurrent = true;
    rkind = value == "mamba" ? family.mamba_layer : RecurrentKind::mamba2;
    return LayerKind::recurrent;
  }
  if (value == "conv") {  // LFM2 short convolution blocks
    has_recurrent = true;
    rkind = RecurrentKind::short_conv;
    return LayerKind::recurrent;
  }
  throw InputError(field, "unknown layer type '" + value +
                              "'; allowed: full_attention, sliding_attention, chunked_attention, "
                              "linear_attention, mamba, conv");
}

std::string dtype_of(const ConfigReader& r, ModelSpec& spec) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (const json* v = r.find_anywhere(key)) {
      if (!v->is_string())
        throw InputError(key, "is " + describe(*v) + "; a dtype name such as \"bfloat16\" is required");
      return canonical_torch_dtype(v->get<std::string>(), key);
    }
  }
  spec.notes.push_back("torch_dtype absent: assumed bfloat16");
  return "bf16";
}

RopeScaling read_rope_scaling(const ConfigReader& r, double& rope_theta) {
  RopeScaling rs;
  const json* v = r.find("rope_scaling");
  std::string field = r.path("rope_scaling");
  // transformers v5 folds rope_theta and the scaling into rope_parameters.
  if (const json* p = r.find("rope_parameters"); p && p->is_object()) {
    if (auto t = p->find("rope_theta"); t != p->end() && t->is_number()) rope_theta = t->get<double>();
    if (!v) {
      v = p;
      field = r.path("rope_parameters");
    }
  }
  if (!v) return rs;
  if (!v->is_object()) throw InputError(field, "is " + describe(*v) + "; an object or null is required");
  std::string type;
  if (auto t = v->find("rope_type"); t != v->end() && t->is_string())
    type = t->get<std::string>();
  else if (auto t2 = v->find("type"); t2 != v->end() && t2->is_string())
    type = t2->get<std::string>();
  if (type.empty()) type = "default";
  if (!kRopeTypes.count(type))
    throw InputError(field + ".rope_type",
                     "unknown rope scaling type '" + type +
                         "'; allowed: default, linear, dynamic, yarn, longrope, llama3, "
                         "su, mrope");
  rs.type = type;
  auto num = [&](const char* key, double fallback) {
    auto it = v->find(key);
    if (it == v->end() || it->is_null()) return fallback;
    if (!it->is_number())
      throw InputError(field + "." + key, "is " + describe(*it) + "; a number is required");
    return it->get<double>();
  };
  rs.factor = num("factor", 1.0);
  if (!(rs.factor > 0.0) || !std::isfinite(rs.factor))
    throw InputError(field + ".factor",
                     "is " + std::to_string(rs.factor) + "; a positive number is required");
  const double original = num("original_max_position_embeddings", 0.0);
  if (!(original >= 0 && original < 1.8e19))  // the cast below is UB beyond 2^64 (fuzz finding)
    throw InputError(field + ".original_max_position_embeddings",
                     "must be a non-negative integer below 2^64");
  rs.original_max_position_embeddings = static_cast<std::uint64_t>(original);
  rs.low_freq_factor = num("low_freq_factor", 0.0);
  rs.high_freq_factor = num("high_freq_factor", 0.0);
  return rs;
}

// MiniMax: attn_type_list (or decoder_attention_types), one integer per layer,
// 0 = lightning (linear) attention, 1 = softmax attention; it wins over
// layer_types (vLLM 0.23 minimax_text_01.py MiniMaxText01Model; MiniMax-M2's
// list is all 1). False when the config has neither.
bool kinds_from_type_list(const ConfigReader& r, std::uint64_t n, ParsedKinds& out) {
  const char* type_list_key = r.has("attn_type_list") ? "attn_type_list" : "decoder_attention_types";
  const json* list = r.find(type_list_key);
  if (!list) return false;
  const std::string field = r.path(type_list_key);
  if (!list->is_array())
    throw InputError(
        field, "is " + describe(*list) + "; a list of 0 (linear) / 1 (full attention) per layer is required");
  if (list->size() != n)
    throw InputError(field, "has " + std::to_string(list->size()) + " entries but num_hidden_layers is " +
                                std::to_string(n) + "; they must match");
  for (std::uint64_t i = 0; i < n; ++i) {
    const json& t = (*list)[i];
    if (!t.is_number_integer() || (t.get<std::int64_t>() != 0 && t.get<std::int64_t>() != 1))
      throw InputError(
          field + "[" + std::to_string(i) + "]",
          "is " + describe(t) + "; 0 (lightning / linear attention) or 1 (full attention) is required");
    if (t.get<std::int64_t>() == 0) {
      out.kinds[i] = LayerKind::recurrent;
      out.has_recurrent = true;
      out.recurrent_kind = RecurrentKind::lightning;
    }
  }
  return true;
}

// layer_types: one name per layer (transformers' per-layer form). False when absent.
bool kinds_from_layer_types(const ConfigReader& r, const families::Family& family, std::uint64_t n,
                            ParsedKinds& out) {
  const json* types = r.find("layer_types");
  if (!types) return false;
  const std::string field = r.path("layer_types");
  if (!types->is_array())
    throw InputError(field, "is " + describe(*types) + "; a list of layer type names is required");
  if (types->size() != n)
    throw InputError(field, "has " + std::to_string(types->size()) + " entries but num_hidden_layers is " +
                                std::to_string(n) + "; they must match");
  for (std::uint64_t i = 0; i < n; ++i) {
    const json& t = (*types)[i];
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (!t.is_string()) throw InputError(f, "is " + describe(t) + "; a layer type name is required");
    out.kinds[i] =
        kind_from_layer_type(t.get<std::string>(), f, out.recurrent_kind, out.has_recurrent, family);
  }
  return true;
}

// Nemotron-H: hybrid_override_pattern, one character per layer: M = Mamba2,
// * = attention, - = MLP, E = MoE (transformers nemotron_h configuration). False when absent.
bool kinds_from_hybrid_pattern(const ConfigReader& r, std::uint64_t n, ParsedKinds& out) {
  const json* pattern = r.find("hybrid_override_pattern");
  if (!pattern) return false;
  const std::string field = r.path("hybrid_override_pattern");
  if (!pattern->is_string()) throw InputError(field, "is " + describe(*pattern) + "; a string is required");
  const std::string p = pattern->get<std::string>();
  if (p.size() != n)
    throw InputError(field, "has " + std::to_string(p.size()) + " characters but num_hidden_layers is " +
                                std::to_string(n) + "; they must match");
  for (std::uint64_t i = 0; i < n; ++i) {
    switch (p[i]) {
      case 'M':
        out.kinds[i] = LayerKind::recurrent;
        out.has_recurrent = true;
        break;
      case '*':
        out.kinds[i] = LayerKind::full_attention;
        break;
      case '-':
      case 'E':
        out.kinds[i] = LayerKind::none;
        break;
      default:
        throw InputError(field,
                         std::string("character '") + p[i] + "' at " + std::to_string(i) +
                             " is not a layer kind; allowed: M (Mamba2), * (attention), - (MLP), E (MoE)");
    }
  }
  out.recurrent_kind = RecurrentKind::mamba2;
  return true;
}

// Attention every period-th layer, the rest recurrent. False when the config has no period.
bool kinds_from_period(const ConfigReader& r, std::uint64_t n, ParsedKinds& out) {
  if (r.has("attn_layer_period")) {
    // Jamba: layer i is attention when i % period == offset, else Mamba (v1).
    const auto period = *r.positive("attn_layer_period");
    const auto offset = r.positive("attn_layer_offset", true).value_or(0);
    if (offset >= period)
      throw InputError(
          r.path("attn_layer_offset"),
          "is " + std::to_string(offset) + "; it must be below attn_layer_period " + std::to_string(period));
    for (std::uint64_t i = 0; i < n; ++i)
      out.kinds[i] = i % period == offset ? LayerKind::full_attention : LayerKind::recurrent;
    out.has_recurrent = true;
    out.recurrent_kind = RecurrentKind::mamba1;
    return true;
  }
  if (r.has("full_attention_interval")) {
    // Qwen3-Next: every interval-th layer (1-based) is full attention, the rest
    // gated delta-net (transformers qwen3_next configuration).
    const auto interval = *r.positive("full_attention_interval");
    for (std::uint64_t i = 0; i < n; ++i)
      out.kinds[i] = (i + 1) % interval == 0 ? LayerKind::full_attention : LayerKind::recurrent;
    out.has_recurrent = true;
    out.recurrent_kind = RecurrentKind::gated_delta_net;
    return true;
  }
  return false;
}

// sliding_window set: which layers slide, from sliding_window_pattern or use_sliding_window,
// else the family's rule (families.cpp), else none (said in a note).
void kinds_from_sliding_window(const ConfigReader& r, const families::Family& family, std::uint64_t n,
                               std::uint64_t sliding_window, ModelSpec& spec, ParsedKinds& out) {
  if (r.has("sliding_window_pattern")) {
    // Gemma 3 / Cohere2: every pattern-th layer (1-based) is global.
    const auto pattern = *r.positive("sliding_window_pattern");
    for (std::uint64_t i = 0; i < n; ++i)
      out.kinds[i] = (i + 1) % pattern == 0 ? LayerKind::full_attention : LayerKind::sliding_window;
    return;
  }
  if (family.sliding == families::SlidingLayers::even) {
    for (std::uint64_t i = 0; i < n; ++i)
      out.kinds[i] = i % 2 == 0 ? LayerKind::sliding_window : LayerKind::full_attention;
    return;
  }
  if (family.sliding == families::SlidingLayers::sixth_global) {
    for (std::uint64_t i = 0; i < n; ++i)
      out.kinds[i] = (i + 1) % 6 == 0 ? LayerKind::full_attention : LayerKind::sliding_window;
    spec.notes.push_back("sliding_window_pattern absent: assumed Gemma 3's 6 (5 local : 1 global)");
    return;
  }
  if (r.has("use_sliding_window")) {
    // Qwen2 family: windows only when use_sliding_window, and only on layers
    // at or above max_window_layers (transformers qwen2 layer_types rule).
    if (r.boolean("use_sliding_window", false)) {
      const auto max_window_layers = r.positive("max_window_layers", true).value_or(n);
      for (std::uint64_t i = 0; i < n; ++i)
        out.kinds[i] = i >= max_window_layers ? LayerKind::sliding_window : LayerKind::full_attention;
    } else {
      spec.notes.push_back(
          "sliding_window is set but use_sliding_window is false: full attention on every layer");
    }
    return;
  }
  if (family.sliding == families::SlidingLayers::every) {
    out.kinds.assign(n, LayerKind::sliding_window);
    spec.notes.push_back(spec.model_type + ": sliding_window " + std::to_string(sliding_window) +
                         " applies to every layer (as transformers and vLLM apply it)");
    return;
  }
  spec.notes.push_back("sliding_window " + std::to_string(sliding_window) + " is set but model_type '" +
                       spec.model_type +
                       "' has no layer pattern for it: treated as full attention on every layer");
}

// Layer kinds for every layer, from whichever of the config's layer-pattern
// fields is present. Order of precedence: explicit layer lists, then the
// architecture-specific pattern fields, then the family's layers (families.cpp).
ParsedKinds read_layer_kinds(const ConfigReader& r, const families::Family& family, std::uint64_t n,
                             ModelSpec& spec) {
  ParsedKinds out;
  out.kinds.assign(n, LayerKind::full_attention);
  const std::uint64_t sliding_window = r.positive("sliding_window").value_or(0);
  if (kinds_from_type_list(r, n, out) || kinds_from_layer_types(r, family, n, out) ||
      kinds_from_hybrid_pattern(r, n, out) || kinds_from_period(r, n, out))
    return out;
  if (spec.traits.parallel_hybrid) {
    // Falcon-H1: attention in every layer and a state beside it; parse_hf_config adds the
    // state's entry after each attention one.
    out.has_recurrent = true;
    out.recurrent_kind = family.state;
    return out;
  }
  if (family.layers == families::Layers::all_recurrent) {
    out.kinds.assign(n, LayerKind::recurrent);
    out.has_recurrent = true;
    out.recurrent_kind = family.state;
    return out;
  }
  if (r.has("attention_chunk_size")) {
    // Llama 4: RoPE layers use chunked local attention, NoPE layers are global
    // (transformers llama4: no_rope_layers; vLLM llama4.py use_chunked_local_attn).
    // The caller fixes NoPE layers back to full attention once RoPE flags are known.
    out.kinds.assign(n, LayerKind::chunked_local);
    return out;
  }
  if (sliding_window > 0) kinds_from_sliding_window(r, family, n, sliding_window, spec, out);
  return out;
}

void read_recurrent(const ConfigReader& r, const families::Family& family, ParsedKinds& kinds,
                    ModelSpec& spec) {
  RecurrentSpec rec;
  rec.kind = kinds.recurrent_kind;
  rec.conv_dtype = spec.dtype;
  // The ssm (temporal) state dtype: mamba_ssm_dtype when the config names one,
  // else the model dtype (vLLM MambaStateDtypeCalculator with
  // mamba_ssm_cache_dtype=auto).
  const std::string ssm_field = r.has("mamba_ssm_dtype") ? "mamba_ssm_dtype" : "";
  if (rec.kind == RecurrentKind::lightning) {
    spec.notes.push_back(
        "lightning attention state: num_attention_heads x head_dim x head_dim per layer in " + spec.dtype +
        " (vLLM linear_attention_state_shape / _dtype)");
  } else if (!ssm_field.empty()) {
    rec.ssm_dtype = canonical_torch_dtype(r.string("mamba_ssm_dtype"), r.path("mamba_ssm_dtype"));
    rec.ssm_dtype_from_config = true;
  } else {
    rec.ssm_dtype = spec.dtype;
    spec.notes.push_back("mamba_ssm_dtype absent: recurrent ssm state assumed in the model dtype (" +
                         spec.dtype + ", vLLM's default; SGLang's is float32)");
  }
  const std::uint64_t hidden = spec.hidden_size;
  auto need = [&](std::initializer_list<const char*> keys) { return r.required_positive(keys); };
  auto opt = [&](const char* key, std::uint64_t fallback) { return r.positive(key).value_or(fallback); };
  switch (rec.kind) {
    case RecurrentKind::gated_delta_net:
      rec.key_head_dim = need({"linear_key_head_dim"});
      rec.num_key_heads = need({"linear_num_key_heads"});
      rec.value_head_dim = need({"linear_value_head_dim"});
      rec.num_value_heads = need({"linear_num_value_heads"});
      rec.d_conv = need({"linear_conv_kernel_dim"});
      break;
    case RecurrentKind::mamba1: {
      const std::uint64_t expand = opt("mamba_expand", opt("expand", 2));
      rec.d_inner = r.positive("intermediate_size").has_value() && family.mamba_inner_is_intermediate_size
                        ? *r.positive("intermediate_size")
                        : checked_mul(expand, hidden, r.path("expand") + " x hidden_size");
      rec.d_state = opt("mamba_d_state", opt("state_size", 16));
      rec.d_conv = opt("mamba_d_conv", opt("conv_kernel", 4));
      break;
    }
    case RecurrentKind::mamba2: {
      rec.n_heads =
          r.positive("mamba_num_heads").value_or(r.positive("mamba_n_heads").value_or(opt("num_heads", 0)));
      rec.head_dim =
          r.positive("mamba_head_dim").value_or(r.positive("mamba_d_head").value_or(opt("head_dim", 0)));
      rec.d_state =
          r.positive("ssm_state_size").value_or(r.positive("mamba_d_state").value_or(opt("state_size", 128)));
      rec.n_groups = r.positive("n_groups").value_or(r.positive("mamba_n_groups").value_or(1));
      rec.d_conv = r.positive("conv_kernel").value_or(r.positive("mamba_d_conv").value_or(4));
      if (rec.n_heads == 0 || rec.head_dim == 0)
        throw InputError(r.path("mamba_num_heads"), "Mamba2 layers need mamba_num_heads and mamba_head_dim");
      rec.d_inner = r.positive("mamba_d_ssm")
                        .value_or(checked_mul(rec.n_heads, rec.head_dim,
                                              r.path("mamba_num_heads") + " x mamba_head_dim"));
      break;
    }
    case RecurrentKind::short_conv:
      rec.d_inner = hidden;
      rec.d_conv = opt("conv_L_cache", 3);
      break;
    case RecurrentKind::lightning:
      // State (num_attention_heads / tp, head_dim, head_dim) in the model dtype: vLLM
      // linear_attention_state_dtype takes mamba_cache_dtype ("auto": the model
      // dtype), not mamba_ssm_dtype (mamba_utils.py, 0.23 and 0.33).
      rec.n_heads = spec.num_attention_heads;
      rec.head_dim = spec.head_dim;
      rec.d_state = spec.head_dim;  // bounds heads x head_dim x head_dim in validate_recurrent
      rec.ssm_dtype = spec.dtype;
      if (rec.n_heads == 0 || rec.head_dim == 0)
        throw InputError(r.path("num_attention_heads"),
                         "lightning attention layers need num_attention_heads and head_dim");
      break;
  }
  validate_recurrent(rec, r.path(rec.kind == RecurrentKind::gated_delta_net ? "linear_key_head_dim"
                                 : rec.kind == RecurrentKind::lightning     ? "num_attention_heads"
                                                                            : "mamba"));
  spec.recurrent = rec;
}

// DeepSeek V3.2 sparse attention (and models sharing it: GLM-5 glm_moe_dsa):
// vLLM treats a config with index_topk as V3.2 (deepseek_v2.py `is_v32 =
// hasattr(config, "index_topk")`) and builds an Indexer, with its own K cache,
// in every MLA layer that does not skip top-k: with index_topk_pattern, layer i
// skips when pattern[i] == "S"; else it skips when max(i - offset + 1, 0) %
// index_topk_freq != 0 (offset index_skip_topk_offset, default 2; freq default
// 1, so every layer has one). Source: vllm 0.33 models/deepseek_v32/attention.py
// and model_executor/models/deepseek_v2.py.
void read_indexer(const ConfigReader& r, ModelSpec& spec) {
  if (!r.has("index_topk")) return;
  if (!spec.mla) {
    spec.notes.push_back(
        "index_topk is set but the model has no MLA (kv_lora_rank): no indexer cache modelled");
    return;
  }
  IndexerSpec ix;
  ix.topk = r.as_u32(*r.positive("index_topk"), r.path("index_topk"));
  ix.n_heads = r.as_u32(r.required_positive({"index_n_heads"}), r.path("index_n_heads"));
  ix.head_dim = r.as_u32(r.required_positive({"index_head_dim"}), r.path("index_head_dim"));
  if (ix.head_dim > 65536)
    throw InputError(r.path("index_head_dim"),
                     "is " + std::to_string(ix.head_dim) + "; at most 65536 is allowed");
  if (spec.mla->q_lora_rank == 0)
    throw InputError(
        r.path("q_lora_rank"),
        "is absent or 0, but the sparse-attention indexer (index_topk) projects from the q latent; "
        "a positive q_lora_rank is required (vLLM asserts it)");
  const std::uint64_t freq = r.positive("index_topk_freq").value_or(1);
  const std::uint64_t offset = r.positive("index_skip_topk_offset", true).value_or(2);
  const json* pattern = r.find("index_topk_pattern");
  std::string pattern_text;
  if (pattern) {
    const std::string field = r.path("index_topk_pattern");
    if (pattern->is_string()) {
      pattern_text = pattern->get<std::string>();
    } else if (pattern->is_array()) {
      for (std::size_t i = 0; i < pattern->size(); ++i) {
        const json& c = (*pattern)[i];
        if (!c.is_string() || c.get_ref<const std::string&>().size() != 1)
          throw InputError(field + "[" + std::to_string(i) + "]",
                           "is " + describe(c) + "; one letter (S = skip) is required");
        pattern_text += c.get<std::string>();
      }
    } else {
      throw InputError(field,
                       "is " + describe(*pattern) + "; a string or list of letters (S = skip) is required");
    }
  }
  std::uint32_t with_indexer = 0;
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    LayerSpec& layer = spec.layers[i];
    if (layer.kind != LayerKind::mla) continue;
    bool skip = false;
    if (pattern)
      skip = i < pattern_text.size() && pattern_text[i] == 'S';
    else
      skip = (i + 1 > offset ? i + 1 - offset : 0) % freq != 0;
    layer.indexer = !skip;
    with_indexer += layer.indexer ? 1 : 0;
  }
  spec.indexer = ix;
  spec.notes.push_back("sparse attention (DeepSeek V3.2 indexer): index_n_heads " +
                       std::to_string(ix.n_heads) + ", index_head_dim " + std::to_string(ix.head_dim) +
                       ", index_topk " + std::to_string(ix.topk) + "; an indexer K cache in " +
                       std::to_string(with_indexer) + " of " + std::to_string(spec.count(LayerKind::mla)) +
                       " MLA layers");
}

// RoPE per layer. no_rope_layers (SmolLM3, Llama 4): 1 = RoPE, 0 = NoPE
// (transformers smollm3/llama4 configuration docstrings). The seed record that
// reads it the other way round is wrong.
void read_rope_flags(const ConfigReader& r, const families::Family& family, ModelSpec& spec) {
  const std::uint64_t n = spec.layers.size();
  if (const json* flags = r.find("no_rope_layers")) {
    const std::string field = r.path("no_rope_layers");
    if (!flags->is_array())
      throw InputError(field, "is " + describe(*flags) + "; a list of 0/1 per layer is required");
    if (flags->size() < n)
      throw InputError(field, "has " + std::to_string(flags->size()) + " entries for " + std::to_string(n) +
                                  " layers; one 0/1 per layer is required");
    for (std::uint64_t i = 0; i < n; ++i) {
      const json& f = (*flags)[i];
      if (!f.is_number_integer() || (f.get<std::int64_t>() != 0 && f.get<std::int64_t>() != 1))
        throw InputError(field + "[" + std::to_string(i) + "]",
                         "is " + describe(f) + "; 1 (RoPE) or 0 (NoPE) is required");
      spec.layers[i].rope = f.get<std::int64_t>() == 1;
    }
    return;
  }
  if (auto interval = r.positive("no_rope_layer_interval")) {
    for (std::uint64_t i = 0; i < n; ++i) spec.layers[i].rope = (i + 1) % *interval != 0;
    spec.notes.push_back("no_rope_layers absent: derived from no_rope_layer_interval " +
                         std::to_string(*interval));
    return;
  }
  if (family.nope_every > 0) {
    for (std::uint64_t i = 0; i < n; ++i) spec.layers[i].rope = (i + 1) % family.nope_every != 0;
    spec.notes.push_back("no_rope_layers absent: Llama 4 default, every " +
                         std::to_string(family.nope_every) + "th layer NoPE");
  }
}

// The config's JSON object (depth-limited, whole text consumed, NUL refused:
// kvsight/input_file.hpp); an error names the origin.
json parse_config_object(std::string_view json_text, const std::string& origin) {
  json root;
  try {
    root = parse_json_input(json_text, origin);
  } catch (const InputError& e) {
    std::string what = e.what();  // "<origin>: not valid JSON at byte N: ..."
    if (what.rfind(origin + ": ", 0) == 0) what.erase(0, origin.size() + 2);
    if (what.rfind("not valid JSON", 0) == 0) what = "is " + what;
    throw InputError(origin, what);
  }
  if (!root.is_object())
    throw InputError(origin, "is JSON but not an object; a config.json object is required");
  return root;
}

// The decoder's sizes: hidden size, layers (returned), vocabulary, intermediate size and
// Gemma 3n's per-layer embeddings.
std::uint64_t read_sizes(const ConfigReader& r, ModelSpec& spec) {
  spec.hidden_size = r.required_positive({"hidden_size", "d_model", "n_embd"});
  const std::uint64_t n_layers =
      r.required_positive({"num_hidden_layers", "n_layer", "num_layers", "n_layers"});
  if (n_layers > 100000)
    throw InputError(r.path("num_hidden_layers"),
                     "is " + std::to_string(n_layers) + "; at most 100000 allowed");
  spec.vocab_size = r.required_positive({"vocab_size", "padded_vocab_size"});
  if (const json* inter = r.find("intermediate_size"); inter && inter->is_array()) {
    // Gemma 3n gives one intermediate size per layer: the weights use their mean.
    if (inter->size() != n_layers)
      throw InputError(r.path("intermediate_size"), "has " + std::to_string(inter->size()) + " entries for " +
                                                        std::to_string(n_layers) + " layers");
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < inter->size(); ++i)
      sum = checked_add(
          sum, r.as_positive((*inter)[i], r.path("intermediate_size") + "[" + std::to_string(i) + "]"),
          r.path("intermediate_size"));
    spec.intermediate_size = sum / n_layers;
    spec.notes.push_back("intermediate_size is a per-layer list: weights use the mean " +
                         std::to_string(spec.intermediate_size));
  } else {
    spec.intermediate_size =
        r.positive("intermediate_size").value_or(r.positive("ffn_hidden_size").value_or(0));
  }
  // Gemma 3n per-layer input embeddings: vocab_size_per_layer_input x layers x
  // hidden_size_per_layer_input (transformers gemma3n embed_tokens_per_layer).
  if (auto per_layer_vocab = r.positive("vocab_size_per_layer_input")) {
    if (auto per_layer_hidden = r.positive("hidden_size_per_layer_input"))
      spec.per_layer_embedding_params =
          checked_mul(checked_mul(*per_layer_vocab, n_layers, "vocab_size_per_layer_input"),
                      *per_layer_hidden, "hidden_size_per_layer_input");
  }
  return n_layers;
}

// Query heads, KV heads, head_dim and attention bias of the standard attention layers.
void read_attention_shape(const ConfigReader& r, const families::Family& family, bool has_attention,
                          ModelSpec& spec) {
  const std::uint64_t heads = r.required_positive({"num_attention_heads", "n_head", "num_heads"});
  spec.num_attention_heads = r.as_u32(heads, r.path("num_attention_heads"));
  std::uint64_t kv = 0;
  if (auto v = r.positive("num_key_value_heads"))
    kv = *v;
  else if (auto v2 = r.positive("num_kv_heads"))
    kv = *v2;
  else if (auto v3 = r.positive("multi_query_group_num"))
    kv = *v3;
  else if (r.boolean("multi_query", false))
    kv = 1;
  else {
    kv = heads;
    if (has_attention)
      spec.notes.push_back("num_key_value_heads absent: assumed equal to num_attention_heads (MHA)");
  }
  if (kv > heads || heads % kv != 0)
    throw InputError(r.path("num_key_value_heads"),
                     std::to_string(kv) + " does not divide num_attention_heads " + std::to_string(heads) +
                         "; kv heads must divide the query heads (GQA groups)");
  spec.num_kv_heads = r.as_u32(kv, r.path("num_key_value_heads"));
  // MLA: the head dim is qk_nope_head_dim + qk_rope_head_dim (read_mla), whatever hidden_size /
  // heads is (GLM-4.7-Flash: 2048 / 20 heads; issue #28).
  const bool mla = r.positive("kv_lora_rank").has_value();
  if (auto hd = r.positive("head_dim")) {
    spec.head_dim = r.as_u32(*hd, r.path("head_dim"));
  } else if (!family.head_dim_optional && !mla) {
    if (spec.hidden_size % heads != 0)
      throw InputError(r.path("head_dim"), "absent, and hidden_size " + std::to_string(spec.hidden_size) +
                                               " is not a multiple of num_attention_heads " +
                                               std::to_string(heads) + "; give head_dim");
    spec.head_dim = r.as_u32(spec.hidden_size / heads, r.path("head_dim"));
  }
  if (spec.head_dim == 0 && spec.hidden_size % heads == 0)
    spec.head_dim = r.as_u32(spec.hidden_size / heads, r.path("head_dim"));
  if (spec.head_dim == 0 && has_attention && !mla)  // Nemotron-H: 0 B/token otherwise (fuzz finding)
    throw InputError(r.path("head_dim"), "absent, and hidden_size " + std::to_string(spec.hidden_size) +
                                             " is not a multiple of num_attention_heads " +
                                             std::to_string(heads) + "; give head_dim");
  spec.attention_bias = r.boolean("attention_bias", r.boolean("qkv_bias", false));
}

// MLA (DeepSeek-V2/V3/R1, Kimi-K2): one latent of kv_lora_rank + qk_rope_head_dim per token.
void read_mla(const ConfigReader& r, ModelSpec& spec) {
  auto rank = r.positive("kv_lora_rank");
  if (!rank) return;
  MlaSpec mla;
  mla.kv_lora_rank = r.as_u32(*rank, r.path("kv_lora_rank"));
  mla.q_lora_rank = r.as_u32(r.positive("q_lora_rank").value_or(0), r.path("q_lora_rank"));
  mla.qk_rope_head_dim = r.as_u32(r.required_positive({"qk_rope_head_dim"}), r.path("qk_rope_head_dim"));
  mla.qk_nope_head_dim = r.as_u32(r.required_positive({"qk_nope_head_dim"}), r.path("qk_nope_head_dim"));
  mla.v_head_dim = r.as_u32(r.required_positive({"v_head_dim"}), r.path("v_head_dim"));
  spec.mla = mla;
  // The attention (query/key) head dim of MLA is nope + rope, not hidden / heads.
  spec.head_dim = r.as_u32(std::uint64_t{mla.qk_nope_head_dim} + mla.qk_rope_head_dim,
                           r.path("qk_nope_head_dim") + " + qk_rope_head_dim");
}

void read_moe(const ConfigReader& r, const families::Family& family, ModelSpec& spec) {
  MoeSpec moe;
  // 0 experts is a dense model (granite-4.0-micro: num_local_experts 0,
  // transformers granitemoehybrid uses a dense MLP then).
  std::uint64_t experts = r.positive("n_routed_experts", true).value_or(0);
  if (experts == 0) experts = r.positive("num_local_experts", true).value_or(0);
  if (experts == 0) experts = r.positive("num_experts", true).value_or(0);
  moe.num_experts = r.as_u32(experts, r.path("num_experts"));
  if (moe.num_experts > 0) {
    moe.experts_per_token =
        r.as_u32(r.positive("num_experts_per_tok")
                     .value_or(r.positive("num_experts_per_token").value_or(r.positive("top_k").value_or(1))),
                 r.path("num_experts_per_tok"));
    moe.num_shared_experts =
        r.as_u32(r.positive("n_shared_experts", true).value_or(0), r.path("n_shared_experts"));
    // Shared experts the config has no field for (Llama 4: families.cpp).
    if (family.implicit_shared_experts > 0 && !r.has("n_shared_experts"))
      moe.num_shared_experts = family.implicit_shared_experts;
    moe.moe_intermediate_size =
        r.positive("moe_intermediate_size")
            .value_or(r.positive("intermediate_size_moe").value_or(spec.intermediate_size));
    moe.shared_expert_intermediate_size = r.positive("shared_expert_intermediate_size", true).value_or(0);
    moe.first_k_dense_layers =
        r.as_u32(r.positive("first_k_dense_replace", true).value_or(0), r.path("first_k_dense_replace"));
    moe.moe_layer_frequency =
        r.as_u32(r.positive("interleave_moe_layer_step")
                     .value_or(r.positive("decoder_sparse_step")
                                   .value_or(r.positive("moe_layer_freq")
                                                 .value_or(r.positive("expert_layer_period").value_or(1)))),
                 r.path("moe_layer_freq"));
    if (moe.experts_per_token > moe.num_experts)
      throw InputError(r.path("num_experts_per_tok"), std::to_string(moe.experts_per_token) +
                                                          " exceeds the " + std::to_string(moe.num_experts) +
                                                          " experts");
  }
  spec.moe = moe;
}

// Tied embeddings (the family's default when the config is silent) and per-head q/k norms.
void read_embedding_tie_and_norms(const ConfigReader& r, const families::Family& family, ModelSpec& spec) {
  spec.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  if (!r.find_anywhere("tie_word_embeddings")) {
    spec.tie_word_embeddings = family.tied_embeddings;
    spec.notes.push_back(std::string("tie_word_embeddings absent: assumed ") +
                         (spec.tie_word_embeddings ? "true" : "false") + " for model_type '" +
                         spec.model_type + "'");
  } else if (const json* t = r.find_anywhere("tie_word_embeddings")) {
    if (!t->is_boolean())
      throw InputError("tie_word_embeddings", "is " + describe(*t) + "; true or false is required");
    spec.tie_word_embeddings = t->get<bool>();
  }
  spec.qk_norm = family.qk_norm;
}

// RoPE theta and scaling, the length keys vLLM reads, and the MTP layers.
void read_positions(const ConfigReader& r, ModelSpec& spec) {
  spec.rope_theta = r.number("rope_theta", 0.0);
  spec.rope_scaling = read_rope_scaling(r, spec.rope_theta);
  std::uint64_t max_len = 0;
  for (const char* key : {"max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                          "max_sequence_length", "max_seq_length", "seq_len"}) {
    if (auto v = r.positive(key)) max_len = max_len == 0 ? *v : std::min(max_len, *v);
  }
  spec.max_position_embeddings = r.positive("max_position_embeddings").value_or(max_len);
  spec.config_max_len = max_len;
  if (max_len == 0) spec.notes.push_back("max_position_embeddings absent: no model length limit known");
  // MTP layers (vllm/config/speculative.py hf_config_override, 0.33: num_nextn_predict_layers,
  // or mtp_num_hidden_layers for Qwen3.5 / 3.6). At most 64: more is not a real config.
  for (const char* key : {"num_nextn_predict_layers", "mtp_num_hidden_layers"}) {
    if (auto v = r.positive(key, true)) {
      if (*v > 64) throw InputError(r.path(key), std::to_string(*v) + " MTP layers; allowed: 0 to 64");
      spec.mtp_layers = std::max(spec.mtp_layers, static_cast<std::uint32_t>(*v));
    }
  }
}

// One attention layer's KV shape and window.
void fill_attention_layer(const ConfigReader& r, std::uint64_t i, std::uint64_t window, std::uint64_t chunk,
                          const ModelSpec& spec, LayerSpec& layer) {
  if (spec.mla) {
    // MLA caches one latent (K only) per token: kv_lora_rank + qk_rope_head_dim.
    if (layer.kind != LayerKind::full_attention)
      throw InputError(r.path("kv_lora_rank"), "MLA with windowed layers is not supported");
    layer.kind = LayerKind::mla;
    layer.kv_heads = 1;
    layer.head_dim_k = r.as_u32(std::uint64_t{spec.mla->kv_lora_rank} + spec.mla->qk_rope_head_dim,
                                r.path("kv_lora_rank") + " + qk_rope_head_dim");
    layer.head_dim_v = 0;
  } else {
    layer.kv_heads = spec.num_kv_heads;
    layer.head_dim_k = spec.head_dim;
    // Different V head dim where the config says so (e.g. v_head_dim without MLA).
    layer.head_dim_v = r.as_u32(r.positive("v_head_dim").value_or(spec.head_dim), r.path("v_head_dim"));
  }
  if (layer.kind == LayerKind::sliding_window) {
    if (window == 0)
      throw InputError(r.path("sliding_window"),
                       "layer " + std::to_string(i) +
                           " is a sliding-window layer but sliding_window is not a positive integer");
    layer.window = window;
  }
  if (layer.kind == LayerKind::chunked_local) {
    if (chunk == 0)
      throw InputError(r.path("attention_chunk_size"),
                       "layer " + std::to_string(i) + " is chunked but attention_chunk_size is not set");
    layer.window = chunk;
  }
}

// The layers of the kinds read, with their KV shapes, and the per-layer-type overrides.
void build_layers(const ConfigReader& r, const ParsedKinds& kinds, ModelSpec& spec) {
  const std::uint64_t n_layers = kinds.kinds.size();
  spec.layers.resize(n_layers);
  const std::uint64_t window = r.positive("sliding_window").value_or(0);
  const std::uint64_t chunk = r.positive("attention_chunk_size").value_or(0);
  for (std::uint64_t i = 0; i < n_layers; ++i) {
    LayerSpec& layer = spec.layers[i];
    layer.kind = kinds.kinds[i];
    if (layer.kind == LayerKind::full_attention || layer.kind == LayerKind::sliding_window ||
        layer.kind == LayerKind::chunked_local)
      fill_attention_layer(r, i, window, chunk, spec, layer);
  }
  // Gemma 2/3 and gpt-oss and others may set a per-layer-type head dim for global layers.
  if (auto global_hd = r.positive("global_head_dim")) {
    for (auto& layer : spec.layers)
      if (layer.kind == LayerKind::full_attention)
        layer.head_dim_k = layer.head_dim_v = r.as_u32(*global_hd, r.path("global_head_dim"));
  }
  if (auto global_kv = r.positive("num_global_key_value_heads")) {
    for (auto& layer : spec.layers)
      if (layer.kind == LayerKind::full_attention)
        layer.kv_heads = r.as_u32(*global_kv, r.path("num_global_key_value_heads"));
  }
}

// Gemma 3n: the last num_kv_shared_layers reuse the KV of the last earlier
// layer of the same attention type (transformers gemma3n
// Gemma3nTextAttention: kv_shared_layer_index).
void read_kv_sharing(const ConfigReader& r, ModelSpec& spec) {
  const std::uint64_t n_layers = spec.layers.size();
  auto shared = r.positive("num_kv_shared_layers", true);
  if (!shared || *shared == 0) return;
  if (*shared >= n_layers)
    throw InputError(
        r.path("num_kv_shared_layers"),
        "is " + std::to_string(*shared) + "; it must be below num_hidden_layers " + std::to_string(n_layers));
  const std::uint64_t first_shared = n_layers - *shared;
  for (std::uint64_t i = first_shared; i < n_layers; ++i) {
    LayerSpec& layer = spec.layers[i];
    std::int32_t source = -1;
    for (std::uint64_t j = first_shared; j-- > 0;) {
      if (spec.layers[j].kind == layer.kind) {
        source = static_cast<std::int32_t>(j);
        break;
      }
    }
    if (source < 0)
      throw InputError(
          r.path("num_kv_shared_layers"),
          "layer " + std::to_string(i) + " shares KV but no earlier layer has its attention type");
    layer.kv_source_layer = source;
    layer.kind = LayerKind::shared_kv;
  }
}

// The recurrent state: a parallel hybrid's state entries (Falcon-H1), the state's shapes,
// and whether any layer keeps one.
void read_state_layers(const ConfigReader& r, const families::Family& family, ParsedKinds& kinds,
                       ModelSpec& spec) {
  if (spec.traits.parallel_hybrid) {
    // Each layer is listed twice, attention then its parallel Mamba2 state, as
    // vLLM registers them (vllm model_executor/models/falcon_h1.py: an Attention
    // and a MambaMixer2 per FalconH1ParallelHybrid layer); llama.cpp likewise
    // keeps KV and recurrent state for every layer (llama_memory_hybrid).
    const std::size_t n_layers = spec.layers.size();
    families::add_parallel_recurrent_layers(spec);
    spec.notes.push_back(spec.model_type + ": each of the " + std::to_string(n_layers) +
                         " layers holds attention KV and a Mamba2 state in parallel; listed as " +
                         std::to_string(2 * n_layers) + " entries (attention, mamba)");
  }
  if (kinds.has_recurrent) read_recurrent(r, family, kinds, spec);
  if (spec.recurrent && spec.recurrent->kind == RecurrentKind::lightning)
    spec.notes.push_back(
        "vLLM serves MiniMaxText01 / MiniMaxM1 through 0.23 only (0.33 model_executor/models/registry.py "
        "_PREVIOUSLY_SUPPORTED_MODELS: 0.23.0); plan with --engine-version 0.23.0 or older");
  if (spec.count(LayerKind::recurrent) == 0) spec.recurrent.reset();
}

// parse_hf_config: the config's steps in order (each reads its fields; an error names the
// first field that is wrong).
ModelSpec read_config(std::string_view json_text, const std::string& origin) {
  const json root = parse_config_object(json_text, origin);
  bool nested = false;
  const json* text = &root;
  if (auto it = root.find("text_config"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) throw InputError("text_config", "is " + describe(*it) + "; an object is required");
    text = &*it;
    nested = true;
  }
  ModelSpec spec;
  spec.source = origin;
  json text_copy = *text;
  {
    std::string type;
    if (auto t = text_copy.find("model_type"); t != text_copy.end() && t->is_string())
      type = t->get<std::string>();
    apply_class_defaults(text_copy, type, nested, spec.notes);
  }
  ConfigReader r(root, text_copy, origin, nested);

  if (auto it = root.find("architectures");
      it != root.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    spec.architecture = (*it)[0].get<std::string>();
  spec.model_type = r.string("model_type");
  if (spec.model_type.empty() && root.contains("model_type") && root["model_type"].is_string())
    spec.model_type = root["model_type"].get<std::string>();
  if (spec.model_type.empty()) spec.notes.push_back("model_type absent");
  const families::Family& family = families::hf_family(spec.model_type);
  spec.traits = families::traits_of(family, spec.model_type);

  spec.dtype = dtype_of(r, spec);
  spec.quantization = read_quantization(r);
  const std::uint64_t n_layers = read_sizes(r, spec);
  ParsedKinds kinds = read_layer_kinds(r, family, n_layers, spec);
  const bool has_attention = std::any_of(kinds.kinds.begin(), kinds.kinds.end(), [](LayerKind k) {
    return k == LayerKind::full_attention || k == LayerKind::sliding_window || k == LayerKind::chunked_local;
  });
  if (has_attention || r.has("num_attention_heads")) read_attention_shape(r, family, has_attention, spec);
  read_mla(r, spec);
  read_moe(r, family, spec);
  read_embedding_tie_and_norms(r, family, spec);
  read_positions(r, spec);

  build_layers(r, kinds, spec);
  read_indexer(r, spec);
  read_rope_flags(r, family, spec);
  // Llama 4: NoPE layers are global attention, RoPE layers chunked.
  for (auto& layer : spec.layers) {
    if (layer.kind == LayerKind::chunked_local && !layer.rope) {
      layer.kind = LayerKind::full_attention;
      layer.window = 0;
    }
  }
  read_kv_sharing(r, spec);
  read_state_layers(r, family, kinds, spec);
  if (spec.layers.empty() || (spec.attention_layer_count() == 0 && !spec.recurrent))
    throw InputError(origin, "has no attention or recurrent layers");
  read_vision(root, spec);
  return spec;
}

}  // namespace

}  // namespace hf_config

ModelSpec parse_hf_config(std::string_view json_text, const std::string& origin) {
  return hf_config::read_config(json_text, origin);
}

}  // namespace kvsight
