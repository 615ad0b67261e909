#pragma once
// GGUF (llama.cpp's model file): header, metadata and tensor infos only, read with
// bounded reads (never the tensor data), every length checked against the file
// size. Format: ggml docs/gguf.md; the rules follow ggml/src/gguf.cpp
// (docs/reference/model-inputs.md "GGUF").
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvsight/model_spec.hpp"

namespace kvsight {

// One ggml tensor type: elements per block and bytes per block
// (ggml/src/ggml.c type_traits, ggml/src/ggml-common.h block structs).
struct GgmlType {
  std::uint32_t id = 0;
  const char* name = "";
  std::uint64_t block_elements = 1;
  std::uint64_t block_bytes = 0;
};
// nullptr for an id that is not (or no longer) a ggml type.
const GgmlType* find_ggml_type(std::uint32_t id);

struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> dims;  // ne[0] first (innermost)
  std::uint32_t type = 0;
  std::uint64_t offset = 0;  // relative to the data section
  std::uint64_t elements = 0;
  std::uint64_t bytes = 0;
};

struct GgufFile {
  std::uint32_t version = 0;
  std::uint64_t alignment = 32;   // general.alignment, default GGUF_DEFAULT_ALIGNMENT
  std::uint64_t data_offset = 0;  // where the tensor data starts
  std::uint64_t file_size = 0;
  // Scalars, strings of at most 64 KiB and arrays of numbers of at most 100,000 entries (one
  // per layer) as JSON values; what the planner never reads (arrays of strings, the tokenizer's
  // arrays, longer values, values past the file's 16 MiB budget) is skipped unread and kept as
  // {"skipped": type, "count": entries (a string: its length), "bytes": n} (gguf.cpp "Bounds").
  std::map<std::string, nlohmann::json> metadata;
  std::vector<GgufTensor> tensors;
  std::uint64_t tensor_bytes = 0;
  std::uint64_t tensor_elements = 0;
};

// Parses the header of a GGUF file on disk. Throws InputError naming the file,
// the key or tensor, and what was expected.
GgufFile read_gguf(const std::string& path);

// The ModelSpec of a GGUF file (the first split of a split model, or any split:
// the others are found by name), weights exact from the tensor infos of every split.
ModelSpec read_gguf_model(const std::string& path);

// The GGUF a directory holds: its only .gguf model file (mmproj files aside), or
// the first split of one split model; nullopt when it holds none. Several
// unrelated GGUF files are an InputError listing them.
std::optional<std::string> gguf_in_dir(const std::string& dir);

}  // namespace kvsight
