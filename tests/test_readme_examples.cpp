// README.md's examples are run and compared byte for byte (issue #23 item 7): every fenced
// block whose first line is "$ kvsight ARGS" must be what `kvsight ARGS` prints on stdout. A
// block whose last line is "..." shows the first lines of the output only. After a change of
// output, `python3 scripts/readme-examples.py` rewrites the blocks from the built binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_support.hpp"

namespace kvsight {
namespace {

struct Example {
  int line = 0;  // README.md line of the "$ kvsight" command
  std::vector<std::string> args;
  std::string expected;      // the block's lines after the command, each with its '\n'
  bool prefix_only = false;  // the block ends with "..."
};

std::vector<Example> readme_examples() {
  std::ifstream in(std::filesystem::path(KVSIGHT_SOURCE_DIR) / "README.md");
  std::vector<Example> out;
  std::string line;
  int number = 0;
  bool in_block = false, collecting = false;
  Example current;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      if (in_block && collecting) out.push_back(current);
      in_block = !in_block;
      collecting = false;
      continue;
    }
    if (!in_block) continue;
    if (!collecting && line.rfind("$ kvsight ", 0) == 0) {
      current = Example{};
      current.line = number;
      std::istringstream words(line.substr(10));
      for (std::string word; words >> word;) current.args.push_back(word);
      collecting = true;
      continue;
    }
    if (!collecting) continue;
    if (line == "...") {
      current.prefix_only = true;
      continue;
    }
    current.expected.append(line).push_back('\n');
  }
  return out;
}

TEST(ReadmeExamples, EveryKvsightExampleIsWhatTheBinaryPrints) {
  const std::vector<Example> examples = readme_examples();
  // plan, fleet plan, inspect, gates, cliff, fit: the README's six kvsight examples.
  ASSERT_GE(examples.size(), 6u);
  for (const Example& example : examples) {
    const auto run = test::run_kvsight(example.args);
    std::string command;
    for (const std::string& a : example.args) command.append(" ").append(a);
    EXPECT_LE(run.exit_code, 1) << "README.md:" << example.line << ": kvsight" << command << "\n" << run.err;
    const std::string actual = example.prefix_only ? run.out.substr(0, example.expected.size()) : run.out;
    EXPECT_EQ(actual, example.expected)
        << "README.md:" << example.line << ": `kvsight" << command
        << "` prints something else; run `python3 scripts/readme-examples.py` after checking the new output";
  }
}

}  // namespace
}  // namespace kvsight
