#pragma once
// The HF config.json reader's parts (model_config.cpp parse_hf_config, config_quantization.cpp,
// config_vision.cpp): how a field is read and named in errors, and the readers of the
// quantization_config and vision_config objects.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kvsight/error.hpp"
#include "kvsight/model_spec.hpp"

namespace kvsight::hf_config {

using json = nlohmann::json;

// A value as error messages show it: scalars as written (strings cut to 40
// characters), arrays and objects by their size only. Never dump() an untrusted
// value: its text can be megabytes, and dump() recurses through its nesting.
inline std::string describe(const json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return s.size() > 40 ? json(s.substr(0, 40)).dump() + "..." : json(s).dump();
  }
  if (v.is_array()) return "an array of " + std::to_string(v.size());
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  return v.dump();  // a number, bool or null: a few characters
}

// Reads fields from the decoder config (text_config when nested) and falls back
// to the top level for fields multimodal wrappers keep there (torch_dtype,
// quantization_config, tie_word_embeddings).
class ConfigReader {
 public:
  ConfigReader(const json& root, const json& text, std::string origin, bool nested)
      : root_(root), text_(text), origin_(std::move(origin)), nested_(nested) {}

  std::string path(const std::string& key) const { return nested_ ? "text_config." + key : key; }

  const json* find(const std::string& key) const {
    auto it = text_.find(key);
    if (it != text_.end() && !it->is_null()) return &*it;
    return nullptr;
  }
  const json* find_anywhere(const std::string& key) const {
    if (const json* v = find(key)) return v;
    auto it = root_.find(key);
    if (it != root_.end() && !it->is_null()) return &*it;
    return nullptr;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  // A positive integer field; nullopt when absent.
  std::optional<std::uint64_t> positive(const std::string& key, bool allow_zero = false) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    return as_positive(*v, path(key), allow_zero);
  }
  std::uint64_t required_positive(std::initializer_list<const char*> keys) const {
    for (const char* key : keys)
      if (auto v = positive(key)) return *v;
    std::string names;
    for (const char* key : keys) names += (names.empty() ? "" : " / ") + path(key);
    throw InputError(names, "missing from " + origin_ + "; a positive integer is required");
  }
  std::uint64_t as_positive(const json& v, const std::string& field, bool allow_zero = false) const {
    if (v.is_number_unsigned()) {
      const auto x = v.get<std::uint64_t>();
      if (x == 0 && !allow_zero) throw InputError(field, "is 0; a positive integer is required");
      return x;
    }
    if (v.is_number_integer()) {
      throw InputError(field, "is " + describe(v) + "; a positive integer is required");
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && d >= (allow_zero ? 0.0 : 1.0) && d < 1.8e19)
        return static_cast<std::uint64_t>(d);
      throw InputError(field, "is " + describe(v) + "; a positive integer is required");
    }
    throw InputError(field, "is " + describe(v) + " (" + v.type_name() + "); a positive integer is required");
  }
  std::uint32_t as_u32(std::uint64_t v, const std::string& field) const {
    if (v > std::numeric_limits<std::uint32_t>::max())
      throw InputError(field, "is " + std::to_string(v) + "; at most 4294967295 is allowed");
    return static_cast<std::uint32_t>(v);
  }
  double number(const std::string& key, double fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) throw InputError(path(key), "is " + describe(*v) + "; a number is required");
    return v->get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) throw InputError(path(key), "is " + describe(*v) + "; true or false is required");
    return v->get<bool>();
  }
  std::string string(const std::string& key) const {
    const json* v = find(key);
    if (!v) return "";
    if (!v->is_string()) throw InputError(path(key), "is " + describe(*v) + "; a string is required");
    return v->get<std::string>();
  }
  const std::string& origin() const { return origin_; }

 private:
  const json& root_;
  const json& text_;
  std::string origin_;
  bool nested_;
};

// Bits per weight on quantized linears. Sources: formulas.md "Weights" (GPTQ/AWQ
// int4 g128 4.156 = 4 + (16-bit scale + 4-bit zero) / 128; FP8 8.0; NVFP4 4.5;
// MXFP4 4.25 = 4 + 8-bit shared exponent / 32).
Quantization read_quantization(const ConfigReader& r);

// Parameters of the vision encoder and projector of a multimodal config, from
// vision_config shapes, for the architectures vLLM 0.33 builds for the families
// in the catalog (docs/reference/model-inputs.md "Vision towers" derives each):
//   SigLIP (Gemma 3)      siglip.py + gemma3_mm.py Gemma3MultiModalProjector
//   Pixtral (Mistral 3)   pixtral.py PixtralHFVisionModel + mistral3.py projector
//   Llama 4               mllama4.py Llama4VisionModel + Llama4MultiModalProjector
//   Qwen3-VL / Qwen3.5    qwen3_vl.py Qwen3_VisionTransformer
//   Qwen2.5-VL            qwen2_5_vl.py Qwen2_5_VisionTransformer
// Another vision model_type is named in a note and not counted.
void read_vision(const json& root, ModelSpec& spec);

}  // namespace kvsight::hf_config
