// The model-family table (families.hpp): one row per family that its files do not describe
// in full. The HF names are transformers' model_type values; the GGUF names llama.cpp's
// architecture names (src/llama-arch.cpp LLM_ARCH_NAMES). A family missing here reads with
// the defaults of Family: every layer as its files say, no trait.
//
// Where a GGUF architecture is left out of a row on purpose, the row says why. Rows whose
// names an "x*" row also matches repeat that row's facts (an exact name wins).
#include "families.hpp"

#include <utility>

namespace kvsight::families {

namespace {

// Read from the readers only, never during static initialization.
const std::vector<Family> kFamilies = {
    // ALiBi instead of RoPE (vLLM's ALiBi models: bloom, mpt); BLOOM's MLP is
    // dense_h_to_4h + dense_4h_to_h (transformers bloom).
    {.hf = {"bloom"}, .gguf = {"bloom"}, .traits = {.alibi = true, .plain_mlp = true}},
    {.hf = {"mpt"}, .gguf = {"mpt"}, .traits = {.alibi = true}},
    // Learned per-head attention sinks (transformers gpt_oss GptOssAttention.sinks). llama.cpp
    // slides every other layer (openai-moe.cpp load_swa_pattern 2).
    {.hf = {"gpt_oss"}, .gguf = {"gpt-oss"}, .traits = {.attention_sinks = true}, .gguf_sliding_pattern = 2},
    // Plain (non-gated) MLPs: up + down only, 2 x H x I (transformers modeling_<type>.py).
    // llama.cpp's phi2, gptneox and starcoder (GPT-BigCode) architectures are these
    // families too, but a GGUF of them has always been estimated with a gated MLP: naming
    // them here changes those figures, which is a change of its own, not this table's.
    {.hf = {"gpt2"}, .gguf = {"gpt2"}, .traits = {.plain_mlp = true}},
    {.hf = {"gpt_bigcode"}, .traits = {.plain_mlp = true}},
    {.hf = {"phi"}, .traits = {.plain_mlp = true}},
    {.hf = {"falcon"}, .gguf = {"falcon"}, .traits = {.plain_mlp = true}},
    {.hf = {"gpt_neox"}, .traits = {.plain_mlp = true}},
    {.hf = {"opt"}, .traits = {.plain_mlp = true}},
    {.hf = {"nemotron"}, .gguf = {"nemotron"}, .traits = {.plain_mlp = true}},
    // config.sliding_window applies to every layer: transformers passes it to every
    // attention layer, vLLM applies cache_config.sliding_window to layers without a
    // per-layer window (vllm/attention/layer.py).
    {.hf = {"starcoder2"},
     .gguf = {"starcoder2"},
     .traits = {.plain_mlp = true},
     .sliding = SlidingLayers::every},
    {.hf = {"mistral"},
     .class_defaults = {{"max_position_embeddings", "131072"}, {"rope_theta", "10000.0"}},
     .sliding = SlidingLayers::every},
    {.hf = {"mixtral", "phi3", "phimoe"}, .gguf = {"phi3", "phimoe"}, .sliding = SlidingLayers::every},
    {.hf = {"llama"},
     .gguf = {"llama"},
     .class_defaults = {{"max_position_embeddings", "2048"}, {"rope_theta", "10000.0"}}},
    // Llama 4: every 4th layer NoPE when no_rope_layers is absent, and MoE layers always
    // carry one shared expert (transformers llama4 Llama4TextMoe.shared_expert; the config
    // has no field for it).
    {.hf = {"llama4", "llama4_text"}, .gguf = {"llama4"}, .nope_every = 4, .implicit_shared_experts = 1},
    {.hf = {"llama4*"}, .implicit_shared_experts = 1},
    // Qwen: q_norm and k_norm per head from Qwen3 on (transformers qwen3 Qwen3Attention).
    {.hf = {"qwen2"}, .gguf = {"qwen2"}, .class_defaults = {{"max_position_embeddings", "32768"}}},
    {.hf = {"qwen3"},
     .gguf = {"qwen3"},
     .class_defaults = {{"max_position_embeddings", "32768"}},
     .qk_norm = true},
    // Qwen3-Next in a GGUF: the ssm.* keys carry the gated delta-net shapes
    // (convert_hf_to_gguf.py Qwen3NextModel) and every 4th layer is full attention unless
    // qwen3next.full_attention_interval says otherwise.
    {.hf = {"qwen3_next"},
     .gguf = {"qwen3next"},
     .qk_norm = true,
     .gguf_state = GgufState::gated_delta_net,
     .gguf_attention_interval = 4},
    {.hf = {"qwen3*"}, .qk_norm = true},
    // Gemma: tied embeddings by default (transformers PretrainedConfig default True; the
    // Llama-family configs pass False). Gemma 2 / 3 add pre- and post-feed-forward norms
    // (transformers gemma2 Gemma2DecoderLayer), Gemma 3 q_norm and k_norm. Gemma 2 slides
    // its even layers (transformers gemma2: is_sliding = not bool(layer_idx % 2)), Gemma 3
    // five of every six; llama.cpp's patterns (src/models/<arch>.cpp load_swa_pattern, read
    // in the llama.cpp vendored by llama-cpp-python 0.3.36): gemma2 2, gemma3 6, gemma3n 5.
    {.hf = {"gemma"}, .gguf = {"gemma"}, .tied_embeddings = true},
    {.hf = {"gemma2"},
     .gguf = {"gemma2"},
     .traits = {.sandwich_norms = true},
     .class_defaults = {{"vocab_size", "256000"},
                        {"max_position_embeddings", "8192"},
                        {"sliding_window", "4096"},
                        {"head_dim", "256"}},
     .sliding = SlidingLayers::even,
     .tied_embeddings = true,
     .gguf_sliding_pattern = 2},
    {.hf = {"gemma2*"}, .gguf = {"gemma2*"}, .traits = {.sandwich_norms = true}},
    // transformers' Gemma3TextConfig defaults: the Gemma 3 27B config.json has no vocab_size,
    // max_position_embeddings, rope_theta or sliding_window_pattern.
    {.hf = {"gemma3_text"},
     .traits = {.sandwich_norms = true},
     .class_defaults = {{"vocab_size", "262208"},
                        {"max_position_embeddings", "131072"},
                        {"rope_theta", "1000000.0"},
                        {"sliding_window", "4096"},
                        {"sliding_window_pattern", "6"},
                        {"head_dim", "256"}},
     .sliding = SlidingLayers::sixth_global,
     .tied_embeddings = true,
     .qk_norm = true},
    // A multimodal Gemma 3: its text_config is a Gemma3TextConfig even where it says
    // model_type "gemma3".
    {.hf = {"gemma3"},
     .gguf = {"gemma3"},
     .traits = {.sandwich_norms = true},
     .text_config_type = "gemma3_text",
     .sliding = SlidingLayers::sixth_global,
     .tied_embeddings = true,
     .qk_norm = true,
     .projector = Projector::gemma3,
     .gguf_sliding_pattern = 6},
    {.hf = {"gemma3n", "gemma3n_text"},
     .gguf = {"gemma3n"},
     .traits = {.sandwich_norms = true},
     .tied_embeddings = true,
     .qk_norm = true,
     .gguf_sliding_pattern = 5},
    {.hf = {"gemma3*"}, .gguf = {"gemma3*"}, .traits = {.sandwich_norms = true}, .qk_norm = true},
    {.hf = {"smollm3"}, .gguf = {"smollm3"}, .tied_embeddings = true},
    // llama.cpp slides 3 of every 4 layers of these (load_swa_pattern 4); OLMo 2 has q_norm
    // and k_norm (transformers olmo2 Olmo2Attention).
    {.hf = {"olmo2"}, .gguf = {"olmo2"}, .qk_norm = true, .gguf_sliding_pattern = 4},
    {.hf = {"cohere2"}, .gguf = {"cohere2"}, .gguf_sliding_pattern = 4},
    {.hf = {"exaone4"}, .gguf = {"exaone4"}, .gguf_sliding_pattern = 4},
    // Mamba: every layer a recurrent state. Mamba (v1) takes d_inner from intermediate_size
    // (transformers MambaConfig: expand x hidden_size); Mamba2's num_heads counts Mamba
    // heads, so hidden_size need not be a multiple of it. A Mamba2 GGUF is Mamba2 without
    // ssm.group_count (convert_hf_to_gguf.py Mamba2Model).
    {.hf = {"mamba"},
     .gguf = {"mamba"},
     .layers = Layers::all_recurrent,
     .state = RecurrentKind::mamba1,
     .mamba_inner_is_intermediate_size = true,
     .tied_embeddings = true},
    {.hf = {"mamba2"},
     .gguf = {"mamba2"},
     .layers = Layers::all_recurrent,
     .state = RecurrentKind::mamba2,
     .head_dim_optional = true,
     .tied_embeddings = true,
     .gguf_state = GgufState::mamba2},
    {.hf = {"falcon_mamba"},
     .layers = Layers::all_recurrent,
     .state = RecurrentKind::mamba1,
     .mamba_inner_is_intermediate_size = true},
    // Falcon-H1: every decoder layer runs attention and a Mamba2 mixer in parallel
    // (transformers falcon_h1 FalconH1DecoderLayer: self.mamba and self_attn).
    {.hf = {"falcon_h1"}, .gguf = {"falcon-h1"}, .traits = {.parallel_hybrid = true}},
    // Jamba's layer_types "mamba" are Mamba (v1) (transformers jamba JambaMambaMixer).
    {.hf = {"jamba"}, .gguf = {"jamba"}, .mamba_layer = RecurrentKind::mamba1},
    // Nemotron-H keeps its MLPs in layers of their own ('-' / 'E' in hybrid_override_pattern;
    // llama.cpp: no KV heads and a feed-forward length), and they are plain (relu2 up +
    // down, transformers nemotron_h NemotronHMLP). Its attention gives head_dim: hidden_size
    // need not be a multiple of the heads.
    {.hf = {"nemotron_h"},
     .gguf = {"nemotron_h"},
     .traits = {.plain_mlp = true, .mlp_layers = true},
     .head_dim_optional = true},
    // MiniMax-Text-01 / M1 (and transformers' "minimax"): layer_types "linear_attention" are
    // lightning attention (vLLM 0.23 minimax_text_01.py maps it to type 0).
    {.hf = {"minimax", "minimax_text_01", "minimax_m1", "MiniMaxM1", "MiniMaxText01"},
     .linear_attention = RecurrentKind::lightning},
    // MiniMax-M2 normalises q and k over all heads at once (vLLM 0.33 minimax_m2.py). Its
    // llama.cpp architecture minimax-m2 is left out: a GGUF of it has always been estimated
    // with per-head norms.
    {.hf = {"minimax_m2"}, .traits = {.full_width_qk_norm = true}},
    {.hf = {"mistral3"}, .projector = Projector::mistral3},
};

// The row naming `name` in `names` (Family::hf or Family::gguf): an exact name first, else
// the longest "x*" prefix of it.
const Family* find_row(std::vector<std::string_view> Family::*names, std::string_view name) {
  const Family* prefixed = nullptr;
  std::size_t longest = 0;
  for (const Family& family : kFamilies) {
    for (std::string_view entry : family.*names) {
      if (entry == name) return &family;
      if (!entry.empty() && entry.back() == '*' && entry.size() > longest &&
          name.substr(0, entry.size() - 1) == entry.substr(0, entry.size() - 1)) {
        prefixed = &family;
        longest = entry.size();
      }
    }
  }
  return prefixed;
}

const Family& or_defaults(const Family* family) {
  static const Family defaults;
  return family ? *family : defaults;
}

}  // namespace

const std::vector<Family>& all_families() { return kFamilies; }

const Family& hf_family(std::string_view model_type) {
  return or_defaults(find_row(&Family::hf, model_type));
}

const Family& gguf_family(std::string_view architecture) {
  return or_defaults(find_row(&Family::gguf, architecture));
}

FamilyTraits traits_of(const Family& family, std::string_view name) {
  FamilyTraits traits = family.traits;
  // vLLM does not scale the length of any model whose model_type contains "gemma3": its
  // max_position_embeddings already counts the RoPE scaling (vllm/config/model.py
  // _get_and_verify_max_len: "gemma3" not in hf_config.model_type). The same test of a
  // GGUF's architecture (gemma3, gemma3n).
  traits.length_includes_rope_scaling = name.find("gemma3") != std::string_view::npos;
  return traits;
}

VisionTower vision_tower(std::string_view vision_model_type) {
  // vision_config.model_type of the architectures vLLM 0.33 builds for the families in the
  // catalog (config_vision.cpp read_vision).
  static const std::pair<std::string_view, VisionTower> towers[] = {
      {"siglip_vision_model", VisionTower::siglip},
      {"siglip", VisionTower::siglip},
      {"pixtral", VisionTower::pixtral},
      {"llama4_vision_model", VisionTower::llama4},
      {"qwen3_vl", VisionTower::qwen3_vl},
      {"qwen3_vl_moe", VisionTower::qwen3_vl},
      {"qwen3_5", VisionTower::qwen3_vl},
      {"qwen3_5_moe", VisionTower::qwen3_vl},
      {"qwen2_5_vl", VisionTower::qwen2_5_vl},
  };
  for (const auto& [type, tower] : towers)
    if (type == vision_model_type) return tower;
  return VisionTower::unknown;
}

void add_parallel_recurrent_layers(ModelSpec& spec) {
  std::vector<LayerSpec> both;
  both.reserve(2 * spec.layers.size());
  for (const LayerSpec& layer : spec.layers) {
    both.push_back(layer);
    LayerSpec state;
    state.kind = LayerKind::recurrent;
    state.rope = false;
    both.push_back(state);
  }
  spec.layers = std::move(both);
}

}  // namespace kvsight::families
