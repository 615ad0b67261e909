#pragma once
// Helpers shared by the tests: run the kvsight binary and capture its output.
#include <string>
#include <vector>

namespace kvsight::test {

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the built kvsight binary with args (no shell), capturing stdout/stderr.
CliRun run_kvsight(const std::vector<std::string>& args);

// A fresh empty directory under the test temp dir, removed at process exit.
std::string temp_dir(const std::string& name);

// Writes text to a file, creating parent directories.
void write_file(const std::string& path, const std::string& text);

// Writes a GGUF with tests/make_gguf.py (llama.cpp's own gguf-py writer; `variant` as its usage
// says) into a fresh directory and returns its path, or "" after a test failure naming the
// cause. The gguf package is a test dependency: its absence fails the test (scripts/setup.sh
// installs it), never skips it.
std::string make_gguf(const std::string& name, const std::string& variant);

// The suffix the cpu backend's kernel description ends with on this machine: the AVX2 /
// AVX-512 kernels' dense tile pass is off on Intel CPUs and on elsewhere (dense_tile_reads_pay
// in probes/src/cpu_backend.cpp), read here from /proc/cpuinfo's vendor_id.
std::string expected_tile_reads_suffix();

// Whether this test binary runs under a sanitizer: their runtimes reserve terabytes of shadow
// address space and abort under an address-space limit (RLIMIT_AS), and their timings are not
// the code's, so the tests that set one, or time a reader, skip there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

}  // namespace kvsight::test
