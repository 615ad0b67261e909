// The figures of `kvsight fit` (issue #26): every configuration searched, accepted ones
// first. The readable views show two tables (what fits, what was rejected and why) cut at
// --top; CSV is one table of raw numbers for every candidate; JSON every candidate whole.
#include "kvsight/app/fit.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

std::string headroom_text(double headroom) {
  return (headroom >= 0 ? "+" : "") + fixed_text(headroom * 100.0, 1) + "%";
}

std::string block_text(const FitCandidate& c) {
  if (c.block_size == 0) return c.block_size_requested ? std::to_string(c.block_size_requested) : "-";
  return std::to_string(c.block_size);
}

std::string reasons_text(const FitCandidate& c) {
  std::string reasons;
  for (const std::string& r : c.reasons) reasons += (reasons.empty() ? "" : "; ") + r;
  return reasons;
}

nlohmann::json candidate_json(const FitCandidate& c) {
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

std::string shown_title(std::string title, std::size_t count, std::size_t top) {
  if (count > top) title += " (first " + std::to_string(top) + "; --top 0 or --format json for all)";
  return title;
}

// CSV: one table of raw numbers, every candidate, accepted first.
FigureTable csv_table(const FitOutcome& outcome) {
  FigureTable t;
  for (const char* key : {"fits", "gpu", "tp", "pp", "gpus", "kv_cache_dtype", "kv_quality", "block_size",
                          "bytes_per_sequence", "needed_kv_bytes", "available_kv_bytes", "max_concurrency",
                          "headroom", "reason"})
    t.columns.emplace_back("", key);
  for (const auto* list : {&outcome.accepted, &outcome.rejected})
    for (const FitCandidate& c : *list)
      t.rows.push_back({{"", c.fits},
                        {"", c.gpu},
                        {"", c.tp},
                        {"", c.pp},
                        {"", c.gpu_count},
                        {"", c.kv_cache_dtype},
                        {"", kv_quality_tier_name(c.kv_tier)},
                        {"", c.block_size},
                        {"", c.bytes_per_sequence},
                        {"", c.needed_kv_bytes},
                        {"", c.available_kv_bytes},
                        {"", fixed_text(c.max_concurrency, 4)},
                        {"", fixed_text(c.headroom, 4)},
                        {"", reasons_text(c)}});
  return t;
}

FigureTable accepted_table(const FitOutcome& outcome, std::size_t top) {
  FigureTable t;
  t.title = shown_title(std::to_string(outcome.accepted.size()) +
                            " configuration(s) fit, fewest GPUs first, then the least lossy KV type, then most headroom",
                        outcome.accepted.size(), top);
  t.columns = {{"GPUs", "", true},   {"gpu", ""},         {"TP", "", true},           {"PP", "", true},
               {"KV type", ""},      {"quality", ""},     {"block", "", true},        {"KV/seq GiB", "", true},
               {"needed GiB", "", true}, {"KV avail GiB", "", true}, {"max conc", "", true}, {"headroom", "", true}};
  t.when_empty = "nothing fits: no configuration searched serves the request (reasons below)";
  for (std::size_t i = 0; i < outcome.accepted.size() && i < top; ++i) {
    const FitCandidate& c = outcome.accepted[i];
    t.rows.push_back({{std::to_string(c.gpu_count), nullptr},
                      {c.gpu, nullptr},
                      {std::to_string(c.tp), nullptr},
                      {std::to_string(c.pp), nullptr},
                      {c.kv_cache_dtype, nullptr},
                      {kv_quality_tier_name(c.kv_tier), nullptr},
                      {block_text(c), nullptr},
                      {fixed_text(to_gib(c.bytes_per_sequence), 3), nullptr},
                      {fixed_text(to_gib(c.needed_kv_bytes), 2), nullptr},
                      {fixed_text(to_gib(c.available_kv_bytes), 2), nullptr},
                      {fixed_text(c.max_concurrency, 2) + "x", nullptr},
                      {headroom_text(c.headroom), nullptr}});
  }
  return t;
}

FigureTable rejected_table(const FitOutcome& outcome, std::size_t top) {
  FigureTable t;
  t.title = shown_title(std::to_string(outcome.rejected.size()) + " configuration(s) rejected, fewest GPUs first",
                        outcome.rejected.size(), top);
  t.columns = {{"GPUs", "", true}, {"gpu", ""}, {"TP", "", true}, {"PP", "", true},
               {"KV type", ""},    {"block", "", true}, {"reason", ""}};
  t.when_empty = "";
  for (std::size_t i = 0; i < outcome.rejected.size() && i < top; ++i) {
    const FitCandidate& c = outcome.rejected[i];
    t.rows.push_back({{std::to_string(c.gpu_count), nullptr},
                      {c.gpu, nullptr},
                      {std::to_string(c.tp), nullptr},
                      {std::to_string(c.pp), nullptr},
                      {c.kv_cache_dtype, nullptr},
                      {block_text(c), nullptr},
                      {reasons_text(c), nullptr}});
  }
  return t;
}

FigureSection json_figures(const FitOutcome& outcome) {
  nlohmann::json accepted = nlohmann::json::array(), rejected = nlohmann::json::array(),
                 refused = nlohmann::json::array();
  for (const auto& c : outcome.accepted) accepted.push_back(candidate_json(c));
  for (const auto& c : outcome.rejected) rejected.push_back(candidate_json(c));
  for (const auto& r : outcome.refused_options) refused.push_back({{"option", r.value}, {"reason", r.reason}});
  return json_section({
           {"model", {{"id", outcome.model.id}, {"name", outcome.model.display_name}}},
           {"engine", outcome.engine},
           {"engine_version", outcome.engine_version},
           {"concurrency", outcome.concurrency},
           {"context", outcome.context},
           {"max_gpus", outcome.max_gpus},
           {"gpus", outcome.gpus},
           {"candidates_planned", outcome.candidates_planned},
           {"search_ms", outcome.search_ms},
           {"fits", !outcome.accepted.empty()},
           {"best", outcome.accepted.empty() ? nlohmann::json(nullptr) : candidate_json(outcome.accepted.front())},
           {"accepted", accepted},
           {"rejected", rejected},
           {"refused_options", refused},
           {"duplicate_kv_cache_dtypes", outcome.duplicate_kv_cache_dtypes},
           {"lossy_kv_cache_dtypes_not_searched", outcome.lossy_kv_cache_dtypes}});
}

}  // namespace

