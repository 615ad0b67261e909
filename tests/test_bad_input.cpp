// The bad-input matrix (docs/reliability.md): every case runs the kvsight
// binary with --output <tmp>/out.json and expects exit code 2, a message on
// stderr naming the field or flag, and nothing written to the output path. Below
// it, the fuzz findings as regression tests with the crashing input inline.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvsight/decode_model.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

namespace fs = std::filesystem;
using test::run_kvsight;
using test::temp_dir;
using test::write_file;

// A small valid config (Llama-shaped): 2 layers, 4 query heads, 2 KV heads,
// head_dim 64 / 4 = 16. Cases below break one field of it at a time.
std::string config_with(const std::string& fields) {
  return "{\"model_type\":\"llama\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
         "\"num_key_value_heads\":2,\"vocab_size\":100,\"max_position_embeddings\":2048" +
         (fields.empty() ? std::string() : "," + fields) + "}";
}

// The safetensors layout: 8-byte little-endian header length, header, data.
std::string safetensors(std::uint64_t declared_length, const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((declared_length >> (8 * i)) & 0xff);
  return bytes + header + data;
}
std::string safetensors(const std::string& header, const std::string& data = "") {
  return safetensors(header.size(), header, data);
}

struct File {
  std::string name;  // relative to the case directory
  std::string text;
};

struct Case {
  std::string name;
  std::vector<std::string> args;  // "@" is replaced by the case directory
  std::vector<File> files;
  std::string expected;  // substring of stderr naming the field or flag
};

// JSON configs that must be refused, each written to <dir>/config.json and
// passed as --model <dir>/config.json.
std::vector<Case> config_cases() {
  const std::vector<std::string> plan = {"plan", "--model", "@/config.json"};
  auto c = [&](std::string name, std::string text, std::string expected) {
    return Case{std::move(name), plan, {{"config.json", std::move(text)}}, std::move(expected)};
  };
  return {
      c("truncated JSON", R"({"hidden_size":4096,"num_hidden_layers":32)", "is not valid JSON"),
      c("empty file", "", "is not valid JSON"),
      c("JSON array", "[1,2,3]", "not an object"),
      c("JSON string", "\"config\"", "not an object"),
      c("JSON null", "null", "not an object"),
      c("missing hidden_size",
        R"({"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"max_position_embeddings":2048})",
        "hidden_size"),
      c("missing num_hidden_layers",
        R"({"hidden_size":64,"num_attention_heads":4,"vocab_size":100,"max_position_embeddings":2048})",
        "num_hidden_layers"),
      c("zero num_hidden_layers", config_with("\"num_hidden_layers\":0"), "num_hidden_layers"),
      c("zero num_attention_heads", config_with("\"num_attention_heads\":0"), "num_attention_heads"),
      c("negative num_attention_heads", config_with("\"num_attention_heads\":-4"), "num_attention_heads"),
      c("negative num_key_value_heads", config_with("\"num_key_value_heads\":-2"), "num_key_value_heads"),
      c("fractional hidden_size", config_with("\"hidden_size\":64.5"), "hidden_size"),
      c("string vocab_size", config_with("\"vocab_size\":\"100\""), "vocab_size"),
      c("boolean head_dim", config_with("\"head_dim\":true"), "head_dim"),
      // 4 query heads in groups of 3 KV heads: 4 % 3 != 0.
      c("kv heads do not divide heads", config_with("\"num_key_value_heads\":3"), "num_key_value_heads"),
      c("more kv heads than heads", config_with("\"num_key_value_heads\":8"), "num_key_value_heads"),
      // 64 / 3 is not an integer and there is no head_dim.
      c("hidden not a multiple of heads", config_with("\"num_attention_heads\":3,\"num_key_value_heads\":1"),
        "head_dim"),
      c("head_dim beyond 32 bits", config_with("\"head_dim\":4294967296"), "head_dim"),
      c("too many layers", config_with("\"num_hidden_layers\":1000000"), "num_hidden_layers"),
      c("unknown torch_dtype", config_with("\"torch_dtype\":\"float7\""), "torch_dtype"),
      c("unknown layer type", config_with(R"("layer_types":["full_attention","banana_attention"])"),
        "layer_types[1]"),
      c("layer_types length", config_with(R"("layer_types":["full_attention"])"), "layer_types"),
      c("sliding layer without window", config_with(R"("layer_types":["full_attention","sliding_attention"])"),
        "sliding_window"),
      c("negative rope factor", config_with(R"("rope_scaling":{"rope_type":"linear","factor":-2})"),
        "rope_scaling.factor"),
      c("unknown rope type", config_with(R"("rope_scaling":{"rope_type":"wobbly","factor":2})"), "rope_type"),
      c("unknown quant method", config_with(R"("quantization_config":{"quant_method":"magic"})"),
        "quantization_config.quant_method"),
      c("experts per token above experts", config_with("\"num_local_experts\":4,\"num_experts_per_tok\":8"),
        "num_experts_per_tok"),
      c("text_config not an object", config_with("\"text_config\":7"), "text_config"),
      // Review findings next to the fuzz ones: sums that wrapped silently.
      // 2^32 x 2 layers x 2^32 = 2^65 per-layer embedding parameters (Gemma 3n fields).
      c("per-layer embeddings overflow",
        config_with("\"vocab_size_per_layer_input\":4294967296,\"hidden_size_per_layer_input\":4294967296"),
        "hidden_size_per_layer_input"),
      // (2^64 - 1) + (2^64 - 1) per-layer intermediate sizes.
      c("per-layer intermediate sizes overflow",
        config_with("\"intermediate_size\":[18446744073709551615,18446744073709551615]"), "intermediate_size"),
      // MLA query head dim 2^32 - 1 + 64 wrapped to 63 in 32 bits.
      c("MLA head dim beyond 32 bits",
        config_with("\"kv_lora_rank\":512,\"qk_rope_head_dim\":64,\"qk_nope_head_dim\":4294967295,\"v_head_dim\":128"),
        "qk_nope_head_dim"),
      // 2^64 - 1 x 2 does not fit in 64 bits (vocab x hidden embedding parameters).
      c("embedding parameters overflow", config_with("\"vocab_size\":18446744073709551615"),
        "embedding parameters"),
  };
}

