#pragma once
// Model families: the one table the HF-config reader (model_config.cpp) and the GGUF reader
// (gguf.cpp) share. A row names a family by its HF model_type values and its llama.cpp
// architectures, states its traits (ModelSpec::traits: ALiBi, sinks, parallel hybrid, MLP
// and norm shapes) and how each reader fills what the family's files leave unsaid: layer
// kinds and recurrent state, the sliding-window pattern, transformers' class defaults.
// families.cpp is the only code that compares a model_type or an architecture name
// (tests/test_model_families.cpp greps the sources for others).
#include <cstdint>
#include <string_view>
#include <vector>

#include "kvsight/model_spec.hpp"

namespace kvsight::families {

// A field's default in transformers' config class (models/<type>/configuration_<type>.py
// __init__), for configs that omit the field.
struct ClassDefault {
  const char* key;
  const char* value;  // JSON text
};

// Layer kinds of a family whose files list none per layer.
enum class Layers {
  from_files,     // the config's fields (layer_types, patterns, windows) or the GGUF's head counts say
  all_recurrent,  // every layer is a recurrent state (Mamba); both readers
};

// Which layers slide when an HF config sets sliding_window and no field of it says which.
enum class SlidingLayers {
  unknown,       // none of them, said in a note: full attention on every layer
  even,          // even layers slide, odd ones are global (Gemma 2)
  sixth_global,  // every 6th layer (1-based) is global (Gemma 3), said in a note
  every,         // every layer (Mistral, Mixtral, Phi-3, StarCoder2, PhiMoE), said in a note
};

// How the GGUF reader reads the ssm.* keys of a family with recurrent layers.
enum class GgufState {
  by_group_count,   // Mamba2 when ssm.group_count is set, else Mamba (v1)
  mamba2,           // Mamba2 even without ssm.group_count
  gated_delta_net,  // Qwen3-Next: ssm.state_size = head_k_dim, group_count = key heads, ...
};

// The projector a multimodal family puts between its vision tower and the decoder.
enum class Projector {
  none,
  gemma3,    // mm_input_projection_weight and mm_soft_emb_norm (vLLM gemma3_mm.py)
  mistral3,  // RMSNorm, patch merger, two linears (vLLM mistral3.py)
};

struct Family {
  std::vector<std::string_view> hf{};    // HF model_type values; "x*" is every model_type that starts with x
  std::vector<std::string_view> gguf{};  // llama.cpp general.architecture values (src/llama-arch.cpp)
  FamilyTraits traits{};                 // both readers copy them onto ModelSpec::traits (traits_of)
  Layers layers = Layers::from_files;
  // The HF-config reader.
  std::vector<ClassDefault> class_defaults{};
  std::string_view text_config_type{};          // the class of a nested text_config of this model_type
  RecurrentKind state = RecurrentKind::mamba2;  // all_recurrent layers, and the parallel_hybrid state
  RecurrentKind linear_attention = RecurrentKind::gated_delta_net;  // layer_types "linear_attention"
  RecurrentKind mamba_layer = RecurrentKind::mamba2;                // layer_types "mamba"
  SlidingLayers sliding = SlidingLayers::unknown;
  bool mamba_inner_is_intermediate_size = false;  // Mamba (v1): d_inner = intermediate_size when given
  bool head_dim_optional = false;                 // num_heads may count Mamba heads: no hidden / heads rule
  std::uint32_t nope_every = 0;                   // no_rope_layers absent: every Nth layer NoPE
  std::uint32_t implicit_shared_experts = 0;      // n_shared_experts absent: MoE layers have this many
  bool tied_embeddings = false;                   // tie_word_embeddings absent: tied
  bool qk_norm = false;                           // q_norm and k_norm per head (ModelSpec::qk_norm)
  Projector projector = Projector::none;          // of a multimodal config with this model_type at the top
  // The GGUF reader.
  GgufState gguf_state = GgufState::by_group_count;
  // full_attention_interval absent: every Nth layer attention, the rest state (0: the
  // layers without KV heads are the state).
  std::uint32_t gguf_attention_interval = 0;
  std::uint32_t gguf_sliding_pattern = 0;  // llama.cpp's swa pattern n when the file has none (0: none)
};

// Every row (tests/test_model_families.cpp checks that no name is in two rows).
const std::vector<Family>& all_families();
// The family of an HF model_type (exact, else the longest "x*" prefix), or a row of defaults.
const Family& hf_family(std::string_view model_type);
// The family of a GGUF's general.architecture, or a row of defaults.
const Family& gguf_family(std::string_view architecture);
// The family's traits for a model named `name` (model_type or architecture).
FamilyTraits traits_of(const Family& family, std::string_view name);

// The vision encoders read_vision counts, by vision_config.model_type.
enum class VisionTower { unknown, siglip, pixtral, llama4, qwen3_vl, qwen2_5_vl };
VisionTower vision_tower(std::string_view vision_model_type);

// A parallel_hybrid family's layers (Falcon-H1): each decoder layer holds attention KV and a
// Mamba-2 state side by side, so each is listed twice, attention then its recurrent state,
// as vLLM registers them (models/falcon_h1.py: an Attention and a MambaMixer2 per layer) and
// llama.cpp keeps both (llama-model.cpp create_memory, llama_memory_hybrid).
void add_parallel_recurrent_layers(ModelSpec& spec);

}  // namespace kvsight::families
