#pragma once
// llama.cpp's -ngl and --no-kv-offload (issue #22 item 5): which repeating layers, which
// weights and which KV live on the GPU and which in host memory. Read in llama.cpp b11312
// (llama-cpp-python 0.3.36): src/llama-model.cpp load_tensors, src/llama-kv-cache.cpp,
// src/llama-memory-recurrent.cpp; the rules and the build they changed in are in
// docs/reference/llamacpp-current.md "Layers on the GPU".
#include <cstdint>
#include <string>
#include <vector>

#include "kvsight/budget.hpp"
#include "kvsight/weights.hpp"

namespace kvsight::engine_detail {

struct LlamaOffload {
  std::uint32_t n_layer = 0;        // repeating layers (hparams.n_layer_all)
  std::uint32_t device_layers = 0;  // the last `device_layers` repeating layers are on the GPU
  bool output_on_device = false;
  bool kv_offload = true;           // false with --no-kv-offload
  std::uint64_t requested = 0;      // -ngl as a number of layers (auto and all: n_layer + 1)
  bool output_first = true;         // PR #18148's order (the output layer is the first one offloaded)
  bool layer_on_device(std::uint32_t il) const { return il + device_layers >= n_layer; }
  bool kv_on_device(std::uint32_t il) const { return kv_offload && layer_on_device(il); }
};

// `ngl` is LlamacppOptions::n_gpu_layers ("auto", "all" or a number checked by set_option).
LlamaOffload llama_offload(std::uint32_t n_layer, const std::string& ngl, bool no_kv_offload, bool output_first);

struct WeightsSplit {
  std::uint64_t device = 0, host = 0;
};
// The input layer stays in host memory whatever -ngl (load_tensors: "there is very little
// benefit to offloading the input layer, so always keep it on the CPU").
WeightsSplit split_weights(const LayerWeights& weights, const LlamaOffload& offload);

// load_tensors' own lines: "offloading output layer to GPU", "offloading N repeating layers
// to GPU", "offloaded N/M layers to GPU", in the order and with the counts of the build.
std::vector<std::string> offload_log_lines(const LlamaOffload& offload);

// One line for Placement::rule.
std::string offload_rule(const LlamaOffload& offload, const std::string& ngl);

}  // namespace kvsight::engine_detail
