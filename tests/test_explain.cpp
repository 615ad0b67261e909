// kvsight explain --log: public start-up log excerpts (tests/fixtures/logs/, each naming its
// source) reconciled term by term with kvsight. Expected figures are the logged ones, read
// off the log text, and kvsight's derived by hand in each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "kvsight/app/explain.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"
#include "log_fixtures.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

using test::fixture_path;

app::ExplainRequest request_for(const std::string& log, const std::string& model) {
  app::ExplainRequest r;
  r.log_name = log;
  r.log_text = test::fixture_text(log);
  r.model = model;
  return r;
}

const app::ExplainTerm* term(const app::ExplainOutcome& out, const std::string& name,
                             const std::string& replay) {
  for (const app::ExplainTerm& t : out.terms)
    if (t.name == name && t.replay == replay) return &t;
  return nullptr;
}

// The named term is the memory term with the largest |difference| when there is one, else
// the term with the largest relative difference.
void expect_largest_is_the_largest(const app::ExplainOutcome& out) {
  ASSERT_TRUE(out.largest.has_value()) << out.largest_summary;
  const app::ExplainTerm& named = out.terms[*out.largest];
  EXPECT_NE(out.largest_summary.find(named.name), std::string::npos);
  if (named.unit == "GiB") {
    for (const app::ExplainTerm& t : out.terms) {
      if (t.unit == "GiB" && t.name != "available KV cache memory" && t.difference()) {
        EXPECT_LE(std::fabs(*t.difference()), std::fabs(*named.difference())) << t.name;
      }
    }
  } else {
    for (const app::ExplainTerm& t : out.terms) {
      EXPECT_FALSE(t.unit == "GiB" && t.name != "available KV cache memory" && t.difference() &&
                   *t.difference() != 0.0)
          << t.name;
      if (t.relative()) {
        EXPECT_LE(std::fabs(*t.relative()), std::fabs(*named.relative())) << t.name;
      }
    }
  }
}

// LMCache #1739, Qwen3-14B: "Available KV cache memory: 6.51 GiB", "GPU KV cache size:
// 42,656 tokens", "Maximum concurrency for 32,768 tokens per request: 1.30x".
TEST(Explain, Lmcache1739GivenMemoryMatchesTheTokens) {
  app::ExplainRequest r = request_for("vllm-lmcache-1739.log", fixture_path("qwen3-14b.config.json"));
  r.options.engine_version = "0.11.0";
  const app::ExplainOutcome out = app::run_explain(r);
  EXPECT_EQ(out.engine, "vllm");
  ASSERT_TRUE(out.given_memory.has_value());
  EXPECT_FALSE(out.gpu_only.has_value());                               // no --gpu, no GPU total in the log
  EXPECT_EQ(out.given_memory->result.capacity->max_model_len, 32768u);  // taken from the log
  const app::ExplainTerm* tokens = term(out, "KV tokens", "given KV memory");
  ASSERT_NE(tokens, nullptr);
  // 6.51 x 2^30 B / (16 x 40 x 2 x 8 x 128 x 2 B) = 2,666.5 -> 2,666 blocks x 16 = 42,656.
  EXPECT_EQ(*tokens->logged, 42656.0);
  EXPECT_EQ(*tokens->kvsight, 42656.0);
  const app::ExplainTerm* conc = term(out, "max concurrency", "given KV memory");
  ASSERT_NE(conc, nullptr);
  EXPECT_DOUBLE_EQ(*conc->logged, 1.30);
  EXPECT_DOUBLE_EQ(*conc->kvsight, 42656.0 / 32768.0);  // 1.3018
  // Tokens agree exactly; the concurrency differs by the log's 2-decimal rounding: named.
  EXPECT_EQ(out.terms[*out.largest].name, "max concurrency");
  expect_largest_is_the_largest(out);
}

