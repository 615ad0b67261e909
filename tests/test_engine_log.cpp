// The engine start-up log reader on excerpts of public logs (tests/fixtures/logs/, each file
// names its source). Expected figures are the ones printed in those logs. Then the round trip
// of each engine's own lines (issue #26 item 4): the lines a plan prints read back as the plan's
// figures, since one template per line prints and reads it; and a hostile line (issue #25).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>

#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"
#include "log_fixtures.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

TEST(EngineLog, VllmV0ProfilingLineFromIssue10517) {
  const EngineLogFigures f = read_engine_log(test::fixture_text("vllm-10517-20k.log"));
  EXPECT_EQ(f.engine, "vllm");
  ASSERT_TRUE(f.total_gpu_gib && f.available_kv_gib && f.gpu_memory_utilization && f.weights_gib);
  EXPECT_DOUBLE_EQ(*f.total_gpu_gib, 23.58);
  EXPECT_DOUBLE_EQ(*f.available_kv_gib, 3.81);
  EXPECT_DOUBLE_EQ(*f.gpu_memory_utilization, 0.90);
  EXPECT_DOUBLE_EQ(*f.weights_gib, 14.9888);
  EXPECT_EQ(f.num_gpu_blocks.value_or(0), 1952u);
  EXPECT_EQ(f.max_model_len.value_or(0), 20000u);
  EXPECT_DOUBLE_EQ(f.max_concurrency.value_or(0), 1.56);
  EXPECT_EQ(f.matched_lines.size(), 4u);  // the 3 comment lines are not figures
}

TEST(EngineLog, VllmV1BlocksFromPr12569) {
  const EngineLogFigures f = read_engine_log(test::fixture_text("vllm-pr12569.log"));
  EXPECT_EQ(f.num_gpu_blocks.value_or(0), 1381u);
  EXPECT_EQ(f.max_model_len.value_or(0), 2048u);
  EXPECT_DOUBLE_EQ(f.max_concurrency.value_or(0), 10.79);
  EXPECT_DOUBLE_EQ(f.weights_gib.value_or(0), 67.7229);
  EXPECT_FALSE(f.available_kv_gib);
}

TEST(EngineLog, VllmTokensWithCommas) {
  const EngineLogFigures a = read_engine_log(test::fixture_text("vllm-21348.log"));
  EXPECT_DOUBLE_EQ(a.available_kv_gib.value_or(0), 8.11);
  EXPECT_EQ(a.kv_tokens.value_or(0), 178880u);
  const EngineLogFigures b = read_engine_log(test::fixture_text("vllm-pr13596.log"));
  EXPECT_EQ(b.kv_tokens.value_or(0), 2042016u);
  EXPECT_EQ(b.max_model_len.value_or(0), 2048u);
  EXPECT_DOUBLE_EQ(b.max_concurrency.value_or(0), 997.08);
}

TEST(EngineLog, SglangPoolLine) {
  const EngineLogFigures f = read_engine_log(test::fixture_text("sglang-21348.log"));
  EXPECT_EQ(f.engine, "sglang");
  EXPECT_EQ(f.kv_tokens.value_or(0), 367404u);
  EXPECT_DOUBLE_EQ(f.kv_size_gib.value_or(0), 8.23 + 8.23);
}

