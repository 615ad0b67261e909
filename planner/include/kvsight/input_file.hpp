#pragma once
// Reading untrusted input files: one place that decides what kvsight will open and
// how much of it it reads (docs/reliability.md). Every reader of a user-named file
// (config.json, calibration JSON, safetensors and GGUF headers, the HF cache's
// refs/main) goes through these, so a FIFO never blocks, /dev/zero is never read to
// exhaustion, and a multi-GB file is never read when only its header is needed.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kvsight {

// Size of a regular file. Opens with O_NONBLOCK, so a FIFO does not block; refuses
// anything that is not a regular file (FIFO, device, socket, directory), naming
// what it found. Throws InputError(field, ...).
std::uint64_t regular_file_size(const std::filesystem::path& path, std::string_view field);

// The whole of a regular file of at most max_bytes. A larger file is refused up
// front from its size (well under a second, whatever the size), naming the limit.
std::string read_input_file(const std::filesystem::path& path, std::string_view field,
                            std::uint64_t max_bytes);

// Exactly `length` bytes at `offset` of a regular file (a header); a file shorter
// than offset + length is refused, naming its size. Nothing else is read.
std::string read_file_range(const std::filesystem::path& path, std::string_view field, std::uint64_t offset,
                            std::uint64_t length);

// A regular file opened once for many bounded reads (the GGUF reader walks a header of
// millions of entries in chunks: one open, not one per chunk). Same checks as
// read_file_range; the descriptor is closed by the destructor.
class InputFile {
 public:
  InputFile(const std::filesystem::path& path, std::string_view field);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  std::uint64_t size() const { return size_; }
  // Exactly `length` bytes at `offset` into `out` (resized; its capacity is reused).
  void read(std::uint64_t offset, std::uint64_t length, std::string& out) const;

 private:
  std::filesystem::path path_;
  std::string field_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// Default nesting limit for JSON inputs: config.json nests 3-4 levels, calibration
// and catalogs fewer; 64 is far above any real file and far below a stack's limit.
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses a JSON document with nesting limited to max_depth (a deeper document is
// refused with the depth it reached, before any deep value is built), the whole
// text consumed (a NUL or garbage after the document is refused), errors naming
// `field` and the byte offset. Throws InputError(field, ...).
nlohmann::json parse_json_input(std::string_view text, std::string_view field,
                                std::size_t max_depth = kMaxJsonDepth);

}  // namespace kvsight
