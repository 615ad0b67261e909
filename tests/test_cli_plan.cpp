// The kvsight binary end to end: plan / inspect / models / gpus, the figures
// the planner-core issue accepts on, fleet tables, and bad input (exit 2).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace kvsight {
namespace {

using nlohmann::json;
using test::run_kvsight;

json run_json(const std::vector<std::string>& args, int expected_exit = 0) {
  auto run = run_kvsight(args);
  EXPECT_EQ(run.exit_code, expected_exit) << run.err;
  return json::parse(run.out);
}

TEST(CliPlan, SmolLM3At64K) {
  const json j = run_json({"plan", "--model", "smollm3-3b", "--context", "65536", "--format", "json"});
  // 36 layers x 4 KV heads x 128 x 2 (K, V) x 2 B = 73,728 B/token.
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 36ull * 4 * 128 * 2 * 2);
  // 65,536 / 16 = 4,096 blocks exactly; 4,096 x 16 x 73,728 = 4,831,838,208 B.
  EXPECT_EQ(j["kv"]["bytes_per_sequence"].get<std::uint64_t>(), 4096ull * 16 * 73728);
  EXPECT_EQ(j["kv"]["bytes_per_sequence"].get<std::uint64_t>(), 4831838208ull);
  EXPECT_EQ(j["kv"]["block_size"].get<std::uint32_t>(), 16u);
  EXPECT_EQ(j["kv"]["state_bytes_per_sequence"].get<std::uint64_t>(), 0u);
}

TEST(CliPlan, SmolLM3ContextRoundsUpToWholeBlocks) {
  const json j = run_json({"plan", "--model", "smollm3-3b", "--context", "1000", "--batch", "3", "--format", "json"});
  // ceil(1000 / 16) = 63 blocks; 63 x 16 = 1,008 tokens x 73,728 B = 74,317,824 B.
  EXPECT_EQ(j["kv"]["blocks_per_sequence"].get<std::uint64_t>(), 63u);
  EXPECT_EQ(j["kv"]["bytes_per_sequence"].get<std::uint64_t>(), 63ull * 16 * 73728);
  EXPECT_EQ(j["kv"]["bytes_per_batch"].get<std::uint64_t>(), 3ull * 63 * 16 * 73728);
}

struct Seed {
  const char* id;
  std::uint64_t layers, kv_heads, head_dim, native_context;
};

TEST(CliPlan, SeedModelsAtTheirNativeContexts) {
  // bytes/token = layers x kv_heads x head_dim x 2 (K, V) x 2 B (bf16).
  const Seed seeds[] = {
      {"smollm2-1.7b-instruct", 24, 32, 64, 8192},          // 196,608 B/token
      {"deepseek-r1-distill-llama-8b", 32, 8, 128, 131072},  // 131,072 B/token
      {"tinyllama-1.1b-chat", 22, 4, 64, 2048},             // 22,528 B/token
  };
  const std::uint64_t published[] = {196608, 131072, 22528};
  for (std::size_t i = 0; i < 3; ++i) {
    const Seed& s = seeds[i];
    const json j = run_json({"plan", "--model", s.id, "--context", std::to_string(s.native_context), "--format", "json"});
    const std::uint64_t per_token = s.layers * s.kv_heads * s.head_dim * 2 * 2;
    EXPECT_EQ(per_token, published[i]) << s.id;
    EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), per_token) << s.id;
    // Native contexts are multiples of 16: no rounding.
    EXPECT_EQ(j["kv"]["bytes_per_sequence"].get<std::uint64_t>(), per_token * s.native_context) << s.id;
  }
}

