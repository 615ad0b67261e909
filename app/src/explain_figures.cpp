// The figures of `kvsight explain` (issue #26): each term the log states, beside kvsight's
// figure for the same replay, the difference and the rule. The CSV is the readable table.
#include <algorithm>
#include <cmath>

#include "kvsight/app/explain.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

std::string signed_fixed(double v, int digits) { return (v >= 0 ? "+" : "") + fixed_text(v, digits); }

std::string term_text(const std::optional<double>& v, const std::string& unit) {
  if (!v) return "-";
  if (unit == "tokens" || unit == "blocks" || unit == "B" || unit == "requests")
    return commas_text(static_cast<std::uint64_t>(std::llround(std::max(0.0, *v))));
  return fixed_text(*v, 2);
}

std::string difference_text(const ExplainTerm& t) {
  if (!t.difference()) return "-";
  std::string diff =
      t.unit == "GiB" || t.unit == "x" ? signed_fixed(*t.difference(), 2) : signed_fixed(*t.difference(), 0);
  if (t.relative()) diff += " (" + signed_fixed(*t.relative() * 100.0, 1) + " %)";
  return diff;
}

}  // namespace

FigureDoc explain_figures(const ExplainRequest& request, const ExplainOutcome& out) {
  FigureDoc doc;
  FigureTable table;
  table.title = "kvsight explain: " + request.log_name + " (" + out.engine + " " + out.engine_version + ", " +
                request.model + (request.gpu.empty() ? "" : " on " + request.gpu) + ")";
  for (const auto& [label, right] : std::vector<std::pair<std::string, bool>>{
           {"term", false}, {"replay", false}, {"logged", true}, {"kvsight", true}, {"difference", true}, {"rule", false}})
    table.columns.emplace_back(label, label, right);
  nlohmann::json terms = nlohmann::json::array();
  for (const ExplainTerm& t : out.terms) {
    terms.push_back({{"name", t.name},
                     {"replay", t.replay},
                     {"unit", t.unit},
                     {"logged", value_or_null(t.logged)},
                     {"logged_implied", t.implied},
                     {"kvsight", value_or_null(t.kvsight)},
                     {"difference", value_or_null(t.difference())},
                     {"relative", value_or_null(t.relative())},
                     {"rule", t.rule}});
    std::vector<std::string> cells{t.name + (t.unit.empty() ? "" : " [" + t.unit + "]"), t.replay,
                                   term_text(t.logged, t.unit) + (t.implied && t.logged ? " (implied)" : ""),
                                   term_text(t.kvsight, t.unit), difference_text(t), t.rule};
    std::vector<FigureCell> row;
    for (const std::string& cell : cells) row.push_back({cell, cell});
    table.rows.push_back(std::move(row));
  }
  nlohmann::json largest = nullptr;
  if (out.largest) largest = out.terms[*out.largest].name + " (" + out.terms[*out.largest].replay + ")";
  doc.sections.push_back(json_section({
           {"log", request.log_name},
           {"engine", out.engine},
           {"engine_version", out.engine_version},
           {"model", request.model},
           {"gpu", request.gpu},
           {"matched_lines", out.figures.matched_lines},
           {"inputs_from_log", out.inputs_from_log},
           {"terms", terms},
           {"largest_difference", largest},
           {"largest_summary", out.largest_summary},
           {"notes", out.notes}}));
  doc.tables.push_back(std::move(table));
  doc.footer.push_back(out.largest_summary);
  for (const std::string& input : out.inputs_from_log) doc.footer.push_back("from the log: " + input);
  for (const std::string& line : out.figures.matched_lines) doc.footer.push_back("log line: " + line);
  for (const std::string& note : out.notes) doc.footer.push_back("note: " + note);
  doc.footer.push_back("GiB = 2^30 bytes; memory terms are per GPU rank.");
  return doc;
}

}  // namespace kvsight::app
