// Safetensors headers validated as safetensors' own loader does, and the set of
// shards a model directory holds: the index's weight_map, a missing shard named,
// a consolidated copy beside the shards not counted.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "kvsight/error.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

namespace fs = std::filesystem;

std::string safetensors(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x01');
}

// One BF16 tensor of `elements`: 2 x elements bytes.
std::string one_tensor(const std::string& name, std::uint64_t elements) {
  return safetensors(R"({")" + name + R"(":{"dtype":"BF16","shape":[)" + std::to_string(elements) +
                         R"(],"data_offsets":[0,)" + std::to_string(2 * elements) + "]}}",
                     2 * elements);
}

void expect_refused(const std::string& file, const std::string& needle) {
  try {
    parse_safetensors_header(file, file.size(), "f.safetensors");
    ADD_FAILURE() << "accepted; expected an error with '" << needle << "'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SafetensorsHeader, OverlappingTensorsAreRefused) {
  // a [0, 16) and b [8, 24): b begins inside a.
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                             R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                             24),
                 "must not overlap");
  // Two tensors on the same bytes (the 3000 B "exact" from a 1,183-byte file).
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                             R"("b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                             16),
                 "must not overlap");
}

TEST(SafetensorsHeader, DtypeTimesShapeMustEqualTheSpan) {
  // F32 [256] = 1,024 B, not 4.
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[256],"data_offsets":[0,4]}})", 4), "must agree");
  // An unknown dtype lists the allowed ones.
  expect_refused(safetensors(R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,2]}})", 2),
                 "allowed: BOOL");
  // F4 packs two per byte: [3] = 12 bits is no whole byte count.
  expect_refused(safetensors(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2), "must agree");
  // F4 [4] = 16 bits = 2 B is fine.
  const std::string f4 = safetensors(R"({"a":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}})", 2);
  EXPECT_EQ(parse_safetensors_header(f4, f4.size(), "f4").total_bytes, 2u);
}

TEST(SafetensorsHeader, OutsideTheFileGapsAndNoTensorsAreRefused) {
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
                 "outside the file");
  // A gap: a [0, 16), b [32, 48) in 48 bytes.
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                             R"("b":{"dtype":"F32","shape":[4],"data_offsets":[32,48]}})",
                             48),
                 "contiguous");
  // Data left over after the last tensor (safetensors: MetadataIncompleteBuffer).
  expect_refused(safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 20),
                 "cover 16 of");
  expect_refused(safetensors(R"({"__metadata__":{"format":"pt"}})", 0), "no tensors");
  // Deep nesting is refused by depth, not by a crash.
  expect_refused(safetensors(std::string(100000, '[') + std::string(100000, ']'), 0), "nests deeper");
}

