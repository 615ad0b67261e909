// exllamav2 / exllamav3 KV-cache budget: a fixed cache the user sizes in tokens.
//
// Sources: turboderp/exllamav2 (v0.2.7) exllamav2/cache.py (ExLlamaV2Cache, _Q8/_Q6/_Q4 caches,
// the FP16 temporary per device for quantized caches), exllamav2/generator/dynamic.py
// (256-token pages, the whole completion reserved up front, max_batch_size 256; FP8 cache
// refused); turboderp-org/exllamav3 (v1.4.1) exllamav3/cache (k_bits, v_bits 2..8, fp16 scale
// per 32 values for K and for V). Per token per layer, with d = kv_heads x head_dim
// (docs/reference/overheads.md): FP16 4d bytes; Q8 2.125d; Q6 1.625d (exl2: K 8-bit,
// V 4-bit; exl3: 6,6); Q4 1.125d; exl3 k,v bits: d (k + v) / 8 + d / 8.
#include <algorithm>
#include <string>

#include "common.hpp"
#include "kvsight/ascii.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
namespace {

using namespace engine_detail;

constexpr std::uint64_t kPage = 256;  // dynamic generator page size, tokens

// Cache mode as bits per K and per V element, in eighths of a bit over the payload:
// payload bits plus one 16-bit scale per 32 values (= 0.5 bit per element) when quantized.
struct Mode {
  std::string name;
  std::uint32_t k_bits = 16, v_bits = 16;  // payload bits
  bool quantized = false;
};

Mode parse_mode(const std::string& text, int generation) {
  const std::string s = ascii_lower(text);
  const std::string allowed = generation == 2 ? "fp16, q8, q6, q4" : "fp16, q2 .. q8 (k = v bits)";
  if (s == "fp16" || s == "f16") return {"FP16", 16, 16, false};
  if (s == "fp8")
    throw InputError("--cache-type-k",
                     "the FP8 cache of exllamav2 is refused by its dynamic generator; allowed: " + allowed);
  if (s.size() == 2 && s[0] == 'q' && s[1] >= '2' && s[1] <= '8') {
    const std::uint32_t bits = static_cast<std::uint32_t>(s[1] - '0');
    if (generation == 2) {
      if (bits == 8) return {"Q8", 8, 8, true};
      if (bits == 6) return {"Q6", 8, 4, true};  // exl2 Q6: 8-bit K, 4-bit V
      if (bits == 4) return {"Q4", 4, 4, true};
    } else {
      return {"Q" + std::to_string(bits), bits, bits, true};
    }
  }
  throw InputError("--cache-type-k", "unknown cache mode '" + text + "'; allowed: " + allowed);
}

// Bytes of one token of one layer: d_k elements of K and d_v of V.
std::uint64_t token_layer_bytes(const Mode& m, std::uint64_t d_k, std::uint64_t d_v) {
  // In half-bits to stay integral: payload + 0.5 bit per element of scale when quantized.
  const std::uint64_t k_half = 2 * m.k_bits + (m.quantized ? 1 : 0);
  const std::uint64_t v_half = 2 * m.v_bits + (m.quantized ? 1 : 0);
  return ceil_div(d_k * k_half + d_v * v_half, 16);
}

class ExllamaEngine final : public Engine {
 public:
  explicit ExllamaEngine(int generation) : generation_(generation) {}
  std::string name() const override { return generation_ == 2 ? "exllamav2" : "exllamav3"; }
  std::vector<std::string> known_versions() const override {
    return generation_ == 2 ? std::vector<std::string>{"0.2.7"} : std::vector<std::string>{"1.4.1"};
  }
  PlanResult budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                    const EngineOptions& options) const override;

