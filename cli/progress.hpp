#pragma once
// Progress of long probes and sweeps on stderr, only when stderr is a terminal and
// --quiet was not given: "point k of N, elapsed, the figure just measured". Nothing
// of it reaches stdout, JSON or any file.
#include <chrono>
#include <string>

namespace kvsight::cli {

class Progress {
 public:
  // enabled: the caller's decision (stderr is a terminal and not --quiet).
  Progress(std::string label, bool enabled);
  // "kvsight preflight: point 2 of 4 (3.1 s): context 8192: nosplit 123.4 us"
  void point(int step, int total, const std::string& what, const std::string& figure);
  bool enabled() const { return enabled_; }
  // The line as it would be printed (tests).
  static std::string line(const std::string& label, int step, int total, double elapsed_s,
                          const std::string& what, const std::string& figure);

 private:
  std::string label_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

// isatty(STDERR_FILENO).
bool stderr_is_terminal();

}  // namespace kvsight::cli
