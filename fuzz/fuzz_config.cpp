// Fuzzes the HF config.json reader (kvsight::parse_hf_config) and everything a
// `plan` does with what it accepts: footprint, weights, the vLLM budget on a
// catalog GPU. InputError is the expected outcome for bad bytes; an accepted
// config must give a model whose shapes can be planned without a silent zero.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"

using namespace kvsight;
using kvsight::fuzz::require;

namespace {

// Structural facts every accepted ModelSpec must satisfy: a KV layer with no
// heads or a zero head dim would plan as 0 bytes per token, confidently.
void check_model(const ModelSpec& m) {
  require(!m.layers.empty(), "accepted a config with no layers");
  require(m.attention_layer_count() > 0 || m.recurrent.has_value(), "accepted a model with no KV and no state");
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    const std::string where = "layer " + std::to_string(i) + " (" + std::string(to_string(l.kind)) + ")";
    if (l.kind == LayerKind::mla) {
      require(m.mla.has_value(), where + ": MLA layer without MLA spec");
      require(l.head_dim_k == static_cast<std::uint64_t>(m.mla->kv_lora_rank) + m.mla->qk_rope_head_dim,
              where + ": latent width is not kv_lora_rank + qk_rope_head_dim (32-bit wrap?)");
    } else if (l.allocates_kv()) {
      require(l.kv_heads > 0, where + ": 0 KV heads");
      require(l.head_dim_k > 0, where + ": head_dim 0");
      require(l.head_dim_v > 0, where + ": V head_dim 0");
    }
    if (l.kind == LayerKind::sliding_window || l.kind == LayerKind::chunked_local)
      require(l.window > 0, where + ": window 0");
    if (l.kind == LayerKind::shared_kv)
      require(l.kv_source_layer >= 0 && static_cast<std::size_t>(l.kv_source_layer) < i,
              where + ": KV source is not an earlier layer");
    if (l.kind == LayerKind::recurrent) require(m.recurrent.has_value(), where + ": recurrent layer without state spec");
  }
}

void plan_it(const ModelSpec& m) {
  (void)derived_max_model_len(m);
  const KvTypes types = resolve_kv_types(m, "auto");
  const TokenFootprint fp = token_footprint(m, types, 1);
  if (m.attention_layer_count() > 0) require(fp.bytes_per_token_all_layers > 0, "KV layers but 0 KV bytes per token");
  if (m.recurrent) require(fp.state_bytes_per_sequence > 0 || m.recurrent->d_conv <= 1,
                           "recurrent layers but 0 state bytes per sequence");
  (void)token_footprint(m, types, 8);
  const WeightsEstimate w = estimate_weights(m, 2, 1);
  require(w.params > 0, "0 parameters");
  if (gpu_catalog().empty()) return;
  EngineOptions options;
  options.context = 4096;
  options.batch = 4;
  (void)make_engine("vllm")->plan(m, &gpu_catalog().front(), options);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ModelSpec model;
  try {
    model = parse_hf_config(text, "fuzz-config.json");
  } catch (const InputError&) {
    return 0;  // bad bytes, rejected with a message: the expected outcome
  }
  check_model(model);
  try {
    plan_it(model);
  } catch (const InputError&) {
    // An accepted shape the planner cannot size (overflow, pp > layers): exit 2 too.
  }
  return 0;
}
