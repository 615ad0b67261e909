// kvsight gates: which attention kernel an engine selects for a model on a device,
// every reason the others are refused, and the constraints that refuse start-up.
#include <memory>

#include "commands.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/gates.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight::cli {

namespace {

struct GatesArgs {
  std::string model;
  std::string gpu;
  EngineOptions options;
};

nlohmann::json verdict_json(const KernelVerdict& verdict) {
  return {{"kernel", verdict.kernel},         {"name", verdict.name},
          {"backend", verdict.backend},       {"admitted", verdict.admitted},
          {"selected", verdict.selected},     {"splits_context", verdict.splits_context},
          {"split_rule", verdict.split_rule}, {"reasons", verdict.reasons},
          {"source", verdict.source}};
}

nlohmann::json group_json(const LayerGroupGate& group, std::uint32_t block_size) {
  nlohmann::json refused = nlohmann::json::array();
  nlohmann::json admitted = nlohmann::json::array();
  std::string split_rule;
  for (const KernelVerdict& verdict : group.kernels) {
    if (verdict.selected) split_rule = verdict.split_rule;
    (verdict.admitted ? admitted : refused).push_back(verdict_json(verdict));
  }
  const std::uint32_t gqa = group.q_heads_per_rank / std::max<std::uint32_t>(1, group.kv_heads_per_rank);
  return {{"layer_kind", group.kind},
          {"layers", group.layer_count},
          {"head_size", group.head_size},
          {"block_size", block_size},
          {"q_heads_per_rank", group.q_heads_per_rank},
          {"kv_heads_per_rank", group.kv_heads_per_rank},
          {"gqa_ratio", gqa},
          {"window", group.window},
          {"selected", group.selected.empty() ? nlohmann::json(nullptr) : nlohmann::json(group.selected)},
          {"selected_name", group.selected_name},
          {"splits_context", group.splits_context},
          {"split_rule", split_rule},
          {"refused", refused},
          {"admitted", admitted}};
}

void run_gates(const GatesArgs& args, CliState& state) {
  check_engine_spellings(state, args.options.engine);
  if (args.gpu.empty()) throw InputError("--gpu", "is required; give a GPU catalog id (kvsight gpus)");
  const app::GatesOutcome outcome = app::run_gates({args.model, args.gpu, args.options});
  const ModelSpec& model = outcome.model;
  const GpuSpec& gpu = outcome.gpu;
  const EngineOptions& options = outcome.options;
  const GateResult& result = outcome.gates;
  state.exit_code = app::exit_code(outcome.verdict);

  if (state.format() == Format::json) {
    nlohmann::json groups = nlohmann::json::array();
    for (const LayerGroupGate& group : result.groups) groups.push_back(group_json(group, result.block_size));
    nlohmann::json attention = group_json(result.primary, result.block_size);
    attention["layer_groups"] = groups;
    nlohmann::json constraints = nlohmann::json::array();
    for (const GateConstraint& c : result.constraints) {
      constraints.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}, {"source", c.source}});
    }
    const nlohmann::json out = {{"model", model.id},
                                {"gpu", gpu.id},
                                {"arch", gpu.arch},
                                {"family", result.family},
                                {"engine", result.engine},
                                {"engine_version", result.engine_version},
                                {"tp", result.tp},
                                {"batch", options.batch},
                                {"block_size", result.block_size},
                                {"block_size_source", result.block_size_source},
                                {"max_seq_len", result.max_seq_len},
                                {"kv_cache_dtype", options.kv_cache_dtype},
                                {"attention", attention},
                                {"constraints", constraints},
                                {"errors", result.errors},
                                {"notes", result.notes},
                                {"can_start", result.errors.empty()}};
    emit(state, render_json(out));
    return;
  }

  Report report;
  report.title = "Attention gates: " + model.id + " on " + gpu.id + " (" + gpu.arch + ", family " +
                 result.family + "), " + result.engine + " " + result.engine_version;
  const LayerGroupGate& primary = result.primary;
  ReportSection summary{"Selected", {}};
  summary.rows.push_back({"attention layers", std::to_string(primary.layer_count) + " " + primary.kind,
                          "head_size " + std::to_string(primary.head_size) + ", " +
                              std::to_string(primary.q_heads_per_rank) + " Q / " +
                              std::to_string(primary.kv_heads_per_rank) + " KV heads per rank"});
  summary.rows.push_back({"block size", std::to_string(result.block_size), result.block_size_source});
  summary.rows.push_back({"tensor parallel", std::to_string(result.tp), ""});
  summary.rows.push_back(
      {"selected", primary.selected.empty() ? "(none)" : primary.selected, primary.selected_name});
  std::string split_rule;
  for (const KernelVerdict& verdict : primary.kernels) {
    if (verdict.selected) split_rule = verdict.split_rule;
  }
  summary.rows.push_back({"splits context", primary.splits_context ? "yes" : "NO", split_rule});
  report.sections.push_back(summary);
  if (result.groups.size() > 1) {
    ReportSection groups{"Other attention-layer groups", {}};
    for (const LayerGroupGate& group : result.groups) {
      if (group.kind == primary.kind && group.head_size == primary.head_size &&
          group.window == primary.window)
        continue;
      groups.rows.push_back({std::to_string(group.layer_count) + " " + group.kind +
                                 (group.window ? " (window " + std::to_string(group.window) + ")" : ""),
                             group.selected.empty() ? "(none)" : group.selected,
                             std::string("head_size ") + std::to_string(group.head_size) +
                                 (group.splits_context ? ", splits context" : ", no context split")});
    }
    report.sections.push_back(groups);
  }
  ReportSection constraints{"Constraints", {}};
  for (const GateConstraint& c : result.constraints) {
    constraints.rows.push_back({c.name, c.ok ? "ok" : "REFUSED", c.detail});
  }
  report.sections.push_back(constraints);
  for (const std::string& error : result.errors) report.footer.push_back("error: " + error);
  for (const std::string& note : result.notes) report.footer.push_back("note: " + note);

  Table kernels;
  kernels.title = "Candidates for the " + primary.kind + " layers (engine priority order)";
  kernels.columns = {"kernel", "backend", "verdict", "splits context", "reasons / source"};
  for (const KernelVerdict& verdict : primary.kernels) {
    std::string reasons;
    for (const std::string& reason : verdict.reasons) reasons += (reasons.empty() ? "" : "; ") + reason;
    const std::string verdict_text =
        verdict.selected ? "SELECTED" : (verdict.admitted ? "admitted (lower priority)" : "refused");
    kernels.rows.push_back({verdict.kernel, verdict.backend, verdict_text,
                            verdict.splits_context ? "yes" : "no",
                            reasons.empty() ? verdict.source : reasons});
  }
  if (state.format() == Format::csv) {
    // One table that carries every figure of the report: the summary, each kernel's
    // verdict with its reasons, each constraint, errors and notes.
    Table csv;
    csv.columns = {"section", "key", "value", "detail"};
    csv.rows.push_back({"summary", "model", model.id, ""});
    csv.rows.push_back({"summary", "gpu", gpu.id, gpu.arch});
    csv.rows.push_back({"summary", "engine", result.engine, result.engine_version});
    csv.rows.push_back({"summary", "head_size", std::to_string(primary.head_size), primary.kind});
    csv.rows.push_back({"summary", "q_heads_per_rank", std::to_string(primary.q_heads_per_rank), ""});
    csv.rows.push_back({"summary", "kv_heads_per_rank", std::to_string(primary.kv_heads_per_rank), ""});
    csv.rows.push_back({"summary", "block_size", std::to_string(result.block_size), result.block_size_source});
    csv.rows.push_back({"summary", "tensor_parallel_size", std::to_string(result.tp), ""});
    csv.rows.push_back({"summary", "max_seq_len", std::to_string(result.max_seq_len), ""});
    csv.rows.push_back({"summary", "selected", primary.selected, primary.selected_name});
    csv.rows.push_back({"summary", "splits_context", primary.splits_context ? "true" : "false", split_rule});
    for (const KernelVerdict& verdict : primary.kernels) {
      std::string reasons;
      for (const std::string& reason : verdict.reasons) reasons += (reasons.empty() ? "" : "; ") + reason;
      csv.rows.push_back({"kernel", verdict.kernel,
                          verdict.selected ? "selected" : (verdict.admitted ? "admitted" : "refused"),
                          reasons.empty() ? verdict.source : reasons});
    }
    for (const GateConstraint& c : result.constraints)
      csv.rows.push_back({"constraint", c.name, c.ok ? "ok" : "refused", c.detail});
    for (const std::string& error : result.errors) csv.rows.push_back({"error", "", error, ""});
    for (const std::string& note : result.notes) csv.rows.push_back({"note", "", note, ""});
    emit(state, render_table(csv, Format::csv));
    return;
  }
  emit(state, render_report(report, state.format()) + "\n" + render_table(kernels, state.format()));
}

}  // namespace

