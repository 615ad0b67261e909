// The byte-size grammar (kvsight/counts.hpp parse_byte_size, parse_gib) beside the count
// grammar: decimal digits, an optional fraction, an optional unit; every other spelling
// refused naming the flag (issue #9: one flag grammar). Then the flags that use it,
// through the kvsight binary: exit 2 and the flag in the message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvsight/counts.hpp"
#include "kvsight/error.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

TEST(ByteSizeGrammar, UnitsAndFractions) {
  EXPECT_EQ(parse_byte_size("4096", "--bytes"), 4096u);
  EXPECT_EQ(parse_byte_size("0", "--bytes"), 0u);
  EXPECT_EQ(parse_byte_size("17B", "--bytes"), 17u);
  EXPECT_EQ(parse_byte_size("8KiB", "--bytes"), 8u * 1024);
  // 512 x 2^20 = 536,870,912.
  EXPECT_EQ(parse_byte_size("512MiB", "--bytes"), 536870912u);
  EXPECT_EQ(parse_byte_size("2GiB", "--bytes"), 2u * 1073741824ull);
  EXPECT_EQ(parse_byte_size("1TiB", "--bytes"), 1099511627776ull);  // 2^40
  EXPECT_EQ(parse_byte_size("1GB", "--bytes"), 1000000000u);
  EXPECT_EQ(parse_byte_size("3KB", "--bytes"), 3000u);
  EXPECT_EQ(parse_byte_size("2MB", "--bytes"), 2000000u);
  EXPECT_EQ(parse_byte_size("1TB", "--bytes"), 1000000000000ull);
  // 1.5 x 2^30 = 1,610,612,736 exactly.
  EXPECT_EQ(parse_byte_size("1.5GiB", "--bytes"), 1610612736u);
  // 0.3 x 1024 = 307.2: a fraction of a byte is dropped.
  EXPECT_EQ(parse_byte_size("0.3KiB", "--bytes"), 307u);
  // Leading zeros are decimal, never octal: 010 is ten.
  EXPECT_EQ(parse_byte_size("010MiB", "--bytes"), 10u << 20);
  // 0.000000000000000001 TiB = 2^40 x 10^-18 = 1.1e-6 B: rounds down to 0.
  EXPECT_EQ(parse_byte_size("0.000000000000000001TiB", "--bytes"), 0u);
  // 2^64 - 1 bytes is the largest size, written out.
  EXPECT_EQ(parse_byte_size("18446744073709551615", "--bytes"), 18446744073709551615ull);
  // 15 x 2^60 = 17,293,822,569,102,704,640 < 2^64; 16 x 2^60 = 2^64 does not fit.
  EXPECT_EQ(parse_byte_size("15728640TiB", "--bytes"), 15ull << 60);
}

TEST(ByteSizeGrammar, EverythingElseIsRefusedNamingTheFlag) {
  for (const std::string text : {"",      " 1",
                                 "1 ",    "-1",
                                 "+1",    "-0",
                                 "0x10",  "0x1p4",
                                 "1e3",   "1E3",
                                 "inf",   "nan",
                                 "NaN",   "1.",
                                 ".5",    "1..5",
                                 "1,024", "1KiBB",
                                 "1kib",  "1 GiB",
                                 "1GiBx", "1K",
                                 "1M",    "1G",
                                 "GiB",   "1.0000000000000000001"}) {
    try {
      (void)parse_byte_size(text, "--bytes");
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "--bytes") << text;
      EXPECT_NE(std::string(e.what()).find("KiB, MiB, GiB, TiB"), std::string::npos) << e.what();
    }
  }
}

TEST(ByteSizeGrammar, OverflowIsRefused) {
  // 2^64 = 18446744073709551616: one more than the largest.
  EXPECT_THROW((void)parse_byte_size("18446744073709551616", "--bytes"), OverflowError);
  // 16 x 2^60 = 2^64.
  EXPECT_THROW((void)parse_byte_size("16777216TiB", "--bytes"), OverflowError);
  // 2^64 - 1 = 18,446,744,073,709,551,615: 18,446,744,073,709,551 KB leave 615 B below it,
  // so .6 KB (600 B) still fits and .9 KB (900 B) does not.
  EXPECT_EQ(parse_byte_size("18446744073709551.6KB", "--bytes"), 18446744073709551600ull);
  EXPECT_THROW((void)parse_byte_size("18446744073709551.9KB", "--bytes"), OverflowError);
  EXPECT_THROW((void)parse_byte_size("99999999999999999999999", "--max-mem"), OverflowError);
}

TEST(ByteSizeGrammar, GibHasNoUnit) {
  // 80 x 2^30 = 85,899,345,920.
  EXPECT_EQ(parse_gib("80", "--gpu-mem-gib"), 85899345920ull);
  // 23.5 x 2^30 = 25,232,932,864.
  EXPECT_EQ(parse_gib("23.5", "--gpu-mem-gib"), 25232932864ull);
  for (const std::string text : {"", "-3", "80GiB", "0x50", "inf", "nan", "8e1", "80 "}) {
    try {
      (void)parse_gib(text, "--gpu-mem-gib");
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "--gpu-mem-gib") << text;
    }
  }
}

void expect_bad(const std::vector<std::string>& args, const std::string& flag) {
  const auto run = test::run_kvsight(args);
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find(flag), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

TEST(ByteSizeFlags, ProbeAndPlanRefuseWhatStodWouldRead) {
  // std::stod read "0x1p20" as 1 MiB, "1e6" as 10^6, "nan" and "-1" as numbers.
  for (const std::string text : {"0x1p20", "1e6", "nan", "inf", "-1MiB", "", "1.5.5GiB"}) {
    expect_bad({"probe", "bandwidth", "--backend", "cpu", "--bytes", text}, "--bytes");
    expect_bad({"probe", "attention", "--backend", "cpu", "--max-mem", text}, "--max-mem");
  }
  // --max-mem 0 is neither a fraction in (0, 1] nor a size > 0.
  expect_bad({"probe", "attention", "--backend", "cpu", "--max-mem", "0"}, "--max-mem");
  expect_bad({"probe", "bandwidth", "--backend", "cpu", "--bytes", "18446744073709551616"}, "--bytes");
  for (const std::string text : {"0x50", "inf", "nan", "-3", "80GiB", "0", "1e3", ""})
    expect_bad({"plan", "--model", "llama-3.1-8b", "--gpu-mem-gib", text}, "--gpu-mem-gib");
}

TEST(ByteSizeFlags, GpuMemGibCountsGib) {
  // 80 GiB = 80 x 2^30 = 85,899,345,920 bytes reach the plan as the device's memory.
  const auto run =
      test::run_kvsight({"plan", "--model", "llama-3.1-8b", "--gpu-mem-gib", "80", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["gpu"]["memory_bytes"].get<std::uint64_t>(), 85899345920ull);
}

}  // namespace
}  // namespace kvsight
