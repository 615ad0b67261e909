// SGLang's launcher, `python -m sglang.launch_server --model-path M ...` (issue #22), read in
// SGLang 0.5.23:
//   sglang/srt/server_args.py ServerArgs.add_cli_args: add_cli_args_from_dataclass over the
//     fields of sglang/srt/arg_groups/fields/*.py (one flag per field, "--field-name" unless the
//     field's Arg names it, plus its aliases; bool fields are store_true switches), then the
//     flags with dynamic choices, --config and the deprecated ones.
//   --context-length, --max-total-tokens and --max-prefill-tokens read human_readable_int
//     (sglang/srt/utils/common.py); other ints int(), fractions float().
// Every flag is in sglang_parser_flags.cpp; the rules below change the memory kvsight plans.
#include "launch_tables.hpp"

namespace kvsight::engine_detail {

namespace {

using F = OptionField;
using G = ValueGrammar;
}  // namespace

const Launcher& sglang_launcher() {
  static const Launcher launcher = [] {
    Launcher l;
    l.engine = "sglang";
    l.commands = {{"python", "-m", "sglang.launch_server"},
                  {"python3", "-m", "sglang.launch_server"},
                  {"sglang", "serve"}};
    l.source = "SGLang 0.5.23 sglang/srt/server_args.py, sglang/srt/arg_groups/fields/*.py";
    l.flags = &sglang_parser_flags();
    l.abbreviations = true;  // server_args.py prepare_server_args: argparse.ArgumentParser()
    const std::string graphs = "changes the CUDA-graph memory kvsight estimates (not modelled)";
    l.rules = {
        {"--model-path", FlagUse::model, std::nullopt, G::text, ""},
        apply_rule("--tp-size", F::tensor_parallel_size, G::python_int),
        apply_rule("--pp-size", F::pipeline_parallel_size, G::python_int),
        apply_rule("--context-length", F::max_model_len, G::sglang_int),
        apply_rule("--mem-fraction-static", F::mem_fraction_static, G::python_float),
        apply_rule("--kv-cache-dtype", F::kv_cache_dtype, G::text),
        apply_rule("--page-size", F::block_size, G::python_int),
        apply_rule("--max-running-requests", F::max_num_seqs, G::python_int),
        apply_rule("--max-total-tokens", F::max_total_tokens, G::sglang_int),
        apply_rule("--disable-radix-cache", F::disable_radix_cache, G::text),
        // fields/model.py dtype: auto keeps 16-bit checkpoints 16-bit, as kvsight plans them.
        {"--dtype", FlagUse::apply, std::nullopt, G::text, "16-bit weights, as kvsight plans them",
         {"auto", "half", "float16", "bfloat16"}},
        note_rule("--dp-size", "each data-parallel rank is a replica of this plan"),
        refuse_rule("--quantization", "quantizes the weights at load: kvsight sizes the checkpoint's own weights"),
        refuse_rule("--chunked-prefill-size", "changes the activation reserve kvsight estimates (not modelled)"),
        refuse_rule("--json-model-override-args", "overrides the model's config: give kvsight the overridden config.json"),
        refuse_rule("--attn-dp-size", "data-parallel attention splits KV and weights differently (not modelled)"),
        refuse_rule("--enable-dp-attention", "data-parallel attention splits KV and weights differently (not modelled)"),
        refuse_rule("--dcp-size", "shards the KV cache over decode context-parallel ranks (not modelled)"),
        refuse_rule("--attn-cp-size", "shards the KV cache over context-parallel ranks (not modelled)"),
        refuse_rule("--ep-size", "shards MoE experts over expert-parallel ranks (not modelled)"),
        refuse_rule("--moe-dp-size", "shards MoE experts over data-parallel ranks (not modelled)"),
        refuse_rule("--enable-kv-cache-sharding", "shards the KV cache (not modelled)"),
        refuse_rule("--cpu-offload-gb", "keeps part of the weights in host memory; kvsight plans them all on the GPU"),
        refuse_rule("--enable-hierarchical-cache", "adds a host-memory KV tier (not modelled)"),
        refuse_rule("--enable-lora", "LoRA adapters take GPU memory kvsight does not size"),
        refuse_rule("--lora-paths", "LoRA adapters take GPU memory kvsight does not size"),
        refuse_rule("--speculative-algorithm", "a draft model's weights and KV (not modelled for SGLang)"),
        refuse_rule("--speculative-draft-model-path", "a draft model's weights and KV (not modelled for SGLang)"),
        refuse_rule("--max-mamba-cache-size", "sets the recurrent-state slots directly (not modelled)"),
        refuse_rule("--mamba-ssm-dtype", "changes the recurrent state's dtype (not modelled)"),
        refuse_rule("--mamba-full-memory-ratio", "changes the recurrent state's share of memory (not modelled)"),
        refuse_rule("--swa-full-tokens-ratio", "changes the sliding-window pool's share (not modelled)"),
        refuse_rule("--disable-hybrid-swa-memory", "changes the sliding-window pool (not modelled)"),
        refuse_rule("--attention-backend",
               "forces an attention backend; kvsight selects it by SGLang's own rules (kvsight gates)"),
        refuse_rule("--cuda-graph-max-bs-decode", graphs),
        refuse_rule("--cuda-graph-max-bs-prefill", graphs),
        refuse_rule("--cuda-graph-bs-decode", graphs),
        refuse_rule("--cuda-graph-bs-prefill", graphs),
        refuse_rule("--cuda-graph-config", graphs),
        refuse_rule("--enable-torch-compile", graphs),
        refuse_rule("--enable-memory-saver", "releases and re-takes GPU memory (not modelled)"),
        refuse_rule("--enable-unified-memory", "changes where the KV pool lives (not modelled)"),
    };
    return l;
  }();
  return launcher;
}

}  // namespace kvsight::engine_detail
