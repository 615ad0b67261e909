// The readers' time and memory are bounded by what a file's header says, not by its size (issue
// #25): each hostile case runs in a child process under an address-space limit of 2,000,000 KiB
// (the shell's `ulimit -v 2000000`), and the child's CPU time and peak RSS are checked against
// the bounds of the issue: a GGUF or safetensors file of any size in <= 1 s and <= 64 MiB, a
// 64 MiB log in <= 5 s. CPU time (user + system), not wall time: the machine that runs the suite
// is shared, and the bound is the reader's work. The files are sparse: gigabytes on paper, a few
// KiB on disk.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gguf.hpp"
#include "kvsight/weights.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

namespace fs = std::filesystem;

using kvsight::test::kSanitized;  // test_support.hpp: the rlimit and timing tests skip under sanitizers

constexpr std::uint64_t kAddressSpaceKib = 2000000;  // ulimit -v 2000000
constexpr double kMiB = 1024.0 * 1024.0;

struct Bounded {
  int exit_code = -1;  // the child's: 0 read, 2 refused (InputError), 101 bad_alloc, 102 other
  int signal = 0;
  double cpu_seconds = 0;
  double wall_seconds = 0;
  double max_rss_mib = 0;
};

::testing::AssertionResult within(const Bounded& b, double cpu_seconds, double rss_mib) {
  if (b.signal != 0) return ::testing::AssertionFailure() << "killed by signal " << b.signal;
  if (b.cpu_seconds > cpu_seconds || b.max_rss_mib > rss_mib)
    return ::testing::AssertionFailure() << b.cpu_seconds << " s CPU (bound " << cpu_seconds << "), "
                                         << b.max_rss_mib << " MiB RSS (bound " << rss_mib << ")";
  return ::testing::AssertionSuccess()
         << b.cpu_seconds << " s CPU, " << b.wall_seconds << " s wall, " << b.max_rss_mib << " MiB RSS";
}

// Runs `body` in a child under the address-space limit; a child past 60 s is killed (SIGALRM).
Bounded run_bounded(const std::function<int()>& body) {
  std::fflush(stdout);  // else the child's freopen writes the parent's buffered lines again
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child == 0) {
    const rlimit limit{kAddressSpaceKib * 1024, kAddressSpaceKib * 1024};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(100);
    alarm(60);
    int code = 0;
    try {
      code = body();
    } catch (const InputError&) {
      code = 2;
    } catch (const std::bad_alloc&) {
      code = 101;
    } catch (...) {
      code = 102;
    }
    _exit(code);
  }
  Bounded out;
  int status = 0;
  rusage usage{};
  if (child < 0 || wait4(child, &status, 0, &usage) != child) return out;
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  out.max_rss_mib = static_cast<double>(usage.ru_maxrss) * 1024.0 / kMiB;  // ru_maxrss is in KiB
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  // The figures docs/reliability.md records.
  std::printf("bounded run: exit %d, %.3f s CPU, %.3f s wall, %.1f MiB peak RSS\n", out.exit_code, out.cpu_seconds,
              out.wall_seconds, out.max_rss_mib);
  return out;
}

// Runs the kvsight binary under the limit (stdout and stderr to /dev/null).
Bounded run_cli_bounded(const std::vector<std::string>& args) {
  return run_bounded([&] {
    std::vector<char*> argv;
    std::string binary = KVSIGHT_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copies = args;
    for (std::string& a : copies) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) return 104;
    execv(binary.c_str(), argv.data());
    return 103;
  });
}

std::string le(std::uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}
std::string gstr(const std::string& s) { return le(s.size(), 8) + s; }
std::string kv_u32(const std::string& key, std::uint64_t v) { return gstr(key) + le(4, 4) + le(v, 4); }

// A GGUF whose metadata holds, after a 2-layer llama's keys, one array `key` of `count` entries of
// `elem` type that a sparse hole fills (zeros: empty strings, zero numbers), then one f32
// tensor. The array's bytes are never written: the file is `count x width` bytes larger on paper.
std::string sparse_gguf(const std::string& name, const std::string& key, std::uint32_t elem,
                        std::uint64_t count, std::uint64_t width) {
  const std::string path = test::temp_dir("bounds-gguf") + "/" + name;
  const std::string head =
      std::string("GGUF") + le(3, 4) + le(1, 8) + le(5, 8) + gstr("general.architecture") + le(8, 4) +
      gstr("llama") + kv_u32("llama.block_count", 2) + kv_u32("llama.embedding_length", 64) +
      kv_u32("llama.attention.head_count", 4) + gstr(key) + le(9, 4) + le(elem, 4) + le(count, 8);
  std::string tail = gstr("token_embd.weight") + le(1, 4) + le(32, 8) + le(0, 4) + le(0, 8);
  const std::uint64_t tail_at = head.size() + count * width;
  tail += std::string((32 - (tail_at + tail.size()) % 32) % 32, '\0') + std::string(128, '\0');
  std::ofstream out(path, std::ios::binary);
  out << head;
  out.seekp(static_cast<std::streamoff>(tail_at));
  out << tail;
  return path;
}

class ReaderBounds : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kSanitized) GTEST_SKIP() << "sanitizer runtime under an address-space limit";
  }
};

