#pragma once
// KV-cache and weight element types as a table: element bits plus quantization
// group overheads. Source: docs/reference/formulas.md "KV dtypes"; llama.cpp
// ggml/src/ggml-common.h (block_q8_0 = 32 x int8 + fp16 scale = 34 B, ...).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvsight {

struct KvDtype {
  std::string name;         // canonical name, e.g. "bf16", "fp8_e4m3", "q8_0"
  std::string description;  // one line for --help and `kvsight inspect`
  std::uint32_t element_bits = 16;
  // Quantization groups: every `group_size` elements of a row carry
  // `group_overhead_bits` of scale/zero. 0 = no groups.
  std::uint32_t group_size = 0;
  std::uint32_t group_overhead_bits = 0;
  // Fixed bytes per row (one head's K or V of one token), e.g. a float32
  // per-token-head scale.
  std::uint32_t row_overhead_bytes = 0;
  bool llamacpp = false;  // a ggml type (valid for --cache-type-k/v)

  // Bytes of one row of `elements` values (one head's K or V for one token).
  std::uint64_t row_bytes(std::uint64_t elements) const;
};

// All known KV dtypes, in display order.
const std::vector<KvDtype>& kv_dtypes();

// Looks up a dtype by name or alias ("auto" is resolved by the caller to the model
// dtype). Throws InputError naming `field` and listing the allowed names.
const KvDtype& find_kv_dtype(std::string_view name, std::string_view field = "--kv-cache-dtype");

// Bytes per element of a plain (unquantized) torch dtype name: "bfloat16",
// "float16", "float32", "bf16", ... Throws InputError naming `field`.
std::uint32_t torch_dtype_bytes(std::string_view name, std::string_view field);

// Normalizes torch dtype spellings to "bf16" / "fp16" / "fp32".
std::string canonical_torch_dtype(std::string_view name, std::string_view field);

}  // namespace kvsight
