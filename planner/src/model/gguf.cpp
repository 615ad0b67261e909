// GGUF reader: header, metadata and tensor infos, never the tensor data.
// Layout (ggml docs/gguf.md, version 3): "GGUF", u32 version, u64 tensor count,
// u64 metadata count; metadata {string key, u32 type, value}; tensor infos
// {string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset}; padding to
// general.alignment; the data. Strings are u64 length + bytes, little-endian
// throughout. Validation follows ggml/src/gguf.cpp gguf_init_from_file_impl:
// known value and tensor types, no duplicate keys, at most 4 dims, ne[0] a
// multiple of the type's block, each offset = the previous tensor's end padded to
// the alignment, the data inside the file.
#include "kvsight/gguf.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "families.hpp"
#include "gguf_architectures.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"

namespace kvsight {

namespace fs = std::filesystem;

namespace {

// ggml/src/ggml.c type_traits (blck_size, type_size = sizeof(block_*) from
// ggml/src/ggml-common.h); ids 4, 5 (Q4_2, Q4_3) and 31-33, 36-38 (the removed
// repacked Q4_0_4_4 ... IQ4_NL_8_8) are gone and refused.
constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36},    {41, "Q1_0", 128, 18},    {42, "Q2_0", 64, 18},
};

// Metadata value types (docs/gguf.md gguf_metadata_value_type).
enum ValueType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::uint64_t scalar_size(std::uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool:
      return 1;
    case kU16:
    case kI16:
      return 2;
    case kU32:
    case kI32:
    case kF32:
      return 4;
    case kU64:
    case kI64:
    case kF64:
      return 8;
    default:
      return 0;
  }
}

// Bounds. GGML_MAX_DIMS 4 (ggml.h); a key or tensor name of 64 KiB. Values the planner never
// reads (the tokenizer's arrays, a chat template) are skipped by seeking, never kept, so the
// time and memory of a read depend on the header's entries, not on the file's size (issue #25):
//  - an array of numbers is kept only up to one entry per layer (kMaxLayers, block_count's own
//    bound); a longer one (token types, scores) is skipped whole by its byte length;
//  - a string value is kept up to 64 KiB (every key the planner reads is a short name); a longer
//    one (a chat template) is skipped by its length;
//  - the values kept weigh at most kMaxKeptBytes (16 MiB: a 100,000-layer model's per-layer
//    arrays are 1.6 MB each as JSON); values past it are skipped, and a key the planner needs
//    among them is refused naming the bound;
//  - an array holds at most 2^30 entries: ggml/src/gguf.cpp GGUF_MAX_ARRAY_ELEMENTS, beyond which
//    llama.cpp refuses the file;
//  - the strings of arrays, whose lengths must each be read to find the next key, number at most
//    2^25 in a file: reading 2^25 lengths is 256 MiB, about 0.2 s, inside the reader's 1 s bound,
//    and a real file holds under a million (Gemma 3's 262,144 tokens and a BPE model's ~500,000
//    merges are the largest);
//  - at most 65,536 metadata keys: a real GGUF holds 20-60, llama.cpp names about 200
//    (src/llama-arch.cpp LLM_KV_NAMES).
constexpr std::uint64_t kMaxDims = 4;
constexpr std::uint64_t kMaxName = 65536;
constexpr std::uint64_t kMaxString = 1ull << 30;  // ggml gguf.cpp GGUF_MAX_STRING_LENGTH
constexpr std::uint64_t kMaxKeptString = 65536;
constexpr std::uint64_t kMaxLayers = 100000;
constexpr std::uint64_t kMaxKeptBytes = 16ull << 20;
constexpr std::uint64_t kMaxArray = 1ull << 30;
constexpr std::uint64_t kMaxArrayStrings = 1ull << 25;
constexpr std::uint64_t kMaxMetadata = 65536;
constexpr std::uint64_t kChunk = 1ull << 20;
// What one kept number costs as a JSON value (nlohmann::json is 16 bytes).
constexpr std::uint64_t kKeptEntryBytes = 16;

// Sequential reader over a file, one bounded chunk in memory at a time, the file opened once.
class Cursor {
 public:
  explicit Cursor(const std::string& path) : file_(path, path), path_(path), size_(file_.size()) {}
  std::uint64_t pos() const { return pos_; }
  std::uint64_t size() const { return size_; }
  std::uint64_t remaining() const { return size_ - pos_; }

  void need(std::uint64_t n, const std::string& what) const {
    if (n > remaining())
      throw InputError(path_, what + " at byte " + std::to_string(pos_) + " needs " + std::to_string(n) +
                                  " bytes but the file has " + std::to_string(size_) +
                                  "; the GGUF is truncated or corrupt");
  }
  std::string bytes(std::uint64_t n, const std::string& what) {
    const char* p = view(n, what);
    return std::string(p, static_cast<std::size_t>(n));
  }
  void skip(std::uint64_t n, const std::string& what) {
    need(n, what);
    pos_ += n;
  }
  std::uint64_t uint(std::uint64_t width, const std::string& what) {
    return little_endian(view(width, what), width);
  }
  std::string string(std::uint64_t max, const std::string& what) {
    const std::uint64_t n = uint(8, what + " length");
    if (n > max)
      throw InputError(path_, what + " at byte " + std::to_string(pos_ - 8) + " is " + std::to_string(n) +
                                  " bytes long; allowed: at most " + std::to_string(max));
    return bytes(n, what);
  }
  // Walks `count` strings (a u64 length, then the bytes) reading only their lengths, a chunk
  // at a time; nothing is built per string, so the walk costs about a nanosecond a string.
  void skip_strings(std::uint64_t count, const std::string& what) {
    for (std::uint64_t i = 0; i < count; ++i) {
      if (remaining() < 8 || pos_ < buffer_offset_ || pos_ + 8 > buffer_offset_ + buffer_.size())
        view(8, what + "[" + std::to_string(i) + "] length");  // refills the chunk or refuses
      else
        pos_ += 8;
      const std::uint64_t n = little_endian(buffer_.data() + (pos_ - 8 - buffer_offset_), 8);
      if (n > kMaxString || n > remaining())
        throw InputError(path_, what + "[" + std::to_string(i) + "] at byte " + std::to_string(pos_ - 8) +
                                    " is " + std::to_string(n) + " bytes long; allowed: at most " +
                                    std::to_string(std::min(kMaxString, remaining())) +
                                    " (the rest of the file)");
      pos_ += n;
    }
  }
  const std::string& path() const { return path_; }

