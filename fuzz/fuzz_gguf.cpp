// Fuzzes the GGUF reader (kvsight::read_gguf, then read_gguf_model): the input is
// the whole file, handed over as an in-memory file (memfd) since the reader takes
// a path and reads bounded ranges of it. InputError is the expected outcome for
// bad bytes; an accepted file must describe tensors that lie inside it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gguf.hpp"

using namespace kvsight;
using kvsight::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = ::memfd_create("fuzz.gguf", MFD_CLOEXEC);
  if (fd < 0) return 0;
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const GgufFile file = read_gguf(path);
    require(file.data_offset <= size || file.tensors.empty(), "tensor data starts beyond the file");
    std::uint64_t end = 0;
    for (const auto& t : file.tensors) {
      require(t.offset >= end, "tensor '" + t.name + "' overlaps the previous one");
      end = t.offset + t.bytes;
      require(file.data_offset + end <= size, "tensor '" + t.name + "' ends beyond the file");
    }
    const ModelSpec model = read_gguf_model(path);
    require(model.exact_weights.has_value(), "an accepted GGUF model has no exact weights");
    require(model.exact_weights->bytes == file.tensor_bytes, "weights are not the sum of the tensor sizes");
  } catch (const InputError&) {
  }
  ::close(fd);
  return 0;
}