// ggml's gguf.cpp refuses an array of more than 2^30 entries (GGUF_MAX_ARRAY_ELEMENTS): a
// 2^31-entry token array is refused from its count. 2^28 strings are within that but each
// length must be read to find the next key (2 GiB of lengths): refused from the count too,
// past kvsight's 2^25 strings in all. Neither reads the hole.
TEST_F(ReaderBounds, GgufTokenArraysOfTwoToThe28And31Entries) {
  for (const std::uint64_t count : {1ull << 28, 1ull << 31}) {
    const std::string path = sparse_gguf("tokens.gguf", "tokenizer.ggml.tokens", 8, count, 8);
    const Bounded b = run_bounded([&] {
      read_gguf_model(path);
      return 0;
    });
    EXPECT_EQ(b.exit_code, 2) << count;
    EXPECT_TRUE(within(b, 1.0, 64.0)) << count;
  }
}

// What is read is skipped without building it: 16M empty strings (128 MiB of lengths), a
// 2^30-entry u8 array (1 GiB) and a 2^30-entry u64 array (8 GiB), each then the model's tensor.
TEST_F(ReaderBounds, GgufArraysThePlannerDoesNotNeedAreSkipped) {
  struct Case {
    std::uint32_t elem;
    std::uint64_t count, width;
  };
  for (const Case& c : {Case{8, 1ull << 24, 8}, Case{0, 1ull << 30, 1}, Case{10, 1ull << 30, 8}}) {
    const std::string path =
        sparse_gguf("skipped.gguf", c.elem == 8 ? "tokenizer.ggml.tokens" : "tokenizer.ggml.scores", c.elem,
                    c.count, c.width);
    const Bounded b = run_bounded([&] { return read_gguf_model(path).num_layers() == 2 ? 0 : 1; });
    EXPECT_EQ(b.exit_code, 0) << c.elem << " x " << c.count;
    EXPECT_TRUE(within(b, 1.0, 64.0)) << c.elem << " x " << c.count;
  }
}

std::string safetensors_with_header(const std::string& dir, const std::string& header, std::uint64_t data) {
  const std::string path = dir + "/model.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    out << le(header.size(), 8) << header;
  }
  fs::resize_file(path, 8 + header.size() + data);
  return path;
}

// A 100 MB header (std::bad_alloc, SIGABRT under this limit before) is refused from its
// length; a 30 MiB header of ~270,000 real-looking tensors, within the 32 MiB cap, is read under
// the same limit (memory: about 12x the header; kvsight's cap keeps it far from the limit).
TEST_F(ReaderBounds, SafetensorsHeaders) {
  const std::string big = test::temp_dir("bounds-st-big");
  {
    const std::string path = big + "/model.safetensors";
    std::ofstream(path, std::ios::binary) << le(100000000, 8);
    fs::resize_file(path, 8 + 100000000ull + 4096);
  }
  Bounded b = run_bounded([&] {
    safetensors_in_dir(big);
    return 0;
  });
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_TRUE(within(b, 1.0, 64.0));

  const std::string near_cap = test::temp_dir("bounds-st-cap");
  std::string header = "{";
  std::uint64_t offset = 0;
  for (int i = 0; header.size() < 30ull << 20; ++i) {
    header += (i ? "," : "") + std::string("\"model.layers.") + std::to_string(i) +
              ".mlp.experts.gate_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[8,8],\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + 128) + "]}";
    offset += 128;
  }
  header += "}";
  safetensors_with_header(near_cap, header, offset);
  b = run_bounded([&] { return safetensors_in_dir(near_cap)->bytes > 0 ? 0 : 1; });
  EXPECT_EQ(b.exit_code, 0);
  EXPECT_TRUE(within(b, 5.0, 1000.0));
}

// A 64 MiB log (the largest explain reads) of real lines and noise: read in <= 5 s, by the
// reader and by the whole command (which reads it for the engine, then for the figures).
TEST_F(ReaderBounds, ASixtyFourMebibyteLog) {
  const std::string path = test::temp_dir("bounds-log") + "/big.log";
  {
    std::ofstream out(path, std::ios::binary);
    // Appended piece by piece: GCC 12 at -O2 warns (-Warray-bounds, a false positive) on a
    // chain of string temporaries here.
    std::string block =
        "(EngineCore pid=1) INFO 11-28 11:46:10 [gpu_worker.py:298] Available KV cache memory: 10.00 GiB\n"
        "(EngineCore pid=1) INFO 11-28 11:46:10 [kv_cache_utils.py:1087] GPU KV cache size: 65,536 tokens\n"
        "(APIServer pid=1) INFO 11-28 11:45:51 [utils.py:253] non-default args: {'model': 'm', "
        "'max_model_len': 4096, 'chat_template': '";
    block.append(2000, 'x');
    block += "'}\n";
    block.append(300, '1');
    block += " GiB tokens x 0.5 version \n";
    std::uint64_t written = 0;
    while (written + block.size() < (64ull << 20)) {
      out << block;
      written += block.size();
    }
  }
  Bounded b = run_bounded([&] {
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return read_engine_log(text).available_kv_gib ? 0 : 1;
  });
  EXPECT_EQ(b.exit_code, 0);
  EXPECT_TRUE(within(b, 5.0, 1000.0));
  const std::string config =
      (std::filesystem::path(KVSIGHT_SOURCE_DIR) / "tests/fixtures/logs/qwen3-14b.config.json").string();
  b = run_cli_bounded({"explain", "--log", path, "--model", config});
  EXPECT_EQ(b.exit_code, 0);
  EXPECT_TRUE(within(b, 5.0, 1000.0));
}

}  // namespace
}  // namespace kvsight