 private:
  static std::uint64_t little_endian(const char* p, std::uint64_t width) {
    std::uint64_t v = 0;
    for (std::size_t i = width; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
  }
  // The next n bytes, in the chunk buffer; advances past them.
  const char* view(std::uint64_t n, const std::string& what) {
    need(n, what);
    if (pos_ < buffer_offset_ || pos_ + n > buffer_offset_ + buffer_.size()) {
      buffer_offset_ = pos_;
      file_.read(pos_, std::min(remaining(), std::max(n, kChunk)), buffer_);
    }
    const char* p = buffer_.data() + (pos_ - buffer_offset_);
    pos_ += n;
    return p;
  }

  InputFile file_;
  std::string path_;
  std::uint64_t size_;
  std::uint64_t pos_ = 0;
  std::string buffer_;
  std::uint64_t buffer_offset_ = 0;
};

nlohmann::json read_scalar(Cursor& c, std::uint32_t type, const std::string& what) {
  const std::uint64_t width = scalar_size(type);
  const std::uint64_t raw = c.uint(width, what);
  switch (type) {
    case kU8:
    case kU16:
    case kU32:
    case kU64:
      return raw;
    case kI8:
      return static_cast<std::int64_t>(static_cast<std::int8_t>(raw));
    case kI16:
      return static_cast<std::int64_t>(static_cast<std::int16_t>(raw));
    case kI32:
      return static_cast<std::int64_t>(static_cast<std::int32_t>(raw));
    case kI64:
      return static_cast<std::int64_t>(raw);
    case kBool:
      if (raw > 1)
        throw InputError(c.path(), what + " is a bool of value " + std::to_string(raw) + "; allowed: 0, 1");
      return raw == 1;
    case kF32: {
      const auto bits = static_cast<std::uint32_t>(raw);
      float f = 0;
      std::memcpy(&f, &bits, 4);
      return static_cast<double>(f);
    }
    case kF64: {
      double d = 0;
      std::memcpy(&d, &raw, 8);
      return d;
    }
    default:
      break;
  }
  throw InputError(c.path(), what + " has value type " + std::to_string(type) + "; allowed: 0-12");
}

// The metadata values of one file, with the budgets above.
class ValueReader {
 public:
  explicit ValueReader(Cursor& c) : c_(c) {}

  nlohmann::json read(std::uint32_t type, const std::string& key, const std::string& what) {
    if (type == kString) {
      const std::uint64_t n = c_.uint(8, what + " length");
      if (n > kMaxString)
        throw InputError(c_.path(), what + " at byte " + std::to_string(c_.pos() - 8) + " is " +
                                        std::to_string(n) + " bytes long; allowed: at most " +
                                        std::to_string(kMaxString) +
                                        " (ggml gguf.cpp GGUF_MAX_STRING_LENGTH)");
      if (n > kMaxKeptString || !keep(n)) {
        c_.skip(n, what);
        return skipped("string", n, n);
      }
      return c_.bytes(n, what);
    }
    if (type != kArray) {
      if (scalar_size(type) == 0)
        throw InputError(c_.path(), what + " has value type " + std::to_string(type) + "; allowed: 0-12");
      return read_scalar(c_, type, what);
    }
    const auto elem = static_cast<std::uint32_t>(c_.uint(4, what + " array type"));
    const std::uint64_t count = c_.uint(8, what + " array length");
    if (elem == kArray)
      throw InputError(c_.path(), what + " is an array of arrays; GGUF readers (ggml gguf.cpp) allow none");
    if (elem != kString && scalar_size(elem) == 0)
      throw InputError(c_.path(),
                       what + " is an array of value type " + std::to_string(elem) + "; allowed: 0-12");
    if (count > kMaxArray)
      throw InputError(c_.path(), what + " has " + std::to_string(count) + " entries; allowed: at most " +
                                      std::to_string(kMaxArray) +
                                      " (ggml gguf.cpp GGUF_MAX_ARRAY_ELEMENTS; llama.cpp refuses more)");
    if (elem == kString) {
      // Every string is at least its 8-byte length.
      if (count > c_.remaining() / 8)
        c_.need(checked_mul(count, 8, what), what + " (" + std::to_string(count) + " strings)");
      if (count > kMaxArrayStrings - array_strings_)
        throw InputError(c_.path(), what + " has " + std::to_string(count) + " strings, " +
                                        std::to_string(array_strings_ + count) +
                                        " in the file's arrays so far; allowed: at most " +
                                        std::to_string(kMaxArrayStrings) +
                                        " in all (each length is read to find the next key; a real "
                                        "GGUF holds under a million)");
      array_strings_ += count;
      const std::uint64_t begin = c_.pos();
      c_.skip_strings(count, what);
      return skipped("string", count, c_.pos() - begin);
    }
    const std::uint64_t width = scalar_size(elem);
    const std::uint64_t bytes = checked_mul(count, width, what);
    c_.need(bytes, what + " (" + std::to_string(count) + " entries)");
    // The tokenizer's arrays are never per-layer values.
    if (count > kMaxLayers || key.rfind("tokenizer.", 0) == 0 || !keep(count * kKeptEntryBytes)) {
      c_.skip(bytes, what);
      return skipped(type_name(elem), count, bytes);
    }
    nlohmann::json out = nlohmann::json::array();
    out.get_ref<nlohmann::json::array_t&>().reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) out.push_back(read_scalar(c_, elem, what));
    return out;
  }