// vLLM #23278, gpt-oss-120b on one H100 under 0.10.1: "Available KV cache memory: -2.14 GiB"
// (the model does not fit). The replay compares the signed figure too: budget 0.90 x 79.19 =
// 71.27 GiB less the weights and overheads it shows, not the 0 the byte count stops at.
TEST(Explain, NegativeAvailableMemoryIsComparedSigned) {
  app::ExplainRequest r = request_for("vllm-23278.log", fixture_path("gpt-oss-120b.config.json"));
  r.gpu = "h100-sxm";
  r.options.engine_version = "0.10.1";
  const app::ExplainOutcome out = app::run_explain(r);
  const app::ExplainTerm* available = term(out, "available KV cache memory", "GPU and flags");
  ASSERT_NE(available, nullptr);
  EXPECT_DOUBLE_EQ(*available->logged, -2.14);
  const app::ExplainTerm* weights = term(out, "weights per rank", "GPU and flags");
  ASSERT_NE(weights, nullptr);
  const double budget = static_cast<double>(out.gpu_only->result.capacity->requested_bytes) / 1073741824.0;
  const double overheads = static_cast<double>(out.gpu_only->result.capacity->overhead_bytes) / 1073741824.0;
  EXPECT_NEAR(*available->kvsight, budget - *weights->kvsight - overheads, 1e-9);
  EXPECT_LT(*available->kvsight, 0.0);
  EXPECT_LE(std::fabs(*available->kvsight - -2.14), 0.25);  // within the issue's 0.25 GiB floor
}

// myoceane.fr blog (2026-04-18), gpt-oss-20b on an A100 80 GB under vLLM 0.19.0: the version,
// max_model_len and utilization come from the banner and the "non-default args" line;
// "Model loading took 13.72 GiB", "Available KV cache memory: 36.56 GiB".
TEST(Explain, GptOss20bA100TakesItsFlagsFromTheNonDefaultArgsLine) {
  app::ExplainRequest r = request_for("vllm-gptoss20b-a100.log", "gpt-oss-20b");
  r.gpu = "a100-80gb";
  const app::ExplainOutcome out = app::run_explain(r);
  ASSERT_TRUE(out.figures.engine_version.has_value());
  EXPECT_EQ(*out.figures.engine_version, "0.19.0");
  EXPECT_EQ(out.figures.max_model_len, std::optional<std::uint64_t>(131072));
  EXPECT_EQ(out.figures.gpu_memory_utilization, std::optional<double>(0.65));
  EXPECT_FALSE(out.figures.tensor_parallel_size.has_value());  // not among the non-default args
  ASSERT_TRUE(out.gpu_only.has_value());
  EXPECT_EQ(out.gpu_only->result.engine_version, "0.19.0");
  EXPECT_EQ(out.gpu_only->result.capacity->max_model_len, 131072u);
  const app::ExplainTerm* weights = term(out, "weights per rank", "GPU and flags");
  ASSERT_NE(weights, nullptr);
  EXPECT_DOUBLE_EQ(*weights->logged, 13.72);
  const app::ExplainTerm* kv = term(out, "available KV cache memory", "GPU and flags");
  ASSERT_NE(kv, nullptr);
  EXPECT_DOUBLE_EQ(*kv->logged, 36.56);
  // Budget 79.25 x 0.65 = 51.51 GiB. The overheads read from 0.19's code (V1, Triton sampler:
  // 256 rows x 201,088 x 14 B + 108 rows of Triton buffer, graphs not subtracted) come within
  // max(3 %, 0.25 GiB) of what the log implies (51.51 - 13.72 - 36.56 = 1.23 GiB), the weights
  // with 0.19's Marlin padding on an A100 (below SM 9.0) within 0.25 GiB of the logged 13.72, and
  // the available memory within max(3 %, 0.25 GiB) of the logged 36.56 GiB.
  const app::ExplainTerm* overheads = term(out, "activation + non-torch (implied)", "GPU and flags");
  ASSERT_NE(overheads, nullptr);
  EXPECT_LE(std::fabs(*overheads->kvsight - *overheads->logged), 0.25) << *overheads->kvsight;
  EXPECT_LE(std::fabs(*weights->kvsight - 13.72), 0.25) << *weights->kvsight;
  EXPECT_LE(std::fabs(*kv->kvsight - 36.56), std::max(0.03 * 36.56, 0.25)) << *kv->kvsight;
  expect_largest_is_the_largest(out);
}

