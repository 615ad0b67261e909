// kvsight explain --log FILE: an engine start-up log reconciled term by term with kvsight's
// plan for the same inputs (app/explain). Binds flags, reads the file, renders.
#include <algorithm>
#include <cmath>
#include <memory>

#include "commands.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/explain.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"

namespace kvsight::cli {

namespace {

// A start-up log excerpt is a few KiB; a whole server log a few MiB.
constexpr std::uint64_t kMaxLogBytes = 64ull << 20;

struct ExplainArgs {
  std::string log_path;
  std::string model;
  std::string gpu;
  EngineOptions options;
  CLI::Option* engine_option = nullptr;
};

std::string signed_fixed(double v, int digits) { return (v >= 0 ? "+" : "") + fixed_text(v, digits); }

std::string figure(const std::optional<double>& v, const std::string& unit) {
  if (!v) return "-";
  if (unit == "tokens" || unit == "blocks" || unit == "B")
    return commas_text(static_cast<std::uint64_t>(std::llround(std::max(0.0, *v))));
  return fixed_text(*v, 2);
}

nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

void run_explain_command(const ExplainArgs& args, CliState& state) {
  app::ExplainRequest request;
  request.log_name = args.log_path;
  request.log_text = read_input_file(args.log_path, "--log", kMaxLogBytes);
  request.model = args.model;
  request.gpu = args.gpu;
  request.options = args.options;
  request.engine_given = args.engine_option && args.engine_option->count() > 0;
  // Without --engine the log's engine applies, and so do its flag spellings.
  if (!request.engine_given) {
    const std::string logged = read_engine_log(request.log_text).engine;
    if (!logged.empty()) request.options.engine = logged;
  }
  check_engine_spellings(state, request.options.engine);
  const app::ExplainOutcome out = app::run_explain(request);
  state.exit_code = 0;

  if (state.format() == Format::json) {
    nlohmann::json terms = nlohmann::json::array();
    for (const app::ExplainTerm& t : out.terms) {
      terms.push_back({{"name", t.name},
                       {"replay", t.replay},
                       {"unit", t.unit},
                       {"logged", optional_json(t.logged)},
                       {"logged_implied", t.implied},
                       {"kvsight", optional_json(t.kvsight)},
                       {"difference", optional_json(t.difference())},
                       {"relative", optional_json(t.relative())},
                       {"rule", t.rule}});
    }
    nlohmann::json largest = nullptr;
    if (out.largest) largest = out.terms[*out.largest].name + " (" + out.terms[*out.largest].replay + ")";
    emit(state, render_json({{"log", args.log_path},
                             {"engine", out.engine},
                             {"engine_version", out.engine_version},
                             {"model", args.model},
                             {"gpu", args.gpu},
                             {"matched_lines", out.figures.matched_lines},
                             {"inputs_from_log", out.inputs_from_log},
                             {"terms", terms},
                             {"largest_difference", largest},
                             {"largest_summary", out.largest_summary},
                             {"notes", out.notes}}));
    return;
  }
  Table table;
  table.title = "kvsight explain: " + args.log_path + " (" + out.engine + " " + out.engine_version + ", " +
                args.model + (args.gpu.empty() ? "" : " on " + args.gpu) + ")";
  table.columns = {"term", "replay", "logged", "kvsight", "difference", "rule"};
  table.right_align = {false, false, true, true, true, false};
  for (const app::ExplainTerm& t : out.terms) {
    std::string diff = "-";
    if (t.difference()) {
      diff = t.unit == "GiB" || t.unit == "x" ? signed_fixed(*t.difference(), 2)
                                              : signed_fixed(*t.difference(), 0);
      if (t.relative()) diff += " (" + signed_fixed(*t.relative() * 100.0, 1) + " %)";
    }
    table.rows.push_back({t.name + (t.unit.empty() ? "" : " [" + t.unit + "]"), t.replay,
                          figure(t.logged, t.unit) + (t.implied && t.logged ? " (implied)" : ""),
                          figure(t.kvsight, t.unit), diff, t.rule});
  }
  std::string text = render_table(table, state.format());
  if (state.format() == Format::csv) {
    emit(state, text);
    return;
  }
  text += "\n" + out.largest_summary + "\n";
  for (const std::string& input : out.inputs_from_log) text += "from the log: " + input + "\n";
  for (const std::string& line : out.figures.matched_lines) text += "log line: " + line + "\n";
  for (const std::string& note : out.notes) text += "note: " + note + "\n";
  text += "GiB = 2^30 bytes; memory terms are per GPU rank.\n";
  emit(state, text);
}

}  // namespace

void add_explain_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<ExplainArgs>();
  auto* command = app.add_subcommand(
      "explain",
      "An engine start-up log (vLLM, SGLang, TensorRT-LLM, llama.cpp) reconciled term by term with kvsight:\n"
      "weights, activation, non-torch, CUDA graphs, available KV memory, blocks / tokens, concurrency, each\n"
      "logged against kvsight with the difference and the rule behind kvsight's figure. Replayed twice: "
      "with\n"
      "the KV memory the log states, and (with --gpu, or a GPU total in the log) with GPU and flags only.");
  command->add_option("--log", args->log_path, "Engine start-up log (an excerpt is enough)")->required();
  add_model_gpu_flags(*command, args->model, args->gpu, true,
                      "The model the log came from: catalog id, HF id, config.json path or directory",
                      "GPU catalog id the log came from (replays the budget)");
  add_engine_flags(*command, args->options);
  args->engine_option = command->get_option("--engine");
  add_output_options(*command, state);
  command->footer(
      "Flags not given are taken from the log where it states them (engine, max_model_len, utilization,\n"
      "GPU total, llama.cpp cells); pin the release with --engine-version.\n"
      "Exit codes: 0 explained; 2 bad input (no line kvsight reads in the log, a bad flag).");
  command->callback([args, &state] { run_explain_command(*args, state); });
}

}  // namespace kvsight::cli
