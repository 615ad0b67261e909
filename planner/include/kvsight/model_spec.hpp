#pragma once
// ModelSpec: the one description of a model, built from an HF config.json (file,
// directory, local HF cache), a built-in catalog entry (same JSON form), a GGUF or flags.
// It holds per-layer attention specs, not "num_layers x kv_heads". The types only: the
// readers and the resolver that build one are kvsight/model_resolver.hpp and
// kvsight/gguf.hpp, and nothing here depends on them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvsight {

enum class LayerKind {
  full_attention,  // KV grows with the whole context
  sliding_window,  // KV capped at `window` tokens (Mistral, Gemma 2/3, gpt-oss)
  chunked_local,   // attention within chunks of `window` tokens (Llama 4)
  mla,             // multi-head latent attention: one latent per token (DeepSeek-V2/V3)
  recurrent,       // Mamba / gated delta-net / linear attention: constant state
  shared_kv,       // reads another layer's KV, allocates none (Gemma 3n)
  none,            // no sequence state (e.g. an MLP-only block)
};
std::string_view to_string(LayerKind kind);

// lightning: MiniMax-Text-01 / M1 linear ("lightning") attention, one
// heads x head_dim x head_dim state per layer (docs/reference/model-inputs.md).
enum class RecurrentKind { mamba1, mamba2, gated_delta_net, short_conv, lightning };
std::string_view to_string(RecurrentKind kind);

// Shapes of a recurrent layer's per-sequence state, in vLLM's terms
// (vllm/model_executor/layers/mamba/mamba_utils.py; formulas.md "Recurrent layers").
struct RecurrentSpec {
  RecurrentKind kind = RecurrentKind::mamba2;
  std::uint64_t d_inner = 0;   // mamba: expand x hidden (or mamba_d_inner / n_heads x head_dim)
  std::uint64_t d_conv = 0;    // conv kernel width (conv state keeps d_conv - 1 columns)
  std::uint64_t d_state = 0;   // mamba ssm state size
  std::uint64_t n_groups = 0;  // mamba2
  std::uint64_t n_heads = 0;   // mamba2 heads
  std::uint64_t head_dim = 0;  // mamba2 head dim
  // gated delta-net (Qwen3-Next, Qwen3.5/3.6): linear_key_head_dim, linear_num_key_heads, ...
  std::uint64_t key_head_dim = 0, num_key_heads = 0, value_head_dim = 0, num_value_heads = 0;
  std::string conv_dtype = "bf16";  // conv state: model dtype
  std::string ssm_dtype = "bf16";   // ssm state: mamba_ssm_dtype (often fp32)
  // The config names mamba_ssm_dtype; without it each engine applies its own default (vLLM:
  // the model dtype; SGLang: float32, configs/mamba_utils.py mamba2_state_dtype).
  bool ssm_dtype_from_config = false;
};

struct LayerSpec {
  LayerKind kind = LayerKind::full_attention;
  std::uint32_t kv_heads = 0;         // KV heads of this layer (MLA: 1 latent)
  std::uint32_t head_dim_k = 0;       // K head dim (MLA: kv_lora_rank + qk_rope_head_dim)
  std::uint32_t head_dim_v = 0;       // V head dim (MLA: 0, the latent is stored once)
  std::uint64_t window = 0;           // sliding window W or chunk size C, tokens
  bool rope = true;                   // false for NoPE layers (SmolLM3, Llama 4 global layers)
  std::int32_t kv_source_layer = -1;  // shared_kv: index of the layer whose KV it reads
  bool indexer = false;               // MLA layer with a sparse-attention indexer K cache (DeepSeek V3.2)

  bool is_attention() const {
    return kind == LayerKind::full_attention || kind == LayerKind::sliding_window ||
           kind == LayerKind::chunked_local || kind == LayerKind::mla;
  }
  bool allocates_kv() const { return is_attention(); }
};

struct RopeScaling {
  std::string type;  // "" (none), linear, dynamic, yarn, llama3, longrope, default, mrope, ...
  double factor = 1.0;
  std::uint64_t original_max_position_embeddings = 0;
  double low_freq_factor = 0.0, high_freq_factor = 0.0;  // llama3
  bool present() const { return !type.empty() && type != "default"; }
};

struct MlaSpec {
  std::uint32_t kv_lora_rank = 0, q_lora_rank = 0;  // q_lora_rank 0 = plain q_proj
  std::uint32_t qk_rope_head_dim = 0, qk_nope_head_dim = 0, v_head_dim = 0;
  // A GGUF converted before llama.cpp PR #12801 (no attention.key_length_mla):
  // llama.cpp caches decompressed per-head K and V for it whatever the build.
  bool gguf_decompressed_cache = false;
};

