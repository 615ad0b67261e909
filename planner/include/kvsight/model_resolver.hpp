#pragma once
// Reading a model into a ModelSpec (kvsight/model_spec.hpp): an HF config.json text, and
// --model resolved to a catalog entry, a config file or directory, a GGUF, or an org/name
// in the local Hugging Face cache.
#include <string>
#include <string_view>
#include <vector>

#include "kvsight/model_spec.hpp"

namespace kvsight {

// Parses an HF config.json text. `origin` is used in messages and ModelSpec::source.
// Reads nested text_config; every unknown value of a known field is an InputError
// naming the field.
ModelSpec parse_hf_config(std::string_view json_text, const std::string& origin);

// Resolves --model: a catalog id, a path to a config.json, a directory holding one,
// or an "org/name" in the local Hugging Face cache ($HF_HOME/hub or
// ~/.cache/huggingface/hub). Never the network. Throws InputError on failure,
// listing what was tried.
ModelSpec resolve_model(const std::string& model_arg);

// Comma list and "all" (every catalog model).
std::vector<std::string> expand_model_list(const std::string& arg);

}  // namespace kvsight
