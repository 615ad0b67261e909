#pragma once
// The catalogs and published figures embedded at build time by cmake/embed_catalog.cmake.
#include <cstddef>

namespace kvsight::catalog_data {
struct EmbeddedFile {
  const char* name;  // file name, e.g. "smollm3-3b.json"
  const char* text;  // file contents
};
extern const char* const gpus_json;
extern const EmbeddedFile models[];
extern const std::size_t model_count;
extern const EmbeddedFile published[];  // data/published/*.json: published reference figures
extern const std::size_t published_count;
}  // namespace kvsight::catalog_data
