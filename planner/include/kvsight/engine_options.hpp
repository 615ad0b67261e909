#pragma once
// The one table of engine option fields (issue #9: one field-to-flag table). Each field
// has a name the planner's errors use ("block_size"), kvsight's neutral spellings that
// every engine reading the field accepts ("--block-size"), a kind that decides how its
// text is parsed, and help. The engines' own spellings are theirs (Engine::flags).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvsight/budget.hpp"

namespace kvsight {

enum class OptionKind {
  count,     // a positive integer (K/M suffixes; kvsight/counts.hpp)
  count0,    // a non-negative integer
  length,    // a positive integer, or -1 (vLLM: the largest length that fits)
  fraction,  // a number in (0, 1]
  text,      // a name checked by the engine (KV cache types)
  choice,    // one of `choices`
  flag,      // no value
};

struct OptionFieldInfo {
  OptionField field;
  std::string name;                  // "tensor_parallel_size"
  std::vector<std::string> neutral;  // kvsight's spellings for every engine that reads it
  OptionKind kind;
  std::string help;
  std::vector<std::string> choices;  // for OptionKind::choice
};

const std::vector<OptionFieldInfo>& option_fields();
const OptionFieldInfo& option_field(OptionField field);
// The field an error names: by field name ("block_size") or by any spelling, neutral or
// an engine's ("--page-size"); nullptr when it names no option field.
const OptionFieldInfo* option_field_named(std::string_view name_or_spelling);

// Parses `text` by the field's kind and stores it in `options`. Throws
// InputError(field name, ...) saying what is allowed. Flags take "" (set) only.
void set_option(EngineOptions& options, OptionField field, std::string_view text);

// The one map from a field to the members that hold it: stores an already-checked value
// in the struct of every engine that reads the field (ctx_size: llama.cpp's n_ctx and
// ExLlama's cache size). For the use cases that set options from their own request (fit).
// A count field (tp, pp, block_size, max_num_batched_tokens, max_num_seqs,
// kv_cache_memory_bytes, ctx_size, parallel, ubatch_size), or std::logic_error.
void store_option(EngineOptions& options, OptionField field, std::uint64_t value);
// A text field (kv_cache_dtype, cache_type_k, cache_type_v, flash_attn), or std::logic_error.
void store_option(EngineOptions& options, OptionField field, const std::string& value);

// The engine's own long spelling of a field ("--tp-size" for SGLang's tensor_parallel_size),
// the first of Engine::flags; "" when the engine does not read the field.
std::string engine_spelling(const Engine& engine, OptionField field);

// Which engines spell an option this way: (display name, field) pairs.
struct SpellingOwner {
  std::string engine;   // Engine::name()
  std::string display;  // Engine::display_name()
  OptionField field;
};
std::vector<SpellingOwner> spelling_owners(std::string_view spelling);

}  // namespace kvsight
