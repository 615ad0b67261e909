// The model-family table (planner/src/model/families.cpp, issue #26 item 3): the one place
// that reads model_type. Its rows are unambiguous, a "x*" row's facts hold for the names it
// also matches, and no other source compares a model_type.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "../planner/src/model/families.hpp"
#include "kvsight/model.hpp"

namespace kvsight {
namespace {

using families::Family;

// "x*" -> "x"; "" for an exact name.
std::string_view prefix_of(std::string_view name) {
  return !name.empty() && name.back() == '*' ? name.substr(0, name.size() - 1) : std::string_view{};
}

TEST(ModelFamilies, NoNameIsInTwoRows) {
  std::map<std::string, int> hf, gguf;
  for (const Family& family : families::all_families()) {
    for (std::string_view name : family.hf) ++hf[std::string(name)];
    for (std::string_view name : family.gguf) ++gguf[std::string(name)];
  }
  for (const auto& [name, rows] : hf) EXPECT_EQ(rows, 1) << "HF model_type " << name;
  for (const auto& [name, rows] : gguf) EXPECT_EQ(rows, 1) << "GGUF architecture " << name;
}

// An exact name wins over an "x*" row that also matches it, so its row repeats that row's
// facts: gemma3_text is a Gemma 3 as "gemma3*" says (sandwich norms, q/k norms), qwen3_next a
// Qwen3 (q/k norms), llama4_text a Llama 4 (one shared expert).
TEST(ModelFamilies, AnExactRowRepeatsThePrefixRowsThatMatchItsNames) {
  for (const Family& prefixed : families::all_families()) {
    for (std::string_view pattern : prefixed.hf) {
      const std::string_view prefix = prefix_of(pattern);
      if (prefix.empty()) continue;
      for (const Family& exact : families::all_families()) {
        for (std::string_view name : exact.hf) {
          if (!prefix_of(name).empty() || name.substr(0, prefix.size()) != prefix) continue;
          EXPECT_TRUE(exact.traits == prefixed.traits) << name << " against " << pattern;
          EXPECT_TRUE(!prefixed.qk_norm || exact.qk_norm) << name << " against " << pattern;
          EXPECT_TRUE(prefixed.implicit_shared_experts == 0 ||
                      exact.implicit_shared_experts == prefixed.implicit_shared_experts)
              << name << " against " << pattern;
        }
      }
    }
  }
}

TEST(ModelFamilies, LookupIsExactThenTheLongestPrefixThenDefaults) {
  // qwen3 (exact) has transformers' Qwen3Config default of 32768 positions; qwen3_moe
  // only the "qwen3*" row's q/k norms, no class defaults.
  EXPECT_EQ(families::hf_family("qwen3").class_defaults.size(), 1u);
  EXPECT_TRUE(families::hf_family("qwen3_moe").qk_norm);
  EXPECT_TRUE(families::hf_family("qwen3_moe").class_defaults.empty());
  // model_type is compared as written (transformers' CONFIG_MAPPING keys are exact).
  EXPECT_FALSE(families::hf_family("BLOOM").traits.alibi);
  EXPECT_TRUE(families::hf_family("bloom").traits.alibi);
  // The same family by either reader's name.
  EXPECT_EQ(&families::hf_family("gpt_oss"), &families::gguf_family("gpt-oss"));
  EXPECT_EQ(&families::hf_family("falcon_h1"), &families::gguf_family("falcon-h1"));
  // Unknown: every default, no trait.
  const Family& unknown = families::hf_family("no_such_family");
  EXPECT_TRUE(unknown.traits == FamilyTraits{});
  EXPECT_EQ(unknown.layers, families::Layers::from_files);
  // vLLM's Gemma 3 length rule is a substring test of the name (vllm/config/model.py
  // _get_and_verify_max_len: "gemma3" not in hf_config.model_type).
  EXPECT_TRUE(
      families::traits_of(families::hf_family("gemma3n_text"), "gemma3n_text").length_includes_rope_scaling);
  EXPECT_FALSE(families::traits_of(families::hf_family("gemma2"), "gemma2").length_includes_rope_scaling);
}

// The readers fill ModelSpec::traits from the table; everything else reads the traits.
TEST(ModelFamilies, TraitsReachTheModelSpec) {
  const ModelSpec gpt_oss = resolve_model("gpt-oss-20b");
  EXPECT_TRUE(gpt_oss.traits.attention_sinks);
  EXPECT_FALSE(gpt_oss.traits.alibi);
  const ModelSpec gemma3 = resolve_model("gemma-3-27b");
  EXPECT_TRUE(gemma3.traits.sandwich_norms);
  EXPECT_TRUE(gemma3.traits.length_includes_rope_scaling);
  const ModelSpec llama = resolve_model("llama-3.1-8b");
  EXPECT_TRUE(llama.traits == FamilyTraits{});
}

// A comparison of a model_type (or, in the readers, of a GGUF architecture) with anything:
// ==, !=, or a search or prefix test of the string.
const std::regex kModelTypeBranch(
    R"re(\bmodel_type\s*(==|!=)|(==|!=)\s*[\w.>\-]*\bmodel_type\b|\bmodel_type\s*\.\s*(r?find|compare|starts_with|ends_with|substr)\s*\(|count\([\w.>\-]*\bmodel_type\b)re");
const std::regex kArchitectureBranch(
    R"re(\b(arch|architecture)\s*(==|!=)|(==|!=)\s*[\w.>\-]*\b(arch|architecture)\b|\b(arch|architecture)\s*\.\s*(r?find|compare|starts_with|ends_with)\s*\()re");

TEST(ModelFamilies, TheBranchPatternsFindBranches) {
  // The patterns below would miss nothing of what the table replaced.
  for (const char* line : {R"(if (m.model_type == "nemotron_h"))", R"(return model_type != "x";)",
                           R"(spec.model_type.rfind("qwen3", 0) == 0)", R"(kTied.count(spec.model_type) > 0)",
                           R"(model.model_type.find("gemma3") != npos)", R"("gpt_oss" == model_type)"})
    EXPECT_TRUE(std::regex_search(std::string(line), kModelTypeBranch)) << line;
  for (const char* line : {R"(if (arch == "qwen3next"))", R"(arch == "falcon-h1" && spec.recurrent)"})
    EXPECT_TRUE(std::regex_search(std::string(line), kArchitectureBranch)) << line;
  EXPECT_FALSE(std::regex_search(std::string(R"(j["model_type"] = m.model_type;)"), kModelTypeBranch));
}

// "no code outside the family table reads model_type": what a family does differently is a
// trait on ModelSpec (kvsight/model_spec.hpp FamilyTraits) or a column of the table.
TEST(ModelFamilies, NoModelTypeBranchOutsideTheFamilyTable) {
  const std::filesystem::path root = KVSIGHT_SOURCE_DIR;
  const std::filesystem::path table = root / "planner/src/model/families.cpp";
  std::vector<std::string> found;
  for (const char* dir : {"planner", "app", "cli", "probes"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / dir)) {
      const std::string ext = entry.path().extension().string();
      if ((ext != ".cpp" && ext != ".hpp") || entry.path() == table) continue;
      const bool reader = entry.path().parent_path() == root / "planner/src/model";
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        if (std::regex_search(line, kModelTypeBranch) ||
            (reader && std::regex_search(line, kArchitectureBranch)))
          found.push_back(entry.path().lexically_relative(root).string() + ":" + std::to_string(number) +
                          ": " + line);
      }
    }
  }
  std::string text;
  for (const std::string& f : found) text += f + "\n";
  EXPECT_TRUE(found.empty()) << text;
}

}  // namespace
}  // namespace kvsight
