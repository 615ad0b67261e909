// kvsight plan: KV footprints, weights, and what fits under an engine's budget
// rules. One model x one GPU gives a report; comma lists or `all` give a fleet
// table with one row per pair.
#include <memory>
#include <optional>

#include "commands.hpp"
#include "figure_output.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/plan.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/counts.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight::cli {

namespace {

struct PlanArgs {
  std::string model;
  std::string gpu;
  std::optional<std::string> gpu_mem_gib;  // the one byte-size grammar, in GiB (kvsight/counts.hpp parse_gib)
  // Overhead overrides, read as strict decimals (parse_number_in): CLI11's own conversion
  // would take "0x10" and "0x1p4" as 16 (issue #14 item 3).
  std::optional<std::string> activation_gib, non_torch_gib, cuda_graph_gib, weights_gib, kv_transfer_gib;
  EngineOptions engine;
  bool no_warnings = false;
  std::vector<std::string> launch;  // the user's launch line, after --
};

std::optional<double> overhead_gib(const std::optional<std::string>& text, const char* flag) {
  if (!text) return std::nullopt;
  return parse_number_in(*text, flag, 0.0, 1.0e9, "a non-negative decimal number of GiB below 1e9");
}

void validate(PlanArgs& a) {
  a.engine.overheads.activation_gib = overhead_gib(a.activation_gib, "--activation-gib");
  a.engine.overheads.non_torch_gib = overhead_gib(a.non_torch_gib, "--non-torch-gib");
  a.engine.overheads.cuda_graph_gib = overhead_gib(a.cuda_graph_gib, "--cuda-graph-gib");
  a.engine.overheads.weights_gib = overhead_gib(a.weights_gib, "--weights-gib");
  a.engine.overheads.kv_transfer_gib = overhead_gib(a.kv_transfer_gib, "--kv-transfer-gib");
  if (a.gpu_mem_gib) {
    const std::uint64_t bytes = parse_gib(*a.gpu_mem_gib, "--gpu-mem-gib");
    // Below 1e7 GiB, as before the grammar was shared: no device is a thousandth of that.
    if (bytes == 0 || bytes >= 10000000ull * (1ull << 30))
      throw InputError("--gpu-mem-gib",
                       "is " + *a.gpu_mem_gib + "; allowed: a positive number of GiB below 1e7");
    a.engine.gpu_memory_bytes = bytes;
  }
}

void run_plan(PlanArgs args, CliState& state) {
  const auto launch = apply_launch_line(state, args.launch, args.model, args.engine);
  if (args.model.empty()) throw InputError("--model", "is required (or a launch line after --)");
  check_engine_spellings(state, args.engine.engine);
  validate(args);
  const Format format = state.format();  // a bad --format is refused before the plan runs
  app::PlanRequest request;
  request.models = args.model;
  request.gpus = args.gpu;
  request.options = args.engine;
  request.decode_warnings = !args.no_warnings;
  const app::PlanOutcome outcome = app::run_plan(request);
  state.exit_code = app::exit_code(outcome.verdict);
  app::FigureDoc doc = app::plan_figures(outcome);
  if (launch) doc.sections.insert(doc.sections.begin(), app::launch_figures(*launch));
  emit(state, render_figures(doc, format));
}

}  // namespace

void add_plan_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd =
      app.add_subcommand("plan", "KV cache per token/sequence/batch, weights, and how many sequences fit");
  cmd->description(
      "KV cache per token, per sequence (with paged-block rounding) and per batch; the weights; and, with a "
      "GPU,\n"
      "what the engine leaves for KV, blocks, KV tokens, max concurrency at max_model_len and the largest\n"
      "max_model_len that fits, with the lines the engine itself logs at start-up.\n"
      "Flags use the engines' own names; each flag's help says which engine reads it.\n"
      "Examples:\n"
      "  kvsight plan --model smollm3-3b --gpu h200\n"
      "  kvsight plan --model llama-3.1-8b --gpu rtx3090 --max-model-len 20000 --gpu-memory-utilization 0.9\n"
      "  kvsight plan --model all --gpu h100-sxm,mi300x --format csv\n"
      "  kvsight plan --gpu h100 -- vllm serve meta-llama/Llama-3.1-8B --max-model-len 32k --max-num-seqs 8");
  auto& e = args->engine;
  add_model_gpu_flags(*cmd, args->model, args->gpu, false,
                      "Catalog id or Hugging Face id (kvsight models), config.json path, model directory, or "
                      "org/name in the local HF cache; comma list or 'all' for a fleet table",
                      "GPU catalog id, any case (kvsight gpus); comma list or 'all'");
  cmd->add_option("--gpu-mem-gib", args->gpu_mem_gib, "GPU memory in GiB instead of a catalog GPU");
  add_engine_flags(*cmd, e);
  // No range beyond 64 bits: the products they enter are overflow-checked and say which.
  add_count_flag(*cmd, "--context", e.context,
                 "Tokens per sequence for the kv.* figures (default: max_model_len)", 0, UINT64_MAX);
  add_batch_flag(*cmd, e.batch,
                 "Sequences in the batch for kv.bytes_per_batch; with a GPU, exit 1 unless that many fit "
                 "(default 1)",
                 UINT64_MAX);
  cmd->add_option("--activation-gib", args->activation_gib, "Override the activation-peak estimate (GiB)");
  cmd->add_option("--non-torch-gib", args->non_torch_gib, "Override the non-torch memory estimate (GiB)");
  cmd->add_option("--cuda-graph-gib", args->cuda_graph_gib, "Override the CUDA-graph memory estimate (GiB)");
  cmd->add_option("--weights-gib", args->weights_gib, "Override the weights size (GiB, whole model)");
  cmd->add_option(
      "--kv-transfer-gib", args->kv_transfer_gib,
      "vLLM: GPU memory a KV-transfer connector (LMCache, NIXL) takes per rank, subtracted before "
      "the KV cache (GiB; vLLM does not size it)");
  cmd->add_flag("--no-warnings", args->no_warnings, "Skip the decode-cliff check");
  add_launch_line(*cmd, args->launch);
  add_output_options(*cmd, state);
  cmd->footer(
      "Exit codes: 0 the plan fits; 1 the engine would refuse to start (e.g. --tp does not divide the "
      "attention\n"
      "heads, --max-model-len above the model's maximum) or --batch sequences at max_model_len do not fit;\n"
      "2 bad input (also an overhead flag the engine's budget has no term for, e.g. --cuda-graph-gib with "
      "sglang).\n"
      "JSON: kv.*, weights.*, capacity.*, constraints[], refusals[], warnings[], engine_log[].");
  cmd->callback([args, &state] { run_plan(*args, state); });
}

}  // namespace kvsight::cli
