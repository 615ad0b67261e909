#pragma once
// Weights footprint: parameters from shapes (dense, MoE, MLA, tied/untied),
// bytes from the dtype and quantization config, or exact bytes from safetensors
// headers when present. Source: docs/reference/formulas.md "Weights".
#include <cstdint>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "kvsight/model_spec.hpp"

namespace kvsight {

struct WeightsEstimate {
  std::uint64_t params = 0;            // total parameters from shapes
  std::uint64_t embedding_params = 0;  // embedding + untied lm_head
  std::uint64_t vision_params = 0;     // vision encoder + projector, from vision_config (in params)
  std::uint64_t bytes = 0;             // total bytes (exact when `exact`)
  std::uint64_t bytes_per_rank = 0;    // the largest share one TP/PP rank holds
  double bits_per_weight = 16.0;       // on the linears
  bool exact = false;                  // from safetensors headers
  std::string method;                  // how bytes were obtained, one line
};

// Parameters from the config's shapes.
std::uint64_t count_params(const ModelSpec& model);
std::uint64_t count_embedding_params(const ModelSpec& model);

// Bytes from shapes and quantization (embeddings/norms stay 16-bit).
WeightsEstimate estimate_weights(const ModelSpec& model, std::uint32_t tp = 1, std::uint32_t pp = 1);

// Weights by where a layer-splitting engine (llama.cpp -ngl) loads them: the input layer
// (token embeddings), one entry per decoder block, the output layer (final norm and LM head,
// with the second copy llama.cpp makes of tied embeddings) and the few repeating tensors
// stored outside the blocks. Exact from a GGUF's tensor infos (GgufTensorLayers); otherwise
// the estimate's bytes with embeddings and norms at the model dtype and the rest spread over
// the blocks by their parameters. input + blocks + shared + output = estimate_weights' bytes,
// plus the tied copy.
struct LayerWeights {
  std::uint64_t input = 0;
  std::uint64_t output = 0;
  std::uint64_t shared = 0;
  std::uint64_t tied_copy = 0;        // of `output`: the second copy of tied token embeddings
  std::vector<std::uint64_t> blocks;  // at least `decoder_blocks` entries
  bool exact = false;
};
LayerWeights weights_by_layer(const ModelSpec& model, std::uint32_t decoder_blocks);

// One tensor of a safetensors header.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t bytes = 0;  // data_offsets end - begin
};
struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;
  std::uint64_t total_bytes = 0;
};
// Parses the header of a safetensors file held in memory (8-byte LE length, then
// JSON). `file_size` is the size of the whole file (offsets are checked against
// it). Throws InputError naming `origin`.
SafetensorsHeader parse_safetensors_header(std::string_view bytes, std::uint64_t file_size,
                                           const std::string& origin);
// Reads only the header of a file on disk (8 bytes, then the header; never the data).
SafetensorsHeader read_safetensors_header(const std::string& path);

// The weights files of a model directory: the shards its
// model.safetensors.index.json lists (a missing one is an InputError naming it),
// else the only *.safetensors file, else one complete set of
// NAME-0000i-of-0000N.safetensors shards. Files not counted (a consolidated copy,
// adapters) are listed in `skipped`. nullopt when the directory has no safetensors.
struct SafetensorsSet {
  std::uint64_t bytes = 0;
  std::vector<std::string> files;    // counted, file names
  std::vector<std::string> skipped;  // present but not counted
  std::string how;                   // which rule chose the files, one phrase
  // Of `bytes`, the vision / audio encoder and projector tensors
  // (is_multimodal_encoder_tensor), and how many.
  std::uint64_t encoder_bytes = 0;
  std::uint64_t encoder_tensors = 0;
};
// Whether a checkpoint tensor belongs to a vision / audio encoder or its projector,
// by its name (vision_tower., visual., multi_modal_projector., ...).
bool is_multimodal_encoder_tensor(const std::string& name);
std::optional<SafetensorsSet> safetensors_in_dir(const std::string& dir);
// safetensors_in_dir(dir)->bytes.
std::optional<std::uint64_t> safetensors_bytes_in_dir(const std::string& dir);

}  // namespace kvsight