// Flags that must be refused, on a catalog model. smollm3-3b: 36 layers, 16
// query heads, 4 KV heads, head_dim 128, bf16: 36 x 4 x 128 x 2 x 2 = 73,728 B/token.
std::vector<Case> flag_cases() {
  auto c = [](std::string name, std::vector<std::string> extra, std::string expected) {
    std::vector<std::string> args = {"plan", "--model", "smollm3-3b"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Case{std::move(name), std::move(args), {}, std::move(expected)};
  };
  return {
      c("negative context", {"--context", "-5"}, "--context"),
      c("non-integer context", {"--context", "abc"}, "--context"),
      // CLI11 2.1 saturates 2^64 to 2^64 - 1 (strtoull): then the byte count overflows.
      c("context beyond 64 bits", {"--context", "18446744073709551616"}, "exceeds 2^64 - 1"),
      c("negative batch", {"--batch", "-1"}, "--batch"),
      c("fractional batch", {"--batch", "2.5"}, "--batch"),
      c("zero batch", {"--batch", "0"}, "--batch"),
      // 2^64 - 1 tokens: ceil(/16) = 2^60 blocks x 16 x 73,728 B overflows.
      c("context whose bytes overflow", {"--context", "18446744073709551615"}, "kv bytes per sequence"),
      // 65,536 x 73,728 = 4,831,838,208 B per sequence x 2^60 sequences overflows.
      c("batch whose bytes overflow", {"--context", "65536", "--batch", "1152921504606846976"}, "kv bytes per batch"),
      c("unknown kv dtype", {"--kv-cache-dtype", "fp7"}, "--kv-cache-dtype"),
      c("MLA-only kv dtype", {"--kv-cache-dtype", "fp8_ds_mla"}, "--kv-cache-dtype"),
      c("unknown engine", {"--engine", "tgi-9000"}, "--engine"),
      c("unknown GPU", {"--gpu", "rtx9999"}, "--gpu"),
      c("empty GPU list entry", {"--gpu", ",h200"}, "--gpu"),
      // Issue #25 class 6: a GPU listed twice was planned twice (two identical rows).
      c("GPU listed twice", {"--gpu", "h200,H200"}, "--gpu: 'h200,H200' lists h200 twice"),
      c("gpu and gpu-mem-gib", {"--gpu", "h200", "--gpu-mem-gib", "80"}, "--gpu-mem-gib"),
      c("negative gpu-mem-gib", {"--gpu-mem-gib", "-3"}, "--gpu-mem-gib"),
      // Overhead overrides are strict decimals: CLI11 read "0x10" and "0x1p4" as 16.
      c("hex activation-gib", {"--gpu", "h200", "--activation-gib", "0x10"}, "--activation-gib"),
      c("hex-float weights-gib", {"--gpu", "h200", "--weights-gib", "0x1p4"}, "--weights-gib"),
      c("negative non-torch-gib", {"--gpu", "h200", "--non-torch-gib", "-0.5"}, "--non-torch-gib"),
      c("nan cuda-graph-gib", {"--gpu", "h200", "--cuda-graph-gib", "nan"}, "--cuda-graph-gib"),
      c("empty activation-gib", {"--gpu", "h200", "--activation-gib", ""}, "--activation-gib"),
      // An override the engine's budget has no term for would change nothing: refused, not ignored.
      c("cuda-graph-gib with sglang", {"--gpu", "h200", "--engine", "sglang", "--cuda-graph-gib", "1"},
        "--cuda-graph-gib: is not used by sglang"),
      c("kv-transfer-gib with llama.cpp", {"--gpu", "h200", "--engine", "llamacpp", "--kv-transfer-gib", "2"},
        "--kv-transfer-gib: is not used by llamacpp"),
      c("utilization 0", {"--gpu", "h200", "--gpu-memory-utilization", "0"}, "--gpu-memory-utilization"),
      c("utilization above 1", {"--gpu", "h200", "--gpu-memory-utilization", "1.5"}, "--gpu-memory-utilization"),
      c("utilization negative", {"--gpu", "h200", "--gpu-memory-utilization", "-0.1"}, "--gpu-memory-utilization"),
      c("utilization nan", {"--gpu", "h200", "--gpu-memory-utilization", "nan"}, "--gpu-memory-utilization"),
      c("tp 0", {"--tp", "0"}, "--tensor-parallel-size"),
      c("tp negative", {"--tp", "-1"}, "--tensor-parallel-size"),
      c("pp 0", {"--pp", "0"}, "--pipeline-parallel-size"),
      c("pp above layers", {"--pp", "37"}, "--pipeline-parallel-size"),
      c("block size 0", {"--block-size", "0"}, "--block-size"),
      c("block size negative", {"--block-size", "-16"}, "--block-size"),
      c("max-model-len 0", {"--gpu", "h200", "--max-model-len", "0"}, "--max-model-len"),
      c("max-model-len below -1", {"--gpu", "h200", "--max-model-len", "-7"}, "--max-model-len"),
      c("negative max-num-seqs", {"--gpu", "h200", "--max-num-seqs", "-1"}, "--max-num-seqs"),
      c("unknown format", {"--format", "yaml"}, "--format"),
      c("unknown flag", {"--contxt", "4096"}, "--contxt"),
  };
}

// --model values that are not a model.
std::vector<Case> model_cases() {
  const std::string good_config = config_with("");
  return {
      {"unknown model id", {"plan", "--model", "llama-9-1t"}, {}, "--model"},
      {"inspect unknown model", {"inspect", "--model", "llama-9-1t"}, {}, "--model"},
      {"empty model", {"plan", "--model", ""}, {}, "--model"},
      {"empty model list entry", {"plan", "--model", ",smollm3-3b"}, {}, "--model"},
      {"directory without config", {"plan", "--model", "@"}, {{"README.md", "no config here"}}, "holds no config.json"},
      {"missing file", {"plan", "--model", "@/nope/config.json"}, {}, "--model"},
      // Header length 4,096 in a 10-byte file.
      {"safetensors header larger than file",
       {"plan", "--model", "@"},
       {{"config.json", good_config}, {"model.safetensors", safetensors(4096, "{}", "")}},
       "larger than the file"},
      {"safetensors shorter than its length field",
       {"plan", "--model", "@"},
       {{"config.json", good_config}, {"model.safetensors", std::string("\x05\x00\x00", 3)}},
       "shorter than"},
      {"safetensors header not JSON",
       {"plan", "--model", "@"},
       {{"config.json", good_config}, {"model.safetensors", safetensors("{nope", "abc")}},
       "safetensors header is not valid JSON"},
      // One tensor claims bytes [0, 1024) of 4 data bytes.
      {"safetensors offsets outside the data",
       {"plan", "--model", "@"},
       {{"config.json", good_config},
        {"model.safetensors",
         safetensors(R"({"w":{"dtype":"F32","shape":[256],"data_offsets":[0,1024]}})", "abcd")}},
       "data_offsets"},
      {"calibration not JSON",
       {"cliff", "--scenario", "vllm-50264", "--calibration", "@/sweep.json"},
       {{"sweep.json", "{\"kernel\":"}},
       "--calibration"},
      {"calibration without nosplit sweep",
       {"cliff", "--scenario", "vllm-50264", "--calibration", "@/sweep.json"},
       {{"sweep.json", R"({"kernel":"splitkv","points":[]})"}},
       "--calibration"},
  };
}

void run_case(const Case& c) {
  SCOPED_TRACE(c.name);
  const std::string dir = temp_dir("bad-input");
  for (const auto& f : c.files) write_file(dir + "/" + f.name, f.text);
  std::vector<std::string> args;
  for (std::string a : c.args) {
    if (const auto at = a.find('@'); at != std::string::npos) a.replace(at, 1, dir);
    args.push_back(a);
  }
  const std::string output = dir + "/out.json";
  args.insert(args.end(), {"--output", output});
  const auto run = run_kvsight(args);
  EXPECT_EQ(run.exit_code, 2) << "stderr: " << run.err << "\nstdout: " << run.out;
  EXPECT_NE(run.err.find(c.expected), std::string::npos) << "stderr lacks '" << c.expected << "': " << run.err;
  EXPECT_EQ(run.err.find("internal error"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(output)) << "a refused run wrote " << output;
  // Nor a temporary left beside it (cli/app.cpp writes <out>.tmp.<pid>, then renames).
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().find("out.json"), std::string::npos) << entry.path();
  fs::remove_all(dir);
}

TEST(BadInput, Configs) {
  for (const auto& c : config_cases()) run_case(c);
}

TEST(BadInput, Flags) {
  for (const auto& c : flag_cases()) run_case(c);
}

TEST(BadInput, Models) {
  for (const auto& c : model_cases()) run_case(c);
}

TEST(BadInput, OutputIntoMissingDirectory) {
  const std::string dir = temp_dir("bad-output");
  const std::string output = dir + "/no-such-dir/out.json";
  const auto run = run_kvsight({"plan", "--model", "smollm3-3b", "--output", output});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("--output"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(dir + "/no-such-dir"));
}

TEST(BadInput, GoodRunStillWritesTheOutput) {
  // The matrix above would pass for a binary that never writes --output; this
  // one must write it.
  const std::string dir = temp_dir("good-output");
  const std::string output = dir + "/out.json";
  write_file(dir + "/config.json", config_with(""));
  const auto good = run_kvsight({"plan", "--model", dir + "/config.json", "--output", output, "--format", "json"});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_TRUE(fs::exists(output));
}

// ---- Fuzz findings (scripts/fuzz.sh), each with the input that crashed or
// produced a wrong number, inline.

TEST(FuzzFindings, ConfigNumberBeyondDoubleIsInputError) {
  // nlohmann throws out_of_range (406), not parse_error, for 1e999: it escaped
  // the reader as an unknown exception.
  EXPECT_THROW(parse_hf_config(R"({"hidden_size":1e999,"num_hidden_layers":2})", "x"), InputError);
}

TEST(FuzzFindings, MlaLatentWidthDoesNotWrap) {
  // kv_lora_rank 2^32 - 1 + qk_rope_head_dim 64 wrapped to a latent of 63
  // elements per token in 32 bits: a confident, tiny KV footprint.
  const std::string config =
      R"({"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":10,)"
      R"("kv_lora_rank":4294967295,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128})";
  try {
    parse_hf_config(config, "x");
    FAIL() << "accepted a latent of 2^32 + 63 elements";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("kv_lora_rank"), std::string::npos) << e.what();
  }
}

