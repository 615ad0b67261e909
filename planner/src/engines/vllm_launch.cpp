// vLLM's launcher, `vllm serve MODEL ...` (issue #22), read in vLLM 0.33.0:
//   vllm/entrypoints/common/cli_args.py make_arg_parser: the positional model_tag, --config
//     (a YAML file of flags), --headless, --api-server-count, --grpc, then FrontendArgs and
//     AsyncEngineArgs (engine/arg_utils.py add_cli_args: one flag per config field).
//   vllm/utils/argparse_utils.py FlexibleArgumentParser: `--model M` is moved to the model
//     position; "_" in a long flag's name is read as "-"; --config's keys are flag names.
//   engine/arg_utils.py _compute_kwargs: max_model_len reads human_readable_int_or_auto;
//     max_num_batched_tokens and kv_cache_memory_bytes human_readable_int; other ints int().
// Every flag of the parser is in vllm_parser_flags.cpp; the rules below are the ones that
// change the memory kvsight plans. A flag with no rule has no effect on it (the frontend,
// logging, tokenizer, parsers, distributed plumbing, sampling limits).
#include "launch_tables.hpp"

namespace kvsight::engine_detail {

namespace {

using F = OptionField;
using G = ValueGrammar;
}  // namespace

const Launcher& vllm_launcher() {
  static const Launcher launcher = [] {
    Launcher l;
    l.engine = "vllm";
    l.commands = {{"vllm", "serve"}};
    l.source = "vLLM 0.33.0 vllm/engine/arg_utils.py, vllm/entrypoints/common/cli_args.py";
    l.positional_model = true;
    l.underscores_are_dashes = true;
    l.abbreviations = true;  // FlexibleArgumentParser keeps argparse's allow_abbrev
    l.flags = &vllm_parser_flags();
    const std::string kv_layout = "changes the KV cache layout kvsight plans (not modelled)";
    l.rules = {
        {"--model", FlagUse::model, std::nullopt, G::text, ""},
        {"--config", FlagUse::config, std::nullopt, G::text, ""},
        apply_rule("--tensor-parallel-size", F::tensor_parallel_size, G::python_int),
        apply_rule("--pipeline-parallel-size", F::pipeline_parallel_size, G::python_int),
        apply_rule("--max-model-len", F::max_model_len, G::vllm_int_or_auto),
        apply_rule("--gpu-memory-utilization", F::gpu_memory_utilization, G::python_float),
        apply_rule("--kv-cache-dtype", F::kv_cache_dtype, G::text),
        apply_rule("--block-size", F::block_size, G::python_int),
        apply_rule("--max-num-batched-tokens", F::max_num_batched_tokens, G::vllm_int),
        apply_rule("--max-num-seqs", F::max_num_seqs, G::python_int),
        apply_rule("--kv-cache-memory-bytes", F::kv_cache_memory_bytes, G::vllm_int),
        apply_rule("--enforce-eager", F::enforce_eager, G::text),
        apply_rule("--enable-prefix-caching", F::enable_prefix_caching, G::text),
        apply_rule("--no-enable-prefix-caching", F::disable_prefix_caching, G::text),
        apply_rule("--async-scheduling", F::async_scheduling, G::text),
        apply_rule("--no-async-scheduling", F::no_async_scheduling, G::text),
        apply_rule("--speculative-config", F::speculative_config, G::text),
        apply_rule("--kv-transfer-config", F::kv_transfer_config, G::text),
        apply_rule("--gdn-prefill-backend", F::gdn_prefill_backend, G::text),
        // config/model.py ModelDType: auto takes the checkpoint's dtype, as kvsight does;
        // half/float16/bfloat16 are 2 bytes like the 16-bit checkpoints kvsight plans.
        {"--dtype", FlagUse::apply, std::nullopt, G::text, "16-bit weights, as kvsight plans them",
         {"auto", "half", "float16", "bfloat16"}},
        // Each data-parallel rank is a whole replica: the plan is one replica's (per GPU the
        // same), unless expert parallelism shards MoE weights over DP x TP (refused below).
        note_rule("--data-parallel-size", "each data-parallel rank is a replica of this plan"),
        note_rule("--no-enforce-eager", "the default (CUDA graphs on)"),
        note_rule("--enable-chunked-prefill", "the default in vLLM V1"),
        refuse_rule("--quantization",
               "quantizes the weights at load: kvsight sizes the checkpoint's own weights; drop the flag and "
               "give --weights-gib"),
        refuse_rule("--quantization-config", "quantizes the weights at load (not modelled)"),
        refuse_rule("--hf-overrides", "overrides the model's config: give kvsight the overridden config.json"),
        refuse_rule("--enable-expert-parallel", "shards MoE experts over DP x TP; kvsight shards weights over TP only"),
        refuse_rule("--enable-eplb", "adds redundant experts' weights (not modelled)"),
        refuse_rule("--cpu-offload-gb", "keeps part of the weights in host memory; kvsight plans them all on the GPU"),
        refuse_rule("--cpu-offload-params", "keeps weights in host memory (not modelled)"),
        refuse_rule("--offload-backend", "keeps weights in host memory (not modelled)"),
        refuse_rule("--offload-params", "keeps weights in host memory (not modelled)"),
        refuse_rule("--kv-offloading-size", "moves KV blocks to host memory (not modelled)"),
        refuse_rule("--kv-offloading-backend", "moves KV blocks to host memory (not modelled)"),
        refuse_rule("--num-gpu-blocks-override", "sets the number of KV blocks directly (not modelled)"),
        refuse_rule("--kv-cache-dtype-skip-layers", "keeps some layers' KV in another dtype (not modelled)"),
        refuse_rule("--disable-sliding-window", kv_layout),
        refuse_rule("--disable-hybrid-kv-cache-manager", kv_layout),
        refuse_rule("--kv-sharing-fast-prefill", kv_layout),
        refuse_rule("--decode-context-parallel-size", "shards the KV cache over decode context-parallel ranks (not modelled)"),
        refuse_rule("--prefill-context-parallel-size", "shards the KV cache over prefill context-parallel ranks (not modelled)"),
        refuse_rule("--mamba-cache-dtype", "changes the recurrent state's dtype (not modelled)"),
        refuse_rule("--mamba-ssm-cache-dtype", "changes the recurrent state's dtype (not modelled)"),
        refuse_rule("--mamba-block-size", "changes the recurrent state's block size (not modelled)"),
        refuse_rule("--mamba-cache-mode", "changes how many state pages a sequence keeps (not modelled)"),
        refuse_rule("--enable-mamba-shared-prefix-checkpoint", "keeps more state pages per sequence (not modelled)"),
        refuse_rule("--enable-lora", "LoRA adapters take GPU memory kvsight does not size"),
        refuse_rule("--mm-ipc-gpu-memory-gb", "reserves GPU memory for multimodal IPC (not modelled)"),
        refuse_rule("--language-model-only", "drops the vision tower's weights (not modelled)"),
        refuse_rule("--attention-backend",
               "forces an attention backend; kvsight selects it by vLLM's own rules (kvsight gates)"),
        refuse_rule("--attention-config", "forces attention options; kvsight selects them by vLLM's own rules"),
        refuse_rule("--compilation-config",
               "changes the CUDA-graph memory kvsight estimates; state it with --cuda-graph-gib"),
        refuse_rule("--cudagraph-capture-sizes",
               "changes the CUDA-graph memory kvsight estimates; state it with --cuda-graph-gib"),
        refuse_rule("--max-cudagraph-capture-size",
               "changes the CUDA-graph memory kvsight estimates; state it with --cuda-graph-gib"),
        refuse_rule("--optimization-level", "changes the CUDA-graph mode and its memory (not modelled)"),
        refuse_rule("--max-num-active-seqs",
               "caps running requests below --max-num-seqs; kvsight reports --max-num-seqs as the cap"),
        refuse_rule("--spec-method", "give the draft as --speculative-config JSON, which kvsight reads"),
        refuse_rule("--spec-model", "give the draft as --speculative-config JSON, which kvsight reads"),
        refuse_rule("--spec-tokens", "give the draft as --speculative-config JSON, which kvsight reads"),
        refuse_rule("--no-enable-chunked-prefill",
               "changes the tokens per step and the activation peak kvsight estimates (not modelled)"),
    };
    return l;
  }();
  return launcher;
}

}  // namespace kvsight::engine_detail
