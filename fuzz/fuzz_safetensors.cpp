// Fuzzes the safetensors header reader (kvsight::parse_safetensors_header): an
// 8-byte little-endian length, that many bytes of JSON, then data. The input is
// the whole file. InputError is the expected outcome for bad bytes; an accepted
// header must describe tensors that lie inside the file.
#include <cstdint>
#include <string_view>

#include "fuzz_common.hpp"
#include "kvsight/error.hpp"
#include "kvsight/weights.hpp"

using namespace kvsight;
using kvsight::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  SafetensorsHeader header;
  try {
    header = parse_safetensors_header(bytes, size, "fuzz.safetensors");
  } catch (const InputError&) {
    return 0;
  }
  require(size >= 8, "accepted a file shorter than the 8-byte length");
  std::uint64_t sum = 0;
  for (const auto& t : header.tensors) {
    require(t.bytes <= size, "tensor '" + t.name + "' is larger than the file");
    sum += t.bytes;  // no wrap: each is below the file size, and tensors are few
  }
  require(sum == header.total_bytes, "total_bytes is not the sum of the tensors");
  require(header.total_bytes <= size, "tensor bytes exceed the file");
  return 0;
}