TEST(SafetensorsDir, IndexMissingShardIsNamed) {
  const std::string dir = test::temp_dir("st-missing");
  test::write_file(dir + "/model-00001-of-00002.safetensors", one_tensor("a", 500));
  test::write_file(dir + "/model.safetensors.index.json",
                   R"({"metadata":{"total_size":2000},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
                   R"("b":"model-00002-of-00002.safetensors"}})");
  try {
    safetensors_in_dir(dir);
    FAIL() << "a missing shard must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsDir, ConsolidatedCopyBesideTheShardsIsNotCounted) {
  // Shards of 500 and 300 BF16 elements = 1,000 + 600 B; consolidated.safetensors
  // holds both again (1,600 B) and must not be counted.
  const std::string dir = test::temp_dir("st-consolidated");
  test::write_file(dir + "/model-00001-of-00002.safetensors", one_tensor("a", 500));
  test::write_file(dir + "/model-00002-of-00002.safetensors", one_tensor("b", 300));
  test::write_file(dir + "/consolidated.safetensors", one_tensor("ab", 800));
  test::write_file(
      dir + "/model.safetensors.index.json",
      R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  auto set = safetensors_in_dir(dir);
  ASSERT_TRUE(set);
  EXPECT_EQ(set->bytes, 1000u + 600u);
  ASSERT_EQ(set->skipped.size(), 1u);
  EXPECT_EQ(set->skipped[0], "consolidated.safetensors");
  // Without the index the complete shard set is still chosen over the copy.
  fs::remove(dir + "/model.safetensors.index.json");
  set = safetensors_in_dir(dir);
  ASSERT_TRUE(set);
  EXPECT_EQ(set->bytes, 1600u);
  EXPECT_EQ(set->skipped.size(), 1u);
  // And a missing shard of the set is named even without the index.
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  try {
    safetensors_in_dir(dir);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsDir, IndexAndShardThatDisagreeAreRefused) {
  const std::string dir = test::temp_dir("st-disagree");
  test::write_file(dir + "/model-00001-of-00001.safetensors", one_tensor("a", 10));
  test::write_file(dir + "/model.safetensors.index.json",
                   R"({"weight_map":{"zz":"model-00001-of-00001.safetensors"}})");
  EXPECT_THROW(safetensors_in_dir(dir), InputError);
  // A shard name that leaves the directory.
  test::write_file(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"../x.safetensors"}})");
  EXPECT_THROW(safetensors_in_dir(dir), InputError);
}

// ---------------------------------------------------------------- hostile shard sets (issue #25 class 4)

std::string refusal_of(const std::string& dir) {
  try {
    safetensors_in_dir(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(SafetensorsDir, AHeaderOverTheCapIsRefusedFromItsLength) {
  // A 100,000,000-byte header (safetensors' own MAX_HEADER_SIZE) in a sparse file of that size:
  // refused from the 8-byte length, before any allocation, naming the file and the 32 MiB cap.
  const std::string dir = test::temp_dir("st-long-header");
  const std::string path = dir + "/model.safetensors";
  std::string length(8, '\0');
  const std::uint64_t header_len = 100000000;
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((header_len >> (8 * i)) & 0xff);
  test::write_file(path, length);
  fs::resize_file(path, 8 + header_len);
  const std::string e = refusal_of(dir);
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("100000000 exceeds kvsight's 33554432-byte limit"), std::string::npos) << e;
}

TEST(SafetensorsDir, TheSameFileOrTensorTwiceIsRefusedNamingBoth) {
  const std::string index =
      R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
  // A symlinked shard: model-00002 is model-00001 under another name.
  std::string dir = test::temp_dir("st-symlink");
  test::write_file(dir + "/model-00001-of-00002.safetensors", one_tensor("a", 10));
  fs::create_symlink(dir + "/model-00001-of-00002.safetensors", dir + "/model-00002-of-00002.safetensors");
  test::write_file(dir + "/model.safetensors.index.json", index);
  std::string e = refusal_of(dir);
  EXPECT_NE(e.find(dir + "/model-00002-of-00002.safetensors: is the same file as '" + dir +
                   "/model-00001-of-00002.safetensors'"),
            std::string::npos)
      << e;
  // A hard link, and no index: the shard set's own names.
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  fs::remove(dir + "/model.safetensors.index.json");
  fs::create_hard_link(dir + "/model-00001-of-00002.safetensors", dir + "/model-00002-of-00002.safetensors");
  e = refusal_of(dir);
  EXPECT_NE(e.find("is the same file as"), std::string::npos) << e;
  // Two index names equal up to a NUL ("...safetensors\u0000x" opens ...safetensors).
  dir = test::temp_dir("st-nul");
  test::write_file(dir + "/model-00001-of-00001.safetensors", one_tensor("a", 10));
  test::write_file(
      dir + "/model.safetensors.index.json",
      R"({"weight_map":{"a":"model-00001-of-00001.safetensors","b":"model-00001-of-00001.safetensors\u0000x"}})");
  e = refusal_of(dir);
  EXPECT_NE(e.find("weight_map['b']"), std::string::npos) << e;
  // Two shards holding the same tensor: named with both files.
  dir = test::temp_dir("st-same-tensor");
  test::write_file(dir + "/model-00001-of-00002.safetensors", one_tensor("a", 10));
  test::write_file(dir + "/model-00002-of-00002.safetensors", one_tensor("a", 20));
  e = refusal_of(dir);
  EXPECT_NE(e.find("holds tensor 'a', which '" + dir + "/model-00001-of-00002.safetensors' holds too"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("model-00002-of-00002.safetensors"), std::string::npos) << e;
  // A set of 0 shards (NAME-0000i-of-00000) is not 0 B of exact weights.
  dir = test::temp_dir("st-zero-shards");
  test::write_file(dir + "/model-00001-of-00000.safetensors", one_tensor("a", 10));
  test::write_file(dir + "/model-00002-of-00000.safetensors", one_tensor("b", 10));
  e = refusal_of(dir);
  EXPECT_NE(e.find("a set of 0 shards"), std::string::npos) << e;
}

const char* kConfig = R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
  "num_key_value_heads":2,"vocab_size":100,"intermediate_size":128,"torch_dtype":"bfloat16"})";

TEST(SafetensorsCli, MissingShardExits2AndConsolidatedIsSkipped) {
  const std::string dir = test::temp_dir("st-cli");
  test::write_file(dir + "/config.json", kConfig);
  test::write_file(dir + "/model-00001-of-00002.safetensors", one_tensor("a", 500));
  test::write_file(dir + "/model-00002-of-00002.safetensors", one_tensor("b", 300));
  test::write_file(dir + "/consolidated.safetensors", one_tensor("ab", 800));
  test::write_file(
      dir + "/model.safetensors.index.json",
      R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  auto run = test::run_kvsight({"plan", "--model", dir, "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["weights"]["bytes"].get<std::uint64_t>(), 1000u + 600u);  // not + the copy's 1,600
  EXPECT_TRUE(j["weights"]["exact"].get<bool>());
  EXPECT_NE(run.out.find("not counted"), std::string::npos);
  EXPECT_NE(run.out.find("consolidated.safetensors"), std::string::npos);
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  run = test::run_kvsight({"plan", "--model", dir});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("model-00002-of-00002.safetensors"), std::string::npos) << run.err;
}

TEST(SafetensorsCli, AShardAsModelIsRefusedAtOnceByItsBytes) {
  const std::string dir = test::temp_dir("st-as-model");
  test::write_file(dir + "/model.safetensors", one_tensor("a", 10));
  const auto run = test::run_kvsight({"plan", "--model", dir + "/model.safetensors"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("safetensors weights file"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace kvsight