void add_gates_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<GatesArgs>();
  auto* command = app.add_subcommand(
      "gates",
      "Which attention kernel the engine selects for this model on this device, every reason each other\n"
      "candidate is refused (condition and value), and the hard constraints that refuse start-up.\n"
      "Evaluated per group of attention layers; rules cite the engine file and version they were read from.");
  add_model_gpu_flags(*command, args->model, args->gpu, true,
                      "Catalog id or Hugging Face id, config.json path, directory, or HF cache org/name",
                      "GPU catalog id, any case (kvsight gpus); required");
  add_engine_flags(*command, args->options);
  add_count_flag(*command, "--batch", args->options.batch, "Sequences decoding together (default 1)", 1,
                 1ull << 24);
  add_output_options(*command, state);
  command->footer(
      "Exit codes: 0 the engine can start with these settings (a kernel is selected for every attention "
      "layer);\n"
      "1 a hard constraint refuses start-up (errors[] non-empty: e.g. --tp does not divide the attention "
      "heads);\n"
      "2 bad input. JSON: attention.selected, attention.splits_context, attention.refused[] {kernel, "
      "reasons[]},\n"
      "attention.layer_groups[], constraints[], errors[].");
  command->callback([args, &state] { run_gates(*args, state); });
}

}  // namespace kvsight::cli