TEST(FuzzFindings, NemotronHWithoutHeadDimIsRefused) {
  // hidden 65 is not a multiple of 4 heads and there is no head_dim: the attention
  // layer got head_dim 0, i.e. 0 KV bytes per token.
  const std::string config =
      R"({"model_type":"nemotron_h","hybrid_override_pattern":"M-M*-","hidden_size":65,"num_hidden_layers":5,)"
      R"("num_attention_heads":4,"num_key_value_heads":2,"{ead_dim":16,"vocab_size":10,"mamba_num_heads":4,)"
      R"("mamba_head_dim":16,"ssm_state_size":8,"n_groups":1,"conv_kernel":4})";
  try {
    parse_hf_config(config, "x");
    FAIL() << "accepted an attention layer with head_dim 0";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
}

TEST(FuzzFindings, RopeOriginalLengthBeyond64BitsIsInputError) {
  // 1.8e24 as original_max_position_embeddings: the double -> uint64 cast was UB
  // (UBSan: outside the range of representable values).
  const std::string config =
      R"({"hidden_size":64,"num_hidden_layers":4,"num_attention_heads":4,"vocab_size":10,)"
      R"("quantization_config":{"quant_method":"gptq","bi4294967296up_size":-1},"rope_scaling":{"rope_type":"yarn",)"
      R"("factor":4.0,"original_max_position_embeddings":1844674407370955161532768},"max_position_embeddings":131072})";
  try {
    parse_hf_config(config, "x");
    FAIL() << "accepted original_max_position_embeddings 1.8e24";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("original_max_position_embeddings"), std::string::npos) << e.what();
  }
}

TEST(FuzzFindings, QuantGroupSizeBeyond32BitsIsInputError) {
  // group_size 5e29: the double -> uint32 cast was UB (UBSan, model_config.cpp read_quantization).
  const std::string config =
      R"({"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":10,)"
      R"("quantization_config":{"quant_method":"gptq","bits":2,"group_size":499999999999999999999999999991}})";
  try {
    parse_hf_config(config, "x");
    FAIL() << "accepted group_size 5e29";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("group_size"), std::string::npos) << e.what();
  }
}