// SGLang's pool line in its other forms (issue #28): an MLA pool prints one "KV size" (DeepSeek V3,
// a published log of 2025-11-04: "[... DP0 TP0 EP0] KV Cache is allocated. #tokens: 524288, KV
// size: 17.16 GB"), and newer releases (0.5.23's memory_pool.py _finalize_allocation_log) print the
// pool's dtype first (a published log of 2026: "KV Cache is allocated. dtype: torch.bfloat16,
// #tokens: 56320, K size: 5.40 GB, V size: 5.40 GB"; an MLA-style pool of 2026-08-17: "dtype:
// torch.bfloat16, #tokens: 1933682, KV size: 12.45 GB").
TEST(EngineLog, SglangPoolLineWithDtypeAndMlaKvSize) {
  EngineLogFigures f =
      read_engine_log("[2025-11-04 05:27:13 DP0 TP0 EP0] KV Cache is allocated. #tokens: 524288, KV size: 17.16 GB\n");
  EXPECT_EQ(f.engine, "sglang");
  EXPECT_EQ(f.kv_tokens.value_or(0), 524288u);
  EXPECT_DOUBLE_EQ(f.kv_size_gib.value_or(0), 17.16);
  f = read_engine_log("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 56320, K size: 5.40 GB, V size: 5.40 GB\n");
  EXPECT_EQ(f.engine, "sglang");
  EXPECT_EQ(f.kv_tokens.value_or(0), 56320u);
  EXPECT_DOUBLE_EQ(f.kv_size_gib.value_or(0), 5.40 + 5.40);
  f = read_engine_log("[2026-08-17 16:52:13] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933682, KV size: 12.45 GB\n");
  EXPECT_EQ(f.kv_tokens.value_or(0), 1933682u);
  EXPECT_DOUBLE_EQ(f.kv_size_gib.value_or(0), 12.45);
}

TEST(EngineLog, CombinedLineOfNewerVllmAndNegativeMemory) {
  // 0.28+ prints tokens and concurrency on one line; a model that does not fit logs a
  // negative available memory.
  const EngineLogFigures f = read_engine_log(
      "Available KV cache memory: -1.25 GiB\n"
      "GPU KV cache size: 72,817 tokens, Maximum concurrency for 32,768 tokens per request: 2.22x\n");
  EXPECT_DOUBLE_EQ(f.available_kv_gib.value_or(0), -1.25);
  EXPECT_EQ(f.kv_tokens.value_or(0), 72817u);
  EXPECT_EQ(f.max_model_len.value_or(0), 32768u);
  EXPECT_DOUBLE_EQ(f.max_concurrency.value_or(0), 2.22);
}

TEST(EngineLog, UnknownTextGivesNoFigures) {
  const EngineLogFigures f = read_engine_log("hello\n\n# a comment\nGPU KV cache size: lots\n");
  EXPECT_EQ(f.engine, "");
  EXPECT_FALSE(f.kv_tokens);
  EXPECT_TRUE(f.matched_lines.empty());
}

// ---------------------------------------------------------------- round trip of kvsight's own lines

using test::kGiBd;

// A figure printed "%.2f" reads back within half a unit of its last place.
constexpr double kTwoPlaces = 0.005 + 1e-9;

double gib_of(std::uint64_t bytes) { return static_cast<double>(bytes) / kGiBd; }

EngineLogFigures read_back(const PlanResult& r) { return read_engine_log(joined(r.engine_log)); }

EngineOptions vllm_options(const std::string& version, std::int64_t max_model_len) {
  EngineOptions o;
  o.engine_version = version;
  o.max_model_len = max_model_len;
  o.gpu_memory_bytes = 24ull << 30;
  o.overheads.weights_gib = 15.0;
  return o;
}

TEST(EngineLogRoundTrip, VllmV1LinesGiveThePlansFigures) {
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, vllm_options("0.11.0", 20000));
  ASSERT_TRUE(r.capacity && r.capacity->fits);
  const Capacity& c = *r.capacity;
  const EngineLogFigures f = read_back(r);
  EXPECT_EQ(f.engine, "vllm");
  EXPECT_NEAR(f.available_kv_gib.value_or(-99), c.available_kv_signed_gib, kTwoPlaces);
  EXPECT_EQ(f.kv_tokens.value_or(0), c.kv_tokens);  // "GPU KV cache size: 31,232 tokens" with commas
  EXPECT_EQ(f.max_model_len.value_or(0), c.max_model_len);
  EXPECT_NEAR(f.max_concurrency.value_or(-1), c.max_concurrency, kTwoPlaces);
  EXPECT_EQ(f.matched_lines.size(), r.engine_log.size()) << joined(r.engine_log);
}