 private:
  // Whether a value of `bytes` still fits the budget of kept values (and takes it if so).
  bool keep(std::uint64_t bytes) {
    if (bytes > kMaxKeptBytes - kept_bytes_) return false;
    kept_bytes_ += bytes;
    return true;
  }
  static const char* type_name(std::uint32_t type) {
    static const char* const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return type < 13 ? names[type] : "?";
  }
  // A value skipped unread: its type, its entry count (a string: its length) and its bytes.
  static nlohmann::json skipped(const char* of, std::uint64_t count, std::uint64_t bytes) {
    return nlohmann::json{{"skipped", of}, {"count", count}, {"bytes", bytes}};
  }

  Cursor& c_;
  std::uint64_t kept_bytes_ = 0;
  std::uint64_t array_strings_ = 0;
};

}  // namespace

const GgmlType* find_ggml_type(std::uint32_t id) {
  for (const auto& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

GgufFile read_gguf(const std::string& path) {
  GgufFile out;
  Cursor c(path);
  out.file_size = c.size();
  if (c.bytes(4, "GGUF magic") != "GGUF")
    throw InputError(path, "is not a GGUF file: it does not begin with \"GGUF\"");
  out.version = static_cast<std::uint32_t>(c.uint(4, "GGUF version"));
  // Version 1 had 32-bit counts and lengths; llama.cpp reads 2 and 3 only.
  if (out.version != 2 && out.version != 3)
    throw InputError(path, "GGUF version " + std::to_string(out.version) + "; allowed: 2, 3");
  const std::uint64_t n_tensors = c.uint(8, "tensor count");
  const std::uint64_t n_kv = c.uint(8, "metadata count");
  // A metadata entry is at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.remaining() / 13)
    throw InputError(path, "metadata count " + std::to_string(n_kv) + " cannot fit in the file's " +
                               std::to_string(out.file_size) + " bytes");
  if (n_kv > kMaxMetadata)
    throw InputError(path, "metadata count " + std::to_string(n_kv) + "; allowed: at most " +
                               std::to_string(kMaxMetadata) + " (a real GGUF holds 20-60 keys)");
  ValueReader values(c);
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string(kMaxName, "metadata key " + std::to_string(i));
    const std::string what = "metadata '" + key.substr(0, 128) + "'";
    const auto type = static_cast<std::uint32_t>(c.uint(4, what + " type"));
    nlohmann::json value = values.read(type, key, what);
    if (!out.metadata.emplace(std::move(key), std::move(value)).second)
      throw InputError(path, what + " appears twice; keys must be unique");
  }
  if (n_tensors > c.remaining() / 32)
    throw InputError(path, "tensor count " + std::to_string(n_tensors) + " cannot fit in the file's " +
                               std::to_string(out.file_size) + " bytes");
  if (auto it = out.metadata.find("general.alignment"); it != out.metadata.end()) {
    if (!it->second.is_number_unsigned() || it->second.get<std::uint64_t>() == 0 ||
        (it->second.get<std::uint64_t>() & (it->second.get<std::uint64_t>() - 1)) != 0 ||
        it->second.get<std::uint64_t>() > (1u << 30))
      throw InputError(path, "metadata 'general.alignment' must be a power of two (default 32)");
    out.alignment = it->second.get<std::uint64_t>();
  }
  std::set<std::string> names;
  std::uint64_t expected_offset = 0;
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = c.string(kMaxName, "tensor name " + std::to_string(i));
    const std::string what = "tensor '" + t.name.substr(0, 128) + "'";
    if (!names.insert(t.name).second) throw InputError(path, what + " appears twice; names must be unique");
    const std::uint64_t n_dims = c.uint(4, what + " n_dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      throw InputError(path, what + " has " + std::to_string(n_dims) + " dimensions; allowed: 1 to 4");
    t.elements = 1;
    for (std::uint64_t d = 0; d < n_dims; ++d) {
      t.dims.push_back(c.uint(8, what + " ne"));
      // ggml keeps ne as int64: anything at or above 2^63 is corrupt.
      if (t.dims.back() >= (1ull << 63)) throw InputError(path, what + " has a dimension beyond 2^63");
      t.elements = checked_mul(t.elements, t.dims.back(), path + ": " + what + " elements");
    }
    t.type = static_cast<std::uint32_t>(c.uint(4, what + " type"));
    const GgmlType* type = find_ggml_type(t.type);
    if (!type) {
      std::string known;
      for (const auto& k : kGgmlTypes)
        known += (known.empty() ? "" : ", ") + std::to_string(k.id) + " " + k.name;
      throw InputError(path, what + " has ggml type " + std::to_string(t.type) + "; allowed: " + known);
    }
    if (t.dims[0] % type->block_elements != 0)
      throw InputError(path, what + " of type " + type->name + " has ne[0] " + std::to_string(t.dims[0]) +
                                 ", not a multiple of its block of " + std::to_string(type->block_elements));
    t.bytes =
        checked_mul(t.elements / type->block_elements, type->block_bytes, path + ": " + what + " bytes");
    t.offset = c.uint(8, what + " offset");
    if (t.offset != expected_offset)
      throw InputError(path,
                       what + " has data offset " + std::to_string(t.offset) + ", expected " +
                           std::to_string(expected_offset) +
                           " (the previous tensor's end padded to the alignment); tensors must not overlap");
    expected_offset = round_up(checked_add(t.offset, t.bytes, path + ": tensor data"), out.alignment,
                               path + ": tensor data");
    out.tensor_bytes = checked_add(out.tensor_bytes, t.bytes, path + ": tensor bytes");
    out.tensor_elements = checked_add(out.tensor_elements, t.elements, path + ": tensor elements");
    out.tensors.push_back(std::move(t));
  }
  out.data_offset = round_up(c.pos(), out.alignment, path + ": data offset");
  // The last tensor's padding may be cut off at the end of the file.
  const std::uint64_t data_end =
      out.tensors.empty()
          ? c.pos()
          : checked_add(out.data_offset, out.tensors.back().offset + out.tensors.back().bytes, path);
  if (data_end > out.file_size)
    throw InputError(path, "tensor data ends at byte " + std::to_string(data_end) + " but the file has " +
                               std::to_string(out.file_size) + "; the file is truncated");
  return out;
}

namespace {

// Typed metadata access for one architecture's keys ("{arch}.block_count").
class Meta {
 public:
  Meta(const GgufFile& file, std::string path, std::string arch)
      : file_(file), path_(std::move(path)), arch_(std::move(arch)) {}
  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }
  const nlohmann::json* find(const std::string& full) const {
    auto it = file_.metadata.find(full);
    return it == file_.metadata.end() ? nullptr : &it->second;
  }
  // A value ValueReader skipped unread, asked for by the planner: refused naming the bound.
  void refuse_skipped(const nlohmann::json& v, const std::string& full) const {
    if (!v.is_object()) return;
    const std::string of = v.value("skipped", "");
    const std::string count = std::to_string(v.value("count", std::uint64_t{0}));
    if (of == "string")
      throw InputError(path_ + ": " + full, "is a string of " + count + " bytes; kvsight reads at most " +
                                                std::to_string(kMaxKeptString) + " for a value it needs");
    throw InputError(path_ + ": " + full,
                     "is an array of " + count + " " + of + " entries; kvsight reads arrays of at most " +
                         std::to_string(kMaxLayers) + " (one per layer) and " +
                         std::to_string(kMaxKeptBytes >> 20) + " MiB of kept values per file");
  }
  std::uint64_t as_uint(const nlohmann::json& v, const std::string& full) const {
    refuse_skipped(v, full);
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
      return static_cast<std::uint64_t>(v.get<std::int64_t>());
    throw InputError(path_ + ": " + full, "must be a non-negative integer");
  }
  std::optional<std::uint64_t> uint(const std::string& suffix) const {
    const nlohmann::json* v = find(key(suffix));
    if (!v) return std::nullopt;
    if (v->is_array()) throw InputError(path_ + ": " + key(suffix), "is an array; one integer is required");
    return as_uint(*v, key(suffix));
  }
  std::uint64_t required(const std::string& suffix) const {
    auto v = uint(suffix);
    if (!v || *v == 0)
      throw InputError(path_ + ": " + key(suffix), "missing or 0; a positive integer is required");
    return *v;
  }
  // A per-layer value: one integer for every layer, or an array of n.
  std::optional<std::vector<std::uint64_t>> per_layer(const std::string& suffix, std::uint64_t n) const {
    const nlohmann::json* v = find(key(suffix));
    if (!v) return std::nullopt;
    refuse_skipped(*v, key(suffix));
    if (!v->is_array()) return std::vector<std::uint64_t>(n, as_uint(*v, key(suffix)));
    if (v->size() != n)
      throw InputError(path_ + ": " + key(suffix),
                       "has " + std::to_string(v->size()) + " entries for " + std::to_string(n) + " layers");
    std::vector<std::uint64_t> out;
    out.reserve(v->size());
    const std::string full = key(suffix);  // once, not per layer: a 100,000-layer file is allowed
    for (const auto& x : *v) out.push_back(as_uint(x, full));
    return out;
  }
  double number(const std::string& suffix, double fallback) const {
    const nlohmann::json* v = find(key(suffix));
    if (!v) return fallback;
    if (!v->is_number()) throw InputError(path_ + ": " + key(suffix), "must be a number");
    const double d = v->get<double>();
    // A NaN or infinite float (f32/f64 metadata) would be carried into every figure.
    if (!std::isfinite(d)) throw InputError(path_ + ": " + key(suffix), "is not a finite number");
    return d;
  }
  std::string string(const std::string& full) const {
    const nlohmann::json* v = find(full);
    if (!v) return "";
    refuse_skipped(*v, full);
    if (!v->is_string()) throw InputError(path_ + ": " + full, "must be a string");
    return v->get<std::string>();
  }
  // Called per layer: the key is built only for the error (suffix is a literal).
  std::uint32_t u32(std::uint64_t v, std::string_view suffix) const {
    if (v > 0xffffffffull)
      throw InputError(path_ + ": " + key(suffix), "is " + std::to_string(v) + "; at most 4294967295");
    return static_cast<std::uint32_t>(v);
  }

 private:
  const GgufFile& file_;
  std::string path_;
  std::string arch_;
};

// NAME-0000i-of-0000N.gguf (llama.cpp src/llama.cpp llama_split_path:
// "%s-%05d-of-%05d.gguf").
const std::regex kSplitName(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");

std::string split_path(const std::string& prefix, std::uint64_t i, std::uint64_t n) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "-%05llu-of-%05llu.gguf", static_cast<unsigned long long>(i),
                static_cast<unsigned long long>(n));
  return prefix + buffer;
}