TEST(FuzzFindings, Bitsandbytes4BitFlagThatIsNotABoolIsInputError) {
  // Finding 11 (nightly fuzz, 2026-12-02): "load_in_4bit": "gptq" made nlohmann's value()
  // throw type_error 302 out of read_quantization, which terminated the process.
  const std::string config =
      R"({"hidden_size":64,"num_hidden_layers":4,"num_attention_heads":4,"vocab_size":10,)"
      R"("quantization_config":{"load_in_4bit":"gptq","bits":2},"max_position_embeddings":32768})";
  try {
    parse_hf_config(config, "x");
    FAIL() << "accepted load_in_4bit \"gptq\"";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("quantization_config.load_in_4bit"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("true or false"), std::string::npos) << e.what();
  }
  // The fuzzer's own input, byte for byte (a 16-digit max_position_embeddings beside it).
  const std::string found =
      R"({"hidden_size":64,"num_hidden_layers":4,"num_attention_heads":4,"vocab_size":10,)"
      R"("quantization_config":{"load_in_4bit":"gptq","bits":2,"staaxlposition_embeddings":32768},)"
      R"("max_position_embeddings":1310742949672962})";
  EXPECT_THROW(parse_hf_config(found, "x"), InputError);
}

TEST(FuzzFindings, ScaledMaxLengthBeyond63BitsIsOverflowError) {
  // 2^62 positions x linear factor 4 = 2^64 tokens: llround's result was
  // unspecified, printed as a max_model_len.
  const ModelSpec m = parse_hf_config(
      R"({"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":10,)"
      R"("max_position_embeddings":4611686018427387904,"rope_scaling":{"rope_type":"linear","factor":4.0}})",
      "x");
  EXPECT_THROW(derived_max_model_len(m), OverflowError);
  // 2^20 x 4 = 4,194,304 still fits.
  const ModelSpec small = parse_hf_config(
      R"({"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":10,)"
      R"("max_position_embeddings":1048576,"rope_scaling":{"rope_type":"linear","factor":4.0}})",
      "x");
  EXPECT_EQ(derived_max_model_len(small), 4194304u);
}

