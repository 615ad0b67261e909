// The one checked output writer (cli/output_file.hpp, docs/reliability.md).
#include "output_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "kvsight/error.hpp"

namespace kvsight::cli {

namespace {

namespace fs = std::filesystem;

// Set once a stdout failure was reported, so close_stdout does not say it twice.
bool g_stdout_failed = false;

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

std::string directory_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// 16 hex digits from the kernel's random source: the temporary's name cannot be
// guessed in advance (issue #14: `<out>.tmp.<pid>` could be, and was planted).
std::string random_suffix() {
  unsigned char bytes[8] = {};
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw OutputError(std::string("cannot draw a random temporary name: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  static const char* const digits = "0123456789abcdef";
  std::string out;
  for (const unsigned char b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 0xf];
  }
  return out;
}

std::string failure(const Artefact& a, const std::string& what, int error) {
  return a.flag + ": " + what + ": " + std::strerror(error);
}

// Creates, writes, fsyncs and closes one temporary beside the target; returns its path.
std::string write_temporary(const Artefact& a) {
  const fs::path target(a.path);
  const std::string base = directory_of(a.path) + "/." + target.filename().string() + ".kvsight-";
  int fd = -1;
  std::string temp;
  // O_EXCL|O_NOFOLLOW: a name that exists (planted file or symlink) fails with
  // EEXIST and a fresh random name is drawn; 2^64 names make a second collision a
  // sign of something else, so a few tries are enough.
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    temp = base + random_suffix() + ".tmp";
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) throw OutputError(failure(a, "cannot create '" + temp + "'", errno));
  }
  if (fd < 0) throw OutputError(a.flag + ": cannot create a temporary beside '" + a.path + "' (names taken)");
  const auto fail = [&](const std::string& what) {
    const int error = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    throw OutputError(failure(a, what + " '" + temp + "'", error));
  };
  // Keep an existing target's permission bits (a rename would otherwise reset them
  // to 0666 & ~umask), but never its setuid/setgid/sticky bits on new contents.
  struct stat info {};
  if (::lstat(a.path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::fchmod(fd, info.st_mode & 0777) != 0)
    fail("cannot set the mode of");
  std::size_t done = 0;
  while (done < a.text.size()) {
    const ssize_t n = ::write(fd, a.text.data() + done, a.text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed to");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync failed on");
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw OutputError(failure(a, "close failed on '" + temp + "'", error));
  }
  return temp;
}

void write_stdout(const std::string& text) {
  std::cout.flush();
  errno = 0;
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) {
    const int error = errno;
    g_stdout_failed = true;
    throw OutputError(std::string("writing stdout failed: ") + std::strerror(error));
  }
  flush_stdout();
}

// What makes two paths one file: device and inode when it exists, else the canonical
// path of its directory plus its name (a new file: two spellings of one new name).
struct FileIdentity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string name;
  bool operator==(const FileIdentity& o) const {
    return exists == o.exists && (exists ? device == o.device && inode == o.inode : name == o.name);
  }
};

FileIdentity identity_of(const std::string& path) {
  FileIdentity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.device = st.st_dev;
    id.inode = st.st_ino;
    return id;
  }
  std::error_code error;
  const fs::path directory = fs::weakly_canonical(fs::path(directory_of(path)), error);
  id.name = (error ? fs::path(directory_of(path)) : directory) / fs::path(path).filename();
  return id;
}

}  // namespace

void check_distinct_files(const std::vector<Artefact>& artefacts, const std::vector<InputPath>& inputs) {
  std::vector<std::pair<const InputPath*, FileIdentity>> existing_inputs;  // an input that is no file: skipped
  for (const InputPath& input : inputs)
    if (FileIdentity id = identity_of(input.path); id.exists) existing_inputs.emplace_back(&input, id);
  std::vector<std::pair<const Artefact*, FileIdentity>> outputs;
  for (const Artefact& a : artefacts) {
    if (a.path.empty()) continue;  // stdout
    const FileIdentity id = identity_of(a.path);
    for (const auto& [other, other_id] : outputs)
      if (other_id == id)
        throw InputError(a.flag, "'" + a.path + "' is the same file as " + other->flag + " '" + other->path +
                                     "'; allowed: a different file for each output");
    for (const auto& [input, input_id] : existing_inputs)
      if (input_id == id)
        throw InputError(a.flag, "'" + a.path + "' is the input file of " + input->flag + " '" + input->path +
                                     "'; writing it would replace the input; allowed: another file");
    outputs.emplace_back(&a, id);
  }
}