// DeepSeek V3.2 sparse attention (DSA): a "lightning indexer" per layer scores
// past tokens and keeps index_topk of them; its keys are cached per token
// (index_n_heads, index_head_dim, index_topk in config.json; vLLM deepseek_v2.py).
struct IndexerSpec {
  std::uint32_t n_heads = 0;   // index_n_heads (query heads of the indexer)
  std::uint32_t head_dim = 0;  // index_head_dim (one cached key of this size per token)
  std::uint32_t topk = 0;      // index_topk (tokens each query attends to)
};

struct MoeSpec {
  std::uint32_t num_experts = 0;  // 0 = dense
  std::uint32_t experts_per_token = 0;
  std::uint32_t num_shared_experts = 0;
  std::uint64_t moe_intermediate_size = 0;
  std::uint64_t shared_expert_intermediate_size = 0;  // when given separately (Qwen MoE)
  std::uint32_t first_k_dense_layers = 0;             // DeepSeek first_k_dense_replace
  std::uint32_t moe_layer_frequency = 1;  // every Nth layer is MoE (Llama 4: interleave_moe_layer_step)
  bool is_moe() const { return num_experts > 0; }
};

struct Quantization {
  std::string method;            // "" (none), gptq, awq, fp8, mxfp4, nvfp4, compressed-tensors, ...
  double bits_per_weight = 0.0;  // on quantized linears; 0 = weights at the model dtype
  std::uint32_t group_size = 0;
  // compressed-tensors quantization_config.ignore: modules left at the model dtype (names or
  // "re:" Python regexes, compressed-tensors utils/match.py); the weight estimate applies them
  // per group of linears (planner/src/model/weights.cpp).
  std::vector<std::string> ignore;
};

// A GGUF's tensor bytes by where llama.cpp loads them (src/llama-arch.cpp LLM_TENSOR_INFOS, b11312):
// the input layer stays in host memory, each repeating block goes to its layer's device and
// the output layer to the device -ngl gives it (docs/reference/llamacpp-current.md "Layers on
// the GPU", issue #22 item 5). Grouped by tensor name, never by reading the data.
struct GgufTensorLayers {
  // token_embd, position_embd, token_types, per_layer_token_embd, masked_embd_*: LAYER_INPUT.
  std::uint64_t input = 0;
  // Every other tensor outside the blocks (output, output_norm, cls, ...): LAYER_OUTPUT.
  std::uint64_t output = 0;
  // rope_freqs, rope_factors_long / _short, token_embd_norm: outside blk.N in the file but
  // LAYER_REPEATING (each layer loads its own copy, TENSOR_DUPLICATED; a few KiB).
  std::uint64_t repeating_shared = 0;
  // token_embd's bytes when the file has no output.weight (tied embeddings): the models
  // create the output from token_embd with TENSOR_DUPLICATED, a second copy on the output's
  // device (src/models/llama.cpp).
  std::uint64_t tied_output = 0;
  std::vector<std::uint64_t> blocks;  // blk.N.*, index N
};

// Weights bytes read from the files themselves (safetensors or GGUF headers),
// when the model came from a directory or a GGUF file.
struct ExactWeights {
  std::uint64_t bytes = 0;
  std::uint64_t params = 0;          // elements of every tensor, when known (GGUF), else 0
  std::string format;                // "safetensors" or "gguf"
  std::string method;                // one line: which files, which were skipped
  std::vector<std::string> files;    // counted
  std::vector<std::string> skipped;  // present, not counted (consolidated copies, adapters)
  std::optional<GgufTensorLayers> gguf_layers;  // GGUF only
};

// What a model's family does that its files state in no field of their own. The readers
// fill it from the model-family table (planner/src/model/families.cpp, by HF model_type or
// llama.cpp architecture), the one code that compares a model_type; the engines, the gates
// and the weights estimate read these instead.
struct FamilyTraits {
  // ALiBi position biases instead of RoPE (BLOOM, MPT): vLLM's ROCm custom paged attention
  // refuses them (docs/reference/gates.md).
  bool alibi = false;
  // Learned per-head attention sinks (gpt-oss): vLLM's ROCM_ATTN refuses them.
  bool attention_sinks = false;
  // Attention and a Mamba2 mixer side by side in every decoder layer (Falcon-H1): each
  // decoder layer is listed twice in `layers`, attention then its state, and the norms and
  // the MLP belong to the attention entry.
  bool parallel_hybrid = false;
  // An up + down MLP (2 x H x I) rather than a gated one (3 x H x I).
  bool plain_mlp = false;
  // Pre- and post-feed-forward norms besides the input and post-attention ones (Gemma 2 / 3).
  bool sandwich_norms = false;
  // MLPs in layers of their own, with no attention or state (Nemotron-H).
  bool mlp_layers = false;
  // q_norm and k_norm over all heads at once, heads x head_dim each (MiniMax-M2).
  bool full_width_qk_norm = false;
  // max_position_embeddings already counts the RoPE scaling, so vLLM does not multiply it by
  // the factor (Gemma 3).
  bool length_includes_rope_scaling = false;

