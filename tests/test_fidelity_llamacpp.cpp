// Published llama.cpp start-up logs (docs/fidelity.md, the llama.cpp rows) replayed through
// kvsight's llama.cpp engine. llama.cpp has no memory budget: its KV pool is fixed by the
// model and the flags alone, so each case asserts the LOGGED size (MiB as llama.cpp prints
// it, to two decimals) and cells against kvsight's plan, within 0.3 %. The expected bytes
// are derived by hand in each test: cells x layers x (K row + V row) bytes per cell.
// The excerpts are in tests/fixtures/logs/llamacpp-*.log, each naming its source on its
// first line; models not in the catalog are read from the config fixtures beside them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "kvsight/app/explain.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/model.hpp"
#include "log_fixtures.hpp"

namespace kvsight {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
using test::fixture_model;
using test::fixture_path;
using test::fixture_text;

PlanResult plan(const ModelSpec& model, const EngineOptions& options) {
  return make_engine("llamacpp")->plan(model, nullptr, options);
}

// One "llama_kv_cache: size = X MiB ( N cells, L layers, S/P seqs)" line of kvsight's own
// log (the format of src/llama-kv-cache.cpp), read back as numbers.
struct CacheLine {
  double mib = 0.0;
  std::uint64_t cells = 0;
  std::uint64_t layers = 0;
};

std::vector<CacheLine> cache_lines(const PlanResult& r) {
  static const std::regex line(
      R"(llama_kv_cache: size = +([0-9.]+) MiB \( *([0-9]+) cells, +([0-9]+) layers)");
  std::vector<CacheLine> out;
  for (const std::string& l : r.engine_log) {
    std::smatch m;
    if (std::regex_search(l, m, line)) out.push_back({std::stod(m[1]), std::stoull(m[2]), std::stoull(m[3])});
  }
  return out;
}

bool within(double kvsight, double logged, double bound = 0.003) {
  return std::fabs(kvsight - logged) <= bound * logged;
}

app::ExplainOutcome explain(const std::string& log, const std::string& model) {
  app::ExplainRequest r;
  r.log_name = log;
  r.log_text = fixture_text(log);
  r.model = model;
  return app::run_explain(r);
}

const app::ExplainTerm* term(const app::ExplainOutcome& out, const std::string& name) {
  for (const app::ExplainTerm& t : out.terms)
    if (t.name == name) return &t;
  return nullptr;
}

// ---------------------------------------------------------------- llama.cpp Hexagon doc
// llamacpp-hexagon-gptoss20b.log: gpt-oss-20b (24 layers alternating sliding 128 / full,
// 8 KV heads x 64), --ctx-size 8192 --batch-size 128 -ctk q8_0 -ctv q8_0 -fa on. The
// logical batch of 128 caps the micro-batch: n_ubatch = min(n_batch 128, n_ubatch 512) = 128
// (llama_init_from_model; docs/reference/llamacpp-published-logs.md).
TEST(FidelityLlamacppHexagon, GptOss20bQ8FullAndSlidingCaches) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.llamacpp.ctx_size = 8192;
  o.llamacpp.ubatch_size = 128;
  o.llamacpp.cache_type_k = "q8_0";
  o.llamacpp.cache_type_v = "q8_0";
  o.llamacpp.flash_attn = "on";
  // llama-completion runs one sequence ("1/1 seqs"), not llama-server's 4 auto slots.
  o.llamacpp.parallel = 1;
  o.llamacpp.parallel_given = true;
  const PlanResult r = plan(resolve_model("gpt-oss-20b"), o);
  // q8_0 row: 8 x 64 = 512 elements = 16 blocks x 34 B = 544 B; K + V = 1,088 B per layer
  // per cell. Full cache: 8,192 cells x 12 layers x 1,088 = 106,954,752 B = 102.00 MiB.
  // SWA cache: pad(min(8192, 128 x 1 + 128), 256) = 256 cells x 12 x 1,088 = 3,342,336 B
  // = 3.1875 MiB, logged as 3.19.
  const std::vector<CacheLine> lines = cache_lines(r);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].cells, 8192u);
  EXPECT_EQ(lines[0].layers, 12u);
  EXPECT_TRUE(within(lines[0].mib, 102.00)) << lines[0].mib;
  EXPECT_EQ(lines[1].cells, 256u);
  EXPECT_EQ(lines[1].layers, 12u);
  EXPECT_TRUE(within(lines[1].mib, 3.19)) << lines[1].mib;
  EXPECT_EQ(r.kv.bytes_per_sequence, 106954752u + 3342336u);
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_sequence) / kMiB, 102.00 + 3.19));
}

