#pragma once
// Shared by the libFuzzer harnesses. The contract every reader keeps: bad bytes
// throw kvsight::InputError (the CLI turns it into exit 2); anything else (another
// exception, a crash, UB, a leak, a timeout, or a result that breaks an invariant,
// i.e. a confident wrong number) is a finding.
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kvsight::fuzz {

// An accepted input produced a result that cannot be right: report and abort so
// libFuzzer saves the input as a crash artifact.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "kvsight fuzz finding: %s\n", what.c_str());
  std::abort();
}

inline void require(bool condition, const std::string& what) {
  if (!condition) finding(what);
}

}  // namespace kvsight::fuzz
