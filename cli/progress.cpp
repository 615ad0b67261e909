// Progress lines on stderr (cli/progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "kvsight/number_text.hpp"

namespace kvsight::cli {

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

std::string Progress::line(const std::string& label, int step, int total, double elapsed_s,
                           const std::string& what, const std::string& figure) {
  // Tenths of a second: finer is noise for a human watching a run.
  const std::string elapsed = fixed_text(elapsed_s, 1) + " s";
  return label + ": point " + std::to_string(step) + " of " + std::to_string(total) + " (" + elapsed +
         "): " + what + (figure.empty() ? "" : ": " + figure);
}

void Progress::point(int step, int total, const std::string& what, const std::string& figure) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::cerr << line(label_, step, total, elapsed, what, figure) << "\n" << std::flush;
}

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

}  // namespace kvsight::cli
