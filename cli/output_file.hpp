#pragma once
// Every file a run writes (--output, --plot, sweep --json-output) and stdout go
// through here (docs/reliability.md, issue #14 item 2):
//  - a target is checked when its flag is parsed, before the run: its directory
//    must exist and be writable, and the target must be absent or a regular file
//    (a device node, FIFO, socket or directory is refused; so is a symlink, see
//    check_output_target);
//  - a command only queues its artefacts (add_artefact); run_cli writes them after
//    the command returned, so a run that fails (exit 2 or 3) writes nothing;
//  - each file is written to a temporary with a random name in the target's own
//    directory, opened O_CREAT|O_EXCL|O_NOFOLLOW (a planted file or symlink at that
//    name is never followed or reused), fsync'd, then renamed over the target;
//  - stdout is flushed and checked (`plan > /dev/full` fails with a message), and
//    closed and checked at exit.
#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvsight::cli {

// A write that failed after its target was accepted (disk full, I/O error, a
// target replaced during the run): a runtime error, exit code 3.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One artefact of a run. An empty path means stdout.
struct Artefact {
  std::string path;
  std::string flag;  // "--output", "--plot", "--json-output": named in messages
  std::string text;
};

// Refuses (InputError(flag, ...), exit 2) a target that cannot be written safely:
// an empty path; a directory that does not exist, is not a directory or is not
// writable; an existing target that is not a regular file. A symlink is refused
// as well, not followed: renaming over it would replace the link itself (out.json
// would silently stop pointing where it did), and following it would write
// wherever someone who could plant the link chose; the message asks for the real
// path instead.
void check_output_target(const std::string& path, const std::string& flag);

// A CLI11 validator running check_output_target on the flag's value at parse
// time, i.e. before any command runs (a sweep with a bad --output never starts).
CLI::Validator output_target(const std::string& flag);

// A file a flag named as input (--log, --model, --calibration): an output must not be it.
struct InputPath {
  std::string path;
  std::string flag;
};

// Refuses (InputError, exit 2, before anything is written) two artefacts that are one file
// (-o and --plot naming the same path, or two names of it) and an artefact that is one of
// the run's input files (issue #25 class 7: the input or one artefact was silently lost).
// Existing files are compared by device and inode, so a hard link, a symlinked directory
// or "./x" against "x" is caught; a target that does not exist yet by its canonical path.
void check_distinct_files(const std::vector<Artefact>& artefacts, const std::vector<InputPath>& inputs);

// Writes all artefacts: every file first to its temporary (written, fsync'd,
// closed), then all renamed, then stdout. If any temporary fails, all temporaries
// are removed and no target is touched. Throws InputError if a target no longer
// passes check_output_target, OutputError if a write fails.
void write_artefacts(const std::vector<Artefact>& artefacts);

// Writes one file the same way (a one-element write_artefacts).
void write_output_file(const std::string& path, const std::string& flag, const std::string& text);

// Flushes stdout and reports a write error (ENOSPC on /dev/full, EPIPE, EIO) as
// OutputError. close_stdout() also closes it, for main() at exit: an error that
// only close reports (NFS) is caught too. Returns false and prints a message
// to stderr if it failed.
void flush_stdout();
bool close_stdout();

}  // namespace kvsight::cli