// A "non-default args" line with a tensor_parallel_size sets TP; a version line of the API
// server sets the version.
TEST(Explain, ReaderTakesTpAndTheApiServerVersion) {
  const EngineLogFigures f = read_engine_log(
      "(APIServer pid=90) INFO 11-28 11:45:51 [api_server.py:1977] vLLM API server version 0.11.2\n"
      "(APIServer pid=90) INFO 11-28 11:45:51 [utils.py:253] non-default args: {'model': 'm', "
      "'max_model_len': 98304, 'tensor_parallel_size': 4, 'gpu_memory_utilization': 0.96}\n");
  EXPECT_EQ(f.engine, "vllm");
  EXPECT_EQ(f.engine_version, std::optional<std::string>("0.11.2"));
  EXPECT_EQ(f.tensor_parallel_size, std::optional<std::uint32_t>(4));
  EXPECT_EQ(f.max_model_len, std::optional<std::uint64_t>(98304));
  EXPECT_EQ(f.gpu_memory_utilization, std::optional<double>(0.96));
  EXPECT_EQ(f.matched_lines.size(), 2u);
}

// vLLM recipes PR #12 (last line of the excerpt): 62.00 GiB needed at 262,144, 55.65 GiB
// available, estimated maximum model length 235296.
TEST(Explain, Recipes12LargestLengthFromTheErrorLine) {
  app::ExplainRequest r =
      request_for("vllm-recipes-12.log", fixture_path("qwen3-coder-480b-a35b.config.json"));
  r.options.engine_version = "0.10.1";
  const app::ExplainOutcome out = app::run_explain(r);
  const app::ExplainTerm* needed = term(out, "KV needed at max_model_len", "given KV memory");
  ASSERT_NE(needed, nullptr);
  EXPECT_DOUBLE_EQ(*needed->logged, 62.00);
  // 262,144 x 62 x 2 x 8 x 128 x 2 B = 66,571,993,088 B = 62.00 GiB exactly.
  EXPECT_DOUBLE_EQ(*needed->kvsight, 62.0);
  const app::ExplainTerm* longest = term(out, "largest max_model_len", "given KV memory");
  ASSERT_NE(longest, nullptr);
  EXPECT_EQ(*longest->logged, 235296.0);
  // 55.65 x 2^30 / (16 x 253,952 B) = 14,705.97 -> 14,705 blocks x 16 = 235,280.
  EXPECT_EQ(*longest->kvsight, 235280.0);
  EXPECT_EQ(out.terms[*out.largest].name, "largest max_model_len");
  expect_largest_is_the_largest(out);
}

// vLLM #10517 (20k): V0 profile line total_gpu_memory=23.58GiB, kv_cache_size=3.81GiB,
// gpu_memory_utilization=0.90, weights 14.9888 GB, 1952 blocks, 1.56x at 20000.
TEST(Explain, Issue10517BudgetTermByTerm) {
  app::ExplainRequest r = request_for("vllm-10517-20k.log", "llama-3.1-8b");
  r.gpu = "rtx3090";
  r.options.engine_version = "0.6.4";
  const app::ExplainOutcome out = app::run_explain(r);
  ASSERT_TRUE(out.given_memory && out.gpu_only);
  const app::ExplainTerm* blocks = term(out, "blocks", "given KV memory");
  ASSERT_NE(blocks, nullptr);
  EXPECT_EQ(*blocks->logged, 1952.0);
  EXPECT_EQ(*blocks->kvsight, 1950.0);  // 3.81 x 2^30 / (16 x 131,072 B) = 1,950.7
  const app::ExplainTerm* weights = term(out, "weights per rank", "GPU and flags");
  ASSERT_NE(weights, nullptr);
  EXPECT_DOUBLE_EQ(*weights->logged, 14.9888);
  const app::ExplainTerm* rest = term(out, "activation + non-torch (implied)", "GPU and flags");
  ASSERT_NE(rest, nullptr);
  EXPECT_TRUE(rest->implied);
  // 23.58 x 0.90 - 14.9888 - 0 (no graph line) - 3.81 = 2.4232 GiB (the log's own
  // peak_torch 17.06 - 14.99 + non_torch 0.35 = 2.42).
  EXPECT_NEAR(*rest->logged, 2.4232, 1e-9);
  const app::ExplainTerm* available = term(out, "available KV cache memory", "GPU and flags");
  ASSERT_NE(available, nullptr);
  EXPECT_DOUBLE_EQ(*available->logged, 3.81);
  // The budget terms were replayed: the named term is a memory term.
  EXPECT_EQ(out.terms[*out.largest].unit, "GiB");
  expect_largest_is_the_largest(out);
}

