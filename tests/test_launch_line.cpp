// Launch lines as input (issue #22): the engines' own command lines, read with each engine's
// own value grammar and flag table. The launch lines below are copied from the engines' docs
// (each cites its page); expected figures are derived by hand in each test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kvsight/app/launch_line.hpp"
#include "kvsight/catalog.hpp"
#include "kvsight/error.hpp"
#include "kvsight/launcher.hpp"
#include "kvsight/model.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

using nlohmann::json;
using test::run_kvsight;

std::vector<std::string> with(std::vector<std::string> kvsight_args, const std::vector<std::string>& line) {
  kvsight_args.push_back("--");
  kvsight_args.insert(kvsight_args.end(), line.begin(), line.end());
  return kvsight_args;
}

json plan_json(const std::vector<std::string>& kvsight_args, const std::vector<std::string>& line) {
  std::vector<std::string> args = {"plan", "--format", "json"};
  args.insert(args.end(), kvsight_args.begin(), kvsight_args.end());
  const auto run = run_kvsight(with(args, line));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return json::parse(run.out.empty() ? "{}" : run.out);
}

// The flags of launch.applied / launch.ignored, as typed.
std::vector<std::string> flags_of(const json& list) {
  std::vector<std::string> out;
  for (const json& item : list) out.push_back(item["flag"].get<std::string>());
  return out;
}

void expect_refused(const std::vector<std::string>& kvsight_args, const std::vector<std::string>& line,
                    const std::string& flag, const std::string& reason) {
  std::vector<std::string> args = {"plan"};
  args.insert(args.end(), kvsight_args.begin(), kvsight_args.end());
  const auto run = run_kvsight(with(args, line));
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.err.find(flag), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(reason), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

// llama-3.1-8b (the catalog's Llama 3 8B shape): 32 layers x 8 KV heads x head_dim 128
// (4096 / 32) x 2 (K, V) x 2 B (bf16) = 131,072 B per token.
constexpr std::uint64_t kLlama8BPerToken = 32ull * 8 * 128 * 2 * 2;

// ------------------------------------------------------------------------------ vLLM

// docs.vllm.ai/en/latest/serving/openai_compatible_server.html ("vllm serve
// NousResearch/Meta-Llama-3-8B-Instruct --dtype auto --api-key token-abc123"); kvsight reads the
// catalog's same-shape llama-3.1-8b (--model) on an H100 (alias "h100").
TEST(LaunchLineVllm, OpenAiServerQuickstart) {
  const json j = plan_json({"--model", "llama-3.1-8b", "--gpu", "h100"},
                           {"vllm", "serve", "NousResearch/Meta-Llama-3-8B-Instruct", "--dtype", "auto",
                            "--api-key", "token-abc123"});
  EXPECT_EQ(j["launch"]["engine"], "vllm");
  EXPECT_EQ(j["launch"]["model"], "NousResearch/Meta-Llama-3-8B-Instruct");
  EXPECT_EQ(flags_of(j["launch"]["applied"]), std::vector<std::string>{"--dtype"});  // auto: 16-bit, as planned
  EXPECT_TRUE(j["launch"]["applied"][0]["field"].is_null());
  EXPECT_EQ(flags_of(j["launch"]["ignored"]), std::vector<std::string>{"--api-key"});
  EXPECT_EQ(j["gpu"]["id"], "h100-sxm");
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), kLlama8BPerToken);
  // No --max-num-seqs: vLLM's default for a >= 70 GiB non-A100 device under `vllm serve` is
  // 1,024 sequences with 8,192 batched tokens (arg_utils.py get_batch_defaults); S = min(S, T)
  // keeps 1,024.
  EXPECT_EQ(j["capacity"]["max_running"].get<std::uint64_t>(), 1024u);
}