TEST(EngineLogRoundTrip, VllmV1RefusalGivesTheNeededMemoryAndTheLargestLength) {
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, vllm_options("0.11.0", 131072));
  ASSERT_TRUE(r.capacity && !r.capacity->fits);
  const Capacity& c = *r.capacity;
  ASSERT_GT(c.largest_max_model_len, 0u);
  const EngineLogFigures f = read_back(r);
  EXPECT_EQ(f.max_model_len.value_or(0), 131072u);
  // Needed: ceil(131072 / 16) = 8192 pages of one block each.
  EXPECT_NEAR(f.kv_needed_gib.value_or(-1), gib_of(8192 * c.page_bytes), kTwoPlaces);
  EXPECT_NEAR(f.available_kv_gib.value_or(-99), gib_of(c.available_kv_bytes), kTwoPlaces);
  EXPECT_EQ(f.estimated_max_model_len.value_or(0), c.largest_max_model_len);
}

TEST(EngineLogRoundTrip, VllmGivenKvMemoryReadsAsTheReservedLine) {
  EngineOptions o = vllm_options("0.11.0", 20000);
  o.vllm.kv_cache_memory_bytes = 5ull << 30;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_NEAR(read_back(r).available_kv_gib.value_or(-1), 5.0, kTwoPlaces);
}

TEST(EngineLogRoundTrip, VllmV0LinesGiveThePlansFigures) {
  for (const std::int64_t length : {20000, 131072}) {  // fits, then V0's refusal
    const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, vllm_options("0.6.4", length));
    ASSERT_TRUE(r.capacity);
    const Capacity& c = *r.capacity;
    const EngineLogFigures f = read_back(r);
    EXPECT_EQ(f.engine, "vllm");
    EXPECT_NEAR(f.total_gpu_gib.value_or(-1), 24.0, kTwoPlaces);
    EXPECT_NEAR(f.available_kv_gib.value_or(-1), gib_of(c.available_kv_bytes), kTwoPlaces);
    EXPECT_NEAR(f.gpu_memory_utilization.value_or(-1), 0.9, kTwoPlaces);
    EXPECT_EQ(f.num_gpu_blocks.value_or(0), c.num_blocks);
    EXPECT_EQ(f.max_model_len.value_or(0), c.max_model_len);
    EXPECT_NEAR(f.max_concurrency.value_or(-1), c.max_concurrency, kTwoPlaces);
    // V0: blocks x 16 tokens, read from the refusal when the length does not fit.
    if (!c.fits) {
      EXPECT_EQ(f.kv_tokens.value_or(0), c.num_blocks * 16);
    }
  }
}

TEST(EngineLogRoundTrip, SglangPoolLineGivesTokensAndBuffers) {
  EngineOptions o;
  o.engine = "sglang";
  o.gpu_memory_bytes = 80ull << 30;
  const ModelSpec model = llama31_8b();
  const PlanResult r = make_engine("sglang")->plan(model, nullptr, o);
  ASSERT_TRUE(r.capacity);
  const EngineLogFigures f = read_back(r);
  EXPECT_EQ(f.engine, "sglang");
  EXPECT_EQ(f.kv_tokens.value_or(0), r.capacity->kv_tokens);
  // K and V buffers hold tokens + 1 page (page size 1): 32 layers x 8 heads x 128 x 2 B each.
  const double buffer_gib = gib_of((r.capacity->kv_tokens + 1) * 32 * 8 * 128 * 2);
  EXPECT_NEAR(f.kv_size_gib.value_or(-1), 2 * buffer_gib, 2 * kTwoPlaces);
}

