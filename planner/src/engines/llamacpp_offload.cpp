// llama.cpp's -ngl placement (llamacpp_offload.hpp).
#include "llamacpp_offload.hpp"

#include <algorithm>

#include "kvsight/checked.hpp"

namespace kvsight::engine_detail {

LlamaOffload llama_offload(std::uint32_t n_layer, const std::string& ngl, bool no_kv_offload, bool output_first) {
  LlamaOffload o;
  o.n_layer = n_layer;
  o.kv_offload = !no_kv_offload;
  o.output_first = output_first;
  // llama_model::n_gpu_layers(): a negative -ngl (auto -1, all -2) is n_layer + 1, every
  // repeating layer and the output layer. With --fit on, llama_params_fit may lower auto
  // (the note in LlamaCppEngine::budget says so); kvsight plans what was asked.
  const std::uint64_t all = std::uint64_t{n_layer} + 1;
  o.requested = ngl == "auto" || ngl == "all" ? all : std::stoull(ngl);
  const std::uint64_t n = std::min(o.requested, all);
  if (output_first) {
    // PR #18148 (b11312 load_tensors): i_gpu_start = max(n_layer + 1 - ngl, 0) over the
    // layers 0..n_layer, the output layer being index n_layer: the output layer goes first,
    // then ngl - 1 repeating layers from the last one down.
    o.output_on_device = n >= 1;
    o.device_layers = static_cast<std::uint32_t>(n >= 1 ? n - 1 : 0);
  } else {
    // Before it: i_gpu_start = max(n_layer - ngl, 0): the last ngl repeating layers, and the
    // output layer only when ngl > n_layer.
    o.device_layers = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, n_layer));
    o.output_on_device = n > n_layer;
  }
  return o;
}

WeightsSplit split_weights(const LayerWeights& weights, const LlamaOffload& offload) {
  WeightsSplit s;
  s.host = weights.input;
  for (std::size_t il = 0; il < weights.blocks.size(); ++il) {
    // Blocks past n_layer (none in a well-formed GGUF) stay with the last layer's device.
    const auto layer = static_cast<std::uint32_t>(std::min<std::size_t>(il, offload.n_layer ? offload.n_layer - 1 : 0));
    std::uint64_t& side = offload.device_layers > 0 && offload.layer_on_device(layer) ? s.device : s.host;
    side = checked_add(side, weights.blocks[il], "weights by layer");
  }
  // The repeating tensors stored outside the blocks load with every layer (a few KiB).
  std::uint64_t& shared = offload.device_layers > 0 ? s.device : s.host;
  shared = checked_add(shared, weights.shared, "weights by layer");
  // The output layer; on the host, a tied head is the mapped token_embd (no second copy counted).
  if (offload.output_on_device)
    s.device = checked_add(s.device, weights.output, "weights by layer");
  else
    s.host = checked_add(s.host, weights.output - std::min(weights.output, weights.tied_copy), "weights by layer");
  return s;
}

std::vector<std::string> offload_log_lines(const LlamaOffload& o) {
  // b11312: n_gpu = min(ngl, n_layer); "offloading output layer" when n_gpu > 0, then
  // n_gpu - 1 repeating layers (the count the code prints, even when every layer is
  // offloaded); "offloaded min(ngl, n_layer + 1)/(n_layer + 1)". Before PR #18148: the
  // repeating layers first (min(ngl, n_layer)), the output line only when ngl > n_layer.
  const std::uint64_t all = std::uint64_t{o.n_layer} + 1;
  const std::uint64_t n_gpu = std::min<std::uint64_t>(o.requested, o.n_layer);
  const std::string offloaded = "load_tensors: offloaded " + std::to_string(std::min(o.requested, all)) + "/" +
                                std::to_string(all) + " layers to GPU";
  if (o.output_first) {
    std::vector<std::string> lines;
    if (n_gpu > 0) lines.push_back("load_tensors: offloading output layer to GPU");
    lines.push_back("load_tensors: offloading " + std::to_string(n_gpu > 0 ? n_gpu - 1 : 0) +
                    " repeating layers to GPU");
    lines.push_back(offloaded);
    return lines;
  }
  std::vector<std::string> lines{"load_tensors: offloading " + std::to_string(n_gpu) + " repeating layers to GPU"};
  if (o.requested > o.n_layer) lines.push_back("load_tensors: offloading output layer to GPU");
  lines.push_back(offloaded);
  return lines;
}

std::string offload_rule(const LlamaOffload& o, const std::string& ngl) {
  std::string text = "-ngl " + ngl + ": " + std::to_string(o.device_layers) + " of " + std::to_string(o.n_layer) +
                     " repeating layers on the GPU";
  if (o.device_layers > 0 && o.device_layers < o.n_layer)
    text += " (layers " + std::to_string(o.n_layer - o.device_layers) + "-" + std::to_string(o.n_layer - 1) + ")";
  text += std::string(", the output layer ") + (o.output_on_device ? "on the GPU" : "in host memory");
  text += o.output_first ? " (offloaded first: PR #18148)" : " (offloaded only when -ngl > n_layer)";
  text += "; the token embeddings in host memory (load_tensors keeps the input layer on the CPU); ";
  text += o.kv_offload ? "each layer's KV with its layer (llama-kv-cache.cpp)"
                       : "every layer's KV in host memory (--no-kv-offload)";
  return text;
}

}  // namespace kvsight::engine_detail
