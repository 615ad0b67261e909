// Bounded reads of user-named files and depth-limited JSON (kvsight/input_file.hpp).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"

namespace fs = std::filesystem;
using kvsight::InputError;

namespace {

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("kvsight_input_" + std::to_string(::getpid()) + "_" + name);
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ParseJsonInput, AcceptsTheDepthLimitAndRefusesOneMore) {
  // 3 nested arrays are depth 3: allowed with a limit of 3, refused with 2.
  EXPECT_NO_THROW(kvsight::parse_json_input("[[[1]]]", "--calibration", 3));
  const std::string message = message_of([] { kvsight::parse_json_input("[[[1]]]", "--calibration", 2); });
  EXPECT_NE(message.find("--calibration"), std::string::npos) << message;
  EXPECT_NE(message.find("deeper than 2"), std::string::npos) << message;
}

TEST(ParseJsonInput, FiftyThousandNestedArraysAreRefusedNotACrash) {
  // The hostile-input case of issue #14: 100 KB of brackets used to overflow the stack.
  const std::string message =
      message_of([] { kvsight::parse_json_input(nested_arrays(50000), "config.json"); });
  EXPECT_NE(message.find("config.json"), std::string::npos) << message;
  EXPECT_NE(message.find("deeper than 64"), std::string::npos) << message;
}

TEST(ParseJsonInput, NestedObjectsInAnUnusedKeyAreRefusedToo) {
  std::string deep;
  for (int i = 0; i < 1000; ++i) deep += "{\"a\":";
  deep += "1" + std::string(1000, '}');
  const std::string text = "{\"hidden_size\": 64, \"unused\": " + deep + "}";
  EXPECT_NE(message_of([&] { kvsight::parse_json_input(text, "config.json"); }).find("deeper"),
            std::string::npos);
}

// A flat object of 200,000 objects (a safetensors header of 200,000 tensors, ~14 MB) parses in
// time linear in its size: the callback parser used for the depth limit before searched the
// whole parent at the end of each member (quadratic: minutes). CPU time, not wall: the suite's
// machine is shared. Brackets inside strings do not count toward the depth.
TEST(ParseJsonInput, AWideObjectParsesInLinearTime) {
  std::string text = "{";
  for (int i = 0; i < 200000; ++i)
    text += (i ? ",\"t" : "\"t") + std::to_string(i) +
            "\":{\"dtype\":\"BF16\",\"shape\":[8],\"data_offsets\":[0,16]}";
  text += "}";
  const std::clock_t start = std::clock();
  EXPECT_EQ(kvsight::parse_json_input(text, "header").size(), 200000u);
  EXPECT_LT(static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC, 5.0);
  EXPECT_NO_THROW(kvsight::parse_json_input("{\"a\":\"" + std::string(100, '[') + "\\\"]\"}", "f", 2));
}

TEST(ParseJsonInput, TrailingNulAndGarbageAreRefusedWithTheOffset) {
  // One literal with its length (the s suffix keeps the NUL): GCC 12 reports a false
  // -Warray-bounds on the inlined string + of a char and a short literal.
  using namespace std::string_literals;
  const std::string text = "{\"a\": 1}\0garbage"s;
  const std::string message = message_of([&] { kvsight::parse_json_input(text, "config.json"); });
  // The document is 8 bytes; the NUL is byte 9 (1-based, nlohmann's convention).
  EXPECT_NE(message.find("at byte 9"), std::string::npos) << message;
}

TEST(ReadInputFile, ReadsARegularFileAndRefusesOneOverTheLimit) {
  const fs::path path = temp_path("small.json");
  write_file(path, "{\"a\": 1}");  // 8 bytes
  EXPECT_EQ(kvsight::read_input_file(path, "--calibration", 8), "{\"a\": 1}");
  const std::string message = message_of([&] { kvsight::read_input_file(path, "--calibration", 7); });
  EXPECT_NE(message.find("is 8 bytes; allowed: at most 7"), std::string::npos) << message;
  fs::remove(path);
}

TEST(ReadInputFile, AFifoIsRefusedAtOnceNotWaitedOn) {
  const fs::path path = temp_path("fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const std::string message = message_of([&] { kvsight::read_input_file(path, "--calibration", 1 << 20); });
  EXPECT_NE(message.find("FIFO"), std::string::npos) << message;
  fs::remove(path);
}

TEST(ReadInputFile, DevicesAndDirectoriesAreRefusedByKind) {
  EXPECT_NE(message_of([] {
              kvsight::read_input_file("/dev/zero", "--model", 1 << 20);
            }).find("a character device"),
            std::string::npos);
  EXPECT_NE(message_of([] { kvsight::read_input_file("/", "--model", 1 << 20); }).find("a directory"),
            std::string::npos);
}

TEST(ReadFileRange, ReadsOnlyTheRangeAndRefusesAShortFile) {
  const fs::path path = temp_path("range.bin");
  write_file(path, "0123456789");  // 10 bytes
  EXPECT_EQ(kvsight::read_file_range(path, "--model", 2, 3), "234");
  EXPECT_EQ(kvsight::regular_file_size(path, "--model"), 10u);
  // 8 + 4 = 12 > 10 bytes.
  const std::string message = message_of([&] { kvsight::read_file_range(path, "--model", 8, 4); });
  EXPECT_NE(message.find("is 10 bytes; expected at least 8 + 4"), std::string::npos) << message;
  fs::remove(path);
}
