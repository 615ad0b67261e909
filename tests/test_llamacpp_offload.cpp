// llama.cpp -ngl and --no-kv-offload (issue #22 item 5): which layers, weights and KV stay in
// host memory, and what the GPU must hold. Every figure is derived here from the shapes and
// the rules of llama.cpp's src/llama-model.cpp load_tensors (b11312 and before PR #18148) and
// src/llama-kv-cache.cpp; docs/reference/llamacpp-current.md "Layers on the GPU".
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace kvsight {
namespace {

using nlohmann::json;
using test::make_gguf;
using test::run_kvsight;

// The TinyLlama-shaped GGUF of tests/make_gguf.py: 22 layers, hidden 2048, 4 KV heads of 64,
// ffn 5632, vocab 32000; token_embd f16, output and the seven linears of a layer q8_0 (34 B
// per 32 elements), norms f32.
constexpr std::uint64_t H = 2048, KV = 256, F = 5632, V = 32000, L = 22;
constexpr std::uint64_t kTokenEmbd = V * H * 2;
constexpr std::uint64_t kOutputLayer = V * H / 32 * 34 + H * 4;  // output q8_0 + output_norm f32
constexpr std::uint64_t kLayer = (H * H + KV * H + KV * H + H * H + 3 * F * H) / 32 * 34 + 2 * H * 4;
// f16 cache: K and V rows of 4 heads x 64 x 2 B per layer per cell.
constexpr std::uint64_t kKvPerLayerCell = 2 * KV * 2;

// A plan of `gguf` at --ctx-size `ctx`, one slot; exit 0 (fits or no GPU) or 1 (does not fit).
json plan(const std::string& gguf, std::vector<std::string> extra, int exit_code = 0, const std::string& ctx = "2048") {
  std::vector<std::string> args = {"plan", "--model", gguf, "--engine", "llamacpp", "--ctx-size", ctx,
                                   "--parallel", "1", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto run = run_kvsight(args);
  EXPECT_EQ(run.exit_code, exit_code) << run.err;
  return json::parse(run.out.empty() ? "{}" : run.out);
}

std::vector<std::string> offload_lines(const json& j) {
  std::vector<std::string> out;
  for (const json& line : j["engine_log"])
    if (line.get<std::string>().rfind("load_tensors:", 0) == 0) out.push_back(line.get<std::string>());
  return out;
}

TEST(LlamacppOffload, OutputLayerFirstThenTheLastRepeatingLayers) {
  const std::string gguf = make_gguf("tinyllama.gguf", "tinyllama");
  ASSERT_FALSE(gguf.empty());
  // b11312 (PR #18148): -ngl 10 = the output layer + 9 repeating layers (13-21); the token
  // embeddings and layers 0-12 stay in host memory, with those layers' KV.
  const json j = plan(gguf, {"-ngl", "10"});
  const json& p = j["placement"];
  EXPECT_EQ(p["layers"].get<std::uint64_t>(), L);
  EXPECT_EQ(p["layers_on_device"].get<std::uint64_t>(), 9u);
  EXPECT_TRUE(p["output_on_device"].get<bool>());
  EXPECT_TRUE(p["weights_exact"].get<bool>());
  EXPECT_EQ(p["weights_device_bytes"].get<std::uint64_t>(), kOutputLayer + 9 * kLayer);
  EXPECT_EQ(p["weights_host_bytes"].get<std::uint64_t>(), kTokenEmbd + 13 * kLayer);
  EXPECT_EQ(p["kv_device_bytes"].get<std::uint64_t>(), 2048 * 9 * kKvPerLayerCell);
  EXPECT_EQ(p["kv_host_bytes"].get<std::uint64_t>(), 2048 * 13 * kKvPerLayerCell);
  // The plan's weights on the GPU are the placement's, and all weights still sum to the file's.
  EXPECT_EQ(j["weights"]["bytes_per_rank"], p["weights_device_bytes"]);
  EXPECT_EQ(j["weights"]["bytes"].get<std::uint64_t>(), kTokenEmbd + kOutputLayer + L * kLayer);
  EXPECT_EQ(offload_lines(j), (std::vector<std::string>{"load_tensors: offloading output layer to GPU",
                                                        "load_tensors: offloading 9 repeating layers to GPU",
                                                        "load_tensors: offloaded 10/23 layers to GPU"}));
}

TEST(LlamacppOffload, BuildsBeforeOutputFirstOffloadRepeatingLayersFirst) {
  const std::string gguf = make_gguf("tinyllama.gguf", "tinyllama");
  ASSERT_FALSE(gguf.empty());
  // Before PR #18148: i_gpu_start = n_layer - ngl: 10 repeating layers (12-21), the output
  // layer only when -ngl > 22.
  const json j = plan(gguf, {"-ngl", "10", "--engine-version", "b6000"});
  const json& p = j["placement"];
  EXPECT_EQ(p["layers_on_device"].get<std::uint64_t>(), 10u);
  EXPECT_FALSE(p["output_on_device"].get<bool>());
  EXPECT_EQ(p["weights_device_bytes"].get<std::uint64_t>(), 10 * kLayer);
  EXPECT_EQ(p["weights_host_bytes"].get<std::uint64_t>(), kTokenEmbd + kOutputLayer + 12 * kLayer);
  EXPECT_EQ(offload_lines(j), (std::vector<std::string>{"load_tensors: offloading 10 repeating layers to GPU",
                                                        "load_tensors: offloaded 10/23 layers to GPU"}));
  // -ngl 23 = n_layer + 1 offloads everything there too.
  const json all = plan(gguf, {"-ngl", "23", "--engine-version", "b6000"});
  EXPECT_TRUE(all["placement"]["output_on_device"].get<bool>());
  EXPECT_EQ(all["placement"]["weights_device_bytes"].get<std::uint64_t>(), kOutputLayer + L * kLayer);
}

TEST(LlamacppOffload, EveryLayerNoLayerAndKvKeptOnTheHost) {
  const std::string gguf = make_gguf("tinyllama.gguf", "tinyllama");
  ASSERT_FALSE(gguf.empty());
  // -ngl 99: every layer and the output on the GPU; the token embeddings never are. The
  // code's own log counts n_gpu - 1 = 21 repeating layers although all 22 are offloaded.
  const json all = plan(gguf, {"-ngl", "99"});
  EXPECT_EQ(all["placement"]["layers_on_device"].get<std::uint64_t>(), L);
  EXPECT_EQ(all["placement"]["weights_device_bytes"].get<std::uint64_t>(), kOutputLayer + L * kLayer);
  EXPECT_EQ(all["placement"]["weights_host_bytes"].get<std::uint64_t>(), kTokenEmbd);
  EXPECT_EQ(all["placement"]["kv_host_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(offload_lines(all), (std::vector<std::string>{"load_tensors: offloading output layer to GPU",
                                                          "load_tensors: offloading 21 repeating layers to GPU",
                                                          "load_tensors: offloaded 23/23 layers to GPU"}));
  // The default (-ngl auto) is the same placement.
  json automatic = plan(gguf, {})["placement"], given = all["placement"];
  automatic.erase("rule");
  given.erase("rule");
  EXPECT_EQ(automatic, given);
  // -ngl 0: nothing on the GPU.
  const json none = plan(gguf, {"-ngl", "0"});
  EXPECT_EQ(none["placement"]["weights_device_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(none["placement"]["kv_device_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(none["placement"]["kv_host_bytes"].get<std::uint64_t>(), 2048 * L * kKvPerLayerCell);
  // --no-kv-offload: the weights as -ngl 99, every layer's KV in host memory.
  const json nkvo = plan(gguf, {"-ngl", "99", "--no-kv-offload"});
  EXPECT_FALSE(nkvo["placement"]["kv_on_device"].get<bool>());
  EXPECT_EQ(nkvo["placement"]["weights_device_bytes"], all["placement"]["weights_device_bytes"]);
  EXPECT_EQ(nkvo["placement"]["kv_device_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(nkvo["placement"]["kv_host_bytes"].get<std::uint64_t>(), 2048 * L * kKvPerLayerCell);
}

TEST(LlamacppOffload, TiedEmbeddingsLoadASecondCopyAsTheOutput) {
  // make_gguf.py tiny-llama: token_embd f16 32 x 64 (4,096 B), blk.0.attn_q q8_0 64 x 64
  // (4,096 / 32 x 34 = 4,352 B), output_norm f32 (256 B), no output.weight: llama.cpp creates
  // the output from token_embd (TENSOR_DUPLICATED) on the output layer's device.
  const std::string gguf = make_gguf("tiny.gguf", "tiny-llama");
  ASSERT_FALSE(gguf.empty());
  const json all = plan(gguf, {"-ngl", "all"}, 0, "256");
  EXPECT_EQ(all["placement"]["weights_device_bytes"].get<std::uint64_t>(), 4352u + 256 + 4096);
  EXPECT_EQ(all["placement"]["weights_host_bytes"].get<std::uint64_t>(), 4096u);
  // -ngl 1: the output layer only (with its copy of the embeddings); the block on the host.
  const json one = plan(gguf, {"-ngl", "1"}, 0, "256");
  EXPECT_EQ(one["placement"]["layers_on_device"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(one["placement"]["weights_device_bytes"].get<std::uint64_t>(), 256u + 4096);
  EXPECT_EQ(one["placement"]["weights_host_bytes"].get<std::uint64_t>(), 4096u + 4352);
  // -ngl 0 (no output layer on the GPU either): the mapped token_embd serves as the output,
  // no second copy.
  const json none = plan(gguf, {"-ngl", "0"}, 0, "256");
  EXPECT_EQ(none["placement"]["weights_host_bytes"].get<std::uint64_t>(), 4096u + 4352 + 256);
}

TEST(LlamacppOffload, FewerLayersOnTheGpuMakeAModelFit) {
  const std::string gguf = make_gguf("tinyllama.gguf", "tinyllama");
  ASSERT_FALSE(gguf.empty());
  // A 1 GiB device. Overheads (engines/llamacpp.cpp): compute n_ubatch x (V + 2I + 4H) x 4 B =
  // 512 x 51,456 x 4 = 105,381,888 B; runtime 0.3 GiB = 322,122,547 B.
  const std::uint64_t total = 1ull << 30, overhead = 105381888 + 322122547;
  // Everything on the GPU: 22 layers + output + 22 layers of KV > 1 GiB.
  const json all = plan(gguf, {"--gpu-mem-gib", "1", "-ngl", "99"}, 1);
  EXPECT_GT(kOutputLayer + L * kLayer + overhead + 2048 * L * kKvPerLayerCell, total);
  EXPECT_FALSE(all["capacity"]["fits"].get<bool>());
  // -ngl 10: output + 9 layers + their KV fit; the KV budget is what the GPU has left.
  const json ten = plan(gguf, {"--gpu-mem-gib", "1", "-ngl", "10"});
  EXPECT_TRUE(ten["capacity"]["fits"].get<bool>());
  EXPECT_EQ(ten["capacity"]["available_kv_bytes"].get<std::uint64_t>(),
            total - (kOutputLayer + 9 * kLayer) - overhead);
}

// The catalog's Llama 3.1 8B (no GGUF): the estimate at bf16. Input = V x H x 2 =
// 1,050,673,152 B; output = V x H x 2 + the norm H x 2 = 1,050,681,344 B; each of the 32
// equal layers (q, o 4096 x 4096; k, v 1024 x 4096; gate, up, down 14336 x 4096; two norms)
// 218,112,000 parameters = 436,224,000 B.
TEST(LlamacppOffload, EstimatedWeightsSplitByLayerParameters) {
  const std::uint64_t input = 128256ull * 4096 * 2, output = input + 4096 * 2;
  const std::uint64_t layer = (2ull * 4096 * 4096 + 2ull * 1024 * 4096 + 3ull * 14336 * 4096 + 2 * 4096) * 2;
  const auto run = run_kvsight({"plan", "--model", "llama-3.1-8b", "--engine", "llamacpp", "--gpu", "rtx4090",
                                "--ctx-size", "32768", "-ngl", "20", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json p = json::parse(run.out)["placement"];
  EXPECT_FALSE(p["weights_exact"].get<bool>());
  EXPECT_EQ(p["layers_on_device"].get<std::uint64_t>(), 19u);
  EXPECT_EQ(p["weights_device_bytes"].get<std::uint64_t>(), output + 19 * layer);
  EXPECT_EQ(p["weights_host_bytes"].get<std::uint64_t>(), input + 13 * layer);
  // 32,768 cells x 19 layers x (8 heads x 128 x 2 B) x 2 (K, V).
  EXPECT_EQ(p["kv_device_bytes"].get<std::uint64_t>(), 32768ull * 19 * 8 * 128 * 2 * 2);
}

TEST(LlamacppOffload, BadValuesNameTheFlag) {
  for (const std::string value : {"abc", "-3", "1.5", ""}) {
    const auto run = run_kvsight({"plan", "--model", "llama-3.1-8b", "--engine", "llamacpp", "-ngl", value});
    EXPECT_EQ(run.exit_code, 2) << value;
    EXPECT_NE(run.err.find("-ngl"), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty());
  }
}

}  // namespace
}  // namespace kvsight
