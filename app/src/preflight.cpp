// The preflight use case (kvsight/app/preflight.hpp): survey, measure, plan, judge.
#include "kvsight/app/preflight.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <sstream>

#include "kvsight/app/cliff.hpp"
#include "kvsight/app/engine_setup.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/model.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

// The GPU capacity is judged for on a node without one, unless --gpu names another: the
// README's target (docs/reference/preflight.md "No GPU").
constexpr const char* kNoGpuTarget = "h200";

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      out.push_back(word);
      word.clear();
    }
  }
  if (!word.empty()) out.push_back(word);
  return out;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string hostname() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0) return "unknown";
  return buffer;
}

// vLLM's gate family of a device the catalog does not know, from its arch
// (GpuSpec::family; docs/reference/gates.md: cuda, gfx9, gfx10, gfx11, gfx12).
std::string family_of(const probes::DeviceRecord& device) {
  if (device.vendor == "nvidia" || device.arch.rfind("sm_", 0) == 0) return "cuda";
  if (device.arch.rfind("gfx", 0) == 0 && device.arch.size() >= 5) {
    const std::string digits = device.arch.substr(3);
    if (digits.size() == 3 || digits[0] == '9') return "gfx9";  // gfx90a, gfx942, gfx950
    return "gfx" + digits.substr(0, 2);                         // gfx1030 -> gfx10, gfx1100 -> gfx11
  }
  return "cuda";
}

// The stopping rule per backend and mode (docs/reference/preflight.md "Stopping rule").
probes::StoppingRule stopping_rule(const std::string& backend, bool full) {
  probes::StoppingRule rule;
  const bool cpu = backend == "cpu";
  // GPUs: nvbench's default bound, 0.5%; the cpu backend on a shared VM: 3%.
  rule.max_noise = cpu ? 0.03 : 0.005;
  rule.min_samples = 5;
  rule.max_samples = full ? 1000 : 200;
  // Time budget per figure: quick must fit 30 s on a GPU and 90 s on a 2-core cpu
  // for about 7 figures (bandwidth + 3 contexts x 2 kernels) plus data set-up.
  rule.max_time_s = full ? 5.0 : (cpu ? 1.5 : 1.0);
  rule.min_time_s = full ? 0.5 : 0.0;
  return rule;
}

std::vector<std::uint64_t> probe_contexts(bool full, std::uint64_t max_model_len) {
  std::vector<std::uint64_t> wanted = full ? std::vector<std::uint64_t>{1024, 2048, 4096, 8192, 16384, 32768}
                                           : std::vector<std::uint64_t>{1024, 8192, 32768};
  // The probes' own limit on a context (probes.hpp: 1..2^24).
  const std::uint64_t cap = std::min<std::uint64_t>(max_model_len > 0 ? max_model_len : 32768, 1ull << 24);
  std::vector<std::uint64_t> out;
  for (const std::uint64_t c : wanted) {
    if (c <= cap) out.push_back(c);
  }
  if (full && (out.empty() || out.back() < cap)) out.push_back(cap);
  if (out.empty()) out.push_back(cap);
  return out;
}

// The engine's budget on its one decision with `memory` as the device's total: the
// decision does not depend on the memory size, only the budget does.
CapacityFacts capacity_on(const Engine& engine, const EngineDecision& decision, const ModelSpec& model,
                          GpuSpec gpu, std::uint64_t memory, const EngineOptions& options) {
  gpu.memory_bytes = memory;
  EngineOptions o = options;
  o.gpu_memory_bytes.reset();
  const PlanResult plan = engine.budget(decision, model, &gpu, o);
  CapacityFacts facts;
  facts.gpu_memory_bytes = memory;
  if (plan.capacity) facts.capacity = *plan.capacity;
  facts.bytes_per_sequence = plan.kv.bytes_per_sequence;
  return facts;
}

bool is_verification_failure(const std::string& message) {
  return message.find("failed verification") != std::string::npos;
}