  std::string display_name() const override { return generation_ == 2 ? "ExLlamaV2" : "ExLlamaV3"; }
  std::string default_version() const override { return known_versions().front(); }
  // The cache is sized in tokens (ExLlamaV2Cache max_seq_len; TabbyAPI cache_size) with
  // one cache mode for K and V (TabbyAPI cache_mode); kvsight spells them --ctx-size and
  // --cache-type-k, as for llama.cpp, and also --cache-size / --cache-mode.
  std::vector<EngineFlag> flags() const override {
    return {{OptionField::ctx_size, {"--cache-size", "--ctx-size"}},
            {OptionField::cache_type_k, {"--cache-mode", "--cache-type-k"}}};
  }
  std::vector<std::string> kv_cache_dtypes() const override {
    if (generation_ == 2) return {"f16", "fp16", "FP16", "q8", "Q8", "q6", "Q6", "q4", "Q4"};
    std::vector<std::string> modes{"f16", "fp16", "FP16"};
    for (char bits = '2'; bits <= '8'; ++bits) {
      modes.push_back(std::string("q") + bits);
      modes.push_back(std::string("Q") + bits);
    }
    return modes;
  }
  std::vector<KvTypeSetting> kv_cache_type_settings(const EngineOptions& options) const override {
    return {{OptionField::cache_type_k, options.exllama.cache_mode}};
  }
  // The cache mode's K and V bits as dtypes (for the quality tier; the budget sizes the
  // cache from the mode itself, token_layer_bytes).
  KvTypes kv_types(const ModelSpec&, const EngineOptions& options) const override {
    const Mode mode = parse_mode(options.exllama.cache_mode, generation_);
    KvTypes types;
    types.k = {mode.name, "ExLlama cache mode " + mode.name + " (K)", mode.k_bits, 0, 0, 0, false};
    types.v = {mode.name, "ExLlama cache mode " + mode.name + " (V)", mode.v_bits, 0, 0, 0, false};
    return types;
  }
  // No tensor parallel in this planner's ExLlama model: the figures are the whole model's.
  bool shards_weights() const override { return false; }
  BlockSizeChoice block_size(const ModelSpec&, const GpuSpec*, const EngineOptions& options) const override {
    return given_or_default_block(
        options, static_cast<std::uint32_t>(kPage), "256-token pages of the dynamic generator",
        [](std::uint32_t b) { return b == kPage; }, "256 (the dynamic generator's fixed page)");
  }
  std::vector<StartupCheck> startup_checks(const ModelSpec&, const GpuSpec*,
                                           const EngineOptions&) const override {
    return {};
  }

 private:
  int generation_;
};

