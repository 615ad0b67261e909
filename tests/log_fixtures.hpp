#pragma once
// The published start-up logs under tests/fixtures/logs/ and the configs stored beside them
// (docs/fidelity.md), and the issue #13 bound the GPU-and-flags replays are held to; shared by
// the fidelity, explain and log-reader tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "kvsight/model.hpp"

namespace kvsight::test {

inline constexpr double kGiBd = 1024.0 * 1024.0 * 1024.0;

// Appended piecewise: GCC 12 at -O2 reports a false -Warray-bounds on a chain of operator+
// over temporaries here (it depends on the source path's length).
inline std::string fixture_path(const std::string& name) {
  std::string path = KVSIGHT_SOURCE_DIR;
  path.append("/tests/fixtures/logs/").append(name);
  return path;
}

inline std::string fixture_text(const std::string& name) {
  std::ifstream in(fixture_path(name));
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

// A model not in the catalog: tests/fixtures/logs/<name>.config.json.
inline ModelSpec fixture_model(const std::string& name) {
  std::string path = fixture_path(name);
  path.append(".config.json");
  return resolve_model(path);
}

inline std::uint64_t gib(double g) { return static_cast<std::uint64_t>(std::llround(g * kGiBd)); }

// Issue #13: "Available KV cache memory" within max(3 %, 0.25 GiB) of the logged value (the
// logged value may be negative: a model that does not fit).
inline bool within_budget_tolerance(double predicted_gib, double logged_gib) {
  return std::fabs(predicted_gib - logged_gib) <= std::max(0.03 * std::fabs(logged_gib), 0.25);
}

}  // namespace kvsight::test