// The probe sweeps as the decode model's calibration input (kvsight/calibration.hpp),
// typed: no JSON in-process. Sweeps other than nosplit and splitkv are not read.
Calibration calibration_of(const std::vector<probes::SweepResult>& sweeps, const std::string& origin) {
  Calibration calibration;
  calibration.origin = origin;
  for (const probes::SweepResult& sweep : sweeps) {
    if (sweep.kernel != "nosplit" && sweep.kernel != "splitkv") continue;
    CalibrationSweep typed;
    typed.where = sweep.kernel;
    typed.backend = sweep.backend;
    typed.device = sweep.device;
    typed.head_dim = sweep.shape.head_dim;
    typed.kv_heads = sweep.shape.kv_heads;
    typed.batch = sweep.shape.batch;
    typed.dtype = sweep.shape.dtype;
    typed.ctas_per_multiprocessor = sweep.ctas_per_multiprocessor;
    for (const probes::ProbePoint& p : sweep.points) typed.points.push_back({p.context, p.time_us, p.gbps});
    (sweep.kernel == "nosplit" ? calibration.nosplit : calibration.splitkv) = std::move(typed);
  }
  return calibration;
}

}  // namespace

const GpuSpec* match_catalog(const probes::DeviceRecord& device) {
  const std::vector<std::string> device_words = words(device.name);
  std::string token;
  for (const std::string& word : device_words) {
    if (std::any_of(word.begin(), word.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      token = word;
      break;
    }
  }
  if (token.empty()) return nullptr;
  const GpuSpec* best = nullptr;
  std::size_t best_overlap = 0;
  double best_distance = 0;
  for (const GpuSpec& gpu : gpu_catalog()) {
    const std::vector<std::string> catalog_words = words(gpu.name + " " + gpu.id);
    if (std::find(catalog_words.begin(), catalog_words.end(), token) == catalog_words.end()) continue;
    if (!device.arch.empty() && device.arch != gpu.arch) continue;
    const double distance =
        std::fabs(static_cast<double>(gpu.memory_bytes) - static_cast<double>(device.memory_total_bytes));
    // Same model token but memory more than 25% away: a variant the catalog lacks
    // (an 80 GB entry is not a 40 GB card).
    if (device.memory_total_bytes > 0 && distance > 0.25 * static_cast<double>(gpu.memory_bytes)) continue;
    // More words in common first ("H100 PCIe" is the PCIe entry, "H100 80GB HBM3" the
    // SXM one), then the nearest memory total (RX 7900 XT 20 GB against XTX 24 GB).
    std::size_t overlap = 0;
    for (const std::string& word : device_words)
      overlap += std::find(catalog_words.begin(), catalog_words.end(), word) != catalog_words.end() ? 1 : 0;
    if (!best || overlap > best_overlap || (overlap == best_overlap && distance < best_distance)) {
      best = &gpu;
      best_overlap = overlap;
      best_distance = distance;
    }
  }
  return best;
}

PreflightOutcome run_preflight(const PreflightRequest& request) {
  const std::string backend_wanted = request.backend.empty() ? "auto" : request.backend;
  if (backend_wanted != "auto" && backend_wanted != "cuda" && backend_wanted != "hip" &&
      backend_wanted != "cpu")
    throw InputError("--backend", "'" + backend_wanted + "' is not a backend; allowed: auto, cuda, hip, cpu");
  const EngineSetup setup = setup_engine(request.options);
  PreflightOutcome out;
  out.mode = request.full ? "full" : "quick";
  out.host = hostname();
  out.generated_at = utc_now();
  out.options = setup.options;
  const EngineOptions& options = setup.options;
  out.model = resolve_model(request.model);
  const ModelSpec& model = out.model;

  // ---- Devices.
  probes::SurveyOptions survey_options = request.survey;
  survey_options.backend = backend_wanted;
  PreflightFacts& facts = out.facts;
  facts.survey = request.injected_survey ? *request.injected_survey : probes::survey_devices(survey_options);
  probes::DeviceSurvey& survey = facts.survey;
  if (!request.injected_survey && (backend_wanted == "cuda" || backend_wanted == "hip")) {
    bool found = false;
    std::string status = "not compiled in this build";
    for (const probes::BackendInfo& b : probes::list_backends()) {
      if (b.name == backend_wanted) {
        status = b.status;
        found = b.status == "ok" && !b.devices.empty();
      }
    }
    if (!found) throw DeviceError("--backend " + backend_wanted + ": " + status);
  }
  if (survey.devices.empty()) {  // an injected survey without devices: the CPU stands in
    survey.devices.push_back(probes::cpu_device_record());
    survey.no_gpu = true;
  }
  const probes::DeviceRecord& device = survey.devices.front();

  // ---- The catalog entry, and the spec the gates and decode model see.
  if (!request.gpu.empty() && lower(request.gpu) != "auto") {
    out.catalog = find_gpu(request.gpu);
    out.catalog_match = "--gpu " + out.catalog->id;
  } else if (!survey.no_gpu) {
    if (const GpuSpec* match = match_catalog(device)) {
      out.catalog = *match;
      out.catalog_match = "device name and memory";
    } else {
      out.catalog_match =
          "none: '" + device.name + "' is not in the catalog; working from its measured figures";
    }
  } else {
    // No GPU: the gates need a device family; judge them for the README's default
    // target and say so (--gpu chooses another).
    out.catalog = find_gpu(kNoGpuTarget);
    out.catalog_match = std::string("no GPU here: capacity and gates are judged for ") + kNoGpuTarget +
                        ", the default (--gpu names another)";
  }
  if (survey.no_gpu) facts.target_gpu = out.catalog->id;
  GpuSpec spec;
  if (out.catalog) {
    spec = *out.catalog;
  } else {
    spec.id = "detected";
    spec.name = device.name;
    spec.vendor = device.vendor;
    spec.arch = device.arch;
    spec.family = family_of(device);
    spec.source = "measured on this node";
  }
  if (!survey.no_gpu || !out.catalog) {
    if (device.memory_total_bytes > 0) spec.memory_bytes = device.memory_total_bytes;
    if (device.multiprocessors > 0) spec.multiprocessors = device.multiprocessors;
  } else {
    // The CPU stand-in: the decode model's device is the CPU (its threads run the probes).
    spec.name = device.name + " (CPU; gates judged for " + out.catalog->id + ")";
    spec.multiprocessors = std::max<std::uint32_t>(1, device.multiprocessors);
  }

  // ---- Gates, start-up refusals, the probe shape.
  const EngineDecision decision = decide_with_gates(*setup.engine, model, spec, options);
  const GateResult& gates = *decision.gates;
  facts.engine = options.engine;
  facts.kernel = gates.primary.selected.empty() ? "none" : gates.primary.selected;
  facts.splits_context = gates.primary.splits_context;
  facts.refusals = decision.refusals;
  // One GPU per rank: vLLM's executor refuses a world size (TP x PP) above the GPUs it
  // can see (docs/reference/preflight.md "Verdict rules").
  const std::uint64_t ranks = static_cast<std::uint64_t>(options.tp) * options.pp;
  if (!survey.no_gpu && ranks > survey.devices.size())
    facts.refusals.push_back("TP x PP = " + std::to_string(ranks) + " ranks need " + std::to_string(ranks) +
                             " GPUs; this node has " + std::to_string(survey.devices.size()));
  out.engine_version = gates.engine_version;
  out.block_size = gates.block_size;
  const ProbeDtypes dtypes = probe_kv_dtype(model, decision);
  out.shape = probe_shape_for(decision, options.batch, dtypes);
  if (!dtypes.note.empty()) out.notes.push_back(dtypes.note);
  facts.requested_concurrency = request.concurrency;

  // ---- Capacity: the memory free now (the minimum over the TP ranks' devices), and the catalog total.
  std::uint64_t free_now = device.memory_free_bytes;
  for (std::size_t i = 0; i < std::min<std::size_t>(options.tp, survey.devices.size()); ++i)
    free_now = std::min(free_now, survey.devices[i].memory_free_bytes);
  facts.free_now = capacity_on(*setup.engine, decision, model, spec, free_now, options);
  facts.max_model_len = facts.free_now->capacity.max_model_len;
  if (out.catalog)
    facts.catalog_total =
        capacity_on(*setup.engine, decision, model, *out.catalog, out.catalog->memory_bytes, options);
  if (setup.engine->needs_free_memory_for_budget(options, &spec) && device.memory_total_bytes > 0) {
    const CapacityFacts total =
        capacity_on(*setup.engine, decision, model, spec, device.memory_total_bytes, options);
    facts.engine_requested_bytes = total.capacity.requested_bytes;
  }

  // ---- Measurements on this node.
  const std::string backend = survey.backend;
  probes::ProbeOptions probe_options;
  probe_options.warmup = backend == "cpu" ? 1 : 3;
  // The stopping rule sets the attention and read sample counts; `repeats` is left to
  // the bandwidth probe's copy, which preflight does not report: a few suffice.
  probe_options.repeats = 3;
  probe_options.stream_reference = false;
  probe_options.stopping = stopping_rule(backend, request.full);
  out.contexts =
      probe_contexts(request.full, facts.max_model_len > 0 ? facts.max_model_len : decision.length.tokens);
  bool probeable = !gates.primary.selected.empty();
  try {
    probes::AttentionShape check = out.shape;
    check.context = out.contexts.front();
    probes::validate_shape(check);
  } catch (const InputError& e) {
    probeable = false;
    out.notes.push_back(std::string("the probe kernels cannot take this model's shape: ") + e.what());
  }
  const int total_steps = 1 + (probeable ? static_cast<int>(out.contexts.size()) : 0);
  const auto progress = [&](int step, const std::string& what, const std::string& figure) {
    if (request.progress) request.progress(PreflightProgress{step, total_steps, what, figure});
  };

  if (!request.measure) probeable = false;
  if (request.measure) {
    out.bandwidth = probes::run_bandwidth(backend, 0, probe_options);
    BandwidthFacts bandwidth;
    bandwidth.measured_bytes_per_s = out.bandwidth->read_gbps * 1e9;
    if (out.catalog && !survey.no_gpu) bandwidth.catalog_peak_bytes_per_s = out.catalog->bandwidth_gbps * 1e9;
    bandwidth.noise = out.bandwidth->read_noise;
    bandwidth.converged = out.bandwidth->read_converged;
    bandwidth.samples = out.bandwidth->read.repeats;
    facts.bandwidth = bandwidth;
    progress(1, "bandwidth", fixed_text(out.bandwidth->read_gbps, 1) + " GB/s");
  }

  std::vector<probes::SweepResult> sweeps;  // nosplit, splitkv: the points that passed
  if (probeable) {
    const std::string engine_kernel = facts.splits_context ? "splitkv" : "nosplit";
    int step = 1;
    for (const std::uint64_t context : out.contexts) {
      ++step;
      std::vector<probes::SweepResult> point;
      std::string failure;
      try {
        point = probes::run_sweeps(backend, {"nosplit", "splitkv"}, out.shape, {context}, probe_options);
      } catch (const DeviceError& e) {
        if (!is_verification_failure(e.what())) throw;
        failure = e.what();
      }
      // Both kernels, each once: the one of the engine's class is the engine path; the
      // other is the split path (or, for an engine that splits, the no-split reference).
      const std::string other_kernel = engine_kernel == "splitkv" ? "nosplit" : "splitkv";
      for (const std::string& probe_kernel : {engine_kernel, other_kernel}) {
        ProbeFacts p;
        p.probe_kernel = probe_kernel;
        p.split = probe_kernel == "splitkv";
        p.kernel = probe_kernel == engine_kernel ? "engine_path" : (p.split ? "split_path" : "no_split");
        p.context = context;
        p.shape = out.shape;
        p.shape.context = context;
        if (!failure.empty()) {
          p.reference_ok = false;
          p.error = failure;
        } else {
          const probes::ProbePoint& m = point[p.split ? 1 : 0].points.front();
          p.measured = true;
          p.time_us = m.time_us;
          p.gbps = m.gbps;
          p.noise = m.noise;
          p.converged = m.converged;
          p.samples = m.samples;
          p.splits = m.splits;
          p.max_error = m.max_error;
        }
        facts.probes.push_back(p);
      }
      if (failure.empty()) {
        if (sweeps.empty())
          sweeps = point;
        else
          for (std::size_t k = 0; k < 2; ++k) sweeps[k].points.push_back(point[k].points.front());
        progress(step, "context " + std::to_string(context),
                 "nosplit " + fixed_text(point[0].points.front().time_us, 1) + " us, splitkv " +
                     fixed_text(point[1].points.front().time_us, 1) + " us");
      } else {
        progress(step, "context " + std::to_string(context), "reference check FAILED");
      }
    }
  }

  // ---- Decode per token, calibrated by these measurements.
  if (!gates.primary.selected.empty()) {
    GpuSpec decode_spec = spec;
    DecodeModelOptions decode_options;
    if (out.bandwidth) {
      decode_spec.bandwidth_gbps = out.bandwidth->read_gbps;  // weights read at the measured rate
      decode_options.bandwidth_efficiency = 1.0;  // the measured figure is already achieved, not peak
    }
    if (sweeps.size() == 2 && sweeps[0].points.size() >= 2) {
      try {
        // The probe results reach the decode model as typed structs (kvsight/calibration.hpp).
        decode_options.calibration =
            fit_calibration(calibration_of(sweeps, "this node's probes"), decode_spec);
      } catch (const InputError& e) {
        out.notes.push_back(std::string("the probes did not give a calibration (") + e.what() +
                            "); decode uses the catalog's");
      }
    }
    const DecodeScenario scenario =
        build_decode_scenario(model, decode_spec, options, decision, decode_options);
    out.calibration_source = scenario.calibration.source;
    std::vector<std::uint64_t> decode_contexts = {1024, 8192, 32768};
    for (const std::uint64_t c : out.contexts) decode_contexts.push_back(c);
    if (facts.max_model_len > 0) decode_contexts.push_back(facts.max_model_len);
    std::sort(decode_contexts.begin(), decode_contexts.end());
    decode_contexts.erase(std::unique(decode_contexts.begin(), decode_contexts.end()), decode_contexts.end());
    const DecodeCurve engine_curve = predict_decode(scenario, decode_contexts, false);
    const DecodeCurve split_curve = predict_decode(scenario, decode_contexts, true);
    for (std::size_t i = 0; i < decode_contexts.size(); ++i) {
      DecodeFacts d;
      d.context = decode_contexts[i];
      d.engine_path = engine_curve.points[i];
      d.split = split_curve.points[i];
      // Measured per-call times at this context: [0] nosplit, [1] splitkv.
      std::optional<double> measured_us[2];
      for (std::size_t k = 0; k < sweeps.size() && k < 2; ++k) {
        for (const probes::ProbePoint& p : sweeps[k].points) {
          if (p.context == d.context) measured_us[k] = p.time_us;
        }
      }
      const double layers = static_cast<double>(gates.primary.layer_count);
      const auto step_with = [layers](const DecodePoint& predicted, double call_us) {
        return predicted.ms_per_token - layers * (predicted.attention_us_per_call - call_us) / 1000.0;
      };
      if (measured_us[1]) d.measured_split_ms = step_with(d.split, *measured_us[1]);
      // The engine path is measured by the probe kernel of its class.
      if (const auto& engine_us = measured_us[facts.splits_context ? 1 : 0])
        d.measured_engine_ms = step_with(d.engine_path, *engine_us);
      d.measured = measured_us[0].has_value() || measured_us[1].has_value();
      facts.decode.push_back(d);
    }
  }

  for (const std::string& note : survey.notes) out.notes.push_back(note);
  out.reasons = judge_preflight(facts);
  // The fixes, planned on the device capacity was judged on: the memory free now, or with no
  // GPU the target's catalog total on a node of up to 8 of them.
  FixInputs fix_inputs;
  fix_inputs.engine = setup.engine.get();
  fix_inputs.model = model;
  fix_inputs.options = options;
  if (survey.no_gpu) {
    fix_inputs.device = *out.catalog;
    fix_inputs.gpus_on_node = 8;
  } else {
    fix_inputs.device = spec;
    fix_inputs.device.memory_bytes = free_now;
    fix_inputs.gpus_on_node = static_cast<std::uint32_t>(survey.devices.size());
    fix_inputs.device_total_bytes = device.memory_total_bytes;
    fix_inputs.free_bytes = free_now;
  }
  attach_fixes(out.reasons, facts, fix_inputs, &gates);
  out.verdict = verdict_of(out.reasons);
  out.device_spec = spec;
  return out;
}

}  // namespace kvsight::app
