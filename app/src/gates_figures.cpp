// The figures of `kvsight gates` (issue #26): the engine's kernel choice for each group of
// attention layers on this device, every candidate's verdict with its reasons, and the
// start-up constraints. Each figure is written once; CSV keeps its summary/kernel/constraint
// rows (csv_key), JSON its nested attention object.
#include <algorithm>

#include "kvsight/app/gates.hpp"

namespace kvsight::app {

namespace {

nlohmann::json verdict_json(const KernelVerdict& verdict) {
  return {{"kernel", verdict.kernel},         {"name", verdict.name},
          {"backend", verdict.backend},       {"admitted", verdict.admitted},
          {"selected", verdict.selected},     {"splits_context", verdict.splits_context},
          {"split_rule", verdict.split_rule}, {"reasons", verdict.reasons},
          {"source", verdict.source}};
}

std::string split_rule_of(const LayerGroupGate& group) {
  for (const KernelVerdict& verdict : group.kernels)
    if (verdict.selected) return verdict.split_rule;
  return "";
}

nlohmann::json group_json(const LayerGroupGate& group, std::uint32_t block_size) {
  nlohmann::json refused = nlohmann::json::array();
  nlohmann::json admitted = nlohmann::json::array();
  for (const KernelVerdict& verdict : group.kernels) (verdict.admitted ? admitted : refused).push_back(verdict_json(verdict));
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
          {"split_rule", split_rule_of(group)},
          {"refused", refused},
          {"admitted", admitted}};
}

std::string reasons_or_source(const KernelVerdict& verdict) {
  std::string reasons;
  for (const std::string& reason : verdict.reasons) reasons += (reasons.empty() ? "" : "; ") + reason;
  return reasons.empty() ? verdict.source : reasons;
}

Figure shared(std::string json_key, std::string csv_key, nlohmann::json value, std::string csv_note = "") {
  Figure f{std::move(json_key), std::move(value)};
  f.csv_key = std::move(csv_key);
  f.csv_note = std::move(csv_note);
  return f;
}

FigureSection selected_figures(const GatesOutcome& outcome) {
  const GateResult& result = outcome.gates;
  const LayerGroupGate& primary = result.primary;
  const std::string split_rule = split_rule_of(primary);
  FigureSection s{"Selected", {}};
  auto& f = s.figures;
  f.push_back(shared("model", "summary.model", outcome.model.id));
  f.push_back(shared("gpu", "summary.gpu", outcome.gpu.id, outcome.gpu.arch));
  f.push_back(shared("engine", "summary.engine", result.engine, result.engine_version));
  f.push_back(csv_figure("summary.head_size", std::to_string(primary.head_size), primary.kind));
  f.push_back(csv_figure("summary.q_heads_per_rank", std::to_string(primary.q_heads_per_rank)));
  f.push_back(csv_figure("summary.kv_heads_per_rank", std::to_string(primary.kv_heads_per_rank)));
  f.push_back(Figure{"", nullptr, "", "attention layers", std::to_string(primary.layer_count) + " " + primary.kind,
                     "head_size " + std::to_string(primary.head_size) + ", " +
                         std::to_string(primary.q_heads_per_rank) + " Q / " +
                         std::to_string(primary.kv_heads_per_rank) + " KV heads per rank"});
  Figure block = shared("block_size", "summary.block_size", std::to_string(result.block_size), result.block_size_source);
  block.label = "block size";
  block.text = std::to_string(result.block_size);
  block.note = result.block_size_source;
  block.in_json = false;
  f.push_back(block);
  Figure tp = shared("tp", "summary.tensor_parallel_size", std::to_string(result.tp));
  tp.label = "tensor parallel";
  tp.text = std::to_string(result.tp);
  tp.in_json = false;
  f.push_back(tp);
  f.push_back(csv_figure("summary.max_seq_len", std::to_string(result.max_seq_len)));
  Figure selected = csv_figure("summary.selected", primary.selected, primary.selected_name);
  selected.label = "selected";
  selected.text = primary.selected.empty() ? "(none)" : primary.selected;
  f.push_back(selected);
  Figure splits = csv_figure("summary.splits_context", primary.splits_context, split_rule);
  splits.label = "splits context";
  splits.text = primary.splits_context ? "yes" : "NO";
  f.push_back(splits);
  // Each candidate's verdict: CSV rows here; the readable views draw them as a table.
  for (const KernelVerdict& verdict : primary.kernels)
    f.push_back(csv_figure("kernel." + verdict.kernel,
                           verdict.selected ? "selected" : (verdict.admitted ? "admitted" : "refused"),
                           reasons_or_source(verdict)));
  // JSON's own figures (typed numbers where the CSV has text).
  nlohmann::json groups = nlohmann::json::array();
  for (const LayerGroupGate& group : result.groups) groups.push_back(group_json(group, result.block_size));
  nlohmann::json attention = group_json(primary, result.block_size);
  attention["layer_groups"] = groups;
  for (auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"arch", outcome.gpu.arch},
           {"family", result.family},
           {"engine_version", result.engine_version},
           {"tp", result.tp},
           {"batch", outcome.options.batch},
           {"block_size", result.block_size},
           {"block_size_source", result.block_size_source},
           {"max_seq_len", result.max_seq_len},
           {"kv_cache_dtype", outcome.options.kv_cache_dtype},
           {"attention", attention}})
    f.push_back(json_figure(key, value));
  return s;
}

