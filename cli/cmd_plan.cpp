// kvsight plan: KV footprints, weights, and what fits under an engine's budget
// rules. One model x one GPU gives a report; comma lists or `all` give a fleet
// table with one row per pair.
#include <charconv>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight::cli {

namespace {

struct PlanArgs {
  std::string model;
  std::string gpu;
  std::optional<double> gpu_mem_gib;
  EngineOptions engine;
  std::optional<std::uint32_t> block_size;
  bool offline = false;
  bool no_warnings = false;
};

// Strict unsigned parsing for count flags: CLI11 2.1 saturates a value beyond
// 2^64 - 1 and wraps a negative one, which would turn a typo into a wrong number.
std::uint64_t parse_count(const std::string& text, const std::string& flag) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw InputError(flag, "is '" + text + "'; allowed: a non-negative integer");
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range || end != text.data() + text.size())
    throw InputError(flag, "is " + text + ", which exceeds 2^64 - 1; allowed: a non-negative integer up to 18446744073709551615");
  return value;
}

template <typename Target>
CLI::Option* add_count(CLI::App& cmd, const std::string& names, Target& target, const std::string& help) {
  const std::string flag = names.substr(0, names.find(','));
  return cmd.add_option_function<std::string>(
      names, [&target, flag](const std::string& text) { target = parse_count(text, flag); }, help);
}

void check_fraction(const std::optional<double>& value, const char* flag) {
  if (value && !(*value > 0.0 && *value <= 1.0))
    throw InputError(flag, "is " + fixed(*value, 4) + "; allowed: a fraction in (0, 1]");
}
void check_gib(const std::optional<double>& value, const char* flag) {
  if (value && !(*value >= 0.0 && *value < 1.0e9))
    throw InputError(flag, "is " + fixed(*value, 3) + "; allowed: a non-negative number of GiB");
}

void validate(PlanArgs& a) {
  check_fraction(a.engine.gpu_memory_utilization, "--gpu-memory-utilization");
  check_fraction(a.engine.mem_fraction_static, "--mem-fraction-static");
  check_fraction(a.engine.free_gpu_memory_fraction, "--free-gpu-memory-fraction");
  check_gib(a.engine.activation_gib, "--activation-gib");
  check_gib(a.engine.non_torch_gib, "--non-torch-gib");
  check_gib(a.engine.cuda_graph_gib, "--cuda-graph-gib");
  check_gib(a.engine.weights_gib, "--weights-gib");
  if (a.engine.tp == 0) throw InputError("--tensor-parallel-size", "is 0; allowed: a positive integer");
  if (a.engine.pp == 0) throw InputError("--pipeline-parallel-size", "is 0; allowed: a positive integer");
  if (a.engine.batch == 0) throw InputError("--batch", "is 0; allowed: a positive integer");
  if (a.engine.parallel == 0) throw InputError("--parallel", "is 0; allowed: a positive integer");
  if (a.block_size) {
    if (*a.block_size == 0) throw InputError("--block-size", "is 0; allowed: a positive number of tokens");
    a.engine.block_size = a.block_size;
  }
  if (a.engine.max_model_len && *a.engine.max_model_len == 0)
    throw InputError("--max-model-len", "is 0; allowed: a positive length, or -1 for the largest that fits");
  if (a.engine.max_model_len && *a.engine.max_model_len < -1)
    throw InputError("--max-model-len", "is negative; allowed: a positive length, or -1 for the largest that fits");
  if (a.gpu_mem_gib) {
    if (!(*a.gpu_mem_gib > 0.0 && *a.gpu_mem_gib < 1.0e7))
      throw InputError("--gpu-mem-gib", "is " + fixed(*a.gpu_mem_gib, 3) + "; allowed: a positive number of GiB");
    a.engine.gpu_memory_bytes = static_cast<std::uint64_t>(std::llround(*a.gpu_mem_gib * kGiB));
  }
  a.engine.api_server = !a.offline;
}