TEST(FuzzFindings, SafetensorsNumberBeyondDoubleIsInputError) {
  // The crashing header: {"w":184467411111055558e5477580768...
  const std::string header = R"({"w":184467411111055558e5477580768})";
  const std::string file = safetensors(header);
  EXPECT_THROW(parse_safetensors_header(file, file.size(), "x"), InputError);
}

TEST(FuzzFindings, CalibrationWithWrongTypesIsInputError) {
  GpuSpec gpu;
  gpu.multiprocessors = 84;
  gpu.bandwidth_gbps = 800;
  // Points that are numbers, not objects (the fuzzer's first crash), and a
  // head_dim that is a string: nlohmann type_error escaped the reader.
  for (const char* text : {
           R"({"kernel":"nosplit","shape":{"head_dim":128,"kv_heads":2},"points":[1,2]})",
           R"({"kernel":"nosplit","shape":{"head_dim":"128","kv_heads":2},"points":[{"context":1,"time_us":1},{"context":2,"time_us":2}]})",
           R"({"kernel":7,"points":[]})",
           R"({"kernel":"nosplit","shape":[],"points":[]})",
       }) {
    SCOPED_TRACE(text);
    EXPECT_THROW(calibration_from_probe_json(text, "sweep.json", gpu), InputError);
  }
}

TEST(FuzzFindings, CalibrationWhoseFitIsNotFiniteIsInputError) {
  // (1e308 - (-1e308)) overflows double: the slope is inf or NaN, which printed
  // as a per-program rate of 0 or nan GB/s.
  GpuSpec gpu;
  gpu.multiprocessors = 84;
  gpu.bandwidth_gbps = 800;
  const char* text =
      R"({"kernel":"nosplit","shape":{"head_dim":128,"kv_heads":2},)"
      R"("points":[{"context":1,"time_us":-1e308},{"context":2,"time_us":1e308}]})";
  EXPECT_THROW(calibration_from_probe_json(text, "sweep.json", gpu), InputError);
}