// Adds one file's tensors to the groups llama.cpp loads them by (GgufTensorLayers): blk.N.*
// to block N, the LAYER_INPUT names of src/llama-arch.cpp to the input, the few repeating
// tensors stored outside the blocks to repeating_shared, anything else to the output layer.
void add_tensor_layers(const GgufFile& file, GgufTensorLayers& layers, bool& has_output, std::uint64_t& token_embd) {
  static const std::set<std::string, std::less<>> kInput = {"token_embd",           "position_embd",
                                                             "token_types",          "per_layer_token_embd",
                                                             "masked_embd_centroids", "masked_embd_ordering"};
  static const std::set<std::string, std::less<>> kRepeating = {"rope_freqs", "rope_factors_long",
                                                                 "rope_factors_short", "token_embd_norm"};
  for (const GgufTensor& t : file.tensors) {
    const std::string_view name = t.name;
    const std::string_view base = name.substr(0, name.find('.'));
    if (base == "blk") {
      // "blk.N.": N in decimal, below kMaxLayers (block_count's own bound); anything else is
      // kept with the output layer rather than sizing a vector from a hostile index.
      const std::string_view rest = name.substr(std::min<std::size_t>(4, name.size()));
      const std::string_view digits = rest.substr(0, rest.find('.'));
      std::uint64_t index = 0;
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (error == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index < kMaxLayers) {
        if (layers.blocks.size() <= index) layers.blocks.resize(index + 1, 0);
        layers.blocks[index] = checked_add(layers.blocks[index], t.bytes, "GGUF block bytes");
        continue;
      }
    }
    if (name == "output.weight") has_output = true;
    if (name == "token_embd.weight") token_embd = t.bytes;
    std::uint64_t& group = kInput.count(base)       ? layers.input
                           : kRepeating.count(base) ? layers.repeating_shared
                                                    : layers.output;
    group = checked_add(group, t.bytes, "GGUF tensor bytes");
  }
}