nlohmann::json to_json(const ModelSpec& model, const GpuSpec* gpu, const PlanResult& r, const EngineOptions& o) {
  nlohmann::json j;
  j["model"] = {{"id", model.id}, {"name", model.display_name}, {"source", model.source}};
  if (gpu)
    j["gpu"] = {{"id", gpu->id}, {"name", gpu->name}, {"memory_bytes", gpu->memory_bytes}};
  else if (o.gpu_memory_bytes)
    j["gpu"] = {{"id", "custom"}, {"name", "--gpu-mem-gib"}, {"memory_bytes", *o.gpu_memory_bytes}};
  else
    j["gpu"] = nullptr;
  j["engine"] = {{"name", r.engine}, {"version", r.engine_version}};
  j["parallel"] = {{"tensor_parallel_size", o.tp}, {"pipeline_parallel_size", o.pp}};
  j["kv"] = {{"bytes_per_token", r.kv.bytes_per_token},
             {"bytes_per_token_all_layers", r.kv.bytes_per_token_all_layers},
             {"state_bytes_per_sequence", r.kv.state_bytes_per_sequence},
             {"bytes_per_sequence", r.kv.bytes_per_sequence},
             {"bytes_per_batch", r.kv.bytes_per_batch},
             {"block_size", r.kv.block_size},
             {"blocks_per_sequence", r.kv.blocks_per_sequence},
             {"context", r.kv.context},
             {"batch", r.kv.batch},
             {"kv_cache_dtype", o.kv_cache_dtype},
             {"per_rank", true}};
  j["weights"] = {{"params", r.weights.params},           {"bytes", r.weights.bytes},
                  {"bytes_per_rank", r.weights.bytes_per_rank}, {"bits_per_weight", r.weights.bits_per_weight},
                  {"exact", r.weights.exact},             {"method", r.weights.method}};
  if (r.capacity) {
    const Capacity& c = *r.capacity;
    j["capacity"] = {{"gpu_memory_bytes", c.gpu_memory_bytes},
                     {"requested_bytes", c.requested_bytes},
                     {"overhead_bytes", c.overhead_bytes},
                     {"available_kv_bytes", c.available_kv_bytes},
                     {"page_bytes", c.page_bytes},
                     {"num_blocks", c.num_blocks},
                     {"kv_tokens", c.kv_tokens},
                     {"max_concurrency", c.max_concurrency},
                     {"max_model_len", c.max_model_len},
                     {"fits", c.fits},
                     {"largest_max_model_len", c.largest_max_model_len},
                     {"limiting_rank", c.limiting_rank}};
  } else {
    j["capacity"] = nullptr;
  }
  j["engine_log"] = r.engine_log;
  auto& assumptions = j["assumptions"] = nlohmann::json::array();
  for (const auto& a : r.assumptions) assumptions.push_back({{"name", a.name}, {"value", a.value}, {"why", a.why}});
  j["notes"] = r.notes;
  j["warnings"] = r.warnings;
  return j;
}

// Exact bytes, then a readable binary unit (GiB for anything from 1 GiB up).
std::string bytes_cell(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  std::string unit;
  if (bytes >= (1ull << 30)) unit = gib(bytes, 3);
  else if (bytes >= (1ull << 20)) unit = fixed(b / (1 << 20), 2) + " MiB";
  else if (bytes >= 1024) unit = fixed(b / 1024, 2) + " KiB";
  else return with_commas(bytes) + " B";
  return with_commas(bytes) + " B (" + unit + ")";
}