// ---- Issue #14 items 4 and 5, model inputs (issue #11 branch model-inputs) ----
// Quantization values outside their allowed sets, recurrent shapes whose products
// wrap, and model paths that are not regular files or are far too large: each
// refused with exit 2 naming the field, nothing written.

TEST(BadInputModelFiles, QuantizationValuesOutsideTheirSets) {
  auto q = [](const std::string& name, const std::string& quant, const std::string& expected) {
    return Case{name,
                {"plan", "--model", "@/config.json"},
                {{"config.json", config_with("\"quantization_config\":" + quant)}},
                expected};
  };
  for (
      const auto& c : {
          q("gptq bits 0", R"({"quant_method":"gptq","bits":0,"group_size":128})", "allowed: 2, 3, 4, 8"),
          q("gptq bits -4", R"({"quant_method":"gptq","bits":-4,"group_size":128})",
            "quantization_config.bits"),
          q("gptq bits string", R"({"quant_method":"gptq","bits":"8","group_size":128})",
            "allowed: 2, 3, 4, 8"),
          q("gptq group 0.5", R"({"quant_method":"gptq","bits":4,"group_size":0.5})",
            "quantization_config.group_size"),
          q("quant_method number", R"({"quant_method":7})", "quantization_config.quant_method"),
          q("awq bits 8", R"({"quant_method":"awq","bits":8,"group_size":128})", "allowed: 4"),
          q("compressed-tensors num_bits 0",
            R"({"quant_method":"compressed-tensors","config_groups":{"group_0":{"weights":{"num_bits":0}}}})",
            "num_bits"),
      })
    run_case(c);
}

TEST(BadInputModelFiles, RecurrentShapesWhoseProductsWrap) {
  auto c = [](const std::string& name, const std::string& text, const std::string& expected) {
    return Case{name, {"plan", "--model", "@/config.json"}, {{"config.json", text}}, expected};
  };
  for (
      const auto& k : {
          // Mamba: d_inner = expand x hidden = 2^63 x 64 = 2^69.
          c("mamba expand 2^63",
            R"({"model_type":"mamba","hidden_size":64,"num_hidden_layers":2,"vocab_size":100,)"
            R"("expand":9223372036854775808,"state_size":16,"conv_kernel":4})",
            "expand"),
          // Nemotron-H: 2 x n_groups x d_state = 2 x 2^63 x 128.
          c("nemotron-h n_groups 2^63",
            R"({"model_type":"nemotron_h","hidden_size":64,"num_hidden_layers":2,"vocab_size":100,)"
            R"("hybrid_override_pattern":"M*","num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,)"
            R"("mamba_num_heads":8,"mamba_head_dim":16,"n_groups":9223372036854775808,"ssm_state_size":128})",
            "mamba"),
          // Qwen3-Next: key dim 2^32 x 2^31 heads x 2 = 2^64.
          c("qwen3-next key dim x heads x 2 = 2^64",
            R"({"model_type":"qwen3_next","hidden_size":64,"num_hidden_layers":2,"vocab_size":100,)"
            R"("num_attention_heads":4,"num_key_value_heads":2,"layer_types":["linear_attention","full_attention"],)"
            R"("linear_key_head_dim":4294967296,"linear_num_key_heads":2147483648,"linear_value_head_dim":16,)"
            R"("linear_num_value_heads":4,"linear_conv_kernel_dim":4})",
            "linear_key_head_dim"),
      })
    run_case(k);
}

