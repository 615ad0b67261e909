// Bounded, type-checked reads of user-named files (kvsight/input_file.hpp).
#include "kvsight/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kvsight/error.hpp"

namespace kvsight {

namespace {

// Closes the descriptor on every path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Opens a regular file for reading; returns the descriptor and its size.
std::pair<int, std::uint64_t> open_regular(const std::filesystem::path& path, std::string_view field) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise block forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw InputError(std::string(field), "cannot open '" + path.string() + "': " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    throw InputError(std::string(field), "cannot stat '" + path.string() + "': " + std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw InputError(std::string(field),
                     "'" + path.string() + "' is " + kind_of(info.st_mode) + "; allowed: a regular file");
  }
  return {fd, static_cast<std::uint64_t>(info.st_size)};
}

// Reads exactly `length` bytes at `offset` into `bytes`; fails if the file ends sooner.
void read_exact_into(int fd, const std::filesystem::path& path, std::string_view field, std::uint64_t offset,
                     std::uint64_t length, std::string& bytes) {
  bytes.resize(length);
  std::uint64_t done = 0;
  while (done < length) {
    const ssize_t got = ::pread(fd, bytes.data() + done, length - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InputError(std::string(field), "cannot read '" + path.string() + "': " + std::strerror(errno));
    }
    if (got == 0)
      throw InputError(std::string(field), "'" + path.string() + "' ended after " +
                                               std::to_string(offset + done) + " bytes; expected at least " +
                                               std::to_string(offset + length));
    done += static_cast<std::uint64_t>(got);
  }
}

std::string read_exact(int fd, const std::filesystem::path& path, std::string_view field,
                       std::uint64_t offset, std::uint64_t length) {
  std::string bytes;
  read_exact_into(fd, path, field, offset, length, bytes);
  return bytes;
}

}  // namespace

std::uint64_t regular_file_size(const std::filesystem::path& path, std::string_view field) {
  const auto [fd, size] = open_regular(path, field);
  FileDescriptor guard(fd);
  return size;
}

std::string read_input_file(const std::filesystem::path& path, std::string_view field,
                            std::uint64_t max_bytes) {
  const auto [fd, size] = open_regular(path, field);
  FileDescriptor guard(fd);
  if (size > max_bytes)
    throw InputError(std::string(field), "'" + path.string() + "' is " + std::to_string(size) +
                                             " bytes; allowed: at most " + std::to_string(max_bytes) +
                                             " for this kind of file");
  return read_exact(fd, path, field, 0, size);
}

std::string read_file_range(const std::filesystem::path& path, std::string_view field, std::uint64_t offset,
                            std::uint64_t length) {
  const auto [fd, size] = open_regular(path, field);
  FileDescriptor guard(fd);
  if (offset > size || length > size - offset)
    throw InputError(std::string(field), "'" + path.string() + "' is " + std::to_string(size) +
                                             " bytes; expected at least " + std::to_string(offset) + " + " +
                                             std::to_string(length));
  return read_exact(fd, path, field, offset, length);
}

InputFile::InputFile(const std::filesystem::path& path, std::string_view field) : path_(path), field_(field) {
  const auto [fd, size] = open_regular(path, field);
  fd_ = fd;
  size_ = size;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read(std::uint64_t offset, std::uint64_t length, std::string& out) const {
  if (offset > size_ || length > size_ - offset)
    throw InputError(field_, "'" + path_.string() + "' is " + std::to_string(size_) +
                                 " bytes; expected at least " + std::to_string(offset) + " + " +
                                 std::to_string(length));
  read_exact_into(fd_, path_, field_, offset, length, out);
}

namespace {

// The deepest nesting of `text`'s arrays and objects, brackets inside strings skipped: one
// linear pass. Stops at the first container past max_depth and returns its depth.
std::size_t nesting_depth(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, a quote included
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (depth > max_depth) return depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

nlohmann::json parse_json_input(std::string_view text, std::string_view field, std::size_t max_depth) {
  // nlohmann's parser is iterative and its destructor is too (3.10+); what recursed was the code
  // walking the result, so a document deeper than max_depth is refused before it is parsed. The
  // depth is a linear scan of the text: nlohmann's parser with a callback (which reported each
  // container's depth here before) searches the whole parent object at the end of each member
  // that is an object, quadratic in the members: a 30 MiB safetensors header of 200,000 tensors
  // took minutes (issue #25).
  // nlohmann's lexer takes a NUL byte for the end of input, so "{...}\0garbage"
  // would parse as the part before it. JSON has no raw NUL (control characters in
  // strings must be escaped), so any NUL is refused.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw InputError(std::string(field), "not valid JSON at byte " + std::to_string(nul + 1) +
                                             ": a NUL byte (JSON text has none)");
  if (const std::size_t depth = nesting_depth(text, max_depth); depth > max_depth)
    throw InputError(std::string(field), "JSON nests deeper than " + std::to_string(max_depth) +
                                             " levels (reached " + std::to_string(depth) +
                                             "); allowed: at most " + std::to_string(max_depth));
  try {
    return nlohmann::json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/false);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based position; e.what() carries the lexer's description.
    throw InputError(std::string(field),
                     "not valid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    // out_of_range (a number beyond double) and the like.
    throw InputError(std::string(field), std::string("not usable JSON: ") + e.what());
  }
}

}  // namespace kvsight