Report to_report(const ModelSpec& model, const GpuSpec* gpu, const PlanResult& r, const EngineOptions& o) {
  Report rep;
  std::string title = "kvsight plan: " + (model.display_name.empty() ? model.id : model.display_name);
  if (gpu) title += " on " + gpu->name;
  title += " under " + r.engine + (r.engine_version.empty() ? "" : " " + r.engine_version);
  if (o.tp > 1 || o.pp > 1) title += " (TP " + std::to_string(o.tp) + ", PP " + std::to_string(o.pp) + ")";
  rep.title = title;
  const bool per_rank = o.tp > 1 || o.pp > 1;
  const std::string rank_note = per_rank ? "per GPU rank" : "";

  ReportSection kv{"KV cache (" + (o.kv_cache_dtype == "auto" ? model.dtype + ", auto" : o.kv_cache_dtype) + ")", {}};
  kv.rows.push_back({"per token (grows with context)", bytes_cell(r.kv.bytes_per_token),
                     r.kv.bytes_per_token == r.kv.bytes_per_token_all_layers ? rank_note : "full-attention layers; " + rank_note});
  if (r.kv.bytes_per_token_all_layers != r.kv.bytes_per_token)
    kv.rows.push_back({"per token, all layers", bytes_cell(r.kv.bytes_per_token_all_layers), "until windows fill"});
  if (r.kv.state_bytes_per_sequence > 0)
    kv.rows.push_back({"recurrent state per sequence", bytes_cell(r.kv.state_bytes_per_sequence), "constant"});
  kv.rows.push_back({"block size", std::to_string(r.kv.block_size) + " tokens", ""});
  kv.rows.push_back({"per sequence at " + with_commas(r.kv.context) + " tokens", bytes_cell(r.kv.bytes_per_sequence),
                     with_commas(r.kv.blocks_per_sequence) + " blocks"});
  kv.rows.push_back({"per batch of " + with_commas(r.kv.batch), bytes_cell(r.kv.bytes_per_batch), ""});
  rep.sections.push_back(kv);

  ReportSection w{"Weights", {}};
  w.rows.push_back({"parameters", with_commas(r.weights.params), fixed(static_cast<double>(r.weights.params) / 1e9, 2) + " B"});
  w.rows.push_back({"bytes", bytes_cell(r.weights.bytes), r.weights.exact ? "exact (safetensors)" : "estimate"});
  if (per_rank) w.rows.push_back({"bytes per rank", bytes_cell(r.weights.bytes_per_rank), "largest rank"});
  rep.sections.push_back(w);

  if (r.capacity) {
    const Capacity& c = *r.capacity;
    ReportSection cap{"Capacity" + std::string(per_rank ? " (per rank; minimum over ranks)" : ""), {}};
    cap.rows.push_back({"GPU memory (runtime total)", gib(c.gpu_memory_bytes), ""});
    if (c.requested_bytes) cap.rows.push_back({"engine budget", gib(c.requested_bytes), ""});
    if (c.overhead_bytes) cap.rows.push_back({"runtime overheads", gib(c.overhead_bytes), "estimate, see assumptions"});
    cap.rows.push_back({"available for KV", gib(c.available_kv_bytes), ""});
    cap.rows.push_back({"blocks", with_commas(c.num_blocks), "page " + with_commas(c.page_bytes) + " B"});
    cap.rows.push_back({"KV tokens", with_commas(c.kv_tokens), ""});
    cap.rows.push_back({"max concurrency at " + with_commas(c.max_model_len), fixed(c.max_concurrency, 2) + "x",
                        c.fits ? "fits" : "DOES NOT FIT"});
    cap.rows.push_back({"largest max_model_len that fits", with_commas(c.largest_max_model_len), ""});
    rep.sections.push_back(cap);
  }
  if (!r.assumptions.empty()) {
    ReportSection as{"Assumptions and estimates (override with the flags named)", {}};
    for (const auto& a : r.assumptions) as.rows.push_back({a.name, a.value, a.why});
    rep.sections.push_back(as);
  }
  if (!r.engine_log.empty()) {
    rep.footer.push_back("What " + r.engine + " would log:");
    for (const auto& line : r.engine_log) rep.footer.push_back("  " + line);
  }
  for (const auto& n : r.notes) rep.footer.push_back("note: " + n);
  for (const auto& wmsg : r.warnings) rep.footer.push_back("WARNING: " + wmsg);
  rep.footer.push_back("Bytes are per GPU rank; GiB = 2^30 bytes.");
  return rep;
}

void add_cliff_warning(const ModelSpec& model, const GpuSpec* gpu, const EngineOptions& options, PlanResult& result) {
  if (!gpu) return;
  try {
    if (auto warning = decode_cliff_warning(model, *gpu, options)) result.warnings.push_back(*warning);
  } catch (const InputError&) {
    // A model the gates cannot judge (e.g. no attention layers) gets no warning.
  }
}

