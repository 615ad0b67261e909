// The engine decision (kvsight/engine_decision.hpp, issue #27): one decision per (model,
// device, engine, version, options), read by every command. One test per symptom of the
// issue's "Why"; each failed on the code before the decision existed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "kvsight/app/cliff.hpp"
#include "kvsight/app/explain.hpp"
#include "kvsight/app/fit.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/gates.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

// An engine that forwards to a real one and counts how often each decision part is asked.
class CountingEngine final : public Engine {
 public:
  explicit CountingEngine(std::unique_ptr<Engine> inner) : inner_(std::move(inner)) {}
  mutable int block_calls = 0, length_calls = 0, type_calls = 0, check_calls = 0;

  std::string name() const override { return inner_->name(); }
  std::vector<std::string> known_versions() const override { return inner_->known_versions(); }
  std::string display_name() const override { return inner_->display_name(); }
  std::string default_version() const override { return inner_->default_version(); }
  VersionForm version_form() const override { return inner_->version_form(); }
  std::vector<EngineFlag> flags() const override { return inner_->flags(); }
  std::vector<std::string> kv_cache_dtypes() const override { return inner_->kv_cache_dtypes(); }
  std::vector<KvTypeSetting> kv_cache_type_settings(const EngineOptions& o) const override {
    return inner_->kv_cache_type_settings(o);
  }
  KvTypes kv_types(const ModelSpec& m, const EngineOptions& o) const override {
    ++type_calls;
    return inner_->kv_types(m, o);
  }
  BlockSizeChoice block_size(const ModelSpec& m, const GpuSpec* g, const EngineOptions& o) const override {
    ++block_calls;
    return inner_->block_size(m, g, o);
  }
  LengthChoice max_model_len(const ModelSpec& m, const EngineOptions& o) const override {
    ++length_calls;
    return inner_->max_model_len(m, o);
  }
  std::vector<StartupCheck> startup_checks(const ModelSpec& m, const GpuSpec* g,
                                           const EngineOptions& o) const override {
    ++check_calls;
    return inner_->startup_checks(m, g, o);
  }
  bool has_gate_rules() const override { return inner_->has_gate_rules(); }
  bool padded_kv_layout(const ModelSpec& m) const override { return inner_->padded_kv_layout(m); }
  PlanResult budget(const EngineDecision& d, const ModelSpec& m, const GpuSpec* g,
                    const EngineOptions& o) const override {
    return inner_->budget(d, m, g, o);
  }

 private:
  std::unique_ptr<Engine> inner_;
};

// "One plan of a hybrid model computes the block size 3 times ...; startup_checks validates
// the block size by calling block_size() and discarding the result": each part once.
TEST(EngineDecision, EachPartIsAskedOnceForAPlanWithGates) {
  const CountingEngine engine(make_engine("vllm"));
  const ModelSpec model = resolve_model("qwen3.6-27b");  // hybrid: the block is raised (784)
  EngineOptions options;
  options.tp = 2;
  const PlanResult plan = engine.plan(model, &find_gpu("rx7900xt"), options);
  EXPECT_EQ(engine.block_calls, 1);
  EXPECT_EQ(engine.length_calls, 1);
  EXPECT_EQ(engine.type_calls, 1);
  EXPECT_EQ(engine.check_calls, 1);
  // The budget's block is the decision's: 784 for Qwen3.6-27B at TP 2 (tests/test_engine_vllm.cpp
  // derives it from the state page).
  EXPECT_EQ(plan.kv.block_size, 784u);
}

// "The effective max_model_len is re-derived in five places (... gates with its own 4096
// fallback ...)": the gates judge max_seq_len at the decision's length, which is the plan's.
TEST(EngineDecision, GatesAndPlanUseOneMaxModelLen) {
  const ModelSpec model = resolve_model("llama-3.1-8b");  // max_position_embeddings 131,072
  const GpuSpec& gpu = find_gpu("h200");
  for (const char* name : {"vllm", "sglang", "trtllm"}) {
    EngineOptions options;
    options.engine = name;
    options.context = 1000;  // the kv.* figures' length, not the engine's max_model_len
    const EngineDecision d = decide(*make_engine(name), model, &gpu, options);
    ASSERT_TRUE(d.gates) << name;
    EXPECT_EQ(d.length.tokens, 131072u) << name;
    // Before: the gates took --context (1000) when no max_model_len was given.
    EXPECT_EQ(d.gates->max_seq_len, 131072u) << name;
    const PlanResult plan = make_engine(name)->budget(d, model, &gpu, options);
    ASSERT_TRUE(plan.capacity) << name;
    EXPECT_EQ(plan.capacity->max_model_len, d.length.tokens) << name;
    options.max_model_len = 20000;
    const EngineDecision given = decide(*make_engine(name), model, &gpu, options);
    EXPECT_EQ(given.gates->max_seq_len, 20000u) << name;
  }
}