PlanResult ExllamaEngine::budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                                 const EngineOptions& options) const {
  check_common_options(options);
  refuse_unused_overheads(options, name(), {OverheadFlag::activation});
  if (model.layers.empty()) throw InputError("--model", "the model has no layers");
  PlanResult result;
  result.engine = name();
  result.engine_version = decision.version.text;
  if (auto newer = newer_than_known_warning(*this, decision.version)) result.warnings.push_back(*newer);
  const Mode mode = parse_mode(options.exllama.cache_mode, generation_);
  if (model.mla) throw InputError("--model", "MLA models are not supported by " + name());
  if (model.recurrent && model.count(LayerKind::recurrent) > 0)
    throw InputError("--model", "recurrent (Mamba / linear attention) layers are not supported by " + name());

  // Every attention layer holds every cached token (no sliding-window savings in the cache).
  std::uint64_t per_token = 0, largest_layer_fp16 = 0;
  for (const LayerSpec& l : model.layers) {
    if (!l.allocates_kv()) continue;
    const std::uint64_t d_k = std::uint64_t{l.kv_heads} * l.head_dim_k;
    const std::uint64_t d_v = std::uint64_t{l.kv_heads} * l.head_dim_v;
    per_token += token_layer_bytes(mode, d_k, d_v);
    const std::uint64_t fp16 = 2 * (d_k + d_v);
    largest_layer_fp16 = std::max(largest_layer_fp16, fp16);
  }
  const std::uint64_t max_seq_len = decision.length.tokens;
  // Cache size in tokens: --ctx-size (ExLlamaV2Cache max_seq_len), default the model's
  // max_seq_len, a multiple of 256.
  const std::uint64_t cache_tokens =
      round_up(options.exllama.cache_size.value_or(max_seq_len), kPage, "cache tokens");
  result.assumptions.push_back(
      {"cache size", std::to_string(cache_tokens) + " tokens",
       options.exllama.cache_size ? "--ctx-size, rounded up to 256" : "the model's max_seq_len"});
  result.assumptions.push_back({"cache mode", mode.name, "--cache-type-k"});
  // exllamav2 quantized caches keep one FP16 K/V layer of the full cache length as a
  // temporary per device.
  const std::uint64_t temp = (generation_ == 2 && mode.quantized)
                                 ? checked_mul(largest_layer_fp16, cache_tokens, "fp16 temporary")
                                 : 0;
  result.kv.bytes_per_token = per_token;
  result.kv.bytes_per_token_all_layers = per_token;
  result.kv.pool_bytes_per_token = per_token;
  result.kv.block_size = decision.block.tokens;
  const std::uint64_t context = options.context ? options.context : max_seq_len;
  result.kv.context = context;
  result.kv.batch = options.batch;
  result.kv.blocks_per_sequence = ceil_div(context, kPage);
  result.kv.bytes_per_sequence = checked_mul(checked_mul(result.kv.blocks_per_sequence, kPage, "tokens"),
                                             per_token, "kv bytes per sequence");
  result.kv.bytes_per_batch = checked_mul(result.kv.bytes_per_sequence, options.batch, "kv bytes per batch");
  result.weights = decision.weights;  // the whole model (shards_weights false)
  result.assumptions.push_back(decision.weights_assumption);

  const std::uint64_t pages = cache_tokens / kPage;
  const std::uint64_t pages_per_request = ceil_div(context, kPage);
  result.notes.push_back(
      "the dynamic generator reserves ceil((prompt + max_new) / 256) = " + std::to_string(pages_per_request) +
      " pages per request up front, " + std::to_string(pages) + " pages in the cache");

  const std::optional<std::uint64_t> total = total_memory(gpu, options);
  if (!total) return result;
  Capacity cap;
  cap.gpu_memory_bytes = *total;
  std::uint64_t overhead = static_cast<std::uint64_t>(0.5 * kGiB);
  std::string why = "CUDA context and scratch buffers: 0.5 GiB (range 0.3-1.5)";
  if (options.overheads.activation_gib) {
    overhead = gib_to_bytes(*options.overheads.activation_gib, "--activation-gib");
    why = "given";
  }
  result.assumptions.push_back({"runtime overhead", gib_text(overhead), why});
  cap.overhead_bytes = checked_add(overhead, temp, "overhead");
  const std::uint64_t used = checked_add(result.weights.bytes_per_rank, cap.overhead_bytes, "non-KV memory");
  cap.available_kv_bytes = used < *total ? *total - used : 0;
  const std::uint64_t cache_bytes = checked_mul(cache_tokens, per_token, "cache bytes");
  cap.page_bytes = checked_mul(kPage, per_token, "page bytes");
  cap.num_blocks = pages;
  cap.kv_tokens = cache_tokens;
  cap.max_model_len = context;
  cap.fits = cache_bytes <= cap.available_kv_bytes && pages >= pages_per_request;
  const double by_pages = static_cast<double>(pages / std::max<std::uint64_t>(1, pages_per_request));
  cap.max_concurrency = cache_bytes <= cap.available_kv_bytes ? std::min(256.0, by_pages) : 0.0;
  // Largest cache that fits, in whole pages (the FP16 temporary grows with it too).
  const std::uint64_t per_page = cap.page_bytes + (temp > 0 ? kPage * largest_layer_fp16 : 0);
  const std::uint64_t room = result.weights.bytes_per_rank + overhead < *total
                                 ? *total - result.weights.bytes_per_rank - overhead
                                 : 0;
  cap.largest_max_model_len = per_page > 0 ? room / per_page * kPage : 0;
  if (cache_bytes > cap.available_kv_bytes)
    result.warnings.push_back("a " + std::to_string(cache_tokens) + "-token cache (" + gib_text(cache_bytes) +
                              ") does not fit; the largest that fits is " +
                              std::to_string(cap.largest_max_model_len) + " tokens");
  result.capacity = cap;
  return result;
}

}  // namespace

std::unique_ptr<Engine> make_exllama_engine(int generation) {
  return std::make_unique<ExllamaEngine>(generation);
}

}  // namespace kvsight