TEST(CliInspect, SmolLM3RopeAndNopeCounts) {
  const json j = run_json({"inspect", "--model", "smollm3-3b", "--format", "json"});
  // no_rope_layers: 0 (NoPE) at every 4th of 36 layers: 9 NoPE, 27 RoPE.
  EXPECT_EQ(j["nope_layers"].get<int>(), 36 / 4);
  EXPECT_EQ(j["rope_layers"].get<int>(), 36 - 36 / 4);
  ASSERT_EQ(j["layers"].size(), 36u);
  EXPECT_EQ(j["layers"][3]["rope"].get<bool>(), false);
  EXPECT_EQ(j["layers"][0]["kind"].get<std::string>(), "full");
  const auto text = run_kvsight({"inspect", "--model", "smollm3-3b"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("27 / 9"), std::string::npos) << text.out;
}

TEST(CliPlan, Vllm10517RowReproduces) {
  // vLLM #10517: Llama-3.1-8B on an RTX 3090, block 16. One block holds
  // 16 tokens x 131,072 B = 2,097,152 B (2 MiB) for all 32 layers. 1,952 blocks
  // = 1,952 x 2 MiB = 4,093,640,704 B; tokens 1,952 x 16 = 31,232; at
  // max_model_len 20,000 a request needs ceil(20000 / 16) = 1,250 blocks:
  // 1,952 / 1,250 = 1.5616x.
  const std::uint64_t bytes = 1952ull * 16 * 131072;
  const json j = run_json({"plan", "--model", "llama-3.1-8b", "--gpu", "rtx3090", "--kv-cache-memory-bytes",
                           std::to_string(bytes), "--max-model-len", "20000", "--format", "json"});
  EXPECT_EQ(j["capacity"]["num_blocks"].get<std::uint64_t>(), 1952u);
  EXPECT_EQ(j["capacity"]["kv_tokens"].get<std::uint64_t>(), 1952u * 16);
  EXPECT_NEAR(j["capacity"]["max_concurrency"].get<double>(), 1952.0 / 1250.0, 1e-3);
  // 1,478 blocks at 29,000: ceil(29000 / 16) = 1,813 blocks per request > 1,478: no fit.
  // No fit is the check failing: exit 1 (issue #9: exit codes mean the verdict).
  const json k = run_json({"plan", "--model", "llama-3.1-8b", "--gpu", "rtx3090", "--kv-cache-memory-bytes",
                           std::to_string(1478ull * 16 * 131072), "--max-model-len", "29000", "--format", "json"},
                          1);
  EXPECT_EQ(k["capacity"]["num_blocks"].get<std::uint64_t>(), 1478u);
  EXPECT_NEAR(k["capacity"]["max_concurrency"].get<double>(), 1478.0 / 1813.0, 1e-3);
  EXPECT_FALSE(k["capacity"]["fits"].get<bool>());
  // The largest length that fits is the whole pool: 1,478 x 16 = 23,648 tokens.
  EXPECT_EQ(k["capacity"]["largest_max_model_len"].get<std::uint64_t>(), 1478u * 16);
}

TEST(CliPlan, FleetTableHasOneRowPerPair) {
  const auto run = run_kvsight({"plan", "--model", "smollm3-3b,tinyllama-1.1b-chat", "--gpu", "h200,rtx3090",
                                "--format", "csv"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Header + 2 models x 2 GPUs.
  std::size_t lines = 0;
  for (char c : run.out) lines += c == '\n';
  EXPECT_EQ(lines, 1u + 2 * 2);
  const json j = run_json({"plan", "--model", "smollm3-3b,tinyllama-1.1b-chat", "--gpu", "h200,rtx3090", "--format", "json"});
  EXPECT_EQ(j["rows"].size(), 4u);
}

TEST(CliPlan, WholeCatalogFleetIsFast) {
  const auto start = std::chrono::steady_clock::now();
  const auto run = run_kvsight({"plan", "--model", "all", "--gpu", "all", "--format", "csv"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Several (model, GPU) pairs do not fit (e.g. gemma-3-27b on an RTX 4090): exit 1.
  ASSERT_EQ(run.exit_code, 1) << run.err;
  // Not a benchmark: a guard against accidental quadratic work (the issue asks
  // for well under a second; 5 s leaves room for a loaded CI machine and sanitizers).
  EXPECT_LT(seconds, 5.0);
}

// --- Bad input: exit 2, a message naming the flag, nothing written. ---

void expect_bad(const std::vector<std::string>& args, const std::string& names) {
  const auto run = run_kvsight(args);
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find(names), std::string::npos) << run.err;
}

TEST(CliPlan, BadInputExitsTwoNamingTheFlag) {
  expect_bad({"plan", "--model", "no-such-model"}, "--model");
  expect_bad({"plan", "--model", "smollm3-3b", "--gpu", "voodoo5"}, "--gpu");
  expect_bad({"plan", "--model", "smollm3-3b", "--gpu", "h200", "--gpu-memory-utilization", "1.5"},
             "--gpu-memory-utilization");
  expect_bad({"plan", "--model", "smollm3-3b", "--gpu", "h200", "--gpu-memory-utilization", "0"},
             "--gpu-memory-utilization");
  expect_bad({"plan", "--model", "smollm3-3b", "--tp", "0"}, "--tensor-parallel-size");
  // SmolLM3 has 16 attention heads: 16 % 3 = 1, so vLLM refuses TP 3.
  // A TP that does not divide the heads is the engine refusing to start: exit 1, in
  // every command (issue #9), with the reason in the output.
  {
    const auto run = run_kvsight({"plan", "--model", "smollm3-3b", "--tp", "3"});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.out.find("does not divide 16 attention heads"), std::string::npos) << run.out;
  }
  expect_bad({"plan", "--model", "smollm3-3b", "--block-size", "0"}, "--block-size");
  expect_bad({"plan", "--model", "smollm3-3b", "--kv-cache-dtype", "fp6"}, "--kv-cache-dtype");
  expect_bad({"plan", "--model", "smollm3-3b", "--engine", "ollama"}, "--engine");
  expect_bad({"plan", "--model", "smollm3-3b", "--format", "xml"}, "--format");
  expect_bad({"plan", "--model", "smollm3-3b", "--context", "abc"}, "--context");
  // 2^63 tokens x 73,728 B/token does not fit in 64 bits.
  expect_bad({"plan", "--model", "smollm3-3b", "--context", "9223372036854775808"}, "exceeds");
  expect_bad({"plan", "--model", "smollm3-3b", "--context", "65536", "--batch", "9223372036854775807"}, "exceeds");
}

TEST(CliCounts, NegativeBatchIsRefusedNotWrapped) {
  // CLI11 2.1 would read -1 into a uint64_t as 2^64 - 1; each command must refuse it.
  expect_bad({"gates", "--model", "llama-3.1-8b", "--gpu", "h200", "--batch", "-1"}, "--batch");
  expect_bad({"cliff", "--model", "llama-3.1-8b", "--gpu", "h200", "--batch", "-2"}, "--batch");
  expect_bad({"gates", "--model", "llama-3.1-8b", "--gpu", "h200", "--batch", "0"}, "positive integer");
}

TEST(CliPlan, OutputFileIsWrittenWholeOrNotAtAll) {
  const std::string dir = test::temp_dir("output");
  const std::string good = dir + "/plan.json", bad = dir + "/bad.json";
  auto run = run_kvsight({"plan", "--model", "smollm3-3b", "--format", "json", "--output", good});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.out.empty());
  std::ifstream in(good);
  const json j = json::parse(in);
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 73728u);
  run = run_kvsight({"plan", "--model", "smollm3-3b", "--tp", "0", "--output", bad});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(bad));
  // No temporary file left behind either.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(CliModel, ConfigFromDirectoryAndHfCache) {
  const std::string config = R"({"model_type":"llama","hidden_size":256,"num_hidden_layers":4,
    "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":1000,"intermediate_size":512,
    "max_position_embeddings":4096,"torch_dtype":"float16","tie_word_embeddings":false})";
  // 4 layers x 2 KV heads x 64 (256 / 4) x 2 x 2 B = 2,048 B/token.
  const std::string dir = test::temp_dir("model-dir");
  test::write_file(dir + "/config.json", config);
  json j = run_json({"plan", "--model", dir, "--format", "json"});
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 4ull * 2 * 64 * 2 * 2);

  const std::string hf_home = test::temp_dir("hf-home");
  test::write_file(hf_home + "/hub/models--acme--tiny/snapshots/abc123/config.json", config);
  ::setenv("HF_HOME", hf_home.c_str(), 1);
  j = run_json({"plan", "--model", "acme/tiny", "--format", "json"});
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 2048u);
  const auto missing = run_kvsight({"plan", "--model", "acme/absent"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("never downloads"), std::string::npos) << missing.err;
  ::unsetenv("HF_HOME");

  const std::string empty = test::temp_dir("empty-dir");
  const auto no_config = run_kvsight({"plan", "--model", empty});
  EXPECT_EQ(no_config.exit_code, 2);
  EXPECT_NE(no_config.err.find("no config.json"), std::string::npos);
}

TEST(CliCatalogs, ModelsAndGpusList) {
  const json models = run_json({"models", "--format", "json"});
  EXPECT_GE(models["models"].size(), 20u);
  const json gpus = run_json({"gpus", "--format", "json"});
  EXPECT_GE(gpus["gpus"].size(), 20u);
  for (const auto& g : gpus["gpus"]) {
    EXPECT_GT(g["memory_bytes"].get<std::uint64_t>(), 0u) << g["id"];
    EXPECT_FALSE(g["source"].get<std::string>().empty()) << g["id"];
  }
  for (const auto& m : models["models"]) EXPECT_FALSE(m["source"].get<std::string>().empty()) << m["id"];
}

TEST(CliHelp, HelpExitsZeroAndTeaches) {
  const auto run = run_kvsight({"plan", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("--gpu-memory-utilization"), std::string::npos);
  EXPECT_NE(run.out.find("[llama.cpp]"), std::string::npos);
  EXPECT_EQ(run_kvsight({}).exit_code, 2);
}

}  // namespace
}  // namespace kvsight
