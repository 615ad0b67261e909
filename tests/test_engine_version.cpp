// Issue #9: one --engine-version grammar (kvsight/engine_version.hpp) for every engine,
// the gates and every command; and each engine's own option struct, set through the one
// field-to-member map (kvsight/engine_options.hpp) and read only by its engine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/engine_version.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gates.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

using test::run_kvsight;

const std::vector<std::string> kVllmKnown = {"0.23.1", "0.33.0"};

EngineVersion dotted(const std::string& text) {
  return parse_engine_version(text, VersionForm::dotted, "vLLM", kVllmKnown);
}
EngineVersion build(const std::string& text) {
  return parse_engine_version(text, VersionForm::build, "llama.cpp", {"b6000"});
}

// ---- the grammar

TEST(EngineVersionGrammar, DottedNumbersAndTags) {
  const EngineVersion v = dotted("0.23.1");
  EXPECT_EQ(v.major, 0);
  EXPECT_EQ(v.minor, 23);
  EXPECT_EQ(v.patch, 1);
  EXPECT_EQ(v.ordinal(), 23001u);  // 0 x 10^6 + 23 x 10^3 + 1
  EXPECT_EQ(v.text, "0.23.1");
  EXPECT_EQ(dotted("v0.9").ordinal(), 9000u);     // patch 0: 9 x 10^3
  EXPECT_EQ(dotted("V1.1").ordinal(), 1001000u);  // 1 x 10^6 + 1 x 10^3
  // PEP 440 dev, pre, post and local parts: the numbers are the version.
  EXPECT_EQ(dotted("0.27.1.dev5").ordinal(), 27001u);
  EXPECT_EQ(dotted("1.1.0rc2").ordinal(), 1001000u);
  EXPECT_EQ(dotted("0.6.4.post1").ordinal(), 6004u);
  EXPECT_EQ(dotted("0.10.2+rocm").ordinal(), 10002u);
  EXPECT_EQ(dotted("1.0.0a1").ordinal(), 1000000u);
  EXPECT_EQ(dotted("0.27.1.dev5").text, "0.27.1.dev5");  // reported as given
  EXPECT_TRUE(dotted("0.28.0").at_least(0, 28));
  EXPECT_FALSE(dotted("0.27.9").at_least(0, 28));
}

TEST(EngineVersionGrammar, DottedRefusesWhatIsNotAVersion) {
  for (const char* bad :
       {"banana", "", "1", "0.", ".9", "0.9x", "0.9banana", "v", "b6000", "0..9", "1234567.0"}) {
    try {
      dotted(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "--engine-version") << bad;
      const std::string what = e.what();
      EXPECT_NE(what.find("MAJOR.MINOR[.PATCH]"), std::string::npos) << what;
      EXPECT_NE(what.find("vLLM"), std::string::npos) << what;
      EXPECT_NE(what.find("known: 0.23.1, 0.33.0"), std::string::npos) << what;
    }
  }
}