// ---------------------------------------------------------------- llama.cpp Snapdragon doc
// llamacpp-snapdragon-olmoe.log: OLMoE-1B-7B-0125-Instruct (16 layers, 16 KV heads x 128,
// no GQA), --ctx-size 8192 -fa on with a q8_0 cache, as the size line logs it.
TEST(FidelityLlamacppSnapdragon, Olmoe1b7bQ8Cache) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.llamacpp.ctx_size = 8192;
  o.llamacpp.cache_type_k = "q8_0";
  o.llamacpp.cache_type_v = "q8_0";
  o.llamacpp.flash_attn = "on";
  const PlanResult r = plan(fixture_model("olmoe-1b-7b-0125-instruct"), o);
  // q8_0 row: 16 x 128 = 2,048 elements = 64 blocks x 34 B = 2,176 B; K + V = 4,352 B per
  // layer per cell; x 16 layers = 69,632 B; x 8,192 cells = 570,425,344 B = 544.00 MiB.
  EXPECT_EQ(r.kv.bytes_per_token, 69632u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 570425344u);
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_sequence) / kMiB, 544.00));
}

// ---------------------------------------------------------------- ggml-org/ci, build 3332
// llamacpp-ci-b3332-pythia28b.log: pythia-2.8b f16 (32 layers, 32 KV heads x 80) on a
// V100, llama-cli with no -c; the log states n_ctx = 2048 (= n_ctx_train).
TEST(FidelityLlamacppCi, Pythia28bBuild3332LoggedContext) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.engine_version = "b3332";
  o.llamacpp.ctx_size = 2048;  // n_ctx as logged
  const PlanResult r = plan(fixture_model("pythia-2.8b"), o);
  // f16 row: 32 x 80 = 2,560 elements x 2 B = 5,120 B; K + V = 10,240 B per layer per cell;
  // x 32 layers = 327,680 B per cell; x 2,048 cells = 671,088,640 B = 640.00 MiB.
  EXPECT_EQ(r.kv.bytes_per_token, 327680u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 671088640u);
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_sequence) / kMiB, 640.00));
}

// The same run with the flags as given (no -c): llama.cpp of that time took the training
// context when -c was not given (common/common.h n_ctx = 0 in the llama.cpp vendored by
// llama-cpp-python 0.2.82, July 2024; 4096 in 0.3.8, March 2025); kvsight assumes 4096 for
// every build (docs/reference/llamacpp-published-logs.md).
TEST(FidelityLlamacppCi, Pythia28bBuild3332DefaultContext) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.engine_version = "b3332";
  const PlanResult r = plan(fixture_model("pythia-2.8b"), o);
  // n_ctx_train 2048 cells x 327,680 B = 640.00 MiB.
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_sequence) / kMiB, 640.00));
}

// ---------------------------------------------------------------- ggml-org/ci, build 4740
// llamacpp-ci-b4740-pythia14b.log: pythia-1.4b f16 (24 layers, 16 KV heads x 128) on an
// Apple M4, llama-cli -c 0 (the training context, 2048).
TEST(FidelityLlamacppCi, Pythia14bBuild4740TrainingContext) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.engine_version = "b4740";
  o.llamacpp.ctx_size = 0;
  const PlanResult r = plan(fixture_model("pythia-1.4b"), o);
  // f16 row: 16 x 128 = 2,048 elements x 2 B = 4,096 B; K + V = 8,192 B per layer per cell;
  // x 24 layers = 196,608 B per cell; x 2,048 cells = 402,653,184 B = 384.00 MiB.
  EXPECT_EQ(r.kv.bytes_per_token, 196608u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 402653184u);
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_sequence) / kMiB, 384.00));
}