// "The cliff warning estimates the weights itself and ignores --weights-gib."
TEST(EngineDecision, DecodeBaselineReadsTheDecisionsWeights) {
  const ModelSpec model = resolve_model("qwen3.6-27b");
  const GpuSpec& gpu = find_gpu("rx7900xt");
  EngineOptions options;
  options.tp = 2;
  options.overheads.weights_gib = 100.0;  // the whole model; 50 GiB per rank at TP 2
  const EngineDecision d = decide(*make_engine("vllm"), model, &gpu, options);
  EXPECT_EQ(d.weights.bytes_per_rank, 50ull << 30);
  DecodeModelOptions decode;
  decode.launch_us_per_layer = 0.0;
  const DecodeScenario scenario = build_decode_scenario(model, gpu, options, d, decode);
  // weights_ms = 50 x 2^30 B / (bandwidth_gbps x 0.7 x 10^6 B/ms); the recurrent state adds
  // 2 x state x batch / (same) < 1 ms, so the baseline lies in [weights_ms, weights_ms + 1].
  const double weights_ms = 50.0 * 1073741824.0 / (gpu.bandwidth_gbps * 0.7 * 1e6);
  EXPECT_GE(scenario.baseline_ms, weights_ms);
  EXPECT_LT(scenario.baseline_ms, weights_ms + 1.0);
}

// "For gpt-oss on TensorRT-LLM, explain divides by the sliding window (+99.8 %)": its paged
// pool holds every attention layer, the sliding ones too.
TEST(EngineDecision, ExplainDividesTensorRtLlmsPoolByEveryLayer) {
  // gpt-oss-20b: 24 layers (12 sliding, 12 full), 8 KV heads of 64 at bf16: 8 x 64 x 2 (K, V)
  // x 2 B = 2,048 B per layer per token; every layer: 24 x 2,048 = 49,152 B. 10 GiB =
  // 10,737,418,240 B / 49,152 = 218,453.3 -> 218,453 tokens (12 full layers only: 436,906).
  app::ExplainRequest request;
  request.log_text =
      "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 10.00 GiB for max tokens in paged KV cache "
      "(218453).\n";
  request.log_name = "trtllm.log";
  request.model = "gpt-oss-20b";
  const app::ExplainOutcome out = app::run_explain(request);
  bool found = false;
  for (const app::ExplainTerm& term : out.terms) {
    if (term.name != "KV tokens") continue;
    found = true;
    ASSERT_TRUE(term.kvsight && term.logged);
    EXPECT_DOUBLE_EQ(*term.kvsight, 218453.0);
    EXPECT_DOUBLE_EQ(*term.logged, 218453.0);
  }
  EXPECT_TRUE(found);
}