FigureDoc fit_figures(const FitOutcome& outcome, std::size_t top) {
  if (top == 0) top = SIZE_MAX;
  FigureDoc doc;
  doc.header.push_back("kvsight fit: " + outcome.model.id + ", " + std::to_string(outcome.concurrency) +
                       " sequences of " + commas_text(outcome.context) + " tokens, under " + outcome.engine_display +
                       " " + outcome.engine_version);
  // The search time is JSON's search_ms: the text stays reproducible.
  doc.header.push_back("searched " + std::to_string(outcome.gpus.size()) + " GPU kind(s), TP x PP up to " +
                       std::to_string(outcome.max_gpus) + " GPUs: " + std::to_string(outcome.candidates_planned) +
                       " plans, " + std::to_string(outcome.accepted.size() + outcome.rejected.size()) +
                       " distinct configurations");
  doc.sections.push_back(json_figures(outcome));
  doc.tables = {accepted_table(outcome, top), rejected_table(outcome, top), csv_table(outcome)};
  for (const auto& r : outcome.refused_options)
    doc.footer.push_back("refused for this model: " + r.value + ": " + r.reason);
  for (const auto& d : outcome.duplicate_kv_cache_dtypes) doc.footer.push_back("not searched again: " + d);
  if (!outcome.lossy_kv_cache_dtypes.empty()) {
    std::string list;
    for (const auto& d : outcome.lossy_kv_cache_dtypes) list += (list.empty() ? "" : ", ") + d;
    doc.footer.push_back("not searched (lossy KV cache types): " + list +
                         "; --kv-cache-dtypes all (or a list) searches them");
  }
  doc.footer.push_back("KV figures are per GPU rank; GiB = 2^30 bytes; headroom = KV available / KV needed - 1.");
  return doc;
}

}  // namespace kvsight::app
