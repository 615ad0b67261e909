// kvsight fit: the inverse of plan. Every (GPU kind, TP, PP, KV cache type, block size)
// that serves --concurrency sequences of --context tokens under the engine's rules,
// fewest GPUs first, then most headroom; each rejected one with its reason.
#include <algorithm>
#include <memory>

#include "commands.hpp"
#include "figure_output.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/fit.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/counts.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"

namespace kvsight::cli {

namespace {

struct FitArgs {
  app::FitRequest request;
  std::string kv_cache_dtypes;  // comma list
  std::string block_sizes;      // comma list of counts, "default" for the engine's
  std::uint64_t max_gpus = 8;
  std::uint64_t top = 20;
  std::vector<std::string> launch;  // the user's launch line, after --
};

std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty())
      throw InputError(flag, "has an empty item in '" + text + "'; allowed: a comma list of names");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The option fields fit searches or derives itself: given as flags they would
// contradict the search, so they are refused with the flag that does it.
void refuse_searched_fields(const std::vector<std::string>& typed_flags) {
  for (const std::string& typed : typed_flags) {
    const OptionFieldInfo* info = option_field_named(typed);
    if (info == nullptr) continue;
    std::string instead;
    switch (info->field) {
      case OptionField::tensor_parallel_size:
      case OptionField::pipeline_parallel_size:
        instead = "--max-gpus (TP x PP are searched)";
        break;
      case OptionField::kv_cache_dtype:
      case OptionField::cache_type_k:
      case OptionField::cache_type_v:
        instead = "--kv-cache-dtypes LIST";
        break;
      case OptionField::block_size:
        instead = "--block-sizes LIST";
        break;
      case OptionField::max_model_len:
      case OptionField::ctx_size:
      case OptionField::parallel:
        instead = "--context and --concurrency";
        break;
      default:
        continue;
    }
    throw InputError(typed, "fit searches or derives this option; use " + instead);
  }
}

void run_fit(FitArgs& args, CliState& state) {
  const auto launch = apply_launch_line(state, args.launch, args.request.model, args.request.options);
  if (args.request.model.empty()) throw InputError("--model", "is required (or a launch line after --)");
  check_engine_spellings(state, args.request.options.engine);
  std::vector<std::string> typed = state.typed_flags;
  if (launch)
    for (const app::LaunchFlagUse& use : launch->applied)
      if (!use.field.empty()) typed.push_back(use.field);
  refuse_searched_fields(typed);
  app::FitRequest& request = args.request;
  request.max_gpus = static_cast<std::uint32_t>(args.max_gpus);
  if (!args.kv_cache_dtypes.empty())
    request.kv_cache_dtypes = split_list(args.kv_cache_dtypes, "--kv-cache-dtypes");
  if (args.block_sizes == "all") {
    request.block_sizes = app::kFullBlockGrid;
  } else if (!args.block_sizes.empty()) {
    for (const std::string& item : split_list(args.block_sizes, "--block-sizes"))
      request.block_sizes.push_back(
          item == "default" ? 0u
                            : static_cast<std::uint32_t>(parse_count_in(item, "--block-sizes", 1, 1u << 20)));
  }
  const Format format = state.format();  // a bad --format is refused before the search
  const app::FitOutcome outcome = app::run_fit(request);
  state.exit_code = app::exit_code(outcome.verdict);
  app::FigureDoc doc = app::fit_figures(outcome, static_cast<std::size_t>(args.top));
  if (launch) doc.sections.insert(doc.sections.begin(), app::launch_figures(*launch));
  emit(state, render_figures(doc, format));
}

}  // namespace

void add_fit_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<FitArgs>();
  auto* cmd = app.add_subcommand(
      "fit", "The configurations (GPU, TP, PP, KV type, block size) that serve N sequences of L tokens");
  cmd->description(
      "The inverse of plan: searches GPU kinds x TP x PP (up to --max-gpus GPUs) x the engine's KV cache "
      "types x\n"
      "block sizes, plans each under the engine's rules, and lists the configurations that hold "
      "--concurrency\n"
      "sequences of --context tokens, fewest GPUs first, then the least lossy KV type (quality: full =\n"
      "the model's own precision, then 8-bit, then low-bit), then most headroom; every configuration the\n"
      "engine would refuse on that GPU (a KV type no attention backend there runs, ...) is rejected with\n"
      "its reason.\n"
      "Examples:\n"
      "  kvsight fit --model llama-3.1-8b --concurrency 64 --context 32K --gpus h200,h100-sxm,l40s\n"
      "  kvsight fit --model qwen3-8b --concurrency 16 --context 128K --engine sglang --format json");
  cmd->add_option(
         "--model,-m", args->request.model,
         "Catalog id or Hugging Face id (kvsight models), config.json path, model directory, or org/name "
         "in the local HF cache (or the model of a launch line after --)");
  add_count_flag(*cmd, "--concurrency", args->request.concurrency, "Sequences served at once (N)", 1,
                 UINT64_MAX)
      ->required();
  add_count_flag(*cmd, "--context", args->request.context,
                 "Tokens per sequence (L); also the engine's max_model_len", 1, UINT64_MAX)
      ->required();
  cmd->add_option("--gpus", args->request.gpus,
                  "GPU catalog ids, comma list or 'all' (default all; kvsight gpus)")
      ->default_str("all");
  add_count_flag(*cmd, "--max-gpus", args->max_gpus, "Largest TP x PP searched per GPU kind (default 8)", 1,
                 64);
  cmd->add_option("--kv-cache-dtypes", args->kv_cache_dtypes,
                  "KV cache types to search, comma list, or 'all' = every type the engine offers (default: "
                  "the types that keep the model's precision, e.g. auto; fp8 and 4-bit caches only when "
                  "asked)");
  cmd->add_option("--block-sizes", args->block_sizes,
                  "Block sizes to offer the engine, comma list ('default' = the engine's own), or 'all' = "
                  "default,1,8,16,32,64,128,256 (default: the engine's own only)");
  add_count_flag(*cmd, "--top", args->top,
                 "Rows of each table in table/markdown output (0 = all; default 20)", 0, UINT64_MAX);
  add_engine_flags(*cmd, args->request.options);
  add_output_options(*cmd, state);
  add_launch_line(*cmd, args->launch);
  cmd->footer(
      "Exit codes: 0 at least one configuration fits; 1 none does; 2 bad input.\n"
      "JSON: best, accepted[], rejected[] {gpu, tp, pp, gpus, kv_cache_dtype, kv_quality, block_size,\n"
      "needed_kv_bytes,\n"
      "available_kv_bytes, max_concurrency, headroom, reasons[]}, refused_options[], candidates_planned.");
  cmd->callback([args, &state] { run_fit(*args, state); });
}

}  // namespace kvsight::cli