// docs.vllm.ai/en/v0.8.4/serving/distributed_serving.html ("vllm serve gpt2
// --tensor-parallel-size 4 --pipeline-parallel-size 2"), planned on llama-3.1-8b.
TEST(LaunchLineVllm, DistributedServing) {
  const json j = plan_json({"--model", "llama-3.1-8b"},
                           {"vllm", "serve", "gpt2", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2"});
  EXPECT_EQ(flags_of(j["launch"]["applied"]),
            (std::vector<std::string>{"--tensor-parallel-size", "--pipeline-parallel-size"}));
  EXPECT_EQ(j["launch"]["applied"][0]["field"], "tensor_parallel_size");
  EXPECT_TRUE(j["launch"]["ignored"].empty());
  EXPECT_EQ(j["parallel"]["tensor_parallel_size"], 4);
  EXPECT_EQ(j["parallel"]["pipeline_parallel_size"], 2);
  // Per rank: 32 / 2 = 16 layers per stage, 8 / 4 = 2 KV heads per rank:
  // 16 x 2 x 128 x 2 x 2 B = 16,384 B per token.
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 16ull * 2 * 128 * 2 * 2);
}

// docs.vllm.ai/en/latest/configuration/serve_args.html "Configuration file": `vllm serve
// SOME_MODEL --config config.yaml` with the page's YAML (host "127.0.0.1", port 6379, uvicorn-log-level
// "info"; its model key left out: the positional SOME_MODEL takes precedence, as the page says).
TEST(LaunchLineVllm, ConfigFile) {
  const std::string dir = test::temp_dir("launch-config");
  const std::string config = dir + "/config.yaml";
  test::write_file(config, "# config.yaml\n\nhost: \"127.0.0.1\"\nport: 6379\nuvicorn-log-level: \"info\"\n");
  const json j = plan_json({"--model", "llama-3.1-8b"}, {"vllm", "serve", "SOME_MODEL", "--config", config});
  EXPECT_EQ(j["launch"]["config"], config);
  EXPECT_TRUE(j["launch"]["applied"].empty());
  EXPECT_EQ(flags_of(j["launch"]["ignored"]),
            (std::vector<std::string>{"--host", "--port", "--uvicorn-log-level"}));
  EXPECT_EQ(j["launch"]["ignored"][1]["value"], "6379");
  EXPECT_EQ(j["launch"]["ignored"][1]["from"], config);
}

// The issue's own line: 32k under a vLLM flag is 32,000 (human_readable_int: k = 1000), and
// --max-num-seqs 8 caps what runs at once whatever KV holds.
TEST(LaunchLineVllm, HumanReadableLengthAndConcurrencyCap) {
  const json j = plan_json({"--gpu", "h100"}, {"vllm", "serve", "meta-llama/Llama-3.1-8B", "--max-model-len", "32k",
                                               "--max-num-seqs", "8", "--port", "8000", "--host", "0.0.0.0",
                                               "--trust-remote-code"});
  EXPECT_EQ(j["launch"]["applied"][0]["effect"], "32000");
  EXPECT_EQ(j["capacity"]["max_model_len"].get<std::uint64_t>(), 32000u);
  // ceil(32,000 / 16) = 2,000 blocks of 16 tokens x 131,072 B = 4,194,304,000 B.
  EXPECT_EQ(j["kv"]["bytes_per_sequence"].get<std::uint64_t>(), 2000ull * 16 * kLlama8BPerToken);
  EXPECT_EQ(j["capacity"]["max_running"].get<std::uint64_t>(), 8u);
  EXPECT_EQ(j["capacity"]["max_running_source"], "--max-num-seqs");
  EXPECT_GT(j["capacity"]["max_concurrency"].get<double>(), 8.0);  // KV holds more than run
  EXPECT_EQ(flags_of(j["launch"]["ignored"]),
            (std::vector<std::string>{"--port", "--host", "--trust-remote-code"}));
}

// kvsight's own flag keeps kvsight's grammar: 32K = 32 x 1,024 = 32,768.
TEST(LaunchLineVllm, KvsightFlagKeepsKvsightGrammar) {
  const auto run = run_kvsight({"plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "32K",
                                "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(json::parse(run.out)["capacity"]["max_model_len"].get<std::uint64_t>(), 32768u);
}

// ------------------------------------------------------------------------------ SGLang

// docs.sglang.io/basic_usage/send_request.html, formerly docs.sglang.ai ("python3 -m sglang.launch_server --model-path
// qwen/qwen2.5-0.5b-instruct --host 0.0.0.0"), planned on the catalog's qwen2.5-7b.
TEST(LaunchLineSglang, SendRequestQuickstart) {
  const json j = plan_json({"--model", "qwen2.5-7b"}, {"python3", "-m", "sglang.launch_server", "--model-path",
                                                       "qwen/qwen2.5-0.5b-instruct", "--host", "0.0.0.0"});
  EXPECT_EQ(j["launch"]["engine"], "sglang");
  EXPECT_EQ(j["launch"]["model"], "qwen/qwen2.5-0.5b-instruct");
  EXPECT_TRUE(j["launch"]["applied"].empty());
  EXPECT_EQ(flags_of(j["launch"]["ignored"]), std::vector<std::string>{"--host"});
  EXPECT_EQ(j["engine"]["name"], "sglang");
  // Qwen2.5-7B: 28 layers x 4 KV heads x head_dim 128 (3584 / 28) x 2 x 2 B = 57,344 B.
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 28ull * 4 * 128 * 2 * 2);
}

// docs.sglang.ai/advanced_features/server_arguments.html: "To enable multi-GPU tensor
// parallelism, add --tp 2" (python -m sglang.launch_server --model-path
// meta-llama/Meta-Llama-3-8B-Instruct --tp 2). "--tp" is argparse's unique prefix of --tp-size.
TEST(LaunchLineSglang, TensorParallelByPrefix) {
  const json j = plan_json({"--model", "llama-3.1-8b"}, {"python", "-m", "sglang.launch_server", "--model-path",
                                                         "meta-llama/Meta-Llama-3-8B-Instruct", "--tp", "2"});
  EXPECT_EQ(flags_of(j["launch"]["applied"]), std::vector<std::string>{"--tp"});
  EXPECT_EQ(j["launch"]["applied"][0]["field"], "tensor_parallel_size");
  EXPECT_EQ(j["parallel"]["tensor_parallel_size"], 2);
  // 8 KV heads / 2 ranks = 4 per rank: 32 x 4 x 128 x 2 x 2 B = 65,536 B per token.
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 32ull * 4 * 128 * 2 * 2);
}

// The same page: "try to set a smaller chunked prefill size ... --chunked-prefill-size 4096".
// It changes the activation reserve kvsight estimates: refused by name, exit 2.
TEST(LaunchLineSglang, ChunkedPrefillSizeRefused) {
  expect_refused({"--model", "llama-3.1-8b"},
                 {"python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Meta-Llama-3-8B-Instruct",
                  "--chunked-prefill-size", "4096"},
                 "--chunked-prefill-size", "activation reserve");
}

// SGLang's own grammar (sglang/srt/utils/common.py human_readable_int): 25.6k = 25,600, and
// --max-running-requests caps what runs.
TEST(LaunchLineSglang, ContextLengthGrammarAndCap) {
  const json j = plan_json({"--model", "llama-3.1-8b", "--gpu", "h200"},
                           {"python", "-m", "sglang.launch_server", "--model-path", "M", "--context-length",
                            "25.6k", "--max-running-requests", "16", "--mem-fraction-static", "0.85"});
  EXPECT_EQ(j["capacity"]["max_model_len"].get<std::uint64_t>(), 25600u);
  EXPECT_EQ(j["capacity"]["max_running"].get<std::uint64_t>(), 16u);
  EXPECT_EQ(j["launch"]["applied"][2]["field"], "mem_fraction_static");
}

// docs.sglang.ai server arguments, --max-total-tokens ("the maximum number of tokens in the
// memory pool ... typically used for development and debugging"): an upper bound on the
// profiled pool (kv_cache_configurator.py _apply_token_constraints, 0.5.23), read with
// human_readable_int like --context-length.
TEST(LaunchLineSglang, MaxTotalTokensBoundsThePool) {
  const std::vector<std::string> line = {"python", "-m", "sglang.launch_server", "--model-path", "M",
                                         "--context-length", "8192"};
  const json free = plan_json({"--model", "llama-3.1-8b", "--gpu", "h200"}, line);
  const std::uint64_t profiled = free["capacity"]["kv_tokens"].get<std::uint64_t>();
  ASSERT_GT(profiled, 100000u);
  std::vector<std::string> capped = line;
  capped.insert(capped.end(), {"--max-total-tokens", "100k"});
  const json j = plan_json({"--model", "llama-3.1-8b", "--gpu", "h200"}, capped);
  EXPECT_EQ(j["launch"]["applied"][1]["field"], "max_total_tokens");
  // 100k = 100,000 tokens (page size 1): 100,000 / 8,192 = 12.21 sequences of 8,192.
  EXPECT_EQ(j["capacity"]["kv_tokens"].get<std::uint64_t>(), 100000u);
  EXPECT_NEAR(j["capacity"]["max_concurrency"].get<double>(), 100000.0 / 8192.0, 1e-9);
  // Above the profiled pool: SGLang keeps the profiled value and says so.
  std::vector<std::string> above = line;
  above.insert(above.end(), {"--max-total-tokens", std::to_string(profiled + 1)});
  const json k = plan_json({"--model", "llama-3.1-8b", "--gpu", "h200"}, above);
  EXPECT_EQ(k["capacity"]["kv_tokens"].get<std::uint64_t>(), profiled);
  EXPECT_NE(k["warnings"].dump().find("is larger than the profiled value " + std::to_string(profiled)),
            std::string::npos)
      << k["warnings"].dump();
}

// ------------------------------------------------------------------------------ llama.cpp

// github.com/ggml-org/llama.cpp tools/server/README.md Quick Start ("./llama-server -m
// models/7B/ggml-model.gguf -c 2048"), planned on llama-3.1-8b.
TEST(LaunchLineLlamacpp, ServerQuickStart) {
  const json j = plan_json({"--model", "llama-3.1-8b", "--gpu", "h100"},
                           {"./llama-server", "-m", "models/7B/ggml-model.gguf", "-c", "2048"});
  EXPECT_EQ(j["launch"]["engine"], "llamacpp");
  EXPECT_EQ(j["launch"]["command"], "llama-server");
  EXPECT_EQ(j["launch"]["model"], "models/7B/ggml-model.gguf");
  EXPECT_EQ(flags_of(j["launch"]["applied"]), std::vector<std::string>{"-c"});
  EXPECT_EQ(j["launch"]["applied"][0]["field"], "ctx_size");
  // No -np: llama-server's -np auto is 4 slots (PR #16736, engines/llamacpp.cpp).
  EXPECT_EQ(j["capacity"]["max_running"].get<std::uint64_t>(), 4u);
  // n_ctx 2,048 cells x 131,072 B = 268,435,456 B (256 MiB) of KV in all.
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), kLlama8BPerToken);
}