// TensorRT-LLM #224: "Using 10718 tokens in paged KV cache" for llama-2-7b on an A10 at
// kv_cache_free_gpu_mem_fraction 0.95: the tokens are the only logged figure, so the named
// term is the token count of the GPU-and-flags replay (the engine buffers kvsight lacks).
TEST(Explain, Trtllm224NamesTheTokenCount) {
  app::ExplainRequest r = request_for("trtllm-224.log", fixture_path("llama-2-7b.config.json"));
  r.gpu = "a10g";
  r.options.trtllm.free_gpu_memory_fraction = 0.95;
  r.options.block_size = 16;
  const app::ExplainOutcome out = app::run_explain(r);
  EXPECT_EQ(out.engine, "trtllm");
  const app::ExplainTerm* tokens = term(out, "KV tokens", "GPU and flags");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(*tokens->logged, 10718.0);
  EXPECT_GT(*tokens->relative(), 0.3);  // docs/fidelity.md row 16: +51 %
  EXPECT_EQ(out.terms[*out.largest].name, "KV tokens");
  expect_largest_is_the_largest(out);
}

// TensorRT-LLM #1400: "Allocate 69524783104 bytes for k/v cache", "Using 132608 tokens".
TEST(Explain, Trtllm1400TokensFromTheBytes) {
  app::ExplainRequest r = request_for("trtllm-1400.log", fixture_path("llama-2-7b.config.json"));
  const app::ExplainOutcome out = app::run_explain(r);
  const app::ExplainTerm* tokens = term(out, "KV tokens", "given KV memory");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(*tokens->logged, 132608.0);
  EXPECT_EQ(*tokens->kvsight, 132608.0);  // 69,524,783,104 / 524,288 B
  const app::ExplainTerm* per_token = term(out, "bytes per token (implied)", "given KV memory");
  ASSERT_NE(per_token, nullptr);
  EXPECT_DOUBLE_EQ(*per_token->logged, 524288.0);
  EXPECT_DOUBLE_EQ(*per_token->kvsight, 524288.0);
}

// vLLM #13061 (V0 0.7.x, TP 2 on 2 x RTX 4090): "Loading model weights took 13.9476 GB" and
// "... maximum number of tokens that can be stored in KV cache (81536)". The activation the
// reporter quotes (0.19 GiB) is in no line the reader knows, so the named term is the weights:
// 13.9476 logged against kvsight's shapes estimate.
TEST(Explain, Issue13061NamesTheWeights) {
  app::ExplainRequest r =
      request_for("vllm-13061.log", fixture_path("deepseek-r1-distill-qwen-14b.config.json"));
  r.gpu = "rtx4090";
  r.options.tp = 2;
  r.options.vllm.gpu_memory_utilization = 0.98;
  r.options.engine_version = "0.7.2";
  const app::ExplainOutcome out = app::run_explain(r);
  EXPECT_EQ(out.figures.kv_tokens.value_or(0), 81536u);
  const app::ExplainTerm* tokens = term(out, "KV tokens", "GPU and flags");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(*tokens->logged, 81536.0);
  EXPECT_EQ(out.terms[*out.largest].name, "weights per rank");
  EXPECT_DOUBLE_EQ(*out.terms[*out.largest].logged, 13.9476);
  expect_largest_is_the_largest(out);
}

TEST(Explain, ALogWithoutAKnownLineIsBadInput) {
  app::ExplainRequest r;
  r.log_name = "empty.log";
  r.log_text = "INFO nothing here\n";
  r.model = "llama-3.1-8b";
  try {
    app::run_explain(r);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--log");
  }
}

