#pragma once
// The architectures llama.cpp loads (general.architecture of a GGUF model). Internal to the
// GGUF reader (gguf.cpp); the list is llama.cpp's, not kvsight's family table (families.cpp
// says how kvsight reads the families it knows; llama.cpp may load more).
#include <optional>
#include <string>
#include <string_view>

namespace kvsight::gguf_detail {

// Why llama.cpp would not load a model of architecture `name` (its LLM_ARCH_NAMES,
// src/llama-arch.cpp), or nullopt when it would: a name with a NUL byte, a name llama.cpp lists
// but refuses as a model ("clip", a vision projector), a name it does not know.
std::optional<std::string> architecture_refusal(std::string_view name);

}  // namespace kvsight::gguf_detail