// The same README, Docker (CUDA): "-m models/7B/ggml-model.gguf -c 512 --host 0.0.0.0 --port
// 8080 --n-gpu-layers 99": 99 >= 32 layers keeps every layer on the GPU, as kvsight plans.
TEST(LaunchLineLlamacpp, DockerCudaAllLayersOnGpu) {
  const json j = plan_json({"--model", "llama-3.1-8b", "--gpu", "rtx4090"},
                           {"llama-server", "-m", "models/7B/ggml-model.gguf", "-c", "512", "--host", "0.0.0.0",
                            "--port", "8080", "--n-gpu-layers", "99"});
  EXPECT_EQ(flags_of(j["launch"]["applied"]), (std::vector<std::string>{"-c", "--n-gpu-layers"}));
  EXPECT_EQ(flags_of(j["launch"]["ignored"]), (std::vector<std::string>{"--host", "--port"}));
}

// The README's "-ngl" with fewer layers than the model has (issue #22 item 5): the output layer
// and ngl - 1 repeating layers on the GPU (b11312), the rest and their KV in host memory;
// --no-kv-offload keeps every layer's KV there (test_llamacpp_offload.cpp derives the bytes).
TEST(LaunchLineLlamacpp, PartialOffloadSplitsHostAndDevice) {
  const json j = plan_json({"--model", "llama-3.1-8b", "--gpu", "rtx4090"},
                           {"llama-server", "-m", "m.gguf", "-c", "8192", "-ngl", "20", "-nkvo"});
  EXPECT_EQ(flags_of(j["launch"]["applied"]), (std::vector<std::string>{"-c", "-ngl", "-nkvo"}));
  EXPECT_EQ(j["placement"]["layers_on_device"].get<std::uint64_t>(), 19u);
  EXPECT_EQ(j["placement"]["kv_device_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(j["placement"]["kv_host_bytes"].get<std::uint64_t>(), 8192 * kLlama8BPerToken);
}

// README "llama-server -m model.gguf --port 8080" with -b 2048: the logical batch in tokens
// changes no sequence count (kv.batch stays 1, the slots stay llama-server's 4).
TEST(LaunchLineLlamacpp, LogicalBatchIsNotSequences) {
  const json j = plan_json({"--model", "llama-3.1-8b", "--gpu", "h100"},
                           {"llama-server", "-m", "model.gguf", "--port", "8080", "-b", "2048"});
  EXPECT_EQ(j["kv"]["batch"].get<std::uint64_t>(), 1u);
  EXPECT_EQ(j["kv"]["bytes_per_batch"], j["kv"]["bytes_per_sequence"]);
  EXPECT_EQ(j["capacity"]["max_running"].get<std::uint64_t>(), 4u);
  EXPECT_EQ(flags_of(j["launch"]["applied"]), std::vector<std::string>{"-b"});
  EXPECT_TRUE(j["launch"]["applied"][0]["field"].is_null());
  // kvsight's own flags no longer take -b: it is not read as --batch.
  const auto run = run_kvsight({"plan", "--engine", "llamacpp", "--model", "llama-3.1-8b", "-b", "2048"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("-b is a flag of llama-server"), std::string::npos) << run.err;
}

// ------------------------------------------------------------------------------ TensorRT-LLM

// nvidia.github.io/TensorRT-LLM/quick-start-guide.html ("trtllm-serve
// TinyLlama/TinyLlama-1.1B-Chat-v1.0"): the Hub id is the catalog entry's.
TEST(LaunchLineTrtllm, QuickStart) {
  const json j = plan_json({"--gpu", "h100"}, {"trtllm-serve", "TinyLlama/TinyLlama-1.1B-Chat-v1.0"});
  EXPECT_EQ(j["launch"]["engine"], "trtllm");
  EXPECT_EQ(j["model"]["id"], "tinyllama-1.1b-chat");
  EXPECT_TRUE(j["launch"]["applied"].empty());
  EXPECT_TRUE(j["launch"]["ignored"].empty());
  // TinyLlama: 22 layers x 4 KV heads x head_dim 64 (2048 / 32) x 2 x 2 B = 22,528 B.
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 22ull * 4 * 64 * 2 * 2);
  // No --max_batch_size: BuildConfig.max_batch_size = 2048 (tensorrt_llm/builder.py).
  EXPECT_EQ(j["capacity"]["max_running"].get<std::uint64_t>(), 2048u);
}

// nvidia.github.io/TensorRT-LLM/examples/deepseek_r1_reasoning_parser.html: expert parallelism
// (--ep_size 8) is refused by name before anything is planned.
TEST(LaunchLineTrtllm, DeepSeekReasoningExampleRefusesExpertParallel) {
  expect_refused({"--model", "deepseek-v3"},
                 {"trtllm-serve", "deepseek-ai/DeepSeek-R1", "--host", "localhost", "--port", "8000",
                  "--trust_remote_code", "--max_batch_size", "1024", "--max_num_tokens", "8192", "--tp_size", "8",
                  "--ep_size", "8", "--pp_size", "1", "--config", "./config.yml", "--reasoning_parser",
                  "deepseek-r1"},
                 "--ep_size", "expert-parallel");
}

// nvidia.github.io/TensorRT-LLM/commands/trtllm-serve/trtllm-serve.html (multimodal):
// --extra_llm_api_options is a YAML of LLM-API options kvsight does not read: refused.
TEST(LaunchLineTrtllm, ExtraLlmApiOptionsRefused) {
  expect_refused({"--model", "qwen2.5-7b"},
                 {"trtllm-serve", "Qwen/Qwen2-VL-7B-Instruct", "--extra_llm_api_options", "./extra-llm-api-config.yml"},
                 "--extra_llm_api_options", "YAML of LLM-API options");
}

// TensorRT-LLM's own flags: --max_batch_size caps what runs; --tp_size is --tensor_parallel_size.
TEST(LaunchLineTrtllm, BatchSizeCapAndTensorParallel) {
  const json j = plan_json({"--model", "llama-3.1-8b", "--gpu", "h100"},
                           {"trtllm-serve", "meta-llama/Llama-3.1-8B", "--tp_size", "2", "--max_batch_size", "128",
                            "--max_seq_len", "8192", "--kv_cache_free_gpu_memory_fraction", "0.9"});
  EXPECT_EQ(j["parallel"]["tensor_parallel_size"], 2);
  EXPECT_EQ(j["capacity"]["max_running"].get<std::uint64_t>(), 128u);
  EXPECT_EQ(j["capacity"]["max_model_len"].get<std::uint64_t>(), 8192u);
}

// ------------------------------------------------------------------------------ bad input

TEST(LaunchLineBadInput, UnknownLauncher) {
  const auto run = run_kvsight({"plan", "--", "ollama", "serve", "llama3"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("'ollama serve' is not a launcher"), std::string::npos) << run.err;
}

TEST(LaunchLineBadInput, FlagMissingItsValue) {
  const auto run = run_kvsight({"plan", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B", "--max-model-len"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--max-model-len (vllm serve): needs a value"), std::string::npos) << run.err;
}

TEST(LaunchLineBadInput, ConflictingDuplicates) {
  const auto run = run_kvsight({"plan", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B", "-tp", "2",
                                "--tensor-parallel-size", "4"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--tensor-parallel-size (vllm serve): is given twice with different values"),
            std::string::npos)
      << run.err;
}

TEST(LaunchLineBadInput, AnotherEnginesFlag) {
  const auto run = run_kvsight({"plan", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B", "--mem-fraction-static",
                                "0.8"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--mem-fraction-static (vllm serve): is a SGLang flag"), std::string::npos) << run.err;
}

TEST(LaunchLineBadInput, UnknownFlagSuggestsTheClosest) {
  const auto run = run_kvsight({"plan", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B", "--max-model-length",
                                "4096"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("did you mean --max-model-len?"), std::string::npos) << run.err;
}

TEST(LaunchLineBadInput, KvsightFlagAndLaunchLineSetTheSameOption) {
  const auto run = run_kvsight({"plan", "--tp", "2", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B", "-tp", "4"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--tp (--tensor-parallel-size): sets tensor_parallel_size, which the launch line sets too (-tp)"),
            std::string::npos)
      << run.err;
}

TEST(LaunchLineBadInput, EngineOtherThanTheLaunchers) {
  const auto run = run_kvsight({"plan", "--engine", "sglang", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--engine: is sglang, and the launch line is vllm serve"), std::string::npos) << run.err;
}

TEST(LaunchLineBadInput, LaunchWordsWithoutDoubleDash) {
  const auto run = run_kvsight({"plan", "vllm", "serve", "meta-llama/Llama-3.1-8B"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("starts a launch line; it goes after --"), std::string::npos) << run.err;
}

TEST(LaunchLineBadInput, BinarySuffixWithDecimalsRefusedAsVllmDoes) {
  const auto run = run_kvsight({"plan", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B", "--max-model-len",
                                "25.6K"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("vLLM refuses decimals with binary suffixes"), std::string::npos) << run.err;
}

TEST(LaunchLineBadInput, OtherCommandsAcceptTheLine) {
  // gates and fit read the same line; fit refuses a flag it searches itself.
  const auto gates = run_kvsight({"gates", "--gpu", "h100", "--format", "json", "--", "vllm", "serve",
                                  "meta-llama/Llama-3.1-8B", "--max-model-len", "8k"});
  EXPECT_EQ(gates.exit_code, 0) << gates.err;
  EXPECT_EQ(json::parse(gates.out)["launch"]["applied"][0]["effect"], "8000");
  const auto fit = run_kvsight({"fit", "--concurrency", "4", "--context", "8K", "--gpus", "h100", "--", "vllm",
                                "serve", "meta-llama/Llama-3.1-8B", "-tp", "2"});
  EXPECT_EQ(fit.exit_code, 2);
  EXPECT_NE(fit.err.find("fit searches or derives this option"), std::string::npos) << fit.err;
}

// ------------------------------------------------------------------------------ value grammars

std::int64_t value(ValueGrammar grammar, const std::string& text) {
  return parse_launch_value(grammar, text, "--flag").number;
}

TEST(LaunchValueGrammar, VllmHumanReadableInt) {
  // vllm/utils/argparse_utils.py human_readable_int (0.33.0).
  EXPECT_EQ(value(ValueGrammar::vllm_int, "32k"), 32000);                // 32 x 10^3
  EXPECT_EQ(value(ValueGrammar::vllm_int, "32K"), 32768);                // 32 x 2^10
  EXPECT_EQ(value(ValueGrammar::vllm_int, "25.6k"), 25600);              // int(25.6 x 1000)
  EXPECT_EQ(value(ValueGrammar::vllm_int, "1m"), 1000000);               // 10^6
  EXPECT_EQ(value(ValueGrammar::vllm_int, "1M"), 1048576);               // 2^20
  EXPECT_EQ(value(ValueGrammar::vllm_int, "2g"), 2000000000);            // 2 x 10^9
  EXPECT_EQ(value(ValueGrammar::vllm_int, "1.2345k"), 1234);             // int(1234.5): truncated
  EXPECT_EQ(value(ValueGrammar::vllm_int, " 4096 "), 4096);              // int() strips
  EXPECT_EQ(value(ValueGrammar::vllm_int, "1_000"), 1000);               // int() takes underscores
  EXPECT_THROW(value(ValueGrammar::vllm_int, "25.6K"), InputError);      // decimals with binary
  EXPECT_THROW(value(ValueGrammar::vllm_int, "0x10"), InputError);       // int("0x10") fails
  EXPECT_THROW(value(ValueGrammar::vllm_int, "32kb"), InputError);
  EXPECT_TRUE(parse_launch_value(ValueGrammar::vllm_int_or_auto, "auto", "f").automatic);
  EXPECT_TRUE(parse_launch_value(ValueGrammar::vllm_int_or_auto, "-1", "f").automatic);
}

TEST(LaunchValueGrammar, SglangHumanReadableInt) {
  // sglang/srt/utils/common.py human_readable_int (0.5.23): case-sensitive SI and IEC.
  EXPECT_EQ(value(ValueGrammar::sglang_int, "32k"), 32000);
  EXPECT_EQ(value(ValueGrammar::sglang_int, "32Ki"), 32768);
  EXPECT_EQ(value(ValueGrammar::sglang_int, "1M"), 1000000);
  EXPECT_EQ(value(ValueGrammar::sglang_int, "25.6k"), 25600);
  EXPECT_EQ(value(ValueGrammar::sglang_int, "0.5k"), 500);
  EXPECT_THROW(value(ValueGrammar::sglang_int, "32K"), InputError);  // K is not an SGLang suffix
  EXPECT_THROW(value(ValueGrammar::sglang_int, "1.5Ki"), InputError);
}

TEST(LaunchValueGrammar, LlamacppStoi) {
  // common/arg.cpp reads ints with std::stoi: what follows the digits is dropped.
  EXPECT_EQ(value(ValueGrammar::cpp_stoi, "2048"), 2048);
  EXPECT_EQ(value(ValueGrammar::cpp_stoi, "32k"), 32);
  EXPECT_EQ(value(ValueGrammar::cpp_stoi, " -1"), -1);
  EXPECT_THROW(value(ValueGrammar::cpp_stoi, "k32"), InputError);
  EXPECT_THROW(value(ValueGrammar::cpp_stoi, "99999999999"), InputError);  // beyond int
  EXPECT_TRUE(parse_launch_value(ValueGrammar::llamacpp_int_or_auto, "-1", "f").automatic);
  EXPECT_EQ(parse_launch_value(ValueGrammar::llamacpp_on_off_auto, "enabled", "f").text, "on");
  EXPECT_EQ(parse_launch_value(ValueGrammar::llamacpp_on_off_auto, "0", "f").text, "off");
  EXPECT_EQ(parse_launch_value(ValueGrammar::llamacpp_on_off_auto, "-1", "f").text, "auto");
  EXPECT_EQ(parse_launch_value(ValueGrammar::llamacpp_gpu_layers, "all", "f").text, "all");
}

TEST(LaunchValueGrammar, PythonFloat) {
  EXPECT_DOUBLE_EQ(parse_launch_value(ValueGrammar::python_float, "0.9", "f").real, 0.9);
  EXPECT_DOUBLE_EQ(parse_launch_value(ValueGrammar::python_float, "9e-1", "f").real, 0.9);
  EXPECT_THROW(parse_launch_value(ValueGrammar::python_float, "0x1p-1", "f"), InputError);
}

// ------------------------------------------------------------------------------ vLLM --config

TEST(LaunchVllmConfig, FlagsInVllmsOrderAndForms) {
  // argparse_utils.py load_config_file: true -> --key, false -> --no-key, a list -> its items,
  // a mapping -> json.dumps, else str(value).
  const std::vector<std::string> flags = app::vllm_config_flags(
      "max-model-len: 32k\n"
      "gpu-memory-utilization: 0.90   # str(0.9)\n"
      "enable-prefix-caching: true\n"
      "enforce-eager: false\n"
      "served-model-name: [a, b]\n"
      "speculative-config:\n"
      "  method: ngram\n"
      "  num_speculative_tokens: 3\n",
      "serve.yaml");
  EXPECT_EQ(flags, (std::vector<std::string>{"--max-model-len", "32k", "--gpu-memory-utilization", "0.9",
                                             "--enable-prefix-caching", "--no-enforce-eager",
                                             "--served-model-name", "a", "b", "--speculative-config",
                                             "{\"method\": \"ngram\", \"num_speculative_tokens\": 3}"}));
}

TEST(LaunchVllmConfig, YamlFormsReadDifferentlyAreRefused) {
  // YAML 1.1 reads 010 as the octal 8: refused rather than read differently from PyYAML.
  EXPECT_THROW(app::vllm_config_flags("port: 010\n", "serve.yaml"), InputError);
  EXPECT_THROW(app::vllm_config_flags("a:\n  b:\n    c: 1\n", "serve.yaml"), InputError);
}

TEST(LaunchVllmConfig, CommandLineWinsOverTheFile) {
  const std::string dir = test::temp_dir("launch-config-precedence");
  const std::string config = dir + "/serve.yaml";
  test::write_file(config, "max_model_len: 16k\ntensor-parallel-size: 2\n");
  EngineOptions options;
  const app::LaunchLine line = app::read_launch_line(
      {"vllm", "serve", "meta-llama/Llama-3.1-8B", "--config", config, "--max-model-len", "8192"}, options);
  // "cli > config > defaults": 8,192 from the line, TP 2 from the file.
  EXPECT_EQ(options.max_model_len, 8192);
  EXPECT_EQ(options.tp, 2u);
  EXPECT_EQ(line.applied.size(), 2u);
}

// ------------------------------------------------------------------------------ names users type

TEST(NamesUsersType, GpuAliasesAndSmiNames) {
  EXPECT_EQ(find_gpu("h100").id, "h100-sxm");
  EXPECT_EQ(find_gpu("a100").id, "a100-80gb");
  EXPECT_EQ(find_gpu("NVIDIA H100 80GB HBM3").id, "h100-sxm");  // nvidia-smi's name of the SXM H100
  EXPECT_EQ(find_gpu("nvidia  h100 pcie").id, "h100-pcie");     // case and spaces do not matter
  EXPECT_EQ(find_gpu("AMD Instinct MI300X").id, "mi300x");      // rocm-smi's product name
  try {
    find_gpu("h2000");
    FAIL() << "h2000 resolved";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean h200?"), std::string::npos) << e.what();
  }
}

TEST(NamesUsersType, UncachedHubIdOffersTheCatalogVariant) {
  const std::string hub = test::temp_dir("empty-hub");
  ::setenv("HF_HUB_CACHE", hub.c_str(), 1);
  ::setenv("HF_HOME", hub.c_str(), 1);
  try {
    resolve_model("meta-llama/Llama-3.1-8B-Instruct");
    FAIL() << "resolved without a cache";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the catalog's llama-3.1-8b (meta-llama/Llama-3.1-8B)"), std::string::npos)
        << e.what();
  }
}

TEST(NamesUsersType, SubcommandAndFlagSuggestions) {
  const auto command = run_kvsight({"plann", "--model", "llama-3.1-8b"});
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_NE(command.err.find("'plann' is not a kvsight command (did you mean plan?)"), std::string::npos)
      << command.err;
  const auto flag = run_kvsight({"plan", "--model", "llama-3.1-8b", "--contxt", "4096"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("--contxt: did you mean --context?"), std::string::npos) << flag.err;
}

}  // namespace
}  // namespace kvsight