void run_plan(PlanArgs args, CliState& state) {
  validate(args);
  const Format format = state.format();
  const auto models = expand_model_list(args.model);
  std::vector<std::string> gpus;
  if (!args.gpu.empty()) gpus = expand_gpu_list(args.gpu);
  if (!args.gpu.empty() && args.engine.gpu_memory_bytes)
    throw InputError("--gpu-mem-gib", "give either --gpu or --gpu-mem-gib, not both");
  const auto engine = make_engine(args.engine.engine);

  // vLLM and SGLang refuse to start when TP does not divide the attention heads
  // (vllm/config/parallel.py verify_with_model_config; gates.md "Engine constraints").
  auto check_tp = [&args](const ModelSpec& model) {
    const std::string& e = args.engine.engine;
    if ((e == "vllm" || e == "sglang") && model.num_attention_heads > 0 &&
        model.num_attention_heads % args.engine.tp != 0)
      throw InputError("--tensor-parallel-size", std::to_string(args.engine.tp) + " does not divide the " +
                                                      std::to_string(model.num_attention_heads) + " attention heads of " +
                                                      model.id + "; " + e + " refuses to start (see `kvsight gates`)");
  };
  const bool single = models.size() == 1 && gpus.size() <= 1;
  if (single) {
    const ModelSpec model = resolve_model(models[0]);
    check_tp(model);
    const GpuSpec* gpu = gpus.empty() ? nullptr : &find_gpu(gpus[0]);
    PlanResult result = engine->plan(model, gpu, args.engine);
    // What the config reader had to assume belongs next to the figures it affects.
    result.notes.insert(result.notes.begin(), model.notes.begin(), model.notes.end());
    if (!args.no_warnings) add_cliff_warning(model, gpu, args.engine, result);
    if (format == Format::json) emit(state, render_json(to_json(model, gpu, result, args.engine)));
    else emit(state, render_report(to_report(model, gpu, result, args.engine), format));
    return;
  }

  // Fleet: one row per (model, GPU) pair. Bad input in one pair is still an
  // error for the whole run: a capacity table with a silently missing row would mislead.
  Table table;
  table.title = "kvsight plan: " + std::to_string(models.size()) + " model(s) x " +
                std::to_string(std::max<std::size_t>(1, gpus.size())) + " GPU(s) under " + engine->name() +
                " (TP " + std::to_string(args.engine.tp) + ", PP " + std::to_string(args.engine.pp) + ")";
  table.columns = {"model", "gpu", "KV B/token", "KV/seq GiB", "weights GiB", "KV avail GiB", "blocks", "KV tokens",
                   "max_model_len", "max conc", "largest len"};
  table.right_align = {false, false, true, true, true, true, true, true, true, true, true};
  nlohmann::json rows = nlohmann::json::array();
  if (gpus.empty()) gpus.push_back("");
  for (const auto& model_id : models) {
    const ModelSpec model = resolve_model(model_id);
    check_tp(model);
    for (const auto& gpu_id : gpus) {
      const GpuSpec* gpu = gpu_id.empty() ? nullptr : &find_gpu(gpu_id);
      PlanResult r = engine->plan(model, gpu, args.engine);
      if (format == Format::json) {
        rows.push_back(to_json(model, gpu, r, args.engine));
        continue;
      }
      std::vector<std::string> row{model.id, gpu ? gpu->id : "-", with_commas(r.kv.bytes_per_token),
                                   fixed(to_gib(r.kv.bytes_per_sequence), 2), fixed(to_gib(r.weights.bytes_per_rank), 2)};
      if (r.capacity) {
        const Capacity& c = *r.capacity;
        row.push_back(fixed(to_gib(c.available_kv_bytes), 2));
        row.push_back(with_commas(c.num_blocks));
        row.push_back(with_commas(c.kv_tokens));
        row.push_back(with_commas(c.max_model_len));
        row.push_back(c.fits ? fixed(c.max_concurrency, 2) + "x" : "no fit");
        row.push_back(with_commas(c.largest_max_model_len));
      } else {
        row.insert(row.end(), 6, "-");
      }
      table.rows.push_back(std::move(row));
    }
  }
  if (format == Format::json) emit(state, render_json({{"rows", rows}}));
  else emit(state, render_table(table, format));
}

}  // namespace

