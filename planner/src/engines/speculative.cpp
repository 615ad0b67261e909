// --speculative-config (kvsight/speculative.hpp). Method names from vllm/config/speculative.py
// (0.33.0): SpeculativeMethod = ngram | draft_model | suffix | custom_class | EagleModelTypes
// (eagle, eagle3, extract_hidden_states, the MTP model types, dflash) | ngram_gpu | dspark.
#include "kvsight/speculative.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"

namespace kvsight {

namespace {

constexpr const char* kField = "speculative_config";

// MTPModelTypes in vllm/config/speculative.py (0.33.0); every one runs the target's own MTP
// layers as the drafter (hf_config_override sets n_predict from the target config).
constexpr std::array<std::string_view, 28> kMtpMethods = {"mtp",
                                                          "deepseek_mtp",
                                                          "dots3_note_mtp",
                                                          "mimo_mtp",
                                                          "mimo_v2_mtp",
                                                          "glm4_moe_mtp",
                                                          "glm4_moe_lite_mtp",
                                                          "glm_ocr_mtp",
                                                          "ernie_mtp",
                                                          "nemotron_h_mtp",
                                                          "exaone_moe_mtp",
                                                          "exaone4_5_mtp",
                                                          "qwen3_next_mtp",
                                                          "qwen4_exp_mtp",
                                                          "qwen3_5_mtp",
                                                          "longcat_flash_mtp",
                                                          "bailing_hybrid_v3_mtp",
                                                          "minimax_m3_mtp",
                                                          "bailing_hybrid_mtp",
                                                          "kimi_k3_mtp",
                                                          "pangu_ultra_moe_mtp",
                                                          "step3p5_mtp",
                                                          "step5_mtp",
                                                          "hy_v3_mtp",
                                                          "hy_v4_mtp",
                                                          "gemma4_mtp",
                                                          "inkling_mtp",
                                                          "glm5_next_mtp"};
constexpr std::array<std::string_view, 4> kDraftModelMethods = {"eagle", "eagle3", "draft_model", "dflash"};
constexpr std::array<std::string_view, 3> kNoDraftMethods = {"ngram", "ngram_gpu", "suffix"};

template <std::size_t N>
bool among(const std::array<std::string_view, N>& list, std::string_view m) {
  return std::find(list.begin(), list.end(), m) != list.end();
}

const char* kAllowed =
    "ngram, ngram_gpu, suffix, eagle, eagle3, draft_model, dflash, mtp or an MTP model type "
    "(deepseek_mtp, qwen3_next_mtp, qwen3_5_mtp, glm4_moe_mtp, ...)";

}  // namespace

SpeculativeConfig parse_speculative_config(std::string_view json_text) {
  const nlohmann::json j = parse_json_input(json_text, kField, 8);
  if (!j.is_object())
    throw InputError(
        kField, std::string("is not a JSON object; allowed: vLLM's form, e.g. "
                            "'{\"method\": \"eagle\", \"model\": \"yuhuili/EAGLE-LLaMA3.1-Instruct-8B\", "
                            "\"num_speculative_tokens\": 3}'"));
  SpeculativeConfig c;
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty())
      throw InputError(std::string(kField) + ".model",
                       "is not a non-empty string; allowed: a catalog id, a config "
                       "path or an HF id in the local cache");
    c.model = it->get<std::string>();
  }
  if (auto it = j.find("method"); it != j.end() && !it->is_null()) {
    if (!it->is_string())
      throw InputError(std::string(kField) + ".method", std::string("is not a string; allowed: ") + kAllowed);
    c.method = it->get<std::string>();
  } else if (!c.model.empty()) {
    // SpeculativeConfig.__post_init__: with a model and no method, vLLM infers eagle / eagle3
    // / mtp from the draft's name or config, else draft_model. kvsight does not guess.
    throw InputError(
        std::string(kField) + ".method",
        std::string("is missing; give it (vLLM infers it from the draft's config, kvsight does not); "
                    "allowed: ") +
            kAllowed);
  } else {
    throw InputError(std::string(kField) + ".method", std::string("is missing; allowed: ") + kAllowed);
  }
  if (among(kMtpMethods, c.method)) {
    c.kind = DraftKind::mtp;
  } else if (among(kDraftModelMethods, c.method)) {
    c.kind = DraftKind::draft_model;
    if (c.model.empty())
      throw InputError(std::string(kField) + ".model",
                       "is missing; method '" + c.method +
                           "' needs the draft model (a catalog id, a config path or "
                           "an HF id in the local cache)");
  } else if (among(kNoDraftMethods, c.method)) {
    c.kind = DraftKind::none;
  } else {
    throw InputError(std::string(kField) + ".method",
                     "is '" + c.method + "'; allowed: " + kAllowed +
                         " (custom_class, extract_hidden_states and dspark are "
                         "not modelled)");
  }
  const auto it = j.find("num_speculative_tokens");
  if (it == j.end() || it->is_null()) {
    // vLLM derives it from the MTP model's n_predict when absent; kvsight needs it given.
    throw InputError(std::string(kField) + ".num_speculative_tokens",
                     "is missing; allowed: an integer 1 to 64");
  }
  if (!it->is_number_unsigned() || it->get<std::uint64_t>() < 1 || it->get<std::uint64_t>() > 64)
    throw InputError(std::string(kField) + ".num_speculative_tokens",
                     "is " + it->dump() + "; allowed: an integer 1 to 64");
  c.num_speculative_tokens = static_cast<std::uint32_t>(it->get<std::uint64_t>());
  return c;
}

}  // namespace kvsight
