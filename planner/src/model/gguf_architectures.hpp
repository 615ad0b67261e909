#pragma once
// The architectures llama.cpp loads (general.architecture of a GGUF model). Internal to the
// GGUF reader (gguf.cpp); the list is llama.cpp's, not kvsight's family table (families.cpp
// says how kvsight reads the families it knows; llama.cpp may load more).
#include <string_view>

namespace kvsight::gguf_detail {

// Whether llama.cpp names `architecture` in its LLM_ARCH_NAMES (src/llama-arch.cpp). "clip" is
// there too, but only for llama-quantize: a model load refuses it (is_clip_architecture).
bool is_llamacpp_architecture(std::string_view architecture);
bool is_clip_architecture(std::string_view architecture);

}  // namespace kvsight::gguf_detail