// The weights of a GGUF model: every split's tensors (split.count / split.tensors.count,
// llama.cpp gguf-split). `file` is the first split (or the only file).
ExactWeights read_gguf_split_weights(const GgufFile& file, const Meta& any, const std::string& path,
                                     const std::string& split_prefix, std::uint64_t split_count) {
  ExactWeights weights;
  weights.format = "gguf";
  weights.bytes = file.tensor_bytes;
  weights.params = file.tensor_elements;
  weights.files.push_back(fs::path(path).filename().string());
  GgufTensorLayers layers;
  bool has_output = false;
  std::uint64_t token_embd = 0;
  add_tensor_layers(file, layers, has_output, token_embd);
  if (const nlohmann::json* sc = any.find("split.count")) {
    const std::uint64_t count = any.as_uint(*sc, "split.count");
    if (split_prefix.empty() && count > 1)
      throw InputError(
          path + ": split.count",
          "is " + std::to_string(count) +
              " but the file name is not NAME-0000i-of-0000N.gguf; the other splits cannot be found");
    if (!split_prefix.empty() && count != split_count)
      throw InputError(path + ": split.count", "is " + std::to_string(count) + " but the file name says " +
                                                   std::to_string(split_count));
    std::uint64_t tensors = file.tensors.size();
    // Each split is its own file: one that is a symlink to (or a hard link of) another would be
    // counted twice; refused naming both (compared by device and inode).
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> seen;
    const auto distinct = [&](const std::string& split) {
      struct stat info {};
      if (::stat(split.c_str(), &info) != 0) return;
      const auto [it, added] =
          seen.emplace(std::pair<std::uint64_t, std::uint64_t>(info.st_dev, info.st_ino), split);
      if (!added)
        throw InputError(split, "is the same file as '" + it->second +
                                    "' (a link to it); each split of a split GGUF is its own file: fetch the "
                                    "missing split again");
    };
    distinct(path);
    for (std::uint64_t i = 2; i <= count; ++i) {
      const std::string other = split_path(split_prefix, i, count);
      std::error_code ec;
      if (!fs::exists(other, ec))
        throw InputError(path, "split " + std::to_string(i) + " of " + std::to_string(count) + " ('" + other +
                                   "') is missing; the download is incomplete");
      distinct(other);
      const GgufFile part = read_gguf(other);
      add_tensor_layers(part, layers, has_output, token_embd);
      weights.bytes = checked_add(weights.bytes, part.tensor_bytes, "GGUF tensor bytes");
      weights.params = checked_add(weights.params, part.tensor_elements, "GGUF tensor elements");
      tensors += part.tensors.size();
      weights.files.push_back(fs::path(other).filename().string());
    }
    if (const nlohmann::json* tc = any.find("split.tensors.count");
        tc && any.as_uint(*tc, "split.tensors.count") != tensors)
      throw InputError(path + ": split.tensors.count",
                       "is " + std::to_string(any.as_uint(*tc, "split.tensors.count")) +
                           " but the splits hold " + std::to_string(tensors) + " tensors");
  }
  if (file.tensors.empty() && weights.files.size() == 1)
    throw InputError(path, "holds no tensors; a GGUF model has at least one");
  if (!has_output) layers.tied_output = token_embd;
  weights.gguf_layers = std::move(layers);
  weights.method = "exact: sum of tensor sizes in the GGUF tensor infos of " +
                   std::to_string(weights.files.size()) + " file" + (weights.files.size() == 1 ? "" : "s") +
                   " (" + fs::path(path).filename().string() + ")";
  return weights;
}

// The per-layer attention and feed-forward sizes of a GGUF (one value or one per layer).
struct GgufLayerShapes {
  std::uint64_t n_layer = 0;
  std::vector<std::uint64_t> heads, kv_heads, ff;
  std::uint64_t head_k = 0, head_v = 0;  // key_length, value_length
};

// Hyperparameters: llama.cpp src/llama-model.cpp llm_load_hparams / load_hparams
// and the key names of src/llama-arch.cpp (LLM_KV_*).
GgufLayerShapes read_gguf_hparams(const GgufFile& file, const Meta& meta, const Meta& any,
                                  const std::string& path, ModelSpec& spec) {
  GgufLayerShapes s;
  s.n_layer = meta.required("block_count");
  if (s.n_layer > kMaxLayers)
    throw InputError(path + ": " + meta.key("block_count"),
                     "is " + std::to_string(s.n_layer) + "; at most " + std::to_string(kMaxLayers));
  spec.hidden_size = meta.required("embedding_length");
  s.heads =
      meta.per_layer("attention.head_count", s.n_layer).value_or(std::vector<std::uint64_t>(s.n_layer, 0));
  s.kv_heads = meta.per_layer("attention.head_count_kv", s.n_layer).value_or(s.heads);
  const std::uint64_t max_heads = *std::max_element(s.heads.begin(), s.heads.end());
  spec.num_attention_heads = meta.u32(max_heads, "attention.head_count");
  // n_embd_head_k = key_length, default n_embd / n_head (llama-model.cpp).
  s.head_k = meta.uint("attention.key_length").value_or(max_heads ? spec.hidden_size / max_heads : 0);
  s.head_v = meta.uint("attention.value_length").value_or(s.head_k);
  s.ff = meta.per_layer("feed_forward_length", s.n_layer).value_or(std::vector<std::uint64_t>(s.n_layer, 0));
  std::uint64_t ff_sum = 0;
  for (auto f : s.ff) ff_sum = checked_add(ff_sum, f, meta.key("feed_forward_length"));
  spec.intermediate_size = ff_sum / s.n_layer;
  if (auto v = meta.uint("vocab_size"))
    spec.vocab_size = *v;
  else if (const nlohmann::json* tokens = any.find("tokenizer.ggml.tokens");
           tokens && tokens->is_object() && tokens->value("skipped", "") == "string")
    spec.vocab_size = tokens->value("count", std::uint64_t{0});  // the tokens, counted unread
  for (const auto& t : file.tensors)
    if (spec.vocab_size == 0 && t.name == "token_embd.weight" && t.dims.size() == 2)
      spec.vocab_size = t.dims[1];
  spec.tie_word_embeddings = true;
  for (const auto& t : file.tensors)
    if (t.name == "output.weight") spec.tie_word_embeddings = false;
  // general.file_type names the dominant type (llama_ftype); the per-tensor
  // types are what count, and they are exact already. The model dtype stays
  // the activations' f16 (llama.cpp computes in f16/f32).
  spec.dtype = "fp16";
  return s;
}

