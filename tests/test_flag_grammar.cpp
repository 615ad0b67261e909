// One flag grammar (issue #9, and issue #14 item 3): every case of the issue runs the
// kvsight binary and checks the exit code and the message, and where a figure changes,
// the figure, derived by hand here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvsight/counts.hpp"
#include "kvsight/error.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

using nlohmann::json;
using test::run_kvsight;

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

void expect_exit(const std::vector<std::string>& args, int code, const std::string& in_stderr = "") {
  const auto run = run_kvsight(args);
  EXPECT_EQ(run.exit_code, code) << run.err << run.out;
  if (!in_stderr.empty()) {
    EXPECT_NE(run.err.find(in_stderr), std::string::npos) << run.err;
  }
}

json json_of(const std::vector<std::string>& args, int code = 0) {
  const auto run = run_kvsight(with(args, {"--format", "json"}));
  EXPECT_EQ(run.exit_code, code) << run.err;
  return json::parse(run.out);
}

const std::vector<std::string> kPlan = {"plan", "--model", "llama-3.1-8b", "--gpu", "h200"};
const std::vector<std::string> kGates = {"gates", "--model", "llama-3.1-8b", "--gpu", "h200"};
const std::vector<std::string> kCliff = {"cliff", "--model", "llama-3.1-8b", "--gpu", "h200"};

// ---- the count grammar itself (kvsight/counts.hpp)

TEST(CountGrammar, DecimalWithSuffixesNeverOctalOrHex) {
  EXPECT_EQ(parse_count("010000", "--max-model-len"), 10000u);  // decimal, not octal 4096
  EXPECT_EQ(parse_count("032", "--block-size"), 32u);           // not octal 26
  EXPECT_EQ(parse_count("4K", "--contexts"), 4u * 1024u);
  EXPECT_EQ(parse_count("1M", "--contexts"), 1024u * 1024u);
  EXPECT_THROW(parse_count("0x10", "--tp"), InputError);
  EXPECT_THROW(parse_count("", "--tp"), InputError);
  EXPECT_THROW(parse_count("-1", "--tp"), InputError);
  EXPECT_THROW(parse_count(" 4", "--tp"), InputError);
  // 2^64 = 18446744073709551616 does not fit; 2^54 K = 2^64 does not either.
  EXPECT_THROW(parse_count("18446744073709551616", "--context"), OverflowError);
  EXPECT_THROW(parse_count("18014398509481984K", "--context"), InputError);
  EXPECT_EQ(parse_count("18446744073709551615", "--context"), 18446744073709551615ull);
}

TEST(CountGrammar, ListsRefuseEmptyItems) {
  EXPECT_EQ(parse_count_list("1024,8K,32K", "--contexts", 1, 1u << 24),
            (std::vector<std::uint64_t>{1024, 8192, 32768}));
  EXPECT_THROW(parse_count_list("1024,,2048", "--contexts", 1, 1u << 24), InputError);
  EXPECT_THROW(parse_count_list("", "--contexts", 1, 1u << 24), InputError);
  EXPECT_THROW(parse_count_list("0", "--contexts", 1, 1u << 24), InputError);
}

TEST(CountGrammar, NumbersAreFinite) {
  EXPECT_DOUBLE_EQ(parse_number_in("0.9", "--gpu-memory-utilization", 0, 1, "a fraction"), 0.9);
  for (const char* bad : {"nan", "inf", "-inf", "0x1p-1", "", "1e400"})
    EXPECT_THROW(parse_number_in(bad, "--x", 0, 1, "a fraction"), InputError) << bad;
  EXPECT_THROW(parse_number_in("1.5", "--x", 0, 1, "a fraction"), InputError);
}

// ---- the same flag means the same thing in every command

TEST(FlagGrammar, BlockSizeZeroIsBadInputEverywhere) {
  for (const auto& command : {kPlan, kGates, kCliff})
    expect_exit(with(command, {"--block-size", "0"}), 2, "--block-size");
}

TEST(FlagGrammar, NegativeMaxModelLenIsBadInputEverywhere) {
  for (const auto& command : {kPlan, kGates, kCliff})
    expect_exit(with(command, {"--max-model-len", "-5"}), 2, "--max-model-len");
}

TEST(FlagGrammar, CliffTakesKSuffixedContexts) {
  const json j = json_of(with(kCliff, {"--contexts", "4K,32K"}));
  ASSERT_EQ(j.at("points").size(), 2u);
  EXPECT_EQ(j["points"][0]["context"].get<std::uint64_t>(), 4096u);   // 4 x 1024
  EXPECT_EQ(j["points"][1]["context"].get<std::uint64_t>(), 32768u);  // 32 x 1024
}

