// The preflight report as JSON, schema kvsight.preflight/1 (docs/preflight-report.md):
// exactly the keys that document fixes, plus a few added ones (allowed within a
// schema version): notes, calibration, catalog_match, per-probe time_us / gbps.
#include <cmath>

#include "kvsight/app/preflight.hpp"

namespace kvsight::app {

namespace {

nlohmann::json finite_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json capacity_json(const std::optional<CapacityFacts>& facts) {
  if (!facts) return nullptr;
  const Capacity& c = facts->capacity;
  return {{"gpu_memory_bytes", facts->gpu_memory_bytes},
          {"available_kv_bytes", c.available_kv_bytes},
          {"max_concurrency", c.max_concurrency},
          {"largest_max_model_len", c.largest_max_model_len},
          {"max_model_len", c.max_model_len},
          {"num_blocks", c.num_blocks},
          {"kv_tokens", c.kv_tokens},
          {"fits", c.fits}};
}

}  // namespace

nlohmann::json preflight_json(const PreflightOutcome& o, int exit_code) {
  const PreflightFacts& f = o.facts;
  nlohmann::json j;
  j["schema"] = "kvsight.preflight/1";
  j["kvsight_version"] = "0.1.0";  // CMakeLists.txt project(VERSION), as `kvsight --version`
  j["host"] = o.host;
  j["generated_at"] = o.generated_at;
  j["mode"] = o.mode;
  j["backend"] = f.survey.backend;
  j["no_gpu"] = f.survey.no_gpu;
  j["model"] = {{"id", o.model.id}, {"source", o.model.source.empty() ? "catalog" : o.model.source}};
  j["engine"] = {{"name", o.options.engine},
                 // "0.33.0 (newest known; --engine-version)": the version, then how it was chosen.
                 {"version", o.engine_version.substr(0, o.engine_version.find(' '))},
                 {"version_note", o.engine_version},
                 {"block_size", o.block_size},
                 {"tp", o.options.tp},
                 {"pp", o.options.pp},
                 {"kv_cache_dtype", o.options.kv_cache_dtype},
                 {"max_model_len", f.max_model_len},
                 {"kernel", f.kernel},
                 {"splits_context", f.splits_context}};
  j["requested"] = {{"concurrency", value_or_null(f.requested_concurrency)},
                    {"context", value_or_null(o.options.max_model_len)}};
  j["verdict"] = o.verdict;
  j["exit_code"] = exit_code;
  nlohmann::json reasons = nlohmann::json::array();
  for (const PreflightReason& r : o.reasons) {
    nlohmann::json fixes = nlohmann::json::array();
    for (const PreflightFix& fix : r.fixes)
      fixes.push_back({{"kind", fix.kind},
                       {"flag", fix.flag.empty() ? nlohmann::json(nullptr) : nlohmann::json(fix.flag)},
                       {"text", fix.text},
                       {"figures", fix.figures}});
    reasons.push_back({{"code", r.code},
                       {"severity", r.severity},
                       {"message", r.message},
                       {"figures", r.figures},
                       {"fixes", fixes}});
  }
  j["reasons"] = reasons;

  nlohmann::json devices = nlohmann::json::array();
  for (const probes::DeviceRecord& d : f.survey.devices) {
    nlohmann::json processes = nlohmann::json::array();
    for (const probes::ProcessMemory& p : d.processes)
      processes.push_back({{"pid", p.pid}, {"name", p.name}, {"used_bytes", p.used_bytes}});
    const GpuSpec* match = f.survey.no_gpu ? nullptr : match_catalog(d);
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"vendor", d.vendor},
                       {"arch", d.arch},
                       {"catalog_id", match ? nlohmann::json(match->id) : nlohmann::json(nullptr)},
                       {"driver_version", d.driver_version.empty() ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(d.driver_version)},
                       {"memory_total_bytes", d.memory_total_bytes},
                       {"memory_free_bytes", d.memory_free_bytes},
                       {"memory_used_by_others_bytes", d.memory_used_by_others_bytes
                                                           ? nlohmann::json(*d.memory_used_by_others_bytes)
                                                           : nlohmann::json(nullptr)},
                       {"processes", processes},
                       {"multiprocessors", d.multiprocessors},
                       {"sources",
                        {{"identity", d.sources.identity},
                         {"memory", d.sources.memory},
                         {"processes", d.sources.processes.empty() ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(d.sources.processes)}}}});
  }
  j["devices"] = devices;

  if (f.bandwidth) {
    const BandwidthFacts& b = *f.bandwidth;
    j["bandwidth"] = {
        {"measured_bytes_per_s", b.measured_bytes_per_s},
        {"catalog_peak_bytes_per_s",
         value_or_null(b.catalog_peak_bytes_per_s)},
        {"ratio", b.catalog_peak_bytes_per_s && *b.catalog_peak_bytes_per_s > 0
                      ? nlohmann::json(b.measured_bytes_per_s / *b.catalog_peak_bytes_per_s)
                      : nlohmann::json(nullptr)},
        {"noise", b.noise},
        {"converged", b.converged},
        {"samples", b.samples}};
    if (!b.catalog_peak_bytes_per_s)
      j["bandwidth"]["note"] = f.survey.no_gpu ? "the CPU's memory bandwidth; no catalog peak for a CPU"
                                               : "device not in the catalog: no peak to compare with";
  } else {
    j["bandwidth"] = nullptr;
  }

  nlohmann::json probes_json = nlohmann::json::array();
  for (const ProbeFacts& p : f.probes) {
    probes_json.push_back(
        {{"kernel", p.kernel},
         {"probe_kernel", p.probe_kernel},
         {"split", p.split},
         {"context", p.context},
         {"head_dim", p.shape.head_dim},
         {"kv_heads", p.shape.kv_heads},
         {"gqa_group", p.shape.kv_heads ? p.shape.q_heads / p.shape.kv_heads : 0},
         {"block_size", p.shape.block_size},
         {"batch", p.shape.batch},
         {"kv_dtype", probes::stored_kv_dtype(p.shape)},
         // One decode call of one layer = one token per sequence.
         {"us_per_token", p.measured ? nlohmann::json(p.time_us) : nlohmann::json(nullptr)},
         {"time_us", p.measured ? nlohmann::json(p.time_us) : nlohmann::json(nullptr)},
         {"gbps", p.measured ? nlohmann::json(p.gbps) : nlohmann::json(nullptr)},
         {"splits", p.splits},
         {"noise", p.noise},
         {"converged", p.converged},
         {"samples", p.samples},
         {"reference_ok", p.reference_ok},
         {"max_abs_error", p.measured ? finite_or_null(p.max_error) : nlohmann::json(nullptr)}});
  }
  j["probes"] = probes_json;

  j["capacity"] = {{"free_now", capacity_json(f.free_now)},
                   {"catalog_total", capacity_json(f.catalog_total)},
                   // Which of the two the verdict judged (catalog_total: no GPU on the node).
                   {"judged", f.survey.no_gpu ? "catalog_total" : "free_now"}};

  nlohmann::json decode = nlohmann::json::array();
  for (const DecodeFacts& d : f.decode) {
    decode.push_back(
        {{"context", d.context},
         // Decode step time per token (us), the engine's path and split-KV.
         {"engine_path_us", d.engine_path.ms_per_token * 1000.0},
         {"split_us", d.split.ms_per_token * 1000.0},
         {"engine_path_attention_us_per_call", d.engine_path.attention_us_per_call},
         {"split_attention_us_per_call", d.split.attention_us_per_call},
         {"measured", d.measured},
         {"measured_engine_path_us",
          d.measured_engine_ms ? nlohmann::json(*d.measured_engine_ms * 1000.0) : nlohmann::json(nullptr)},
         {"measured_split_us",
          d.measured_split_ms ? nlohmann::json(*d.measured_split_ms * 1000.0) : nlohmann::json(nullptr)}});
  }
  j["decode"] = decode;
  j["calibration"] = o.calibration_source;
  j["catalog_match"] = o.catalog_match;
  j["notes"] = o.notes;
  return j;
}

}  // namespace kvsight::app