void read_gguf_positions(const Meta& meta, const std::string& path, ModelSpec& spec) {
  spec.max_position_embeddings = meta.uint("context_length").value_or(0);
  spec.config_max_len = spec.max_position_embeddings;
  if (spec.max_position_embeddings == 0)
    spec.notes.push_back(meta.key("context_length") + " absent: no model length limit known");
  spec.rope_theta = meta.number("rope.freq_base", 0.0);
  if (spec.rope_theta < 0.0)
    throw InputError(path + ": " + meta.key("rope.freq_base"), "must not be negative");
  const nlohmann::json* type = meta.find(meta.key("rope.scaling.type"));
  std::string t = type && type->is_string() ? type->get<std::string>() : "";
  if (!t.empty() && t != "none") {
    spec.rope_scaling.type = t;
    spec.rope_scaling.factor = meta.number("rope.scaling.factor", 1.0);
    if (!(spec.rope_scaling.factor > 0.0 && spec.rope_scaling.factor < 1e6))
      throw InputError(path + ": " + meta.key("rope.scaling.factor"), "must be a positive number below 10^6");
    spec.rope_scaling.original_max_position_embeddings =
        meta.uint("rope.scaling.original_context_length").value_or(0);
  }
}

void read_gguf_moe(const Meta& meta, const std::string& path, ModelSpec& spec) {
  auto experts = meta.uint("expert_count");
  if (!experts || *experts == 0) return;
  spec.moe.num_experts = meta.u32(*experts, "expert_count");
  spec.moe.experts_per_token = meta.u32(meta.uint("expert_used_count").value_or(1), "expert_used_count");
  spec.moe.num_shared_experts = meta.u32(meta.uint("expert_shared_count").value_or(0), "expert_shared_count");
  spec.moe.moe_intermediate_size = meta.uint("expert_feed_forward_length").value_or(spec.intermediate_size);
  spec.moe.first_k_dense_layers =
      meta.u32(meta.uint("leading_dense_block_count").value_or(0), "leading_dense_block_count");
  if (spec.moe.experts_per_token > spec.moe.num_experts)
    throw InputError(path + ": " + meta.key("expert_used_count"), "exceeds " + meta.key("expert_count"));
}

// The recurrent state of the ssm.* keys (llama-model.cpp LLM_KV_SSM_*), read as the family
// says (families.cpp GgufState).
RecurrentSpec read_gguf_state(const Meta& meta, const families::Family& family, const std::string& path) {
  RecurrentSpec rec;
  rec.conv_dtype = rec.ssm_dtype = "fp32";  // llama.cpp keeps r and s in f32 (llama-memory-recurrent.cpp)
  rec.d_conv = meta.required("ssm.conv_kernel");
  rec.d_state = meta.required("ssm.state_size");
  const std::uint64_t inner = meta.required("ssm.inner_size");
  const std::uint64_t dt_rank = meta.uint("ssm.time_step_rank").value_or(0);
  const std::uint64_t groups = meta.uint("ssm.group_count").value_or(0);
  if (family.gguf_state == families::GgufState::gated_delta_net) {
    // Gated delta-net: d_state = head_k_dim, group_count = num_k_heads,
    // time_step_rank = num_v_heads, inner_size = head_v_dim x num_v_heads
    // (gguf-py convert_hf_to_gguf.py Qwen3NextModel).
    rec.kind = RecurrentKind::gated_delta_net;
    rec.key_head_dim = rec.d_state;
    rec.num_key_heads = groups;
    rec.num_value_heads = dt_rank;
    if (dt_rank == 0 || inner % dt_rank != 0)
      throw InputError(path + ": " + meta.key("ssm.time_step_rank"),
                       "must be positive and divide ssm.inner_size");
    rec.value_head_dim = inner / dt_rank;
  } else if (groups > 0 || family.gguf_state == families::GgufState::mamba2) {
    // Mamba2: time_step_rank = n_heads (convert_hf_to_gguf.py Mamba2Model).
    rec.kind = RecurrentKind::mamba2;
    rec.d_inner = inner;
    rec.n_groups = groups ? groups : 1;
    rec.n_heads = dt_rank;
    if (dt_rank == 0 || inner % dt_rank != 0)
      throw InputError(path + ": " + meta.key("ssm.time_step_rank"),
                       "must be positive and divide ssm.inner_size");
    rec.head_dim = inner / dt_rank;
  } else {
    rec.kind = RecurrentKind::mamba1;
    rec.d_inner = inner;
  }
  validate_recurrent(rec, path + ": " + meta.key("ssm"));
  return rec;
}