TEST(Explain, CliJsonNamesTheLargestTerm) {
  const test::CliRun run = test::run_kvsight({"explain", "--log", fixture_path("vllm-lmcache-1739.log"),
                                              "--model", fixture_path("qwen3-14b.config.json"),
                                              "--engine-version", "0.11.0", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["largest_difference"], "max concurrency (given KV memory)");
  EXPECT_EQ(j["engine"], "vllm");
}

// Without --engine the log's engine applies, so TensorRT-LLM's own flags are accepted.
TEST(Explain, CliTakesTheLogsEngineFlags) {
  const test::CliRun run = test::run_kvsight(
      {"explain", "--log", fixture_path("trtllm-224.log"), "--model", fixture_path("llama-2-7b.config.json"),
       "--gpu", "a10g", "--free-gpu-memory-fraction", "0.95", "--block-size", "16", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["engine"], "trtllm");
  EXPECT_EQ(j["largest_difference"], "KV tokens (GPU and flags)");
}

// Every logged term agrees (69,524,783,104 B / 524,288 B = 132,608 tokens): the term compared
// is still named.
TEST(Explain, AnExactReplayStillNamesTheTerm) {
  const app::ExplainOutcome out =
      app::run_explain(request_for("trtllm-1400.log", fixture_path("llama-2-7b.config.json")));
  ASSERT_TRUE(out.largest.has_value());
  EXPECT_EQ(*out.terms[*out.largest].difference(), 0.0);
  EXPECT_NE(out.largest_summary.find("KV tokens"), std::string::npos) << out.largest_summary;
}

TEST(Explain, CliRefusesAMissingModelWithExit2) {
  const test::CliRun run = test::run_kvsight({"explain", "--log", fixture_path("vllm-lmcache-1739.log")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--model"), std::string::npos) << run.err;
}

// ---------------------------------------------------------------- hostile logs (issue #25)

app::ExplainRequest request_of_text(const std::string& text) {
  app::ExplainRequest r;
  r.log_name = "pasted.log";
  r.log_text = text;
  r.model = fixture_path("qwen3-14b.config.json");
  return r;
}

// A logged TP that --tp would refuse (0, or 99,999 > 65,536 ranks) is a refusal naming the line.
TEST(Explain, ALoggedTpIsCheckedLikeTheTpFlag) {
  for (const std::string tp : {"0", "99999"}) {
    try {
      app::run_explain(
          request_of_text("Available KV cache memory: 10.00 GiB\n"
                          "non-default args: {'tensor_parallel_size': " +
                          tp + "}\n"));
      FAIL() << tp << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "--log");
      EXPECT_NE(std::string(e.what()).find("pasted.log line 2 (\"non-default args\"): tensor_parallel_size"),
                std::string::npos)
          << e.what();
    }
  }
  // TP 2 is taken.
  const app::ExplainOutcome out = app::run_explain(request_of_text(
      "Available KV cache memory: 10.00 GiB\nnon-default args: {'tensor_parallel_size': 2}\n"));
  EXPECT_EQ(std::count(out.inputs_from_log.begin(), out.inputs_from_log.end(),
                       std::string("tensor_parallel_size 2 (\"non-default args\")")),
            1);
}

// SGLang's "#tokens: 0": no term divides by it, every figure is finite.
TEST(Explain, SglangZeroTokensDividesByNothing) {
  app::ExplainRequest r =
      request_of_text("KV Cache is allocated. #tokens: 0, K size: 1.00 GB, V size: 1.00 GB\n");
  const app::ExplainOutcome out = app::run_explain(r);
  EXPECT_EQ(term(out, "bytes per token (implied)", "given KV memory"), nullptr);
  for (const app::ExplainTerm& t : out.terms) {
    if (t.logged) {
      EXPECT_TRUE(std::isfinite(*t.logged)) << t.name;
    }
    if (t.kvsight) {
      EXPECT_TRUE(std::isfinite(*t.kvsight)) << t.name;
    }
  }
}

// Invalid UTF-8 in a matched line: the JSON carries it with U+FFFD, exit 0 (was "internal
// error", exit 3, from the JSON writer).
TEST(Explain, CliJsonOfALogWithInvalidUtf8) {
  const std::string path = test::temp_dir("explain-utf8") + "/bad.log";
  test::write_file(path, "Available KV cache memory: 10.00 GiB \xff\xfe\n");
  const test::CliRun run = test::run_kvsight(
      {"explain", "--log", path, "--model", fixture_path("qwen3-14b.config.json"), "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["matched_lines"][0], "Available KV cache memory: 10.00 GiB \xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace kvsight