TEST(BadInputModelFiles, DevicesFifosAndHugeConfigsAreRefusedAtOnce) {
  const std::string dir = temp_dir("bad-model-kinds");
  const std::string output = dir + "/out.json";
  auto refused = [&](const std::vector<std::string>& args, const std::string& expected) {
    SCOPED_TRACE(args[2]);
    std::vector<std::string> full = args;
    full.insert(full.end(), {"--output", output});
    const auto run = run_kvsight(full);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(output));
  };
  // Character devices: never read (they would be read until memory runs out).
  refused({"plan", "--model", "/dev/zero"}, "a character device");
  refused({"plan", "--model", "/dev/urandom"}, "a character device");
  // A 200 MB config that begins like JSON: refused from its size (4 MiB limit).
  const std::string huge = dir + "/config.json";
  write_file(huge, "[");
  fs::resize_file(huge, 200ull * 1000 * 1000);
  refused({"plan", "--model", huge}, "allowed: at most 4194304");
  // A FIFO as refs/main in the HF cache: refused, never opened for a blocking read.
  const std::string hub = dir + "/hub";
  const std::string repo = hub + "/models--org--fifo";
  fs::create_directories(repo + "/refs");
  fs::create_directories(repo + "/snapshots/abc");
  write_file(repo + "/snapshots/abc/config.json", config_with(""));
  ASSERT_EQ(::mkfifo((repo + "/refs/main").c_str(), 0600), 0);
  ::setenv("HF_HUB_CACHE", hub.c_str(), 1);
  refused({"plan", "--model", "org/fifo"}, "a FIFO");
  ::unsetenv("HF_HUB_CACHE");
  // Bytes that are no model file at all name what was found.
  write_file(dir + "/model.bin", std::string("\x7f"
                                             "ELF\x02\x01\x01\x00",
                                             8));
  refused({"plan", "--model", dir + "/model.bin"}, "7f 45 4c 46");
}

TEST(BadInputModelFiles, OfflineHubIdSaysWhatToRun) {
  const std::string dir = temp_dir("bad-hub-id");
  ::setenv("HF_HUB_CACHE", dir.c_str(), 1);
  const auto run = run_kvsight({"plan", "--model", "someorg/not-cached"});
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("huggingface-cli download someorg/not-cached config.json"), std::string::npos)
      << run.err;
}

// ---- Issue #14, second round: calibration files, --baseline-ms and output
// paths (cli/output_file.hpp, planner/src/decode/decode_model.cpp). Each case
// asserts the exit code, the flag or key named, and that no file was written or
// changed.

// A valid no-split sweep of head_dim 256, 2 KV heads; cases break one part of it.
std::string calibration_with(const std::string& points, const std::string& extra = "") {
  return R"({"kernel":"nosplit","shape":{"head_dim":256,"kv_heads":2,"dtype":"bf16"},"points":)" + points +
         "}" + extra;
}
const std::string kGoodPoints = R"([{"context":1024,"time_us":100},{"context":2048,"time_us":150}])";

std::vector<Case> hostile_calibration_cases() {
  const std::vector<std::string> cliff = {"cliff", "--scenario", "vllm-50264", "--calibration",
                                          "@/sweep.json"};
  auto c = [&](std::string name, std::string text, std::string expected) {
    return Case{std::move(name), cliff, {{"sweep.json", std::move(text)}}, std::move(expected)};
  };
  const std::string splitkv_1e300 =
      R"({"sweeps":[)" + calibration_with(kGoodPoints) +
      R"(,{"kernel":"splitkv","points":[{"context":4096,"time_us":10,"gbps":1e300}]}]})";
  return {
      // 30,000 nested arrays crashed the recursive walk (stack overflow): now the
      // parser stops at depth 65 of the 64 allowed (kvsight/input_file.hpp).
      c("30000 nested arrays", std::string(30000, '[') + std::string(30000, ']'), "nests deeper than 64"),
      c("nested objects in an unused key",
        calibration_with(kGoodPoints)
            .insert(1,
                    [] {
                      std::string deep;
                      for (int i = 0; i < 20000; ++i) deep += "{\"a\":";
                      return "\"unused\":" + deep + "1" + std::string(20000, '}') + ",";
                    }()),
        "nests deeper than 64"),
      c("NUL then garbage after the document", calibration_with(kGoodPoints, std::string("\0garbage", 8)),
        "NUL byte"),
      c("trailing garbage", calibration_with(kGoodPoints, " {}"), "--calibration"),
      c("negative time",
        calibration_with(R"([{"context":1024,"time_us":-5},{"context":2048,"time_us":150}])"),
        "points[0].time_us is -5"),
      c("zero time", calibration_with(R"([{"context":1024,"time_us":0},{"context":2048,"time_us":150}])"),
        "points[0].time_us is 0"),
      c("time missing (was read as 0)",
        calibration_with(R"([{"context":1024},{"context":2048,"time_us":150}])"),
        "points[0].time_us is missing"),
      c("context missing (was read as 0)",
        calibration_with(R"([{"context":1024,"time_us":100},{"time_us":150}])"),
        "points[1].context is missing"),
      c("fractional context",
        calibration_with(R"([{"context":1024.5,"time_us":100},{"context":2048,"time_us":150}])"),
        "points[0].context is 1024.5"),
      c("context beyond the probes' 2^24",
        calibration_with(R"([{"context":1024,"time_us":100},{"context":1e12,"time_us":150}])"),
        "points[1].context"),
      c("time 1e300 us",
        calibration_with(R"([{"context":1024,"time_us":100},{"context":2048,"time_us":1e300}])"),
        "points[1].time_us"),
      c("all points at one context",
        calibration_with(R"([{"context":1024,"time_us":100},{"context":1024,"time_us":150}])"),
        "at least two different contexts"),
      c("splitkv gbps 1e300", splitkv_1e300, "$.sweeps[1].points[0].gbps is 1e+300"),
      c("head_dim missing", R"({"kernel":"nosplit","shape":{"kv_heads":2},"points":)" + kGoodPoints + "}",
        "shape.head_dim is missing"),
      c("dtype unknown",
        R"({"kernel":"nosplit","shape":{"head_dim":256,"kv_heads":2,"dtype":"fp7"},"points":)" + kGoodPoints +
            "}",
        "shape.dtype is 'fp7'; allowed: bf16, fp16, fp32"),
  };
}