// kvsight's own SGLang lines: 0.5.23 prints the dtype (torch.float8_e4m3fn for an fp8 cache), 0.5.2
// does not; an MLA model (DeepSeek V3) one latent buffer as "KV size", never "V size: 0.00".
TEST(EngineLogRoundTrip, SglangPrintsItsVersionsPoolLine) {
  const auto pool_line = [](const std::string& model, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"plan", "--engine", "sglang", "--model", model, "--gpu", "h200", "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto run = test::run_kvsight(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json plan = nlohmann::json::parse(run.out.empty() ? "{}" : run.out);
    for (const auto& line : plan.value("engine_log", nlohmann::json::array()))
      if (line.get<std::string>().rfind("KV Cache is allocated.", 0) == 0) return line.get<std::string>();
    return std::string();
  };
  EXPECT_EQ(pool_line("llama-3.1-8b", {"--kv-cache-dtype", "fp8_e4m3"}).rfind("KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: ", 0), 0u);
  EXPECT_EQ(pool_line("llama-3.1-8b", {"--engine-version", "0.5.2"}).rfind("KV Cache is allocated. #tokens: ", 0), 0u);
  const std::string mla = pool_line("deepseek-v3", {"--tp", "8"});
  EXPECT_EQ(mla.rfind("KV Cache is allocated. dtype: torch.bfloat16, #tokens: ", 0), 0u) << mla;
  EXPECT_NE(mla.find(", KV size: "), std::string::npos) << mla;
  EXPECT_EQ(mla.find("V size: 0.00"), std::string::npos) << mla;
  // Read back: the MLA pool's tokens and size.
  const EngineLogFigures f = read_engine_log(mla + "\n");
  EXPECT_EQ(f.engine, "sglang");
  EXPECT_GT(f.kv_size_gib.value_or(0), 0.0);
}