FigureSection other_group_figures(const GateResult& result) {
  FigureSection s{"Other attention-layer groups", {}};
  if (result.groups.size() <= 1) return s;
  const LayerGroupGate& primary = result.primary;
  for (const LayerGroupGate& group : result.groups) {
    if (group.kind == primary.kind && group.head_size == primary.head_size && group.window == primary.window) continue;
    s.figures.push_back(Figure{"", nullptr, "",
                               std::to_string(group.layer_count) + " " + group.kind +
                                   (group.window ? " (window " + std::to_string(group.window) + ")" : ""),
                               group.selected.empty() ? "(none)" : group.selected,
                               std::string("head_size ") + std::to_string(group.head_size) +
                                   (group.splits_context ? ", splits context" : ", no context split")});
  }
  return s;
}

FigureSection constraint_figures(const GateResult& result) {
  FigureSection s{"Constraints", {}};
  nlohmann::json constraints = nlohmann::json::array();
  for (const GateConstraint& c : result.constraints) {
    constraints.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}, {"source", c.source}});
    Figure row = csv_figure("constraint." + c.name, c.ok ? "ok" : "refused", c.detail);
    row.label = c.name;
    row.text = c.ok ? "ok" : "REFUSED";
    s.figures.push_back(row);
  }
  s.figures.push_back(json_figure("constraints", constraints));
  for (const std::string& error : result.errors) s.figures.push_back(csv_figure("error.", error));
  for (const std::string& note : result.notes) s.figures.push_back(csv_figure("note.", note));
  s.figures.push_back(json_figure("errors", result.errors));
  s.figures.push_back(json_figure("notes", result.notes));
  s.figures.push_back(json_figure("can_start", result.errors.empty()));
  return s;
}

}  // namespace

FigureDoc gates_figures(const GatesOutcome& outcome) {
  const GateResult& result = outcome.gates;
  const LayerGroupGate& primary = result.primary;
  FigureDoc doc;
  doc.title = "Attention gates: " + outcome.model.id + " on " + outcome.gpu.id + " (" + outcome.gpu.arch +
              ", family " + result.family + "), " + result.engine + " " + result.engine_version;
  doc.csv_header = {"section", "key", "value", "detail"};
  doc.sections = {selected_figures(outcome), other_group_figures(result), constraint_figures(result)};
  for (const std::string& error : result.errors) doc.footer.push_back("error: " + error);
  for (const std::string& note : result.notes) doc.footer.push_back("note: " + note);
  FigureTable kernels;
  kernels.title = "Candidates for the " + primary.kind + " layers (engine priority order)";
  for (const char* label : {"kernel", "backend", "verdict", "splits context", "reasons / source"})
    kernels.columns.emplace_back(label, "");
  for (const KernelVerdict& verdict : primary.kernels) {
    const std::string verdict_text =
        verdict.selected ? "SELECTED" : (verdict.admitted ? "admitted (lower priority)" : "refused");
    kernels.rows.push_back({{verdict.kernel, nullptr},
                            {verdict.backend, nullptr},
                            {verdict_text, nullptr},
                            {verdict.splits_context ? "yes" : "no", nullptr},
                            {reasons_or_source(verdict), nullptr}});
  }
  doc.tables.push_back(std::move(kernels));
  return doc;
}

}  // namespace kvsight::app