TEST(FlagGrammar, EngineAliasesWorkEverywhere) {
  for (const char* alias : {"llama.cpp", "LLAMA.CPP", "llama-cpp"}) {
    expect_exit(with(kGates, {"--engine", alias}), 0);
    expect_exit({"plan", "--model", "llama-3.1-8b", "--engine", alias}, 0);
  }
  expect_exit(with(kGates, {"--engine", "tensorrt-llm"}), 0);
}

TEST(FlagGrammar, TpThatDoesNotDivideHeadsIsExitOneEverywhere) {
  // Llama-3.1-8B has 32 attention heads; 3 does not divide 32: vLLM refuses to start.
  for (const auto& command : {kPlan, kGates, kCliff}) expect_exit(with(command, {"--tp", "3"}), 1);
  const json plan = json_of(with(kPlan, {"--tp", "3"}), 1);
  ASSERT_FALSE(plan.at("refusals").empty());
  EXPECT_NE(plan["refusals"][0].get<std::string>().find("does not divide 32 attention heads"),
            std::string::npos);
  EXPECT_EQ(plan["verdict"], "check_failed");
}

TEST(FlagGrammar, KvCacheTypesAreTheEnginesInEveryCommand) {
  // q4_0 is a llama.cpp cache type, not a vLLM --kv-cache-dtype: bad input in both.
  expect_exit(with(kPlan, {"--kv-cache-dtype", "q4_0"}), 2, "is not a KV cache type of vLLM");
  expect_exit(with(kGates, {"--kv-cache-dtype", "q4_0"}), 2, "is not a KV cache type of vLLM");
  // issue #14 item 7: fp7 exits 2 in gates as in plan.
  expect_exit(with(kGates, {"--kv-cache-dtype", "fp7"}), 2, "--kv-cache-dtype");
  expect_exit(with(kPlan, {"--kv-cache-dtype", "fp7"}), 2, "--kv-cache-dtype");
}

TEST(FlagGrammar, AnotherEnginesFlagIsRefusedNamingItsEngine) {
  expect_exit(with(kPlan, {"--cache-type-k", "q8_0"}), 2, "--cache-type-k: is a llama.cpp");
  expect_exit(with(kPlan, {"--tp-size", "2"}), 2, "is a SGLang flag, not one of vLLM's");
  expect_exit(with(kPlan, {"--engine", "sglang", "--gpu-memory-utilization", "0.8"}), 2, "vLLM flag");
  // A neutral flag for a field the engine does not read.
  expect_exit({"plan", "--model", "llama-3.1-8b", "--engine", "llamacpp", "--block-size", "16"}, 2,
              "llama.cpp has no block_size option");
  expect_exit({"plan", "--model", "llama-3.1-8b", "--engine", "llamacpp", "--max-model-len", "8192"}, 2,
              "its length is --ctx-size");
}