TEST(EngineLogRoundTrip, TrtllmPoolLineGivesMemoryAndTokens) {
  EngineOptions o;
  o.engine = "trtllm";
  o.gpu_memory_bytes = 80ull << 30;
  const PlanResult r = make_engine("trtllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  const Capacity& c = *r.capacity;
  const EngineLogFigures f = read_back(r);
  EXPECT_EQ(f.engine, "trtllm");
  EXPECT_NEAR(f.available_kv_gib.value_or(-1), gib_of(c.num_blocks * c.page_bytes), kTwoPlaces);
  EXPECT_EQ(f.kv_tokens.value_or(0), c.kv_tokens);
}

// llama.cpp's cache line carries the options behind it: replaying them (options_from_log, as
// explain does) prints the same lines again.
TEST(EngineLogRoundTrip, LlamacppCacheLineReplaysTheSameCache) {
  for (const bool unified : {false, true}) {
    EngineOptions o;
    o.engine = "llamacpp";
    o.llamacpp.ctx_size = 8192;
    o.llamacpp.parallel = 4;
    o.llamacpp.parallel_given = true;
    o.llamacpp.kv_unified = unified;
    const auto engine = make_engine("llamacpp");
    const PlanResult r = engine->plan(llama31_8b(), nullptr, o);
    const EngineLogFigures f = read_back(r);
    EXPECT_EQ(f.engine, "llamacpp");
    EXPECT_EQ(f.kv_tokens.value_or(0), 8192u);  // 4 streams x 2048 cells, or 1 x 8192
    EXPECT_EQ(f.llamacpp_seqs.value_or(0), 4u);
    EXPECT_EQ(f.llamacpp_streams.value_or(0), unified ? 1u : 4u);
    // 8192 cells x 32 layers x 8 heads x 128 x 2 (K and V) x 2 B = 1024 MiB
    EXPECT_NEAR(f.kv_size_gib.value_or(-1), 1.0, kTwoPlaces / 1024);
    EngineOptions replay;
    replay.engine = "llamacpp";
    std::vector<std::string> inputs;
    engine->options_from_log(f, replay, inputs);
    EXPECT_EQ(engine->plan(llama31_8b(), nullptr, replay).engine_log, r.engine_log) << joined(inputs);
  }
}

// Every engine that prints lines reads them back as its own (none is left to a reader elsewhere).
TEST(EngineLogRoundTrip, EveryEngineThatPrintsLinesReadsThem) {
  for (const auto& engine : all_engines()) {
    EngineOptions o;
    o.engine = engine->name();
    o.gpu_memory_bytes = 80ull << 30;
    const PlanResult r = engine->plan(llama31_8b(), nullptr, o);
    if (r.engine_log.empty()) {
      EXPECT_EQ(engine->log_reader(), nullptr) << engine->name();
      continue;
    }
    EXPECT_NE(engine->log_reader(), nullptr) << engine->name();
    EXPECT_EQ(read_back(r).engine, engine->name()) << joined(r.engine_log);
  }
}

// ---------------------------------------------------------------- hostile input (issue #25)

// std::regex's recursive backtracking overflowed the stack (SIGSEGV) on one line of 20,000 -
// 65,000 characters; the scanner's recursion is as deep as a template, and its time is linear.
TEST(EngineLogHostile, AHundredThousandCharacterLineReadsWithoutCrashing) {
  const std::string figures = "Available KV cache memory: 1.5 GiB";
  for (const std::string unit : {"a", "1", " ", "kv_cache_size=1GiB ", "non-default args: {", "version "}) {
    std::string line;
    while (line.size() < 100000) line += unit;
    const auto start = std::chrono::steady_clock::now();
    const EngineLogFigures f = read_engine_log(line + figures + "\n" + line);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_DOUBLE_EQ(f.available_kv_gib.value_or(0), 1.5) << unit;
    EXPECT_LT(seconds, 5.0) << unit;  // ~10 ms here; a quadratic scan takes minutes
  }
}

// A fuzz finding (fuzz/fuzz_log.cpp, 2026-12-05): vLLM V0's profiling line with
// "kv_cache_size=-.81GiB" gave -0.81 GiB of KV memory. Malformed numbers are no reading; the
// well-formed line gives its figure (vLLM prints it with Python's "{:.2f}").
TEST(EngineLogHostile, MalformedNumbersAreNotRead) {
  const std::string head = "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
                           "peak_torch_memory=15.35GiB non_torch_memory=0.08GiB kv_cache_size=";
  EXPECT_FALSE(read_engine_log(head + "-.81GiB gpu_memory_utilization=0.90").available_kv_gib);
  EXPECT_FALSE(read_engine_log(head + "3.8.1GiB gpu_memory_utilization=0.90").available_kv_gib);
  EXPECT_DOUBLE_EQ(read_engine_log(head + "3.81GiB gpu_memory_utilization=0.90").available_kv_gib.value_or(0), 3.81);
  EXPECT_FALSE(read_engine_log("Available KV cache memory: 10.5.5.5 GiB").available_kv_gib);
  EXPECT_FALSE(read_engine_log("GPU KV cache size: 1" + std::string(30, '0') + " tokens").kv_tokens);
}

// A line over the 1 MiB cap is refused naming its number and length; a line of exactly 1 MiB
// (16x the longest real line) is read.
TEST(EngineLogHostile, ALineOverTheCapIsRefusedNamingIt) {
  const std::string figures = "Available KV cache memory: 1.5 GiB";
  const std::string at_cap = figures + std::string(kMaxLogLineBytes - figures.size(), 'x');
  EXPECT_DOUBLE_EQ(read_engine_log("first\n" + at_cap + "\n").available_kv_gib.value_or(0), 1.5);
  try {
    read_engine_log("first\n" + at_cap + "x\n" + figures);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--log");
    EXPECT_NE(std::string(e.what()).find("line 2 is 1048577 bytes long; allowed: at most 1048576"),
              std::string::npos)
        << e.what();
  }
}

// One start-up is one engine's: vLLM's line 1 and SGLang's line 3 are refused, both named.
TEST(EngineLogHostile, ALogOfTwoEnginesIsRefusedNamingBoth) {
  try {
    read_engine_log(
        "Available KV cache memory: 1.5 GiB\nother\n"
        "KV Cache is allocated. #tokens: 100, K size: 1.00 GB, V size: 1.00 GB\n");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("two engines: vllm (line 1) and sglang (line 3)"), std::string::npos)
        << e.what();
  }
  // Every real log excerpt is one engine's (no line of one reads as another's).
  for (const auto& entry : std::filesystem::directory_iterator(test::fixture_path(""))) {
    if (entry.path().extension() != ".log") continue;
    EXPECT_NO_THROW(read_engine_log(test::fixture_text(entry.path().filename().string()))) << entry.path();
  }
}

// A logged tensor_parallel_size is kept as logged, with its line, for explain to check.
TEST(EngineLogHostile, ALoggedTpIsKeptWithItsLine) {
  const EngineLogFigures f = read_engine_log("x\ny\nnon-default args: {'tensor_parallel_size': 99999}\n");
  EXPECT_EQ(f.tensor_parallel_size, std::optional<std::uint64_t>(99999));
  EXPECT_EQ(f.tensor_parallel_size_line, 3u);
}

}  // namespace
}  // namespace kvsight