TEST(BadInput, HostileCalibrationFiles) {
  for (const auto& c : hostile_calibration_cases()) run_case(c);
}

TEST(BadInput, HostileCalibrationControlIsAccepted) {
  // The base every case above breaks is itself accepted: the cases fail for the
  // part they break. slope = (150 - 100) / (2048 - 1024) us/token; head_dim 256
  // bf16 reads (256 + 256) x 2 = 1024 B per token per program, so the rate is
  // 1024 B / (50/1024 us) = 20,971.52 B/us = 20.972 GB/s.
  const std::string dir = temp_dir("calibration-control");
  write_file(dir + "/sweep.json", calibration_with(kGoodPoints));
  const auto run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--calibration", dir + "/sweep.json",
                                "--format", "json", "--output", dir + "/out.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::ifstream in(dir + "/out.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_NEAR(j.at("calibration").at("per_program_gbps").get<double>(), 1024.0 / (50.0 / 1024.0) / 1000.0,
              1e-9);
}

TEST(BadInput, CalibrationThatIsAFifoIsRefusedWithoutBlocking) {
  // Opening a FIFO with no writer blocked forever (issue #14 item 5).
  const std::string dir = temp_dir("calibration-fifo");
  ASSERT_EQ(::mkfifo((dir + "/sweep.json").c_str(), 0600), 0);
  run_case({"calibration FIFO",
            {"cliff", "--scenario", "vllm-50264", "--calibration", dir + "/sweep.json"},
            {},
            "a FIFO"});
}

TEST(BadInput, BaselineMsMustBeFiniteAndPositive) {
  // nan and inf were taken as numbers, -5 was silently ignored (the estimate used).
  for (const char* value : {"nan", "inf", "-inf", "-5", "0", "1e999", "", "5ms"}) {
    run_case({std::string("--baseline-ms ") + value,
              {"cliff", "--scenario", "vllm-50264", "--baseline-ms", value},
              {},
              "--baseline-ms"});
  }
  // The control: a finite positive time is used as given.
  const std::string dir = temp_dir("baseline-control");
  const auto run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--baseline-ms", "79.5", "--format",
                                "json", "--output", dir + "/out.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::ifstream in(dir + "/out.json");
  EXPECT_EQ(nlohmann::json::parse(in).at("baseline_ms").get<double>(), 79.5);
}

TEST(BadInput, OutputThatIsASymlinkOrDeviceIsRefusedAndUnchanged) {
  const std::string dir = temp_dir("hostile-output");
  write_file(dir + "/victim", "precious");
  fs::create_symlink(dir + "/victim", dir + "/out.json");
  for (const char* flag : {"--output", "--plot"}) {
    SCOPED_TRACE(flag);
    std::vector<std::string> args = {"cliff", "--scenario", "vllm-50264", flag, dir + "/out.json"};
    const auto run = run_kvsight(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_NE(run.err.find(flag), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("symlink"), std::string::npos) << run.err;
    EXPECT_EQ(run.out, "");
    std::ifstream victim(dir + "/victim");
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(victim), {}), "precious");
    EXPECT_TRUE(fs::is_symlink(dir + "/out.json"));
  }
  const auto device = run_kvsight({"probe", "sweep", "--backend", "cpu", "--json-output", "/dev/null"});
  EXPECT_EQ(device.exit_code, 2) << device.err;
  EXPECT_NE(device.err.find("--json-output"), std::string::npos) << device.err;
  EXPECT_NE(device.err.find("character device"), std::string::npos) << device.err;
}

}  // namespace
}  // namespace kvsight
