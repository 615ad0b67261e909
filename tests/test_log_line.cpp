// The log-line templates the engines print their start-up lines from and read them back with
// (planner/src/engines/log_line.hpp). Each case states the std::regex pattern the reader
// replaced (log_reader.cpp before issue #26 item 4) and what regex_search took from the line.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "../planner/src/engines/log_line.hpp"

namespace kvsight::engine_detail {
namespace {

TEST(LogLine, PrintsTheValuesInOrderAndReadsThemBackByName) {
  const LogLine line{"Maximum concurrency for {N,:length} tokens per request: {X:concurrency}x"};
  const std::string printed = line.print({"32,768", "2.22"});
  EXPECT_EQ(printed, "Maximum concurrency for 32,768 tokens per request: 2.22x");
  // A match views the line it read (LogMatch): the line must outlive it.
  const std::string logged = "INFO 08-20 [kv_cache_utils.py:1] " + printed;
  const auto m = line.read(logged);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->count("length"), 32768u);  // commas skipped
  EXPECT_DOUBLE_EQ(m->number("concurrency"), 2.22);
  EXPECT_THROW(line.print({"1"}), std::logic_error);
  EXPECT_THROW((void)m->count("tokens"), std::logic_error);
}

TEST(LogLine, NumbersAreTheEnginesGrammarOrNoReading) {
  // Python's f"{x:.2f}" / f"{n:,}": digits with at most one '.' between digits, commas in
  // groups of three. Anything else is no reading of the line, never a prefix of it (issue
  // #25 class 2: "10.5.5.5 GiB" was read as 10.5, ". GiB" as 0).
  const LogLine line{"memory: {-X:gib} GiB"};
  EXPECT_FALSE(line.read("memory: - GiB"));
  EXPECT_DOUBLE_EQ(line.read("memory: -1.25 GiB")->number("gib"), -1.25);
  EXPECT_FALSE(line.read("memory: 1.2.3 GiB"));
  EXPECT_FALSE(line.read("memory: 10.5.5.5 GiB"));
  EXPECT_FALSE(line.read("memory: . GiB"));
  EXPECT_FALSE(line.read("memory: -.81 GiB"));
  EXPECT_FALSE(line.read("memory: 12. GiB"));
  EXPECT_FALSE(line.read("memory: 1" + std::string(400, '0') + " GiB"));  // beyond a double's digits
  // A sentence's full stop after a number is not part of it.
  EXPECT_DOUBLE_EQ(LogLine{"took {X:gib}{*.}"}.read("took 14.99.")->number("gib"), 14.99);
  // The leftmost place that matches: the first "memory:" is not followed by a number.
  EXPECT_DOUBLE_EQ(line.read("memory: x memory: 4 GiB")->number("gib"), 4.0);
  // Commas in groups of three after 1-3 digits; a count beyond 64 bits is no reading
  // (it saturated to 2^64 - 1 before).
  const LogLine tokens{"size: {N,:n} tokens"};
  EXPECT_EQ(tokens.read("size: 1,234,567 tokens")->count("n"), 1234567u);
  EXPECT_EQ(tokens.read("size: 1234567 tokens")->count("n"), 1234567u);
  EXPECT_FALSE(tokens.read("size: 12,34 tokens"));
  EXPECT_FALSE(tokens.read("size: 1234,567 tokens"));
  EXPECT_FALSE(tokens.read("size: ,123 tokens"));
  EXPECT_EQ(LogLine{"n={N:n}"}.read("n=18446744073709551615")->count("n"), UINT64_MAX);
  EXPECT_FALSE(LogLine{"n={N:n}"}.read("n=18446744073709551616"));
  EXPECT_FALSE(LogLine{"n={N:n}"}.read("n=123456789012345678901234567890"));
}

TEST(LogLine, OptionalPartsAndPrintOnlyEnds) {
  // # GPU blocks: ([0-9]+), and V0's ", # CPU blocks: M" printed after it.
  const LogLine blocks{"# GPU blocks: {N:gpu}[, # CPU blocks: {N:cpu}]"};
  EXPECT_EQ(blocks.print({"1952", "2048"}), "# GPU blocks: 1952, # CPU blocks: 2048");
  const auto v1 = blocks.read("# GPU blocks: 1381");
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->count("gpu"), 1381u);
  EXPECT_FALSE(v1->has("cpu"));
  EXPECT_TRUE(blocks.starts("# GPU blocks: 1381"));
  // {*text} at either end is printed, not required: reserved (-?[0-9.]+) GiB memory for KV Cache.
  const LogLine reserved{"{*Initial free memory ... GiB, }reserved {-X:gib} GiB memory for KV Cache{*.}"};
  EXPECT_EQ(reserved.print({"5.38"}), "Initial free memory ... GiB, reserved 5.38 GiB memory for KV Cache.");
  EXPECT_DOUBLE_EQ(reserved.read("reserved 5.38 GiB memory for KV Cache")->number("gib"), 5.38);
}

TEST(LogLine, GapsTakeAsMuchAsLetsTheRestMatch) {
  // total_gpu_memory=([0-9.]+)GiB.*kv_cache_size=(-?[0-9.]+)GiB: '.*' is greedy, so the last
  // kv_cache_size that is followed by a number; '.' does not cross '\r'.
  const LogLine line{"total={X:total}GiB{* ... }kv={-X:kv}GiB"};
  EXPECT_EQ(line.print({"23.58", "3.81"}), "total=23.58GiB ... kv=3.81GiB");
  EXPECT_DOUBLE_EQ(line.read("total=1GiB kv=2GiB kv=3GiB kv=xGiB")->number("kv"), 3.0);
  EXPECT_FALSE(line.read("total=1GiB \r kv=2GiB"));
  // non-default args: \{(.*)\}: to the last brace.
  const LogLine args{"args: \\{{T:args}\\}"};
  EXPECT_EQ(args.read("args: {'a': {'b': 1}} tail")->text("args"), "'a': {'b': 1}");
}

TEST(LogLine, FormsAndWords) {
  // (?:vLLM API server version |utils\.py:[0-9]+\] +(?:[^ ]+ +)*version )v?([0-9]+\.[0-9]+(?:\.[0-9]+)?)
  const LogLine version{"vLLM API server version [v]{V:version}",
                        "utils.py:{N}\\] { }{W}version [v]{V:version}"};
  EXPECT_EQ(version.read("[utils.py:299] version 0.19.0")->text("version"), "0.19.0");
  EXPECT_EQ(version.read("[utils.py:12]   art  art version v0.11.2.")->text("version"), "0.11.2");
  EXPECT_EQ(version.read("[utils.py:12] subversion 1.0 version 2.0")->text("version"), "2.0");
  EXPECT_FALSE(version.read("[utils.py:12] subversion 1.0"));
  // The leftmost of the forms: the api_server line stands first.
  EXPECT_EQ(version.read("vLLM API server version 0.10.1 [utils.py:1] version 9.9")->text("version"),
            "0.10.1");
}

TEST(LogLine, RefusesTemplatesItCannotRead) {
  EXPECT_THROW(LogLine{"a {N"}, std::logic_error);
  EXPECT_THROW(LogLine{"a [b"}, std::logic_error);
  EXPECT_THROW(LogLine{"a {Q}"}, std::logic_error);
  EXPECT_THROW(LogLine{"a {T}{N}"}, std::logic_error);  // a gap needs text after it
  EXPECT_THROW((LogLine{"a {N:x}", "b {N:y}"}), std::logic_error);
}

}  // namespace
}  // namespace kvsight::engine_detail