  bool operator==(const FamilyTraits&) const = default;
};

struct ModelSpec {
  std::string id;            // catalog id or the path/org-name it was read from
  std::string display_name;  // e.g. "HuggingFaceTB/SmolLM3-3B"
  std::string source;        // where the config came from (URL or path)
  std::string architecture;  // architectures[0]
  std::string model_type;    // as the files name it (GGUF: general.architecture); shown, never compared
  FamilyTraits traits;       // from the family table

  std::uint64_t hidden_size = 0;
  std::uint32_t num_attention_heads = 0;  // query heads
  std::uint32_t num_kv_heads = 0;         // of standard attention layers
  std::uint32_t head_dim = 0;             // query/key head dim of standard attention layers
  std::uint64_t intermediate_size = 0;
  std::uint64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  std::uint64_t per_layer_embedding_params = 0;  // Gemma 3n per-layer input embeddings
  bool attention_bias = false;
  bool qk_norm = false;
  std::string dtype = "bf16";  // weights and activations (torch_dtype / dtype)
  Quantization quantization;
  MoeSpec moe;
  std::optional<MlaSpec> mla;
  std::optional<RecurrentSpec> recurrent;
  std::optional<IndexerSpec> indexer;  // DeepSeek V3.2 family; layers with one have LayerSpec::indexer
  // Parameters of a multimodal model's vision (or audio) encoder and projector,
  // from vision_config shapes (0 when text-only or not known); `vision_tower`
  // names the architecture counted.
  std::uint64_t vision_params = 0;
  std::string vision_tower;

  // Multi-token-prediction layers outside num_hidden_layers (DeepSeek V3 / GLM-4.5
  // num_nextn_predict_layers, Qwen3.5 / 3.6 mtp_num_hidden_layers): an engine's MTP drafter
  // runs them and gives each a KV cache (vllm/config/speculative.py hf_config_override, 0.33).
  std::uint32_t mtp_layers = 0;

  std::uint64_t max_position_embeddings = 0;
  std::uint64_t config_max_len = 0;  // min over every length key vLLM reads (n_positions, max_seq_len, ...)
  double rope_theta = 0.0;
  RopeScaling rope_scaling;

  std::string local_dir;  // directory the config came from (safetensors live there), "" otherwise
  std::optional<ExactWeights> exact_weights;  // set by resolve_model from the weights files' headers

  std::vector<LayerSpec> layers;
  // Defaults assumed where the config was silent, and other facts worth saying.
  std::vector<std::string> notes;

  std::uint32_t num_layers() const { return static_cast<std::uint32_t>(layers.size()); }
  std::uint32_t count(LayerKind kind) const;
  std::uint32_t attention_layer_count() const;  // layers that allocate KV
  std::uint32_t rope_layer_count() const;       // attention layers with RoPE
  std::uint32_t nope_layer_count() const;       // attention layers without RoPE
  bool is_hybrid() const;                       // attention and recurrent layers together
};

// The longest context the model config allows, as vLLM derives it
// (vllm/config/model.py _get_and_verify_max_len): the smallest of the length keys
// (max_position_embeddings, n_positions, max_seq_len, seq_length, ...), times the
// rope_scaling factor unless the type is su/longrope/llama3 (whose
// max_position_embeddings already is the extended length); yarn starts from
// original_max_position_embeddings. Not for a model whose length already counts it
// (FamilyTraits::length_includes_rope_scaling: Gemma 3).
std::uint64_t derived_max_model_len(const ModelSpec& model);

// Checks that every product the state formulas take of a recurrent spec fits in
// 64 bits (d_inner + 2 n_groups d_state, key dim x heads x 2, ... times 8-byte
// elements, times the conv width): an absurd config is refused here, naming
// `field`, instead of wrapping later.
void validate_recurrent(const RecurrentSpec& spec, const std::string& field);

}  // namespace kvsight
