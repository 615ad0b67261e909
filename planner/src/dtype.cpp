// The KV dtype table. Sources: docs/reference/formulas.md "KV dtypes";
// llama.cpp ggml/src/ggml-common.h (block_q8_0: fp16 d + 32 x int8 = 34 B; block_q4_0:
// fp16 d + 16 B = 18 B; block_q4_1: fp16 d, m + 16 B = 20 B; block_q5_0: fp16 d + 4 B qh +
// 16 B = 22 B; block_q5_1: 24 B; block_iq4_nl: fp16 d + 16 B = 18 B); vLLM
// vllm/config/cache.py (CacheDType) for the vLLM names.
#include <algorithm>
#include <string>

#include "kvsight/ascii.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/dtype.hpp"
#include "kvsight/error.hpp"

namespace kvsight {

std::uint64_t KvDtype::row_bytes(std::uint64_t elements) const {
  std::uint64_t bits = checked_mul(elements, element_bits, "kv row bits");
  if (group_size > 0) {
    bits = checked_add(bits, checked_mul(ceil_div(elements, group_size), group_overhead_bits, "kv row bits"),
                       "kv row bits");
  }
  return checked_add(ceil_div(bits, 8), row_overhead_bytes, "kv row bytes");
}

namespace {

struct Alias {
  const char* alias;
  const char* name;
};

// Spellings users and engines use for the same type. vLLM: "fp8" = fp8_e4m3 on CUDA
// (vllm/config/cache.py); llama.cpp: f16/bf16/f32 (--cache-type-k).
constexpr Alias kAliases[] = {
    {"fp16", "fp16"},       {"f16", "fp16"},          {"float16", "fp16"},   {"half", "fp16"},
    {"bf16", "bf16"},       {"bfloat16", "bf16"},     {"fp32", "fp32"},      {"f32", "fp32"},
    {"float32", "fp32"},    {"float", "fp32"},        {"fp8", "fp8_e4m3"},   {"fp8_e4m3", "fp8_e4m3"},
    {"fp8_e5m2", "fp8_e5m2"}, {"fp8_inc", "fp8_e4m3"}, {"int8", "int8"},
};

std::vector<KvDtype> make_table() {
  std::vector<KvDtype> t;
  auto add = [&](KvDtype d) { t.push_back(std::move(d)); };
  // name, description, element bits, group size, group overhead bits, row overhead bytes, llama.cpp
  add({"bf16", "bfloat16, 2 B per element", 16, 0, 0, 0, true});
  add({"fp16", "float16, 2 B per element", 16, 0, 0, 0, true});
  add({"fp32", "float32, 4 B per element", 32, 0, 0, 0, true});
  add({"fp8_e4m3", "fp8 e4m3, 1 B per element (per-tensor scales, negligible)", 8, 0, 0, 0, false});
  add({"fp8_e5m2", "fp8 e5m2, 1 B per element (per-tensor scales, negligible)", 8, 0, 0, 0, false});
  // Per-token-head scales: one float32 per head per token for K and one for V
  // (formulas.md: 2 x kv_heads x 4 B per token-layer).
  add({"fp8_per_token_head", "fp8, 1 B per element + fp32 scale per token-head for K and V", 8, 0, 0, 4, false});
  add({"int8", "int8, 1 B per element (per-tensor scales)", 8, 0, 0, 0, false});
  add({"int8_per_token_head", "int8, 1 B per element + fp32 scale per token-head for K and V", 8, 0, 0, 4, false});
  // vLLM 0.28+ (TRITON_ATTN only): two int4 per byte + one fp32 scale per token-head for K and
  // V; triton_attn.py customize_spec (0.33): content = (head_size // 2 + head_size_v // 2) x 1 B
  // + 2 x 4 B per head per token.
  add({"int4_per_token_head", "int4, 2 per byte + fp32 scale per token-head for K and V", 4, 0, 0, 4, false});
  // NVFP4: 4-bit elements + one fp8 scale per 16 elements (head_dim/2 + head_dim/16 B).
  add({"nvfp4", "NVFP4, 4 bits + fp8 scale per 16 elements", 4, 16, 8, 0, false});
  // llama.cpp ggml block types: 32 elements per block, fp16 scale (and min for _1 types).
  add({"q8_0", "llama.cpp q8_0, 34 B per 32 elements", 8, 32, 16, 0, true});
  add({"q4_0", "llama.cpp q4_0, 18 B per 32 elements", 4, 32, 16, 0, true});
  add({"q4_1", "llama.cpp q4_1, 20 B per 32 elements", 4, 32, 32, 0, true});
  add({"q5_0", "llama.cpp q5_0, 22 B per 32 elements", 5, 32, 16, 0, true});
  add({"q5_1", "llama.cpp q5_1, 24 B per 32 elements", 5, 32, 32, 0, true});
  add({"iq4_nl", "llama.cpp iq4_nl, 18 B per 32 elements", 4, 32, 16, 0, true});
  // KIVI-style group quantization: fp16 scale and zero point per group of G
  // (bits + 32/G bits per element).
  for (std::uint32_t group : {32u, 64u, 128u}) {
    for (std::uint32_t bits : {4u, 2u}) {
      const std::string g = std::to_string(group), b = std::to_string(bits);
      add({"int" + b + "_g" + g, "int" + b + ", fp16 scale + zero per group of " + g, bits, group, 32, 0, false});
    }
  }
  return t;
}

std::string allowed_names() {
  std::string out;
  for (const auto& d : kv_dtypes()) out += (out.empty() ? "" : ", ") + d.name;
  return out + " (aliases: fp8, f16, f32, float16, bfloat16, auto = the model dtype)";
}

}  // namespace

const std::vector<KvDtype>& kv_dtypes() {
  static const std::vector<KvDtype> table = make_table();
  return table;
}

const KvDtype& find_kv_dtype(std::string_view name, std::string_view field) {
  std::string key = ascii_lower(name);
  for (const auto& a : kAliases)
    if (key == a.alias) key = a.name;
  for (const auto& d : kv_dtypes())
    if (d.name == key) return d;
  throw InputError(std::string(field), "unknown KV cache dtype '" + std::string(name) + "'; allowed: " + allowed_names());
}

std::string canonical_torch_dtype(std::string_view name, std::string_view field) {
  const std::string key = ascii_lower(name);
  if (key == "bfloat16" || key == "bf16" || key == "torch.bfloat16") return "bf16";
  if (key == "float16" || key == "fp16" || key == "half" || key == "torch.float16") return "fp16";
  if (key == "float32" || key == "fp32" || key == "float" || key == "torch.float32") return "fp32";
  throw InputError(std::string(field),
                   "unknown dtype '" + std::string(name) + "'; allowed: bfloat16, float16, float32");
}

std::uint32_t torch_dtype_bytes(std::string_view name, std::string_view field) {
  const std::string canonical = canonical_torch_dtype(name, field);
  return canonical == "fp32" ? 4 : 2;
}

}  // namespace kvsight