void check_output_target(const std::string& path, const std::string& flag) {
  if (path.empty())
    throw InputError(flag, "is empty; allowed: a file path (omit the flag to write to stdout)");
  if (fs::path(path).filename().empty() || path.back() == '/')
    throw InputError(flag, "'" + path + "' names a directory; allowed: a file path");
  const std::string directory = directory_of(path);
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0)
    throw InputError(flag, "directory '" + directory + "' of '" + path + "': " + std::strerror(errno) +
                               " (does the directory exist?)");
  if (!S_ISDIR(info.st_mode))
    throw InputError(flag,
                     "'" + directory + "' (the directory of '" + path + "') is " + kind_of(info.st_mode));
  if (::access(directory.c_str(), W_OK | X_OK) != 0)
    throw InputError(flag, "cannot write in directory '" + directory + "': " + std::strerror(errno));
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return;  // a new file
    throw InputError(flag, "cannot stat '" + path + "': " + std::strerror(errno));
  }
  if (S_ISLNK(info.st_mode))
    throw InputError(flag,
                     "'" + path +
                         "' is a symlink; allowed: a regular file or a new name (give the link's target "
                         "path to replace that file)");
  if (!S_ISREG(info.st_mode))
    throw InputError(
        flag, "'" + path + "' is " + kind_of(info.st_mode) + "; allowed: a regular file or a new name");
}

CLI::Validator output_target(const std::string& flag) {
  return CLI::Validator(
      [flag](std::string& path) -> std::string {
        try {
          check_output_target(path, flag);
        } catch (const InputError& e) {
          // CLI11 prefixes the flag's name; drop ours to avoid saying it twice.
          const std::string message = e.what();
          return message.rfind(flag + ": ", 0) == 0 ? message.substr(flag.size() + 2) : message;
        }
        return "";
      },
      "FILE");
}

void write_artefacts(const std::vector<Artefact>& artefacts) {
  std::vector<std::pair<const Artefact*, std::string>> temporaries;
  try {
    for (const Artefact& a : artefacts) {
      if (a.path.empty()) continue;
      check_output_target(a.path, a.flag);  // again: the run may have taken a while
      temporaries.emplace_back(&a, write_temporary(a));
    }
  } catch (...) {
    for (const auto& [a, temp] : temporaries) ::unlink(temp.c_str());
    throw;
  }
  for (std::size_t i = 0; i < temporaries.size(); ++i) {
    const auto& [a, temp] = temporaries[i];
    if (::rename(temp.c_str(), a->path.c_str()) != 0) {
      const int error = errno;
      for (std::size_t j = i; j < temporaries.size(); ++j) ::unlink(temporaries[j].second.c_str());
      throw OutputError(failure(*a, "cannot rename '" + temp + "' to '" + a->path + "'", error));
    }
    // The rename itself is durable once the directory is synced; a directory that
    // cannot be fsync'd (some network filesystems: EINVAL) still has the file.
    const int dir = ::open(directory_of(a->path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
  for (const Artefact& a : artefacts) {
    if (a.path.empty()) write_stdout(a.text);
  }
}

void write_output_file(const std::string& path, const std::string& flag, const std::string& text) {
  write_artefacts({Artefact{path, flag, text}});
}

void flush_stdout() {
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    const int error = errno;
    g_stdout_failed = true;
    throw OutputError(std::string("writing stdout failed: ") +
                      (error != 0 ? std::strerror(error) : "stream error"));
  }
}

bool close_stdout() {
  if (g_stdout_failed) return false;
  try {
    flush_stdout();
  } catch (const OutputError& e) {
    std::cerr << "kvsight: error: " << e.what() << "\n";
    return false;
  }
  errno = 0;
  if (std::fclose(stdout) != 0) {
    std::cerr << "kvsight: error: closing stdout failed: " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

}  // namespace kvsight::cli