// Layer kinds. With ssm.* keys, which layers keep a state: every layer of an all-recurrent
// family (mamba, mamba2); all but every Nth of a family that says so (Qwen3-Next); else in
// hybrids the layers with no KV heads (llama-model.cpp recurrent_layer_arr[i] = n_head_kv(i)
// == 0; Nemotron-H also needs n_ff(i) == 0, its MLP-only layers have neither).
std::vector<LayerKind> read_gguf_layer_kinds(const Meta& meta, const families::Family& family,
                                             const std::string& path, const GgufLayerShapes& s,
                                             ModelSpec& spec) {
  std::vector<LayerKind> kinds(s.n_layer, LayerKind::full_attention);
  if (meta.find(meta.key("ssm.state_size")) == nullptr) return kinds;
  spec.recurrent = read_gguf_state(meta, family, path);
  // llama.cpp src/models/qwen3next.cpp takes (i + 1) % full_attention_interval, which 0 would
  // divide by; src/models/qwen4exp.cpp refuses 0 (qwen4exp_require_nonzero). Refused here too.
  const std::uint64_t interval =
      family.gguf_attention_interval > 0
          ? meta.uint("full_attention_interval").value_or(family.gguf_attention_interval)
          : 0;
  if (family.gguf_attention_interval > 0 && interval == 0)
    throw InputError(path + ": " + meta.key("full_attention_interval"),
                     "is 0; a positive interval (every Nth layer is full attention) is required");
  for (std::uint64_t i = 0; i < s.n_layer; ++i) {
    if (family.layers == families::Layers::all_recurrent) {
      kinds[i] = LayerKind::recurrent;
    } else if (family.gguf_attention_interval > 0) {
      kinds[i] = (i + 1) % interval == 0 ? LayerKind::full_attention : LayerKind::recurrent;
    } else if (s.kv_heads[i] == 0) {
      kinds[i] = spec.traits.mlp_layers && s.ff[i] > 0 ? LayerKind::none : LayerKind::recurrent;
    }
  }
  return kinds;
}

// Sliding window: attention.sliding_window with the pattern from
// attention.sliding_window_pattern (an integer n: layer i slides when
// i % n < n - 1; or one bool per layer), else the family's (families.cpp, from
// llama.cpp src/models/<arch>.cpp load_swa_pattern). Returns the window.
std::uint64_t read_gguf_sliding_layers(const Meta& meta, const families::Family& family,
                                       const std::string& path, ModelSpec& spec,
                                       std::vector<LayerKind>& kinds) {
  const std::uint64_t window = meta.uint("attention.sliding_window").value_or(0);
  if (window == 0) return window;
  const std::uint64_t n_layer = kinds.size();
  std::vector<bool> swa(n_layer, false);
  const nlohmann::json* pattern = meta.find(meta.key("attention.sliding_window_pattern"));
  if (pattern && pattern->is_array()) {
    if (pattern->size() != n_layer)
      throw InputError(
          path + ": " + meta.key("attention.sliding_window_pattern"),
          "has " + std::to_string(pattern->size()) + " entries for " + std::to_string(n_layer) + " layers");
    for (std::uint64_t i = 0; i < n_layer; ++i) {
      if (!(*pattern)[i].is_boolean())
        throw InputError(path + ": " + meta.key("attention.sliding_window_pattern"), "entries must be bools");
      swa[i] = (*pattern)[i].get<bool>();
    }
  } else if (pattern || family.gguf_sliding_pattern > 0) {
    const std::uint64_t n_pattern = pattern
                                        ? meta.as_uint(*pattern, meta.key("attention.sliding_window_pattern"))
                                        : family.gguf_sliding_pattern;
    // llama-hparams.cpp set_swa_pattern: n 0 = every layer slides.
    for (std::uint64_t i = 0; i < n_layer; ++i) swa[i] = n_pattern == 0 || i % n_pattern < n_pattern - 1;
  } else {
    spec.notes.push_back(meta.key("attention.sliding_window") +
                         " is set but this architecture has no sliding-window pattern in llama.cpp: full "
                         "attention on every layer");
  }
  for (std::uint64_t i = 0; i < n_layer; ++i)
    if (swa[i] && kinds[i] == LayerKind::full_attention) kinds[i] = LayerKind::sliding_window;
  return window;
}

// MLA (deepseek2 and kin): attention.kv_lora_rank. From llama.cpp PR #12801 the
// converter writes key_length = kv_lora_rank + n_rot, value_length = kv_lora_rank
// and the per-head sizes as key_length_mla / value_length_mla; the cache is the
// latent. A GGUF without the _mla keys predates it: llama.cpp caches the
// decompressed per-head K and V for it (llama-model.cpp is_mla).
void read_gguf_mla(const Meta& meta, const std::string& path, GgufLayerShapes& s, ModelSpec& spec) {
  auto rank = meta.uint("attention.kv_lora_rank");
  if (!rank || *rank == 0) return;
  MlaSpec mla;
  mla.kv_lora_rank = meta.u32(*rank, "attention.kv_lora_rank");
  mla.q_lora_rank = meta.u32(meta.uint("attention.q_lora_rank").value_or(0), "attention.q_lora_rank");
  mla.qk_rope_head_dim = meta.u32(meta.required("rope.dimension_count"), "rope.dimension_count");
  auto k_mla = meta.uint("attention.key_length_mla");
  auto v_mla = meta.uint("attention.value_length_mla");
  const std::uint64_t k_full = k_mla.value_or(s.head_k), v_full = v_mla.value_or(s.head_v);
  if (k_full <= mla.qk_rope_head_dim)
    throw InputError(path + ": " + meta.key("attention.key_length"),
                     "must exceed rope.dimension_count for MLA");
  mla.qk_nope_head_dim = meta.u32(k_full - mla.qk_rope_head_dim, "attention.key_length");
  mla.v_head_dim = meta.u32(v_full, "attention.value_length");
  mla.gguf_decompressed_cache = !k_mla.has_value();
  spec.mla = mla;
  s.head_k = k_full;
  s.head_v = v_full;
  if (mla.gguf_decompressed_cache)
    spec.notes.push_back(
        "GGUF without attention.key_length_mla (converted before llama.cpp PR #12801): llama.cpp caches "
        "decompressed per-head K and V");
}