// "plan --tp 3 prints the TP refusal twice."
TEST(EngineDecision, PlanPrintsTheTpRefusalOnce) {
  const auto run = test::run_kvsight({"plan", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "3"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  const std::string all = run.out + run.err;
  std::size_t count = 0;
  for (std::size_t at = all.find("does not divide 32"); at != std::string::npos;
       at = all.find("does not divide 32", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << all;
}

// "llama.cpp's block size is 1 in plan and 0 in gates."
TEST(EngineDecision, LlamaCppBlockIsTheSameInPlanAndGates) {
  const std::vector<std::string> common = {"--model",  "llama-3.1-8b", "--gpu",    "h200",
                                           "--engine", "llamacpp",     "--format", "json"};
  std::vector<std::string> plan_args = {"plan"}, gates_args = {"gates"};
  plan_args.insert(plan_args.end(), common.begin(), common.end());
  gates_args.insert(gates_args.end(), common.begin(), common.end());
  const auto plan = test::run_kvsight(plan_args);
  const auto gates = test::run_kvsight(gates_args);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  ASSERT_EQ(gates.exit_code, 0) << gates.err;
  const auto p = nlohmann::json::parse(plan.out);
  const auto g = nlohmann::json::parse(gates.out);
  // One cell per token: a "block" of 1 in both.
  EXPECT_EQ(p["kv"]["block_size"], 1);
  EXPECT_EQ(g["block_size"], 1);
}

// "15 by-name engine branches remain outside planner/src/engines": none may be left. A
// comparison of an engine name with a literal engine name in app/, cli/, the gates or the
// decode model is a rule that belongs to the engine (a hook of kvsight/budget.hpp).
TEST(EngineDecision, NoEngineNameBranchOutsideTheEngines) {
  const std::regex branch(
      R"re((==|!=)\s*"(vllm|sglang|trtllm|llamacpp|exllamav2|exllamav3)"|"(vllm|sglang|trtllm|llamacpp|exllamav2|exllamav3)"\s*(==|!=))re");
  const std::filesystem::path root = KVSIGHT_SOURCE_DIR;
  std::vector<std::string> found;
  for (const char* dir : {"app", "cli", "planner/src/gates", "planner/src/decode"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / dir)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp") continue;
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        if (std::regex_search(line, branch))
          found.push_back(entry.path().lexically_relative(root).string() + ":" + std::to_string(number) +
                          ": " + line);
      }
    }
  }
  std::string text;
  for (const std::string& f : found) text += f + "\n";
  EXPECT_TRUE(found.empty()) << text;
}

// "the newest vLLM version is written 3 times": each engine's default is the last of the
// versions it knows, except vLLM, which keeps 0.33.0 while 0.34.0 is known (issue #28,
// docs/reference/engine-versions.md "Default version"); the gates say which when none is given.
TEST(EngineDecision, EachEnginesDefaultVersionIsItsNewestKnownButVllms) {
  for (const auto& engine : all_engines()) {
    const std::vector<std::string> known = engine->known_versions();
    ASSERT_FALSE(known.empty()) << engine->name();
    if (engine->name() == "vllm") {
      EXPECT_EQ(engine->default_version(), "0.33.0");
      EXPECT_EQ(known.back(), "0.34.0");
    } else {
      EXPECT_EQ(engine->default_version(), known.back()) << engine->name();
    }
  }
  const GateResult gates = evaluate_gates(resolve_model("llama-3.1-8b"), find_gpu("h200"), EngineOptions{});
  EXPECT_EQ(gates.engine_version, "0.33.0 (default; 0.34.0 is known too; --engine-version)");
  EngineOptions sglang;
  sglang.engine = "sglang";
  const GateResult newest = evaluate_gates(resolve_model("llama-3.1-8b"), find_gpu("h200"), sglang);
  EXPECT_EQ(newest.engine_version,
            make_engine("sglang")->known_versions().back() + " (newest known; --engine-version)");
}

// "compiled block sizes 8, 16, 32 is stale": the probe's messages and --help say what the
// kernels compile (one block-16 instance, every other size on the runtime path).
TEST(EngineDecision, ProbeHelpNamesTheCompiledInstances) {
  const auto help = test::run_kvsight({"probe", "attention", "--help"});
  EXPECT_NE(help.out.find("16 (compiled instance) or any other size 1..4096"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("8, 16, 32"), std::string::npos) << help.out;
  const auto bad = test::run_kvsight({"probe", "attention", "--backend", "cpu", "--head-dim", "96"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("allowed: 64, 128, 256"), std::string::npos) << bad.err;
}

// "fit over every GPU kind of the catalog returns no row that gates refuses."
app::FitRequest llama_fit(std::uint64_t concurrency, std::uint64_t context, const std::string& gpus) {
  app::FitRequest request;
  request.model = "llama-3.1-8b";
  request.concurrency = concurrency;
  request.context = context;
  request.gpus = gpus;
  return request;
}

TEST(EngineDecision, FitAcceptsNothingTheGatesRefuse) {
  app::FitRequest request = llama_fit(4, 8192, "all");
  request.max_gpus = 2;
  const app::FitOutcome outcome = app::run_fit(request);
  ASSERT_FALSE(outcome.accepted.empty());
  for (const app::FitCandidate& c : outcome.accepted) {
    EngineOptions options;
    options.tp = c.tp;
    options.pp = c.pp;
    options.kv_cache_dtype = c.kv_cache_dtype;
    if (c.block_size_requested) options.block_size = c.block_size_requested;
    const GateResult gates = evaluate_gates(resolve_model("llama-3.1-8b"), find_gpu(c.gpu), options);
    EXPECT_TRUE(gates.errors.empty()) << c.gpu << " tp " << c.tp << " " << c.kv_cache_dtype << ": "
                                      << (gates.errors.empty() ? "" : gates.errors.front());
    EXPECT_FALSE(gates.primary.selected.empty()) << c.gpu << " " << c.kv_cache_dtype;
  }
}

// "fit ... ranks nvfp4 KV first on MI300X and MI325X (and gates admits it there)": no ROCm
// attention backend of vLLM 0.33 lists nvfp4 (gates.md "KV cache types per attention
// backend"), so every nvfp4 candidate there is rejected with the engine's refusal, and
// plan refuses it too (exit 1).
TEST(EngineDecision, NoNvfp4CacheOnAmd) {
  app::FitRequest request = llama_fit(64, 32768, "mi300x,mi325x");
  request.kv_cache_dtypes = {"all"};
  const app::FitOutcome outcome = app::run_fit(request);
  ASSERT_FALSE(outcome.accepted.empty());
  for (const app::FitCandidate& c : outcome.accepted) EXPECT_NE(c.kv_cache_dtype, "nvfp4") << c.gpu;
  std::size_t refused = 0;
  for (const app::FitCandidate& c : outcome.rejected) {
    if (c.kv_cache_dtype != "nvfp4") continue;
    ++refused;
    std::string reasons;
    for (const std::string& r : c.reasons) reasons += r + "; ";
    EXPECT_NE(reasons.find("refuses kv_cache_dtype nvfp4"), std::string::npos) << reasons;
  }
  EXPECT_GT(refused, 0u);
  const auto run = test::run_kvsight({"plan", "--model", "llama-3.1-8b", "--gpu", "mi300x",
                                      "--kv-cache-dtype", "nvfp4", "--max-model-len", "8192"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE((run.out + run.err).find("refuses kv_cache_dtype nvfp4"), std::string::npos) << run.out;
}

// "preflight and cliff probe K/V at bf16 whatever the plan's KV dtype: an fp8 plan is probed at
// twice its bytes": the probe reads the decision's cache type.
TEST(EngineDecision, ProbesReadThePlansKvCacheType) {
  const ModelSpec llama = resolve_model("llama-3.1-8b");  // bf16
  const GpuSpec& gpu = find_gpu("h200");
  const auto dtypes_for = [&](const std::string& kv) {
    EngineOptions options;
    options.kv_cache_dtype = kv;
    return app::probe_kv_dtype(llama, decide(*make_engine("vllm"), llama, &gpu, options));
  };
  EXPECT_EQ(dtypes_for("auto").dtype, "bf16");
  EXPECT_EQ(dtypes_for("auto").kv_dtype, "auto");
  EXPECT_EQ(dtypes_for("float16").dtype, "fp16");  // a 16-bit cache of another type: q and K/V in it
  EXPECT_EQ(dtypes_for("fp8").kv_dtype, "fp8_e4m3");
  EXPECT_TRUE(dtypes_for("fp8").note.empty());
  // fp8_e5m2 has no decode in the probe kernels: E4M3 reads the same 1 B per element.
  EXPECT_EQ(dtypes_for("fp8_e5m2").kv_dtype, "fp8_e4m3");
  EXPECT_NE(dtypes_for("fp8_e5m2").note.find("1.00x the bytes"), std::string::npos)
      << dtypes_for("fp8_e5m2").note;
  // nvfp4: a 128-element row is 64 B + 8 fp8 scales = 72 B; E4M3 reads 128 B = 1.78x.
  EXPECT_NE(dtypes_for("nvfp4").note.find("1.78x the bytes"), std::string::npos) << dtypes_for("nvfp4").note;

  // The cliff's measurement runs at the plan's type: fp8 K/V, 1 B per element. At context 256,
  // 8 KV heads of 128: K + V = 256 x 8 x 128 x 2 x 1 B = 524,288 B (bf16 would be 1,048,576).
  const auto run = test::run_kvsight({"cliff", "--model", "llama-3.1-8b", "--gpu", "rx7900xt",
                                      "--kv-cache-dtype", "fp8", "--backend", "cpu", "--measure-contexts",
                                      "256", "--repeats", "1", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["shape"]["probe_kv_dtype"], "fp8_e4m3");
  for (const auto& kernel : j["measured"]["kernels"]) {
    EXPECT_EQ(kernel["shape"]["kv_dtype"], "fp8_e4m3");
    const std::uint64_t bytes = kernel["points"][0]["bytes"];
    EXPECT_GE(bytes, 524288u);
    EXPECT_LT(bytes, 1048576u);
  }
}

// "The README's own fit example leads with nvfp4": run the README's fit line; its first row
// must be a full-precision KV cache.
TEST(EngineDecision, ReadmeFitExampleLeadsWithAFullPrecisionCache) {
  std::ifstream readme(std::string(KVSIGHT_SOURCE_DIR) + "/README.md");
  std::string line, command;
  while (std::getline(readme, line))
    if (line.rfind("$ kvsight fit ", 0) == 0) {
      command = line.substr(10);
      break;
    }
  ASSERT_FALSE(command.empty()) << "README.md has no '$ kvsight fit' example";
  std::vector<std::string> args;
  std::istringstream words(command);
  for (std::string word; words >> word;) args.push_back(word);
  args.insert(args.end(), {"--format", "json"});
  const auto run = test::run_kvsight(args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_FALSE(j["best"].is_null());
  EXPECT_EQ(j["best"]["kv_quality"], "full") << j["best"].dump();
}

}  // namespace
}  // namespace kvsight
