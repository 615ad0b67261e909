// TensorRT-LLM's launcher, `trtllm-serve MODEL ...` (issue #22), read in
// tensorrt_llm/commands/serve.py (NVIDIA/TensorRT-LLM at commit 00209af1, the 1.1 series; the
// wheel is not on PyPI, so the list below is written from the file): the click command
// "serve" with the positional MODEL and its @click.option list. click reads type=int with
// int() and type=float with float(); is_flag options are switches.
#include "launch_tables.hpp"

namespace kvsight::engine_detail {

namespace {

using F = OptionField;
using G = ValueGrammar;
using V = FlagValues;
}  // namespace

const std::vector<ParserFlag>& trtllm_parser_flags() {
  // serve.py serve(): every @click.option, in its order, and click's own --help.
  static const std::vector<ParserFlag> flags = {
      {V::one, {"--tokenizer"}},
      {V::one, {"--custom_tokenizer"}},
      {V::one, {"--host"}},
      {V::one, {"--port"}},
      {V::one, {"--backend"}},
      {V::one, {"--custom_module_dirs"}},
      {V::one, {"--log_level"}},
      {V::one, {"--max_beam_width"}},
      {V::one, {"--max_batch_size"}},
      {V::one, {"--max_num_tokens"}},
      {V::one, {"--max_seq_len"}},
      {V::one, {"--tensor_parallel_size", "--tp_size"}},
      {V::one, {"--pipeline_parallel_size", "--pp_size"}},
      {V::one, {"--context_parallel_size", "--cp_size"}},
      {V::one, {"--moe_expert_parallel_size", "--ep_size"}},
      {V::one, {"--moe_cluster_parallel_size", "--cluster_size"}},
      {V::one, {"--gpus_per_node"}},
      {V::one, {"--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction"}},
      {V::one, {"--num_postprocess_workers"}},
      {V::none, {"--trust_remote_code"}},
      {V::one, {"--revision"}},
      {V::one, {"--config", "--extra_llm_api_options"}},
      {V::one, {"--reasoning_parser"}},
      {V::one, {"--tool_parser"}},
      {V::one, {"--metadata_server_config_file"}},
      {V::one, {"--server_role"}},
      {V::none, {"--fail_fast_on_attention_window_too_large"}},
      {V::one, {"--otlp_traces_endpoint"}},
      {V::one, {"--disagg_cluster_uri"}},
      {V::none, {"--enable_chunked_prefill"}},
      {V::one, {"--media_io_kwargs"}},
      {V::one, {"--chat_template"}},
  };
  return flags;
}

const Launcher& trtllm_launcher() {
  static const Launcher launcher = [] {
    Launcher l;
    l.engine = "trtllm";
    l.commands = {{"trtllm-serve", "serve"}, {"trtllm-serve"}};
    l.source = "TensorRT-LLM tensorrt_llm/commands/serve.py (commit 00209af1)";
    l.positional_model = true;
    l.flags = &trtllm_parser_flags();
    l.rules = {
        apply_rule("--tensor_parallel_size", F::tensor_parallel_size, G::python_int),
        apply_rule("--pipeline_parallel_size", F::pipeline_parallel_size, G::python_int),
        apply_rule("--max_seq_len", F::max_model_len, G::python_int),
        apply_rule("--free_gpu_memory_fraction", F::free_gpu_memory_fraction, G::python_float),
        apply_rule("--max_batch_size", F::max_num_seqs, G::python_int),
        apply_rule("--max_num_tokens", F::max_num_batched_tokens, G::python_int),
        // kvsight's TensorRT-LLM budget is the PyTorch backend's (trtllm.cpp), the default.
        {"--backend", FlagUse::apply, std::nullopt, G::text, "the PyTorch backend, as kvsight plans it",
         {"pytorch"}},
        {"--max_beam_width", FlagUse::apply, std::nullopt, G::text, "one beam, as kvsight plans", {"1"}},
        refuse_rule("--config",
               "a YAML of LLM-API options (kv_cache_config, ...) that kvsight does not read yet; give its "
               "memory options as trtllm-serve flags"),
        refuse_rule("--context_parallel_size", "shards the KV cache over context-parallel ranks (not modelled)"),
        refuse_rule("--moe_expert_parallel_size", "shards MoE experts over expert-parallel ranks (not modelled)"),
        refuse_rule("--moe_cluster_parallel_size", "shards MoE experts over clusters (not modelled)"),
    };
    return l;
  }();
  return launcher;
}

}  // namespace kvsight::engine_detail
