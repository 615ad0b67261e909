// vision_config of a multimodal HF config.json: the parameters of its vision encoder and
// projector, per tower (read_vision in config_reader.hpp says which).
#include <optional>
#include <string>

#include "config_reader.hpp"
#include "families.hpp"
#include "kvsight/checked.hpp"

namespace kvsight::hf_config {

namespace {

// A parameter count whose every + and x is overflow checked (an absurd
// vision_config is refused naming it, never wrapped).
struct ParamCount {
  std::uint64_t n = 0;
};
ParamCount operator+(ParamCount a, ParamCount b) {
  return {checked_add(a.n, b.n, "vision_config parameters")};
}
ParamCount operator*(ParamCount a, ParamCount b) {
  return {checked_mul(a.n, b.n, "vision_config parameters")};
}
ParamCount operator+(ParamCount a, std::uint64_t b) { return a + ParamCount{b}; }
ParamCount operator*(std::uint64_t a, ParamCount b) { return ParamCount{a} * b; }
ParamCount operator/(ParamCount a, ParamCount b) { return {a.n / b.n}; }
ParamCount& operator+=(ParamCount& a, ParamCount b) { return a = a + b; }

// The sizes of a vision_config: positive integers up to 2^20 (real ones are a few
// thousand); the sums and products are overflow checked besides (ParamCount). A field the
// count needs but the config lacks leaves the tower uncounted, said in a note (the KV plan
// does not depend on it); a wrong value is an error.
class VisionConfig {
 public:
  VisionConfig(const json& root, const json& vision)
      : root_(root), reader_(root, vision, "vision_config", false) {}

  ParamCount size(const char* key, std::optional<std::uint64_t> fallback = std::nullopt) {
    const json* value = reader_.find(key);
    if (!value) {
      if (fallback) return ParamCount{*fallback};
      if (missing_.empty()) missing_ = field(key);
      return ParamCount{1};
    }
    const std::uint64_t x = reader_.as_positive(*value, field(key));
    if (x > (1u << 20))
      throw InputError(field(key), "is " + std::to_string(x) + "; at most 1048576 is allowed");
    return ParamCount{x};
  }
  // A size the multimodal config keeps at its top level (the projector's).
  ParamCount root_size(const char* key, std::uint64_t fallback) const {
    auto r = root_.find(key);
    if (r == root_.end() || r->is_null()) return ParamCount{fallback};
    const std::uint64_t x = reader_.as_positive(*r, key);
    if (x > (1u << 20)) throw InputError(key, "is " + std::to_string(x) + "; at most 1048576 is allowed");
    return ParamCount{x};
  }
  bool root_bool(const char* key, bool fallback) const {
    auto r = root_.find(key);
    if (r == root_.end() || r->is_null()) return fallback;
    if (!r->is_boolean()) throw InputError(key, "is " + describe(*r) + "; true or false is required");
    return r->get<bool>();
  }
  bool boolean(const char* key, bool fallback) const { return reader_.boolean(key, fallback); }
  const json* find(const char* key) const { return reader_.find(key); }
  static std::string field(const char* key) { return std::string("vision_config.") + key; }
  // The first field a count needed and did not find; "" when none.
  const std::string& missing() const { return missing_; }

