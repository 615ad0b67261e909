// kvsight fit: the inverse of plan. Every (GPU kind, TP, PP, KV cache type, block size)
// that serves --concurrency sequences of --context tokens under the engine's rules,
// fewest GPUs first, then most headroom; each rejected one with its reason.
#include <algorithm>
#include <chrono>
#include <memory>

#include "commands.hpp"
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
void refuse_searched_fields(const CliState& state) {
  for (const std::string& typed : state.typed_flags) {
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

std::string headroom_text(double headroom) {
  return (headroom >= 0 ? "+" : "") + fixed_text(headroom * 100.0, 1) + "%";
}

std::string block_text(const app::FitCandidate& c) {
  if (c.block_size == 0) return c.block_size_requested ? std::to_string(c.block_size_requested) : "-";
  return std::to_string(c.block_size);
}

nlohmann::json candidate_json(const app::FitCandidate& c) {
  return {{"gpu", c.gpu},
          {"tp", c.tp},
          {"pp", c.pp},
          {"gpus", c.gpu_count},
          {"kv_cache_dtype", c.kv_cache_dtype},
          {"kv_dtype_resolved", c.kv_dtype_resolved},
          {"kv_quality", kv_quality_tier_name(c.kv_tier)},
          {"block_size", c.block_size},
          {"block_size_requested",
           c.block_size_requested ? nlohmann::json(c.block_size_requested) : nlohmann::json(nullptr)},
          {"fits", c.fits},
          {"bytes_per_sequence", c.bytes_per_sequence},
          {"needed_kv_bytes", c.needed_kv_bytes},
          {"available_kv_bytes", c.available_kv_bytes},
          {"weights_bytes_per_rank", c.weights_bytes_per_rank},
          {"max_concurrency", c.max_concurrency},
          {"headroom", c.headroom},
          {"reasons", c.reasons}};
}

void run_fit(FitArgs& args, CliState& state) {
  check_engine_spellings(state, args.request.options.engine);
  refuse_searched_fields(state);
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
  const auto start = std::chrono::steady_clock::now();
  const app::FitOutcome outcome = app::run_fit(request);
  const double search_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  state.exit_code = app::exit_code(outcome.verdict);
  const Format format = state.format();

  if (format == Format::json) {
    nlohmann::json accepted = nlohmann::json::array();
    for (const auto& c : outcome.accepted) accepted.push_back(candidate_json(c));
    nlohmann::json rejected = nlohmann::json::array();
    for (const auto& c : outcome.rejected) rejected.push_back(candidate_json(c));
    nlohmann::json refused = nlohmann::json::array();
    for (const auto& r : outcome.refused_options)
      refused.push_back({{"option", r.value}, {"reason", r.reason}});
    const nlohmann::json out = {{"model", {{"id", outcome.model.id}, {"name", outcome.model.display_name}}},
                                {"engine", outcome.engine},
                                {"engine_version", outcome.engine_version},
                                {"concurrency", outcome.concurrency},
                                {"context", outcome.context},
                                {"max_gpus", outcome.max_gpus},
                                {"gpus", outcome.gpus},
                                {"candidates_planned", outcome.candidates_planned},
                                {"search_ms", search_ms},
                                {"fits", !outcome.accepted.empty()},
                                {"best", outcome.accepted.empty() ? nlohmann::json(nullptr)
                                                                  : candidate_json(outcome.accepted.front())},
                                {"accepted", accepted},
                                {"rejected", rejected},
                                {"refused_options", refused},
                                {"duplicate_kv_cache_dtypes", outcome.duplicate_kv_cache_dtypes},
                                {"lossy_kv_cache_dtypes_not_searched", outcome.lossy_kv_cache_dtypes}};
    emit(state, render_json(out));
    return;
  }

  if (format == Format::csv) {
    // One table of raw numbers: every candidate, accepted first.
    Table table;
    table.columns = {"fits",
                     "gpu",
                     "tp",
                     "pp",
                     "gpus",
                     "kv_cache_dtype",
                     "kv_quality",
                     "block_size",
                     "bytes_per_sequence",
                     "needed_kv_bytes",
                     "available_kv_bytes",
                     "max_concurrency",
                     "headroom",
                     "reason"};
    auto add = [&](const app::FitCandidate& c) {
      std::string reasons;
      for (const std::string& r : c.reasons) reasons += (reasons.empty() ? "" : "; ") + r;
      table.rows.push_back({c.fits ? "true" : "false", c.gpu, std::to_string(c.tp), std::to_string(c.pp),
                            std::to_string(c.gpu_count), c.kv_cache_dtype, kv_quality_tier_name(c.kv_tier),
                            std::to_string(c.block_size), std::to_string(c.bytes_per_sequence),
                            std::to_string(c.needed_kv_bytes), std::to_string(c.available_kv_bytes),
                            fixed_text(c.max_concurrency, 4), fixed_text(c.headroom, 4), reasons});
    };
    for (const auto& c : outcome.accepted) add(c);
    for (const auto& c : outcome.rejected) add(c);
    emit(state, render_table(table, format));
    return;
  }

  const std::size_t top = args.top == 0 ? SIZE_MAX : static_cast<std::size_t>(args.top);
  std::string text = "kvsight fit: " + outcome.model.id + ", " + std::to_string(outcome.concurrency) +
                     " sequences of " + commas_text(outcome.context) + " tokens, under " +
                     outcome.engine_display + " " + outcome.engine_version + "\n";
  text += "searched " + std::to_string(outcome.gpus.size()) + " GPU kind(s), TP x PP up to " +
          std::to_string(outcome.max_gpus) + " GPUs: " + std::to_string(outcome.candidates_planned) +
          " plans, " + std::to_string(outcome.accepted.size() + outcome.rejected.size()) +
          " distinct configurations\n\n";  // the search time is JSON's search_ms: the text stays reproducible
  Table fits;
  fits.title = std::to_string(outcome.accepted.size()) +
               " configuration(s) fit, fewest GPUs first, then the least lossy KV type, then most headroom" +
               (outcome.accepted.size() > top
                    ? " (first " + std::to_string(top) + "; --top 0 or --format json for all)"
                    : "");
  fits.columns = {"GPUs",  "gpu",        "TP",         "PP",           "KV type",  "quality",
                  "block", "KV/seq GiB", "needed GiB", "KV avail GiB", "max conc", "headroom"};
  fits.right_align = {true, false, true, true, false, false, true, true, true, true, true, true};
  for (std::size_t i = 0; i < outcome.accepted.size() && i < top; ++i) {
    const auto& c = outcome.accepted[i];
    fits.rows.push_back(
        {std::to_string(c.gpu_count), c.gpu, std::to_string(c.tp), std::to_string(c.pp), c.kv_cache_dtype,
         kv_quality_tier_name(c.kv_tier), block_text(c), fixed_text(to_gib(c.bytes_per_sequence), 3),
         fixed_text(to_gib(c.needed_kv_bytes), 2), fixed_text(to_gib(c.available_kv_bytes), 2),
         fixed_text(c.max_concurrency, 2) + "x", headroom_text(c.headroom)});
  }
  if (!outcome.accepted.empty())
    text += render_table(fits, format) + "\n";
  else
    text += "nothing fits: no configuration searched serves the request (reasons below)\n\n";

  Table rejected;
  rejected.title = std::to_string(outcome.rejected.size()) + " configuration(s) rejected, fewest GPUs first" +
                   (outcome.rejected.size() > top
                        ? " (first " + std::to_string(top) + "; --top 0 or --format json for all)"
                        : "");
  rejected.columns = {"GPUs", "gpu", "TP", "PP", "KV type", "block", "reason"};
  rejected.right_align = {true, false, true, true, false, true, false};
  for (std::size_t i = 0; i < outcome.rejected.size() && i < top; ++i) {
    const auto& c = outcome.rejected[i];
    std::string reasons;
    for (const std::string& r : c.reasons) reasons += (reasons.empty() ? "" : "; ") + r;
    rejected.rows.push_back({std::to_string(c.gpu_count), c.gpu, std::to_string(c.tp), std::to_string(c.pp),
                             c.kv_cache_dtype, block_text(c), reasons});
  }
  if (!outcome.rejected.empty()) text += render_table(rejected, format) + "\n";
  for (const auto& r : outcome.refused_options)
    text += "refused for this model: " + r.value + ": " + r.reason + "\n";
  for (const auto& d : outcome.duplicate_kv_cache_dtypes) text += "not searched again: " + d + "\n";
  if (!outcome.lossy_kv_cache_dtypes.empty()) {
    std::string list;
    for (const auto& d : outcome.lossy_kv_cache_dtypes) list += (list.empty() ? "" : ", ") + d;
    text += "not searched (lossy KV cache types): " + list +
            "; --kv-cache-dtypes all (or a list) searches them\n";
  }
  text += "KV figures are per GPU rank; GiB = 2^30 bytes; headroom = KV available / KV needed - 1.\n";
  emit(state, text);
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
         "in the local HF cache")
      ->required();
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
  cmd->footer(
      "Exit codes: 0 at least one configuration fits; 1 none does; 2 bad input.\n"
      "JSON: best, accepted[], rejected[] {gpu, tp, pp, gpus, kv_cache_dtype, kv_quality, block_size,\n"
      "needed_kv_bytes,\n"
      "available_kv_bytes, max_concurrency, headroom, reasons[]}, refused_options[], candidates_planned.");
  cmd->callback([args, &state] { run_fit(*args, state); });
}

}  // namespace kvsight::cli