// llamacpp-ci-b4740-pythia14b-ppl.log: the same model and build, llama-perplexity -c 128
// -b 128, flash attention off. Before the padding was dropped llama.cpp padded n_ctx to
// llama_kv_cache_get_padding() = 256 with flash attention and 32 without (src/llama.cpp of
// llama-cpp-python 0.2.82 and src/llama-kv-cache.cpp of 0.3.8; docs/reference/
// llamacpp-published-logs.md), so 128 stays 128.
TEST(FidelityLlamacppCi, Pythia14bBuild4740PerplexityWithoutFlashAttention) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.engine_version = "b4740";
  o.llamacpp.ctx_size = 128;
  o.llamacpp.ubatch_size = 128;
  o.llamacpp.flash_attn = "off";
  const PlanResult r = plan(fixture_model("pythia-1.4b"), o);
  // pad(128, 32) = 128 cells x 196,608 B = 25,165,824 B = 24.00 MiB.
  EXPECT_EQ(r.kv.bytes_per_sequence, 25165824u);
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_sequence) / kMiB, 24.00));
}

// ---------------------------------------------------------------- nehaai/kvcalc README
// llamacpp-kvcalc-llama3-8b*.log: Meta-Llama-3-8B-Instruct (32 layers, 8 KV heads x 128:
// the attention shape of the catalog's llama-3.1-8b), llama-server -c 8192 on an Apple M5.
TEST(FidelityLlamacppKvcalc, Llama3_8bOneSlot) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.llamacpp.ctx_size = 8192;
  const PlanResult r = plan(resolve_model("llama-3.1-8b"), o);
  // f16 row: 8 x 128 x 2 B = 2,048 B; K + V = 4,096 B per layer per cell; x 32 layers =
  // 131,072 B per cell; x 8,192 cells = 1,073,741,824 B = 1024.00 MiB.
  EXPECT_EQ(r.kv.bytes_per_sequence, 1073741824u);
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_sequence) / kMiB, 1024.00));
}

TEST(FidelityLlamacppKvcalc, Llama3_8bFourSlotsSplitTheContext) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.llamacpp.ctx_size = 8192;
  o.llamacpp.parallel = 4;
  o.batch = 4;  // the four slots
  const PlanResult r = plan(resolve_model("llama-3.1-8b"), o);
  // Not unified: 4 streams of 8192 / 4 = 2,048 cells; 4 x 2,048 x 131,072 B
  // = 1,073,741,824 B = 1024.00 MiB, the same pool as one slot.
  EXPECT_EQ(r.kv.context, 2048u);
  EXPECT_EQ(r.kv.bytes_per_batch, 1073741824u);
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_batch) / kMiB, 1024.00));
}

// llama.cpp prints the cells of one stream beside the stream count ("2048 cells, 4/4
// seqs"); kvsight's log line prints all the cells of the pool.
TEST(FidelityLlamacppKvcalc, Llama3_8bFourSlotsLogLineCountsOneStream) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.llamacpp.ctx_size = 8192;
  o.llamacpp.parallel = 4;
  const std::vector<CacheLine> lines = cache_lines(plan(resolve_model("llama-3.1-8b"), o));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].cells, 2048u);  // 8192 / 4 slots
  EXPECT_TRUE(within(lines[0].mib, 1024.00));
}

TEST(FidelityLlamacppKvcalc, Llama3_8bQ8Cache) {
  EngineOptions o;
  o.engine = "llamacpp";
  o.llamacpp.ctx_size = 8192;
  o.llamacpp.cache_type_k = "q8_0";
  o.llamacpp.cache_type_v = "q8_0";
  o.llamacpp.flash_attn = "on";
  const PlanResult r = plan(resolve_model("llama-3.1-8b"), o);
  // q8_0 row: 8 x 128 = 1,024 elements = 32 blocks x 34 B = 1,088 B; K + V = 2,176 B per
  // layer per cell; x 32 layers = 69,632 B; x 8,192 cells = 570,425,344 B = 544.00 MiB.
  EXPECT_EQ(r.kv.bytes_per_sequence, 570425344u);
  EXPECT_TRUE(within(static_cast<double>(r.kv.bytes_per_sequence) / kMiB, 544.00));
}