// The layers of the kinds read, with their KV shapes.
void build_gguf_layers(const Meta& meta, const std::string& path, const GgufLayerShapes& s,
                       const std::vector<LayerKind>& kinds, std::uint64_t window, ModelSpec& spec) {
  spec.head_dim = meta.u32(s.head_k, "attention.key_length");
  spec.num_kv_heads = 0;
  for (std::uint64_t i = 0; i < s.n_layer; ++i)
    if (kinds[i] != LayerKind::recurrent && kinds[i] != LayerKind::none)
      spec.num_kv_heads = std::max(spec.num_kv_heads, meta.u32(s.kv_heads[i], "attention.head_count_kv"));
  spec.layers.resize(s.n_layer);
  for (std::uint64_t i = 0; i < s.n_layer; ++i) {
    LayerSpec& layer = spec.layers[i];
    layer.kind = kinds[i];
    if (layer.kind == LayerKind::recurrent || layer.kind == LayerKind::none) continue;
    if (spec.mla) {
      layer.kind = LayerKind::mla;
      layer.kv_heads = 1;
      layer.head_dim_k = spec.mla->kv_lora_rank + spec.mla->qk_rope_head_dim;
      layer.head_dim_v = 0;
      continue;
    }
    if (s.heads[i] == 0 || s.kv_heads[i] == 0 || s.head_k == 0)
      throw InputError(path + ": " + meta.key("attention.head_count"),
                       "layer " + std::to_string(i) +
                           " is an attention layer with no heads; give head_count, head_count_kv");
    if (s.heads[i] % s.kv_heads[i] != 0)
      throw InputError(
          path + ": " + meta.key("attention.head_count_kv"),
          std::to_string(s.kv_heads[i]) + " does not divide head_count " + std::to_string(s.heads[i]));
    layer.kv_heads = meta.u32(s.kv_heads[i], "attention.head_count_kv");
    layer.head_dim_k = meta.u32(s.head_k, "attention.key_length");
    layer.head_dim_v = meta.u32(s.head_v, "attention.value_length");
    if (layer.kind == LayerKind::sliding_window) layer.window = window;
  }
}

}  // namespace

ModelSpec read_gguf_model(const std::string& path_arg) {
  std::string path = path_arg;
  // A split model: its hyperparameters live in split 1 (llama.cpp gguf-split
  // writes the metadata to the first split only).
  std::smatch m;
  const std::string file_name = fs::path(path).filename().string();
  std::string split_prefix;
  std::uint64_t split_count = 0;
  if (std::regex_match(file_name, m, kSplitName)) {
    split_prefix = (fs::path(path).parent_path() / m[1].str()).string();
    split_count = std::stoull(m[3].str());
    if (split_count == 0) throw InputError(path, "split count 0 in its name");
    path = split_path(split_prefix, 1, split_count);
  }
  const GgufFile file = read_gguf(path);
  const std::string arch_key = "general.architecture";
  Meta any(file, path, "");
  // A LoRA adapter is no model: llama.cpp loads it with llama_adapter_lora_init
  // (src/llama-adapter.cpp: general.type "adapter", adapter.type "lora"), never as a model.
  if (any.string("general.type") == "adapter" || any.find("adapter.type") != nullptr)
    throw InputError(path + ": general.type",
                     "this is a LoRA adapter, not a model (general.type 'adapter'" +
                         std::string(any.find("adapter.type")
                                         ? ", adapter.type '" + any.string("adapter.type").substr(0, 32) + "'"
                                         : "") +
                         "); give the base model's GGUF (llama.cpp loads an adapter with --lora)");
  const std::string arch = any.string(arch_key);
  if (arch.empty())
    throw InputError(path + ": general.architecture", "missing; a GGUF model names its architecture");
  if (const std::optional<std::string> refusal = gguf_detail::architecture_refusal(arch))
    throw InputError(path + ": general.architecture", *refusal);
  Meta meta(file, path, arch);

  ModelSpec spec;
  spec.source = path;
  spec.architecture = arch;
  spec.model_type = arch;
  const families::Family& family = families::gguf_family(arch);
  spec.traits = families::traits_of(family, arch);
  spec.display_name = any.string("general.name");
  if (spec.display_name.empty()) spec.display_name = fs::path(path).stem().string();

  ExactWeights weights = read_gguf_split_weights(file, any, path, split_prefix, split_count);
  GgufLayerShapes shapes = read_gguf_hparams(file, meta, any, path, spec);
  read_gguf_positions(meta, path, spec);
  read_gguf_moe(meta, path, spec);
  std::vector<LayerKind> kinds = read_gguf_layer_kinds(meta, family, path, shapes, spec);
  const std::uint64_t window = read_gguf_sliding_layers(meta, family, path, spec, kinds);
  read_gguf_mla(meta, path, shapes, spec);
  build_gguf_layers(meta, path, shapes, kinds, window, spec);
  // Falcon-H1: every layer has attention KV and a parallel Mamba-2 state (llama-model.cpp
  // create_memory: filter_attn and filter_recr both true).
  if (spec.traits.parallel_hybrid && spec.recurrent) families::add_parallel_recurrent_layers(spec);
  if (spec.count(LayerKind::recurrent) == 0) spec.recurrent.reset();
  if (spec.attention_layer_count() == 0 && !spec.recurrent)
    throw InputError(path, "has no attention or recurrent layers");
  spec.exact_weights = std::move(weights);
  spec.local_dir = fs::path(path).parent_path().string();
  return spec;
}

std::optional<std::string> gguf_in_dir(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> models;
  std::set<std::string> split_sets;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".gguf") != 0) continue;
    // Vision projectors (mmproj-*.gguf, llama.cpp tools/mtmd) are not the model.
    if (name.rfind("mmproj", 0) == 0) continue;
    std::smatch m;
    if (std::regex_match(name, m, kSplitName)) {
      if (split_sets.insert(m[1].str() + "|" + m[3].str()).second)
        models.push_back(split_path((fs::path(dir) / m[1].str()).string(), 1, std::stoull(m[3].str())));
    } else {
      models.push_back((fs::path(dir) / name).string());
    }
  }
  if (models.empty()) return std::nullopt;
  if (models.size() > 1) {
    std::sort(models.begin(), models.end());
    std::string listed;
    for (std::size_t i = 0; i < models.size() && i < 6; ++i)
      listed += (i ? ", " : "") + fs::path(models[i]).filename().string();
    throw InputError("--model", "directory '" + dir + "' holds " + std::to_string(models.size()) +
                                    " GGUF models (" + listed +
                                    "); pass the path of the one to plan, e.g. --model '" + models[0] + "'");
  }
  return models[0];
}

}  // namespace kvsight