 private:
  const json& root_;
  const ConfigReader reader_;
  std::string missing_;
};

// Each tower's count (docs/reference/model-inputs.md "Vision towers"); H is the text
// decoder's hidden size, `what` names the tower in notes.
ParamCount siglip_params(VisionConfig& c, ParamCount H, families::Projector projector, std::string& what) {
  const ParamCount h = c.size("hidden_size"), i = c.size("intermediate_size"),
                   L = c.size("num_hidden_layers");
  const ParamCount p = c.size("patch_size"), img = c.size("image_size"), ch = c.size("num_channels", 3);
  const ParamCount side = img / p;
  // Patch conv (weight + bias), one position per patch; per layer q, k, v, out
  // (weights + biases), fc1 / fc2 (+ biases), two LayerNorms; post LayerNorm.
  ParamCount params = ch * p * p * h + h + side * side * h + L * (4 * h * h + 2 * h * i + 9 * h + i) + 2 * h;
  // The attention-pooling head unless vision_use_head is false (siglip.py).
  if (c.boolean("vision_use_head", true)) params += h + 4 * h * h + 4 * h + 2 * h + 2 * h * i + i + h;
  // Gemma 3: mm_input_projection_weight (h x H) and mm_soft_emb_norm (h).
  if (projector == families::Projector::gemma3) params += h * H + h;
  what = "SigLIP, " + std::to_string(L.n) + " layers";
  return params;
}

ParamCount pixtral_params(VisionConfig& c, ParamCount H, families::Projector projector, std::string& what) {
  const ParamCount h = c.size("hidden_size"), i = c.size("intermediate_size"),
                   L = c.size("num_hidden_layers");
  const ParamCount p = c.size("patch_size"), ch = c.size("num_channels", 3);
  // patch_conv (no bias), ln_pre; per layer two RMSNorms, q k v o (no bias), gated MLP.
  ParamCount params = ch * p * p * h + h + L * (4 * h * h + 3 * h * i + 2 * h);
  if (projector == families::Projector::mistral3) {
    // Mistral3MultiModalProjector: RMSNorm, patch merger (s^2 h -> h), linear_1 h -> H,
    // linear_2 H -> H, biases when multimodal_projector_bias.
    const ParamCount sm = c.root_size("spatial_merge_size", 2);
    params += h + sm * sm * h * h + h * H + H * H;
    if (c.root_bool("multimodal_projector_bias", false)) params += 2 * H;
  }
  what = "Pixtral, " + std::to_string(L.n) + " layers";
  return params;
}

ParamCount llama4_vision_params(VisionConfig& c, ParamCount H, std::string& what) {
  const ParamCount h = c.size("hidden_size"), i = c.size("intermediate_size"),
                   L = c.size("num_hidden_layers");
  const ParamCount p = c.size("patch_size"), img = c.size("image_size"), ch = c.size("num_channels", 3);
  const ParamCount pin = c.size("projector_input_dim"), pout = c.size("projector_output_dim");
  const ParamCount vout = c.size("vision_output_dim");
  const ParamCount side = img / p;
  // Unfold-conv linear (no bias), class embedding, (side^2 + 1) positions, pre / post
  // LayerNorms; per layer q k v o with biases, fc1 / fc2 with biases, two LayerNorms.
  ParamCount params =
      ch * p * p * h + h + (side * side + 1) * h + 4 * h + L * (4 * h * h + 2 * h * i + 9 * h + i);
  // vision_adapter (pixel-shuffle MLP): fc1 intermediate_size -> projector_input_dim,
  // fc2 -> projector_output_dim, biases when multi_modal_projector_bias.
  params += i * pin + pin * pout;
  if (c.boolean("multi_modal_projector_bias", false)) params += pin + pout;
  // Llama4MultiModalProjector: linear_1 vision_output_dim -> H, no bias.
  params += vout * H;
  what = "Llama 4 vision, " + std::to_string(L.n) + " layers";
  return params;
}

ParamCount qwen3_vl_params(VisionConfig& c, std::string& what) {
  const ParamCount h = c.size("hidden_size"), i = c.size("intermediate_size"), L = c.size("depth");
  const ParamCount p = c.size("patch_size"), t = c.size("temporal_patch_size", 2),
                   ch = c.size("in_channels", 3);
  const ParamCount npos = c.size("num_position_embeddings"), sm = c.size("spatial_merge_size", 2);
  const ParamCount out = c.size("out_hidden_size");
  ParamCount deepstack;
  if (const json* d = c.find("deepstack_visual_indexes")) {
    if (!d->is_array())
      throw InputError(VisionConfig::field("deepstack_visual_indexes"),
                       "is " + describe(*d) + "; a list is required");
    deepstack = ParamCount{d->size()};
  }
  const ParamCount m = sm * sm * h;  // merged patch width
  // Conv3d patch embed (+ bias), position table; per block two LayerNorms, qkv and
  // proj with biases, fc1 / fc2 with biases; merger LayerNorm(h), fc1 m -> m, fc2 m ->
  // out (biases); each deepstack merger the same with LayerNorm(m).
  ParamCount params = ch * t * p * p * h + h + npos * h + L * (4 * h * h + 2 * h * i + 9 * h + i);
  const ParamCount merger_linears = m * m + m + m * out + out;
  params += 2 * h + merger_linears + deepstack * (2 * m + merger_linears);
  what = "Qwen3-VL vision, " + std::to_string(L.n) + " blocks";
  return params;
}

ParamCount qwen2_5_vl_params(VisionConfig& c, std::string& what) {
  const ParamCount h = c.size("hidden_size"), i = c.size("intermediate_size"), L = c.size("depth");
  const ParamCount p = c.size("patch_size"), t = c.size("temporal_patch_size", 2);
  const ParamCount ch = c.size("in_chans", c.size("in_channels", 3).n), sm = c.size("spatial_merge_size", 2);
  const ParamCount out = c.size("out_hidden_size");
  const ParamCount m = sm * sm * h;
  // Conv3d patch embed (no bias); per block two RMSNorms, qkv and proj with biases,
  // gated MLP with biases; merger RMSNorm(h), fc1 m -> m, fc2 m -> out (biases).
  ParamCount params =
      ch * t * p * p * h + L * (4 * h * h + 3 * h * i + 7 * h + 2 * i) + h + m * m + m + m * out + out;
  what = "Qwen2.5-VL vision, " + std::to_string(L.n) + " blocks";
  return params;
}

}  // namespace

void read_vision(const json& root, ModelSpec& spec) {
  auto it = root.find("vision_config");
  if (it == root.end() || it->is_null()) return;
  const json& v = *it;
  if (!v.is_object()) throw InputError("vision_config", "is " + describe(v) + "; an object is required");
  VisionConfig c(root, v);
  std::string type;
  if (auto t = v.find("model_type"); t != v.end() && t->is_string()) type = t->get<std::string>();
  std::string root_type;
  if (auto t = root.find("model_type"); t != root.end() && t->is_string()) root_type = t->get<std::string>();
  const families::Projector projector = families::hf_family(root_type).projector;
  const ParamCount H{spec.hidden_size};  // the text decoder's hidden size
  ParamCount params;
  std::string what;
  switch (families::vision_tower(type)) {
    case families::VisionTower::siglip:
      params = siglip_params(c, H, projector, what);
      break;
    case families::VisionTower::pixtral:
      params = pixtral_params(c, H, projector, what);
      break;
    case families::VisionTower::llama4:
      params = llama4_vision_params(c, H, what);
      break;
    case families::VisionTower::qwen3_vl:
      params = qwen3_vl_params(c, what);
      break;
    case families::VisionTower::qwen2_5_vl:
      params = qwen2_5_vl_params(c, what);
      break;
    case families::VisionTower::unknown:
      spec.notes.push_back("vision_config (model_type '" + type.substr(0, 40) +
                           "') is not counted in the weights estimate: its architecture is not modelled");
      return;
  }
  if (!c.missing().empty()) {
    spec.notes.push_back("vision tower (" + type.substr(0, 40) + ") not counted in the weights estimate: " +
                         c.missing() + " is missing from the config");
    return;
  }
  spec.vision_params = params.n;
  spec.vision_tower = what;
  spec.notes.push_back("vision tower counted from vision_config: " + what + ", " + std::to_string(params.n) +
                       " parameters (encoder + projector)");
}

}  // namespace kvsight::hf_config
