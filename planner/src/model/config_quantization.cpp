// quantization_config of an HF config.json: the method and the bits per weight of the
// quantized linears (docs/reference/formulas.md "Weights").
#include <algorithm>
#include <string>

#include "config_reader.hpp"
#include "kvsight/ascii.hpp"

namespace kvsight::hf_config {

namespace {
// Bounds on quantization_config.ignore: real configs list a few to a few hundred modules.
constexpr std::size_t kMaxIgnoreEntries = 4096;
constexpr std::size_t kMaxIgnoreChars = 1024;
}  // namespace

Quantization read_quantization(const ConfigReader& r) {
  Quantization q;
  const json* v = r.find_anywhere("quantization_config");
  if (!v) return q;
  if (!v->is_object())
    throw InputError("quantization_config", "is " + describe(*v) + "; an object is required");
  const json& c = *v;
  auto str = [&](const char* key) -> std::string {
    auto it = c.find(key);
    return it != c.end() && it->is_string() ? it->get<std::string>() : "";
  };
  if (auto m = c.find("quant_method"); m != c.end() && !m->is_null() && !m->is_string())
    throw InputError("quantization_config.quant_method",
                     "is " + describe(*m) + "; a method name (string) is required");
  q.method = str("quant_method");
  if (q.method.empty() && c.contains("load_in_4bit")) q.method = "bitsandbytes";
  q.method = ascii_lower(q.method);
  // An integer from an allowed set; a string, fraction or other value is refused
  // (never a fallback).
  auto integer_in = [&](const json& obj, const char* key, const std::string& field,
                        std::initializer_list<std::int64_t> allowed, std::int64_t fallback) -> std::int64_t {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    std::string set;
    for (auto a : allowed) set += (set.empty() ? "" : ", ") + std::to_string(a);
    if (!it->is_number_integer() ||
        std::find(allowed.begin(), allowed.end(), it->get<std::int64_t>()) == allowed.end())
      throw InputError(field, "is " + describe(*it) + "; allowed: " + set);
    return it->get<std::int64_t>();
  };
  // group_size: -1 (one group per output channel) or a positive integer.
  auto group_of = [&](const json& obj, const char* key, const std::string& field,
                      std::int64_t fallback) -> std::int64_t {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_number_integer() || it->get<std::int64_t>() == 0 || it->get<std::int64_t>() < -1 ||
        it->get<std::int64_t>() > 4294967295ll)
      throw InputError(
          field, "is " + describe(*it) + "; allowed: -1 (per channel) or a positive integer below 2^32");
    return it->get<std::int64_t>();
  };
  if (q.method == "gptq" || q.method == "awq" || q.method == "gptq_marlin" || q.method == "awq_marlin" ||
      q.method == "auto-round" || q.method == "autoround") {
    // Bit widths vLLM accepts: GPTQ 2/3/4/8 (vllm quantization/gptq.py GPTQConfig),
    // AWQ 4 only (awq.py AWQConfig); auto-round as GPTQ.
    const bool awq = q.method.rfind("awq", 0) == 0;
    const std::initializer_list<std::int64_t> gptq_bits = {2, 3, 4, 8}, awq_bits = {4};
    const char* bits_key = c.contains("bits") || !c.contains("w_bit") ? "bits" : "w_bit";
    const auto bits = static_cast<double>(integer_in(
        c, bits_key, std::string("quantization_config.") + bits_key, awq ? awq_bits : gptq_bits, 4));
    const char* group_key =
        c.contains("group_size") || !c.contains("q_group_size") ? "group_size" : "q_group_size";
    const std::int64_t group_raw =
        group_of(c, group_key, std::string("quantization_config.") + group_key, 128);
    const double group = group_raw > 0 ? static_cast<double>(group_raw) : 0.0;  // -1 = per-channel
    q.group_size = static_cast<std::uint32_t>(group);
    // fp16 scale + `bits`-bit zero point per group.
    q.bits_per_weight = bits + (group > 0 ? (16.0 + bits) / group : 0.0);
  } else if (q.method == "fp8" || q.method == "fbgemm_fp8") {
    q.bits_per_weight = 8.0;
  } else if (q.method == "mxfp4") {
    q.bits_per_weight = 4.25;
  } else if (q.method == "modelopt" || q.method == "nvfp4" || q.method == "modelopt_fp4") {
    const std::string algo = str("quant_algo");
    q.bits_per_weight = (algo.find("FP8") != std::string::npos) ? 8.0 : 4.5;
  } else if (q.method == "bitsandbytes") {
    // load_in_4bit must be a JSON bool: nlohmann's value() throws type_error on a string
    // (fuzz finding 11, docs/reliability.md).
    bool four = false;
    if (auto f = c.find("load_in_4bit"); f != c.end() && !f->is_null()) {
      if (!f->is_boolean())
        throw InputError("quantization_config.load_in_4bit",
                         "is " + describe(*f) + "; true or false is required");
      four = f->get<bool>();
    }
    // NF4 with a fp32 absmax per 64 (4 + 32/64); int8 LLM.int8 ~8.
    q.bits_per_weight = four ? 4.5 : 8.0;
  } else if (q.method == "compressed-tensors" || q.method == "compressed_tensors") {
    // Weight bits vLLM's compressed-tensors schemes take: 4 and 8
    // (compressed_tensors_wNa16.py WNA16_SUPPORTED_BITS; w8a8 schemes 8).
    double bits = 8.0, group = 0;
    if (auto groups = c.find("config_groups"); groups != c.end() && groups->is_object()) {
      for (const auto& [name, g] : groups->items()) {
        if (auto w = g.find("weights"); w != g.end() && w->is_object()) {
          const std::string field = "quantization_config.config_groups." + name.substr(0, 64) + ".weights";
          bits = static_cast<double>(integer_in(*w, "num_bits", field + ".num_bits", {4, 8}, 8));
          const std::int64_t gs = group_of(*w, "group_size", field + ".group_size", -1);
          group = gs > 0 ? static_cast<double>(gs) : 0.0;
        }
        break;  // the first group describes the linears
      }
    }
    q.group_size = group > 0 ? static_cast<std::uint32_t>(group) : 0;
    q.bits_per_weight = bits + (group > 0 ? 16.0 / group : 0.0);
    // ignore: the modules kept at the model dtype, names or "re:" patterns (compressed-tensors
    // QuantizationConfig.ignore). Bounded: a config lists a handful; thousands are refused.
    if (auto ig = c.find("ignore"); ig != c.end() && !ig->is_null()) {
      if (!ig->is_array())
        throw InputError("quantization_config.ignore", "is " + describe(*ig) + "; a list of module names is required");
      if (ig->size() > kMaxIgnoreEntries)
        throw InputError("quantization_config.ignore",
                         "has " + std::to_string(ig->size()) + " entries; allowed: at most " +
                             std::to_string(kMaxIgnoreEntries));
      for (std::size_t i = 0; i < ig->size(); ++i) {
        const json& e = (*ig)[i];
        const std::string field = "quantization_config.ignore[" + std::to_string(i) + "]";
        if (!e.is_string()) throw InputError(field, "is " + describe(e) + "; a module name or \"re:\" pattern is required");
        if (e.get_ref<const std::string&>().size() > kMaxIgnoreChars)
          throw InputError(field, "is " + std::to_string(e.get_ref<const std::string&>().size()) +
                                      " characters; allowed: at most " + std::to_string(kMaxIgnoreChars));
        q.ignore.push_back(e.get<std::string>());
      }
    }
  } else if (q.method == "bitnet") {
    q.bits_per_weight = 1.58;
  } else if (!q.method.empty()) {
    throw InputError(
        "quantization_config.quant_method",
        "unknown method '" + q.method +
            "'; allowed: gptq, awq, fp8, mxfp4, modelopt (nvfp4), bitsandbytes, compressed-tensors, "
            "bitnet (override the weights with --weights-gib)");
  }
  return q;
}

}  // namespace kvsight::hf_config
