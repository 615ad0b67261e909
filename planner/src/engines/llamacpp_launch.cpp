// llama.cpp's launcher, `llama-server -m MODEL.gguf ...` (issue #22), read in llama.cpp b11312
// as vendored by llama-cpp-python 0.3.36 (common/arg.cpp common_params_parser_init: the flags
// whose set_examples include LLAMA_EXAMPLE_SERVER or LLAMA_EXAMPLE_COMMON, or that have none).
// Integers are read with std::stoi (arg.cpp handler_int); a flag's names are whole words
// ("-ngl", "-ctk"), never bundled letters. Every flag is in llamacpp_parser_flags.cpp; the
// rules below change the memory kvsight plans.
#include "launch_tables.hpp"

namespace kvsight::engine_detail {

namespace {

using F = OptionField;
using G = ValueGrammar;
}  // namespace

const Launcher& llamacpp_launcher() {
  static const Launcher launcher = [] {
    Launcher l;
    l.engine = "llamacpp";
    l.commands = {{"llama-server"}};
    l.source = "llama.cpp b11312 common/arg.cpp (llama-cpp-python 0.3.36)";
    l.flags = &llamacpp_parser_flags();
    l.equals_values = false;  // arg.cpp common_params_parse_ex: the value is argv[++i]
    l.underscores_are_dashes = true;
    l.value_is_next_word = true;
    const std::string host_weights = "keeps weights in host memory; kvsight plans them all on the GPU";
    l.rules = {
        {"--model", FlagUse::model, std::nullopt, G::text, ""},
        {"--hf-repo", FlagUse::model, std::nullopt, G::text, ""},
        apply_rule("--ctx-size", F::ctx_size, G::cpp_stoi),
        apply_rule("--parallel", F::parallel, G::llamacpp_int_or_auto),
        apply_rule("--cache-type-k", F::cache_type_k, G::text),
        apply_rule("--cache-type-v", F::cache_type_v, G::text),
        apply_rule("--flash-attn", F::flash_attn, G::llamacpp_on_off_auto),
        apply_rule("--swa-full", F::swa_full, G::text),
        apply_rule("--ubatch-size", F::ubatch_size, G::cpp_stoi),
        apply_rule("--kv-unified", F::kv_unified, G::text),
        apply_rule("--n-gpu-layers", F::n_gpu_layers, G::llamacpp_gpu_layers),
        // -b is the logical batch in tokens (n_batch), not a number of sequences: the KV
        // cache and the slots do not depend on it (kvsight sizes compute by n_ubatch).
        note_rule("--batch-size", "the logical batch in tokens (n_batch): no effect on the KV cache or the slots"),
        // common/arg.cpp --fit (default on): llama_params_fit may lower n_ctx and -ngl to fit.
        note_rule("--fit", "with fit on (the default) llama.cpp may lower n_ctx to fit; kvsight plans the n_ctx given"),
        {"--split-mode", FlagUse::apply, std::nullopt, G::text, "layers split across devices, as kvsight plans",
         {"layer", "none"}},
        refuse_rule("--no-kv-unified", "one KV buffer per slot (not modelled)"),
        refuse_rule("--kv-unified-per-slot", "changes the KV buffers per slot (not modelled)"),
        apply_rule("--no-kv-offload", F::no_kv_offload, G::text),
        refuse_rule("--override-tensor", host_weights),
        refuse_rule("--cpu-moe", host_weights),
        refuse_rule("--n-cpu-moe", host_weights),
        refuse_rule("--tensor-split", "splits the model unevenly across devices (not modelled)"),
        refuse_rule("--lora", "LoRA adapters take GPU memory kvsight does not size"),
        refuse_rule("--lora-scaled", "LoRA adapters take GPU memory kvsight does not size"),
        refuse_rule("--spec-draft-model", "a draft model's weights and KV (not modelled for llama.cpp)"),
        refuse_rule("--spec-draft-hf", "a draft model's weights and KV (not modelled for llama.cpp)"),
        refuse_rule("--mmproj", "a multimodal projector's weights (not modelled)"),
        refuse_rule("--mmproj-url", "a multimodal projector's weights (not modelled)"),
        refuse_rule("--override-kv", "overrides the model's metadata: give kvsight the changed GGUF"),
        refuse_rule("--rope-scaling", "changes the model's context scaling (not modelled)"),
    };
    return l;
  }();
  return launcher;
}

}  // namespace kvsight::engine_detail