void add_plan_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "KV cache per token/sequence/batch, weights, and how many sequences fit");
  cmd->description(
      "KV cache per token, per sequence (with paged-block rounding) and per batch; the weights; and, with a GPU,\n"
      "what the engine leaves for KV, blocks, KV tokens, max concurrency at max_model_len and the largest\n"
      "max_model_len that fits, with the lines the engine itself logs at start-up.\n"
      "Flags use the engines' own names; each flag's help says which engine reads it.\n"
      "Examples:\n"
      "  kvsight plan --model smollm3-3b --gpu h200\n"
      "  kvsight plan --model llama-3.1-8b --gpu rtx3090 --max-model-len 20000 --gpu-memory-utilization 0.9\n"
      "  kvsight plan --model all --gpu h100-sxm,mi300x --format csv");
  auto& e = args->engine;
  cmd->add_option("--model,-m", args->model,
                  "Catalog id (kvsight models), config.json path, model directory, or org/name in the local HF "
                  "cache; comma list or 'all' for a fleet table")
      ->required();
  cmd->add_option("--gpu,-g", args->gpu, "GPU catalog id (kvsight gpus); comma list or 'all'");
  cmd->add_option("--gpu-mem-gib", args->gpu_mem_gib, "GPU memory in GiB instead of a catalog GPU");
  cmd->add_option("--engine,-e", e.engine, "Engine whose budget rules apply: vllm, sglang, trtllm, llamacpp")
      ->default_str("vllm");
  cmd->add_option("--engine-version", e.engine_version, "Engine version whose defaults and log lines to use (default: newest known)");
  add_count(*cmd, "--context,-c", e.context, "Tokens per sequence for the kv.* figures (default: max_model_len)");
  add_count(*cmd, "--batch,-b", e.batch, "Sequences in the batch for kv.bytes_per_batch (default 1)");
  cmd->add_option("--kv-cache-dtype", e.kv_cache_dtype,
                  "[vLLM, SGLang, TRT-LLM] KV dtype: auto (model dtype), bf16, fp16, fp32, fp8, fp8_e4m3, fp8_e5m2, "
                  "fp8_ds_mla, fp8_per_token_head, int8, nvfp4, int4_g32, ...")
      ->default_str("auto");
  cmd->add_option("--block-size", args->block_size, "[vLLM] tokens per KV block (TRT-LLM tokens_per_block, SGLang page size)");
  cmd->add_option("--tensor-parallel-size,--tp", e.tp, "[vLLM, SGLang, TRT-LLM] tensor-parallel ranks")->default_str("1");
  cmd->add_option("--pipeline-parallel-size,--pp", e.pp, "[vLLM, SGLang, TRT-LLM] pipeline stages")->default_str("1");
  cmd->add_option("--gpu-memory-utilization", e.gpu_memory_utilization,
                  "[vLLM] fraction of total GPU memory vLLM may use (default 0.92; 0.90 through 0.11.x)");
  cmd->add_option("--max-model-len", e.max_model_len, "[vLLM] context length; -1 = the largest that fits (default: from config)");
  add_count(*cmd, "--max-num-batched-tokens", e.max_num_batched_tokens, "[vLLM] tokens per scheduler step (default by GPU and version)");
  add_count(*cmd, "--max-num-seqs", e.max_num_seqs, "[vLLM] sequences per step (default by GPU and version)");
  add_count(*cmd, "--kv-cache-memory-bytes", e.kv_cache_memory_bytes, "[vLLM] KV cache size in bytes, skipping the memory profile");
  cmd->add_flag("--enforce-eager", e.enforce_eager, "[vLLM] no CUDA graphs (no graph memory estimate)");
  cmd->add_flag("--enable-prefix-caching", e.enable_prefix_caching, "[vLLM] prefix caching (hybrid models keep one more state page)");
  cmd->add_flag("--offline", args->offline, "[vLLM] defaults of the offline LLM class instead of `vllm serve`");
  cmd->add_option("--mem-fraction-static", e.mem_fraction_static, "[SGLang] fraction for weights + KV pool");
  cmd->add_option("--free-gpu-memory-fraction", e.free_gpu_memory_fraction, "[TRT-LLM] fraction of free memory for KV (default 0.9)");
  add_count(*cmd, "--ctx-size", e.ctx_size, "[llama.cpp] n_ctx, KV cells (default 4096, llama.cpp's common default; 0 = the model's training context)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--parallel", e.parallel, "[llama.cpp] slots sharing n_ctx")->default_str("1");
  cmd->add_option("--cache-type-k", e.cache_type_k, "[llama.cpp] K cache type: f16, bf16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl")
      ->default_str("f16");
  cmd->add_option("--cache-type-v", e.cache_type_v, "[llama.cpp] V cache type (same values)")->default_str("f16");
  cmd->add_flag("--swa-full", e.swa_full, "[llama.cpp] full-size cache for sliding-window layers");
  cmd->add_option("--ubatch-size", e.ubatch_size, "[llama.cpp] n_ubatch")->default_str("512")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--kv-unified", e.kv_unified, "[llama.cpp] one KV buffer shared by all slots");
  cmd->add_option("--activation-gib", e.activation_gib, "Override the activation-peak estimate (GiB)");
  cmd->add_option("--non-torch-gib", e.non_torch_gib, "Override the non-torch memory estimate (GiB)");
  cmd->add_option("--cuda-graph-gib", e.cuda_graph_gib, "Override the CUDA-graph memory estimate (GiB)");
  cmd->add_option("--weights-gib", e.weights_gib, "Override the weights size (GiB, whole model)");
  cmd->add_flag("--no-warnings", args->no_warnings, "Skip the decode-cliff check");
  add_output_options(*cmd, state);
  cmd->callback([args, &state] { run_plan(*args, state); });
}

}  // namespace kvsight::cli
