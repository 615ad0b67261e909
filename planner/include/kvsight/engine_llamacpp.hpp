#pragma once
// llama.cpp's own options, as llama-server spells them (planner/src/engines/llamacpp.cpp
// and the llama.cpp gate rules read them).
#include <cstdint>
#include <optional>
#include <string>

namespace kvsight {

struct LlamacppOptions {
  std::optional<std::uint64_t> ctx_size;  // --ctx-size (n_ctx; 0 = the training context)
  std::uint32_t parallel = 1;             // --parallel (slots)
  // --parallel given: llama-server's default is -np auto (= 4 slots, unified KV) from
  // PR #16736 on (engines/llamacpp.cpp); unset, builds before it use 1.
  bool parallel_given = false;
  std::string cache_type_k = "f16";  // --cache-type-k
  std::string cache_type_v = "f16";  // --cache-type-v
  std::string flash_attn = "auto";   // --flash-attn / -fa: on, off, auto
  bool swa_full = false;             // --swa-full
  std::uint64_t ubatch_size = 512;   // --ubatch-size (n_ubatch)
  bool kv_unified = false;           // --kv-unified
  // --n-gpu-layers / -ngl: "auto" (the default, -1), "all" (-2), or a number of layers on
  // the GPU, the output layer counted as one (engines/llamacpp_offload.cpp: which layers,
  // weights and KV stay in host memory; issue #22 item 5).
  std::string n_gpu_layers = "auto";
  bool no_kv_offload = false;  // --no-kv-offload / -nkvo: every layer's KV in host memory
};

}  // namespace kvsight
