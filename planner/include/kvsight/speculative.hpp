#pragma once
// Speculative decoding as vLLM's --speculative-config takes it (vllm/config/speculative.py,
// 0.33.0), reduced to what changes the KV cache and the weights: the method, the number of
// speculative tokens, and the draft model's layers (docs/reference/speculative.md).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kvsight {

struct ModelSpec;

enum class DraftKind {
  none,         // ngram, ngram_gpu, suffix: proposals from the prompt, no draft KV
  mtp,          // the target's own MTP layers (num_nextn_predict_layers / mtp_num_hidden_layers)
  draft_model,  // a separate draft model: eagle, eagle3, draft_model, dflash
};

struct SpeculativeConfig {
  std::string method;  // vLLM's method name, as given
  DraftKind kind = DraftKind::none;
  std::uint32_t num_speculative_tokens = 0;
  std::string model;                       // the draft model as given ("model" key), "" for mtp / none
  std::shared_ptr<const ModelSpec> draft;  // resolved from `model` by the app layer
};

// Parses the JSON text of --speculative-config. Throws InputError("speculative_config", ...)
// naming the key and what is allowed.
SpeculativeConfig parse_speculative_config(std::string_view json_text);

}  // namespace kvsight