// ---------------------------------------------------------------- explain --log on the fixtures
// kvsight explain reads the "llama_kv_cache: size = X MiB (N cells" line
// (the llama.cpp engine's log reader), replays n_ctx = N and compares the tokens the
// logged size holds at kvsight's bytes per token with the logged cells.

TEST(FidelityLlamacppExplain, Llama3_8bOneCacheLine) {
  const app::ExplainOutcome out = explain("llamacpp-kvcalc-llama3-8b.log", "llama-3.1-8b");
  EXPECT_EQ(out.figures.engine, "llamacpp");
  ASSERT_TRUE(out.figures.kv_tokens.has_value());
  EXPECT_EQ(*out.figures.kv_tokens, 8192u);
  ASSERT_TRUE(out.figures.kv_size_gib.has_value());
  EXPECT_DOUBLE_EQ(*out.figures.kv_size_gib, 1024.0 / 1024.0);  // 1024.00 MiB
  // 1 GiB / 131,072 B per token (32 layers x 4,096 B) = 8,192 tokens, the logged cells.
  const app::ExplainTerm* tokens = term(out, "KV tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_DOUBLE_EQ(*tokens->logged, 8192.0);
  EXPECT_DOUBLE_EQ(*tokens->kvsight, 8192.0);
  EXPECT_NE(out.largest_summary.find("KV tokens"), std::string::npos) << out.largest_summary;
}

TEST(FidelityLlamacppExplain, Llama3_8bQ8CacheLine) {
  // The run's flags, as a user replays them: -ctk q8_0 -ctv q8_0 -fa on.
  app::ExplainRequest r;
  r.log_name = "llamacpp-kvcalc-llama3-8b-q8.log";
  r.log_text = fixture_text(r.log_name);
  r.model = "llama-3.1-8b";
  r.options.llamacpp.cache_type_k = "q8_0";
  r.options.llamacpp.cache_type_v = "q8_0";
  r.options.llamacpp.flash_attn = "on";
  const app::ExplainOutcome out = app::run_explain(r);
  // 544 MiB = 570,425,344 B / 69,632 B per token (32 layers x 2,176 B of q8_0 K + V)
  // = 8,192 tokens, the logged cells.
  const app::ExplainTerm* tokens = term(out, "KV tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_DOUBLE_EQ(*tokens->logged, 8192.0);
  EXPECT_DOUBLE_EQ(*tokens->kvsight, 8192.0);
}

// Two caches (full, then sliding window): the replay must take the full cache's cells
// (8,192) as n_ctx, not the SWA cache's 256.
TEST(FidelityLlamacppExplain, GptOss20bReadsTheFullCacheLine) {
  const app::ExplainOutcome out = explain("llamacpp-hexagon-gptoss20b.log", "gpt-oss-20b");
  ASSERT_TRUE(out.figures.kv_tokens.has_value());
  EXPECT_EQ(*out.figures.kv_tokens, 8192u);
  EXPECT_DOUBLE_EQ(*out.figures.kv_size_gib, 102.00 / 1024.0);
}

// "2048 cells, 4/4 seqs": 4 streams of 2,048 cells, n_ctx 8,192.
TEST(FidelityLlamacppExplain, Llama3_8bFourStreams) {
  const app::ExplainOutcome out = explain("llamacpp-kvcalc-llama3-8b-np4.log", "llama-3.1-8b");
  // 1 GiB / 131,072 B per token = 8,192 tokens in the pool, 4 x 2,048 cells.
  const app::ExplainTerm* tokens = term(out, "KV tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_DOUBLE_EQ(*tokens->kvsight, 8192.0);
}

// Builds before the llama_kv_cache rename print "KV self size = X MiB, K (f16): ..." and
// the cells in the n_ctx / kv_size lines.
TEST(FidelityLlamacppExplain, OlderBuildsKvSelfSizeLine) {
  const app::ExplainOutcome out =
      explain("llamacpp-ci-b4740-pythia14b.log", fixture_path("pythia-1.4b.config.json"));
  ASSERT_TRUE(out.figures.kv_tokens.has_value());
  EXPECT_EQ(*out.figures.kv_tokens, 2048u);
  EXPECT_DOUBLE_EQ(*out.figures.kv_size_gib, 384.0 / 1024.0);
}

}  // namespace
}  // namespace kvsight