TEST(EngineVersionGrammar, LlamaCppBuilds) {
  EXPECT_EQ(build("b6000").build, 6000);
  EXPECT_EQ(build("b6000").ordinal(), 6000u);
  EXPECT_EQ(build("B5200").build, 5200);
  EXPECT_EQ(build("7900").build, 7900);  // the bare number llama-server --version prints
  for (const char* bad : {"0.9", "latest", "b", "b60a0", "b12345678", "b6000-cuda", ""}) {
    try {
      build(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "--engine-version");
      EXPECT_NE(std::string(e.what()).find("bNNNN"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("known: b6000"), std::string::npos) << e.what();
    }
  }
}

TEST(EngineVersionGrammar, EitherFormWhenTheEngineIsNotKnown) {
  EXPECT_EQ(read_engine_version("b6000").form, VersionForm::build);
  EXPECT_EQ(read_engine_version("0.9.2").form, VersionForm::dotted);
  // The gates' comparable number is the same ordinal.
  EXPECT_EQ(parse_engine_version("b5000"), 5000u);
  EXPECT_EQ(parse_engine_version("0.9.2"), 9002u);
  EXPECT_THROW(read_engine_version("x.y"), InputError);
}

TEST(EngineVersionGrammar, EachEngineTakesItsForm) {
  EngineOptions o;
  o.engine_version = "0.9";
  EXPECT_EQ(make_engine("vllm")->version(o).ordinal(), 9000u);
  EXPECT_THROW(make_engine("llamacpp")->version(o), InputError);
  o.engine_version = "b6000";
  EXPECT_EQ(make_engine("llamacpp")->version(o).build, 6000);
  EXPECT_THROW(make_engine("sglang")->version(o), InputError);
  EXPECT_THROW(make_engine("exllamav2")->version(o), InputError);
  o.engine_version = "";  // the engine's default (llama.cpp b11312 from issue #13)
  EXPECT_EQ(make_engine("llamacpp")->version(o).text, "b11312");
  EXPECT_EQ(make_engine("sglang")->version(o).text, "0.5.23");
  EXPECT_EQ(make_engine("trtllm")->version(o).text, "1.1.0");
}

// Every command refuses a bad version with exit 2, naming --engine-version and the form.
TEST(EngineVersionGrammar, CommandsExitTwoNamingTheFlagAndForm) {
  const std::vector<std::vector<std::string>> cases = {
      {"plan", "--model", "llama-3.1-8b", "--engine-version", "banana"},
      {"gates", "--model", "llama-3.1-8b", "--gpu", "h200", "--engine-version", "banana"},
      // A single number: plan refused it before, the gates took it as 1.0.0.
      {"gates", "--model", "llama-3.1-8b", "--gpu", "h200", "--engine-version", "1"},
      {"plan", "--model", "llama-3.1-8b", "--engine", "exllamav2", "--engine-version", "banana"},
  };
  for (const auto& args : cases) {
    const auto run = run_kvsight(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_NE(run.err.find("--engine-version"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("MAJOR.MINOR[.PATCH]"), std::string::npos) << run.err;
  }
  // llama.cpp: a dotted version is refused by plan and gates alike (the gates read it as 0.9.0).
  for (const std::string command : {"plan", "gates"}) {
    const auto run = run_kvsight({command, "--model", "llama-3.1-8b", "--gpu", "h200", "--engine",
                                  "llama.cpp", "--engine-version", "0.9"});
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_NE(run.err.find("bNNNN"), std::string::npos) << run.err;
  }
}

TEST(EngineVersionGrammar, TaggedVersionsPlanAsTheirRelease) {
  const auto run =
      run_kvsight({"plan", "--model", "llama-3.1-8b", "--engine-version", "0.27.1.dev5", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out).at("engine").at("version"), "0.27.1.dev5");
}

// ---- each engine's own options

TEST(EngineOptionStructs, FieldsLandInTheirEnginesStruct) {
  EngineOptions o;
  set_option(o, OptionField::gpu_memory_utilization, "0.5");
  set_option(o, OptionField::max_num_seqs, "64");
  set_option(o, OptionField::offline, "");
  set_option(o, OptionField::mem_fraction_static, "0.8");
  set_option(o, OptionField::free_gpu_memory_fraction, "0.7");
  set_option(o, OptionField::parallel, "4");
  set_option(o, OptionField::cache_type_v, "q8_0");
  set_option(o, OptionField::flash_attn, "off");
  EXPECT_EQ(o.vllm.gpu_memory_utilization.value_or(-1.0), 0.5);
  EXPECT_EQ(o.vllm.max_num_seqs.value_or(0u), 64u);
  EXPECT_FALSE(o.vllm.api_server);
  EXPECT_EQ(o.sglang.mem_fraction_static.value_or(-1.0), 0.8);
  EXPECT_EQ(o.trtllm.free_gpu_memory_fraction.value_or(-1.0), 0.7);
  EXPECT_EQ(o.llamacpp.parallel, 4u);
  EXPECT_EQ(o.llamacpp.cache_type_v, "q8_0");
  EXPECT_EQ(o.llamacpp.flash_attn, "off");
  // A field two engines read goes to both structs: --ctx-size is llama.cpp's n_ctx and
  // ExLlama's cache size; --cache-type-k llama.cpp's K type and ExLlama's one mode.
  set_option(o, OptionField::ctx_size, "4K");  // 4 x 1024
  EXPECT_EQ(o.llamacpp.ctx_size.value_or(0u), 4096u);
  EXPECT_EQ(o.exllama.cache_size.value_or(0u), 4096u);
  set_option(o, OptionField::cache_type_k, "q8");
  EXPECT_EQ(o.llamacpp.cache_type_k, "q8");
  EXPECT_EQ(o.exllama.cache_mode, "q8");
  // The shared fields stay beside the structs.
  set_option(o, OptionField::tensor_parallel_size, "2");
  set_option(o, OptionField::max_model_len, "8K");
  EXPECT_EQ(o.tp, 2u);
  EXPECT_EQ(o.max_model_len.value_or(0), 8192);
}

TEST(EngineOptionStructs, EachEngineReadsOnlyItsOwn) {
  // ExLlama's cache is the model's max_seq_len (131,072 = 512 pages of 256) unless its own
  // cache_size is set; llama.cpp's n_ctx does not size it.
  EngineOptions o;
  o.gpu_memory_bytes = 80ull << 30;
  o.llamacpp.ctx_size = 1000;
  const auto exllama = make_engine("exllamav2");
  EXPECT_EQ(exllama->plan(llama31_8b(), nullptr, o).capacity->kv_tokens, 131072u);
  o.exllama.cache_size = 1000;  // rounded up to 4 pages: 4 x 256 = 1,024
  EXPECT_EQ(exllama->plan(llama31_8b(), nullptr, o).capacity->kv_tokens, 1024u);
  // llama.cpp's K cache type is checked under its field name; vLLM does not read it.
  o.llamacpp.cache_type_k = "fp8";
  try {
    make_engine("llamacpp")->check_options(o);
    ADD_FAILURE() << "fp8 accepted as a llama.cpp cache type";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "cache_type_k");
  }
  EXPECT_NO_THROW(make_engine("vllm")->check_options(o));
  o.exllama.cache_mode = "q5";  // exllamav2 modes: fp16, q8, q6, q4
  try {
    exllama->check_options(o);
    ADD_FAILURE() << "q5 accepted as an exllamav2 cache mode";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "cache_type_k");
  }
}

}  // namespace
}  // namespace kvsight
