// llama.cpp's architecture names (gguf_architectures.hpp).
#include "gguf_architectures.hpp"

#include <algorithm>
#include <iterator>

namespace kvsight::gguf_detail {

namespace {

// LLM_ARCH_NAMES of llama.cpp's src/llama-arch.cpp as vendored by llama-cpp-python 0.3.36
// (read from its sdist, docs/reference/model-inputs.md "GGUF"), less "clip" (a vision projector,
// refused as a main model: src/llama.cpp "CLIP cannot be used as main model") and "(unknown)".
// llama-model.cpp llama_model_create refuses any other name: "unknown model architecture: '...'".
constexpr std::string_view kArchitectures[] = {
    "llama",
    "llama4",
    "deci",
    "falcon",
    "grok",
    "gpt2",
    "gptj",
    "gptneox",
    "mpt",
    "baichuan",
    "starcoder",
    "refact",
    "bert",
    "modern-bert",
    "nomic-bert",
    "nomic-bert-moe",
    "neo-bert",
    "jina-bert-v2",
    "jina-bert-v3",
    "eurobert",
    "bloom",
    "stablelm",
    "qwen",
    "qwen2",
    "qwen2moe",
    "qwen2vl",
    "qwen3",
    "qwen3moe",
    "qwen3next",
    "qwen3vl",
    "qwen3vlmoe",
    "qwen35",
    "qwen35moe",
    "qwen4exp",
    "phi2",
    "phi3",
    "phimoe",
    "plamo",
    "plamo2",
    "plamo3",
    "codeshell",
    "orion",
    "internlm2",
    "minicpm",
    "minicpm3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3n",
    "gemma4",
    "gemma4-assistant",
    "gemma-embedding",
    "starcoder2",
    "mamba",
    "mamba2",
    "maple",
    "jamba",
    "falcon-h1",
    "xverse",
    "command-r",
    "cohere2",
    "cohere2moe",
    "dbrx",
    "olmo",
    "olmo2",
    "olmoe",
    "muse-glimmer",
    "openelm",
    "arctic",
    "deepseek",
    "deepseek2",
    "deepseek2-ocr",
    "deepseek32",
    "deepseek4",
    "chatglm",
    "glm4",
    "glm4moe",
    "glm-dsa",
    "bitnet",
    "t5",
    "t5encoder",
    "jais",
    "jais2",
    "nemotron",
    "nemotron_h",
    "nemotron_h_moe",
    "exaone",
    "exaone4",
    "exaone-moe",
    "rwkv6",
    "rwkv6qwen2",
    "rwkv7",
    "arwkv7",
    "granite",
    "granitemoe",
    "granitehybrid",
    "graniteswitch",
    "granite_swa",
    "chameleon",
    "wavtokenizer-dec",
    "plm",
    "bailingmoe",
    "bailingmoe2",
    "bailingmoe3",
    "dots1",
    "dots3note",
    "arcee",
    "afmoe",
    "laguna",
    "ernie4_5",
    "ernie4_5-moe",
    "hunyuan-moe",
    "hunyuan-dense",
    "hunyuan_vl",
    "hy_v3",
    "hy_v4",
    "smollm3",
    "gpt-oss",
    "lfm2",
    "lfm2moe",
    "dream",
    "smallthinker",
    "llada",
    "llada-moe",
    "seed_oss",
    "grovemoe",
    "apertus",
    "minimax-01",
    "hrm_text",
    "minimax-m2",
    "minimax-m3",
    "cogvlm",
    "rnd1",
    "pangu-embedded",
    "mistral3",
    "eagle3",
    "dflash",
    "mistral4",
    "paddleocr",
    "mimo2",
    "step35",
    "spark2_5",
    "llama-embed",
    "maincoder",
    "kimi-linear",
    "kimi-k3",
    "glm5-next",
    "talkie",
    "mellum",
    "nanbeige",
    "qwen3tts",
    "pockettts",
};

// Names llama.cpp lists but refuses to load as a model, with its reason.
struct RefusedName {
  std::string_view name;
  std::string_view reason;
};
constexpr RefusedName kRefused[] = {
    {"clip",
     "is 'clip': a vision projector, not a language model (llama.cpp src/llama.cpp: \"CLIP cannot be used as "
     "main model, use it with --mmproj instead\")"},
};

}  // namespace

std::optional<std::string> architecture_refusal(std::string_view name) {
  if (const std::size_t nul = name.find_first_of(std::string_view("\0", 1)); nul != std::string_view::npos)
    return "holds a NUL byte at offset " + std::to_string(nul) +
           "; an architecture is a name such as 'llama' (llama.cpp: unknown model architecture)";
  const auto refused = std::find_if(std::begin(kRefused), std::end(kRefused),
                                    [&](const RefusedName& r) { return r.name == name; });
  if (refused != std::end(kRefused)) return std::string(refused->reason);
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), name) != std::end(kArchitectures))
    return std::nullopt;
  return "unknown model architecture: '" + std::string(name.substr(0, 128)) +
         "' (llama.cpp refuses it: src/llama-model.cpp llama_model_create); allowed: an architecture "
         "llama.cpp loads, e.g. llama, qwen3, gemma3";
}

}  // namespace kvsight::gguf_detail