TEST(FlagGrammar, TheEnginesOwnSpellingsAreAccepted) {
  // vLLM -tp 2: 8 KV heads / 2 = 4 per rank: 32 layers x 4 x 128 x 2 (K, V) x 2 B = 65,536 B.
  EXPECT_EQ(json_of(with(kPlan, {"-tp", "2"}))["kv"]["bytes_per_token"].get<std::uint64_t>(), 65536u);
  // SGLang --tp-size 2 likewise.
  EXPECT_EQ(json_of(with(kPlan, {"--engine", "sglang", "--tp-size", "2"}))["kv"]["bytes_per_token"]
                .get<std::uint64_t>(),
            65536u);
  // TensorRT-LLM --tp_size 2 --kv_cache_free_gpu_memory_fraction 0.5.
  const json trt = json_of(
      with(kPlan, {"--engine", "trtllm", "--tp_size", "2", "--kv_cache_free_gpu_memory_fraction", "0.5"}));
  EXPECT_EQ(trt["parallel"]["tensor_parallel_size"].get<int>(), 2);
  // available = free after weights x 0.5: the requested (free) figure halved, to the byte.
  EXPECT_NEAR(static_cast<double>(trt["capacity"]["available_kv_bytes"].get<std::uint64_t>()),
              static_cast<double>(trt["capacity"]["requested_bytes"].get<std::uint64_t>()) * 0.5, 1.0);
  // llama.cpp -ctk q8_0 -ctv q8_0 -fa on: q8_0 is 34 B per 32 elements. Per token: 32 layers x
  // 8 KV heads x 128 = 32,768 elements each for K and V: 2 x 32,768 x 34 / 32 = 69,632 B. "-ctk"
  // must not be read as "-c tk".
  const json llama = json_of({"plan", "--model", "llama-3.1-8b", "--engine", "llamacpp", "-c", "8192", "-np",
                              "4", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"});
  EXPECT_EQ(llama["kv"]["bytes_per_token"].get<std::uint64_t>(), 69632u);
}

TEST(FlagGrammar, VllmBooleanFlagsHaveTheirNoForms) {
  // vLLM's bool arguments are argparse.BooleanOptionalAction (engine/arg_utils.py, 0.33.0).
  // Mistral-7B-v0.1: every layer sliding, W = 4,096, block 16, max_model_len 32,768; on an
  // H200 (>= 70 GiB, API server) max_num_batched_tokens T = 8,192.
  // Default 0.33 at PP 1: async scheduling, 2 batches in flight:
  //   ceil(min(4,095 + 2 x 8,192, 32,768) / 16) + 1 = ceil(20,479 / 16) + 1 = 1,280 + 1 = 1,281.
  // --no-async-scheduling: one batch: ceil(12,287 / 16) + 1 = 768 + 1 = 769.
  const std::vector<std::string> mistral = {"plan", "--model", "mistral-7b-v0.1", "--gpu", "h200"};
  EXPECT_EQ(json_of(mistral)["kv"]["blocks_per_sequence"], 1281);
  EXPECT_EQ(json_of(with(mistral, {"--async-scheduling"}))["kv"]["blocks_per_sequence"], 1281);
  EXPECT_EQ(json_of(with(mistral, {"--no-async-scheduling"}))["kv"]["blocks_per_sequence"], 769);
  expect_exit(with(mistral, {"--async-scheduling", "--no-async-scheduling"}), 2, "not both");
  // Qwen3-Next-80B at TP 2: 12 attention + 36 linear-attention layers, so 1 attention group
  // and 36 / 12 = 3 state groups; state page 548,864 B, attention 1,024 B per token per layer;
  // max_model_len 262,144. Prefix caching (on by default for hybrids from 0.28, align mode) on
  // an H200 runs FlashInfer's GDN prefill (0.33+): the block is a multiple of 64,
  // 64 x ceil(548,864 / 65,536) = 576, ceil(262,144 / 576) = 456 attention pages (455 x 576 =
  // 262,080 is short), and each state group keeps 3 pages (2 + the prefill checkpoint):
  // 456 + 3 x 3 = 465. --no-enable-prefix-caching: no align mode, block 16 x ceil(548,864 /
  // 16,384) = 544, ceil(262,144 / 544) = 482 pages + 1 state page per group = 485.
  const std::vector<std::string> next = {"plan", "--model", "qwen3-next-80b-a3b", "--gpu", "h200", "--tp", "2"};
  EXPECT_EQ(json_of(next)["kv"]["blocks_per_sequence"], 465);
  EXPECT_EQ(json_of(with(next, {"--no-enable-prefix-caching"}))["kv"]["blocks_per_sequence"], 485);
  expect_exit(with(next, {"--no-enable-prefix-caching", "--enable-prefix-caching"}), 2, "not both");
  // Another engine's flag, as for every engine flag.
  expect_exit(with(next, {"--engine", "sglang", "--no-async-scheduling"}), 2, "vLLM");
}

TEST(FlagGrammar, TheUsersLengthDrivesCapacityForEveryEngine) {
  // SGLang pages of 1 token: concurrency = pool tokens / 8,192.
  const json sglang = json_of(with(kPlan, {"--engine", "sglang", "--context-length", "8192"}));
  EXPECT_EQ(sglang["capacity"]["max_model_len"].get<std::uint64_t>(), 8192u);
  EXPECT_NEAR(sglang["capacity"]["max_concurrency"].get<double>(),
              static_cast<double>(sglang["capacity"]["kv_tokens"].get<std::uint64_t>()) / 8192.0, 1e-9);
  // TensorRT-LLM, 32-token blocks: 8,192 / 32 = 256 blocks per sequence.
  const json trt = json_of(with(kPlan, {"--engine", "trtllm", "--max_seq_len", "8192"}));
  EXPECT_EQ(trt["capacity"]["max_model_len"].get<std::uint64_t>(), 8192u);
  EXPECT_NEAR(trt["capacity"]["max_concurrency"].get<double>(),
              static_cast<double>(trt["capacity"]["num_blocks"].get<std::uint64_t>()) / 256.0, 1e-9);
  // The neutral spelling works for both.
  EXPECT_EQ(
      json_of(with(kPlan, {"--engine", "sglang", "--max-model-len", "8192"}))["capacity"]["max_model_len"],
      8192);
}

TEST(FlagGrammar, GpuIdsIgnoreCaseAndCatalogModelsAnswerToTheirHfId) {
  const json j = json_of({"plan", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H200"});
  EXPECT_EQ(j["model"]["id"], "llama-3.1-8b");
  EXPECT_EQ(j["gpu"]["id"], "h200");
}

TEST(FlagGrammar, ExitOneWhenItDoesNotFit) {
  // Llama-3.1-8B at its 131,072 tokens needs 131,072 x 131,072 B = 16 GiB of KV for one
  // sequence; an RTX 4090 (24 GB) holds 16 GB of weights besides: no fit.
  expect_exit({"plan", "--model", "llama-3.1-8b", "--gpu", "rtx4090"}, 1);
  // vLLM refuses a max_model_len above the model's 131,072 (model.py _get_and_verify_max_len).
  expect_exit(with(kPlan, {"--max-model-len", "200000"}), 1);
  // --batch asks for that many sequences: the H200 holds about 6.8 at 131,072, not 64.
  expect_exit(with(kPlan, {"--batch", "64"}), 1);
  expect_exit(with(kPlan, {"--batch", "4"}), 0);
}

// ---- issue #14 item 3: numbers are never read wrong from a flag

TEST(FlagGrammar, LeadingZerosAreDecimalAndHexOrEmptyIsRefused) {
  EXPECT_EQ(json_of(with(kPlan, {"--max-model-len", "010000"}))["capacity"]["max_model_len"], 10000);
  EXPECT_EQ(json_of(with(kPlan, {"--block-size", "032"}))["kv"]["block_size"], 32);
  // --tp 010 is 10 (not octal 8, which divides 32): 10 does not divide 32 heads: exit 1.
  expect_exit(with(kPlan, {"--tp", "010"}), 1);
  expect_exit(with(kPlan, {"--block-size", "0x10"}), 2, "--block-size: '0x10' is not a count");
  expect_exit(with(kPlan, {"--max-model-len", ""}), 2, "--max-model-len");
  expect_exit(with(kGates, {"--batch", "99999999999999999999999"}), 2, "--batch");
  expect_exit(with(kCliff, {"--batch", "99999999999999999999999"}), 2, "--batch");
  expect_exit(with(kPlan, {"--kv-cache-memory-bytes", "18446744073709551615"}), 2, "--kv-cache-memory-bytes");
  // vllm/config/cache.py BlockSize: 17 is not one of 1, 8, 16, 32, 64, 128, 256.
  expect_exit(with(kPlan, {"--block-size", "17"}), 2, "allowed: 1, 8, 16, 32, 64, 128, 256");
  expect_exit(with(kPlan, {"--gpu-memory-utilization", "nan"}), 2, "--gpu-memory-utilization");
}

// ---- formats carry every figure

TEST(FlagGrammar, CsvCarriesRawNumbersAndWarnings) {
  const auto run = run_kvsight(with(kPlan, {"--tp", "3", "--format", "csv"}));
  EXPECT_EQ(run.exit_code, 1);
  // 131,072 B / token at TP 1 would be 131072; at TP 3, 8 KV heads / 3 = 2 per rank (integer
  // division, engines replicate, not split unevenly): the raw figure has no comma or unit.
  EXPECT_NE(run.out.find("kv,bytes_per_token,"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("KiB"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("warning,,vLLM would refuse to start"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("engine_log,vllm,"), std::string::npos) << run.out;
  const auto fleet =
      run_kvsight({"plan", "--model", "llama-3.1-8b", "--gpu", "h200,rtx4090", "--format", "csv"});
  EXPECT_NE(fleet.out.find("max_concurrency"), std::string::npos);
  EXPECT_EQ(fleet.out.find("no fit"), std::string::npos) << fleet.out;
  EXPECT_NE(fleet.out.find(",false,"), std::string::npos) << fleet.out;  // the 4090 row
}

TEST(FlagGrammar, GatesCsvCarriesConstraintsAndNotes) {
  const auto run = run_kvsight(with(kGates, {"--tp", "3", "--format", "csv"}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("constraint,tensor parallel size divides attention heads,refused"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("error,,"), std::string::npos);
  EXPECT_NE(run.out.find("summary,selected,"), std::string::npos);
}

TEST(FlagGrammar, MarkdownAndJsonCarryWarnings) {
  const auto md = run_kvsight(with(kPlan, {"--tp", "3", "--format", "markdown"}));
  EXPECT_NE(md.out.find("would refuse to start"), std::string::npos) << md.out;
  const json j = json_of(with(kPlan, {"--tp", "3"}), 1);
  EXPECT_FALSE(j.at("warnings").empty());
  EXPECT_FALSE(j.at("constraints").empty());
}

TEST(FlagGrammar, HelpNamesTheEngineOfEachSpelling) {
  const auto run = run_kvsight({"plan", "--help"});
  EXPECT_NE(run.out.find("[SGLang] --tp-size"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("[TensorRT-LLM] --max_seq_len"), std::string::npos);
  EXPECT_NE(run.out.find("[llama.cpp] --cache-type-k, -ctk"), std::string::npos);
}

}  // namespace
}  // namespace kvsight
