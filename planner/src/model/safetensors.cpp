// Safetensors headers and the set of shards a model directory holds. Only the
// 8-byte length and the JSON header of any file are read, never the data
// (docs/reference/model-inputs.md "Safetensors").
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <new>
#include <regex>
#include <set>
#include <string_view>
#include <utility>

#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"
#include "kvsight/weights.hpp"

namespace kvsight {

namespace fs = std::filesystem;

namespace {

// Element width in bits of every safetensors dtype (huggingface/safetensors
// safetensors/src/tensor.rs Dtype::bitsize, v0.6: F4 and F6 are sub-byte).
struct StDtype {
  const char* name;
  std::uint64_t bits;
};
constexpr StDtype kStDtypes[] = {
    {"BOOL", 8},    {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},    {"F8_E5M2", 8},
    {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},    {"U16", 16},    {"F16", 16}, {"BF16", 16}, {"I32", 32},
    {"U32", 32},    {"F32", 32},    {"C64", 64},    {"F64", 64},    {"I64", 64}, {"U64", 64},
};

std::uint64_t dtype_bits(const std::string& name, const std::string& field) {
  for (const auto& d : kStDtypes)
    if (name == d.name) return d.bits;
  std::string allowed;
  for (const auto& d : kStDtypes) allowed += (allowed.empty() ? "" : ", ") + std::string(d.name);
  throw InputError(field,
                   "dtype '" + name.substr(0, 32) + "' is not a safetensors dtype; allowed: " + allowed);
}

std::uint64_t read_le64(std::string_view bytes) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return v;
}

// The largest header kvsight reads: 32 MiB. A header is about 100-150 B of JSON per tensor; the
// largest real ones are a few MB (a whole DeepSeek-V3, 91,000 tensors, in one file would be about
// 12 MB; its shards hold ~560 tensors, ~70 KB each), so 32 MiB is over twice the largest real
// need. Parsed, a header takes about 12x its size in memory (nlohmann::json; a 30 MiB header
// peaks at 362 MiB RSS, tests/test_reader_bounds.cpp), so the cap keeps a read under 400 MB,
// inside a 2 GB address-space limit; safetensors' own MAX_HEADER_SIZE
// (safetensors/src/tensor.rs, 100,000,000 bytes) parsed the same way ran out of memory there
// (issue #25 class 4: std::bad_alloc, SIGABRT).
constexpr std::uint64_t kMaxHeaderBytes = 32ull << 20;
// model.safetensors.index.json: about 100 B per tensor; DeepSeek-V3's (91,000
// tensors) is under 10 MB.
constexpr std::uint64_t kMaxIndexBytes = 64ull << 20;

void refuse_long_header(std::uint64_t header_len, const std::string& origin) {
  if (header_len > kMaxHeaderBytes)
    throw InputError(origin, "safetensors header length " + std::to_string(header_len) +
                                 " exceeds kvsight's " + std::to_string(kMaxHeaderBytes) +
                                 "-byte limit (32 MiB; the largest real headers are a few MB)");
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view bytes, std::uint64_t file_size,
                                           const std::string& origin) {
  // Format (huggingface/safetensors README "Format"): 8-byte little-endian header
  // length N, then N bytes of JSON {name: {dtype, shape, data_offsets: [begin,
  // end]}, ..., "__metadata__": {...}}, then the data; offsets are relative to the
  // data start. The rules below are the ones safetensors' own loader enforces
  // (tensor.rs Metadata::validate and read_metadata): offsets contiguous from 0 in
  // order, end - begin = elements x dtype size, the last end = the data size.
  if (bytes.size() < 8 || file_size < 8)
    throw InputError(origin, "is not a safetensors file: shorter than its 8-byte header length");
  const std::uint64_t header_len = read_le64(bytes.substr(0, 8));
  if (header_len > file_size - 8 || header_len > bytes.size() - 8)
    throw InputError(origin, "safetensors header length " + std::to_string(header_len) +
                                 " is larger than the file (" + std::to_string(file_size) + " bytes)");
  refuse_long_header(header_len, origin);
  nlohmann::json header;
  try {
    header = parse_json_input(bytes.substr(8, static_cast<std::size_t>(header_len)), "safetensors header");
  } catch (const InputError& e) {  // depth, NUL, trailing bytes, syntax: said the same way
    std::string what = e.what();
    if (what.rfind("safetensors header: ", 0) == 0) what.erase(0, 20);
    throw InputError(origin, "safetensors header is not valid JSON: " + what);
  } catch (const std::bad_alloc&) {
    // Under an address-space limit even a header within the cap may not fit: the input is
    // refused, never an abort.
    throw InputError(origin, "safetensors header of " + std::to_string(header_len) +
                                 " bytes does not fit in memory here (allocation failed)");
  }
  if (!header.is_object()) throw InputError(origin, "safetensors header is not a JSON object");
  const std::uint64_t data_size = file_size - 8 - header_len;
  SafetensorsHeader out;
  struct Span {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, tensor] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string field = origin + ": tensor '" + name.substr(0, 128) + "'";
    if (!tensor.is_object())
      throw InputError(field, "is not an object; {dtype, shape, data_offsets} is required");
    auto offsets = tensor.find("data_offsets");
    if (offsets == tensor.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
      throw InputError(field + ".data_offsets", "must be two non-negative integers [begin, end]");
    const auto begin = (*offsets)[0].get<std::uint64_t>(), end = (*offsets)[1].get<std::uint64_t>();
    if (begin > end || end > data_size)
      throw InputError(field + ".data_offsets", "[" + std::to_string(begin) + ", " + std::to_string(end) +
                                                    "] fall outside the file's " + std::to_string(data_size) +
                                                    " data bytes");
    SafetensorsTensor t;
    t.name = name;
    auto dt = tensor.find("dtype");
    if (dt == tensor.end() || !dt->is_string())
      throw InputError(field + ".dtype", "is missing or not a string");
    t.dtype = dt->get<std::string>();
    const std::uint64_t bits = dtype_bits(t.dtype, field + ".dtype");
    auto shape = tensor.find("shape");
    if (shape == tensor.end() || !shape->is_array())
      throw InputError(field + ".shape", "is missing or not a list of non-negative integers");
    std::uint64_t elements = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned())
        throw InputError(field + ".shape", "entries must be non-negative integers");
      t.shape.push_back(d.get<std::uint64_t>());
      elements = checked_mul(elements, t.shape.back(), field + ".shape");
    }
    const std::uint64_t bit_count = checked_mul(elements, bits, field + ".shape");
    if (bit_count % 8 != 0 || bit_count / 8 != end - begin)
      throw InputError(field + ".data_offsets",
                       "span " + std::to_string(end - begin) + " bytes, but " + t.dtype + " x " +
                           std::to_string(elements) + " elements is " + std::to_string(bit_count) +
                           " bits; they must agree (dtype size x shape = end - begin)");
    t.bytes = end - begin;
    out.total_bytes = checked_add(out.total_bytes, t.bytes, "safetensors bytes");
    spans.push_back({begin, end, name.substr(0, 128)});
    out.tensors.push_back(std::move(t));
  }
  if (out.tensors.empty())
    throw InputError(origin, "safetensors header lists no tensors; a weights file has at least one");
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (const Span& s : spans) {
    if (s.begin != expected)
      throw InputError(origin + ": tensor '" + s.name + "'.data_offsets",
                       "begins at " + std::to_string(s.begin) + " but the previous tensor ends at " +
                           std::to_string(expected) + "; tensors must be contiguous and must not overlap");
    expected = s.end;
  }
  if (expected != data_size)
    throw InputError(origin, "tensors cover " + std::to_string(expected) + " of the file's " +
                                 std::to_string(data_size) + " data bytes; they must cover all of it");
  return out;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  const std::uint64_t size = regular_file_size(path, path);
  if (size < 8) throw InputError(path, "is not a safetensors file: shorter than its 8-byte header length");
  const std::string length_bytes = read_file_range(path, path, 0, 8);
  const std::uint64_t header_len = read_le64(length_bytes);
  if (header_len > size - 8)
    throw InputError(path, "safetensors header length " + std::to_string(header_len) +
                               " is larger than the file (" + std::to_string(size) + " bytes)");
  refuse_long_header(header_len, path);
  return parse_safetensors_header(length_bytes + read_file_range(path, path, 8, header_len), size, path);
}

bool is_multimodal_encoder_tensor(const std::string& name) {
  // Tensor-name prefixes of the vision / audio encoders and their projectors in
  // transformers and vLLM checkpoints (Gemma 3 vision_tower. / multi_modal_projector.,
  // Mistral 3 the same, Llama 4 vision_model. / multi_modal_projector., Qwen-VL
  // visual., Gemma 3n embed_vision. / audio_tower. / embed_audio.; with or without
  // a leading "model.").
  static const char* const prefixes[] = {
      "vision_tower.", "vision_model.", "visual.",      "multi_modal_projector.", "vision_encoder.",
      "mm_projector.", "embed_vision.", "audio_tower.", "embed_audio.",           "audio_model."};
  std::string_view n = name;
  if (n.rfind("model.", 0) == 0) n.remove_prefix(6);
  for (const char* p : prefixes)
    if (n.rfind(p, 0) == 0) return true;
  return false;
}

namespace {
// Adds one shard's header to the set: its bytes, and those of its encoder tensors.
void count_header(SafetensorsSet& set, const SafetensorsHeader& header) {
  set.bytes = checked_add(set.bytes, header.total_bytes, "safetensors bytes");
  for (const auto& t : header.tensors)
    if (is_multimodal_encoder_tensor(t.name)) {
      set.encoder_bytes = checked_add(set.encoder_bytes, t.bytes, "safetensors bytes");
      ++set.encoder_tensors;
    }
}
// Reads and counts the shards of one set, each once: the same file reached under two names (a
// symlinked shard, a hard link, an index name that holds a NUL) and a tensor that two shards
// hold are refused naming both, never counted twice as exact (issue #25 class 4).
class ShardCounter {
 public:
  ShardCounter(SafetensorsSet& set, std::string dir_prefix) : set_(set), dir_prefix_(std::move(dir_prefix)) {}
  SafetensorsHeader add(const std::string& name) {
    const std::string path = dir_prefix_ + name;
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0) {
      const auto [it, added] =
          files_.emplace(std::pair<std::uint64_t, std::uint64_t>(info.st_dev, info.st_ino), name);
      if (!added)
        throw InputError(path,
                         "is the same file as '" + dir_prefix_ + it->second +
                             "' (a link to it); each shard of a set is its own file and is counted once");
    }
    SafetensorsHeader header = read_safetensors_header(path);
    for (const auto& t : header.tensors) {
      const auto [it, added] = shard_of_.emplace(t.name, name);
      if (!added)
        throw InputError(path, "holds tensor '" + t.name.substr(0, 128) + "', which '" + dir_prefix_ +
                                   it->second + "' holds too; each tensor of a checkpoint is in one shard");
    }
    count_header(set_, header);
    set_.files.push_back(name);
    return header;
  }

 private:
  SafetensorsSet& set_;
  std::string dir_prefix_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> files_;  // (device, inode) -> name
  std::map<std::string, std::string> shard_of_;                           // tensor -> shard
};

}  // namespace

std::optional<SafetensorsSet> safetensors_in_dir(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;    // *.safetensors file names
  std::vector<std::string> indexes;  // *.safetensors.index.json
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0) files.push_back(name);
    if (name.size() > 23 && name.compare(name.size() - 23, 23, ".safetensors.index.json") == 0)
      indexes.push_back(name);
  }
  if (ec) throw InputError(dir, "cannot list the directory: " + ec.message());
  std::sort(files.begin(), files.end());
  std::sort(indexes.begin(), indexes.end());
  if (files.empty() && indexes.empty()) return std::nullopt;

  SafetensorsSet set;
  std::set<std::string> counted;
  const std::string dir_prefix = (fs::path(dir) / "").string();
  ShardCounter shards(set, dir_prefix);
  if (!indexes.empty()) {
    // transformers writes model.safetensors.index.json; its weight_map (tensor ->
    // shard file) is the list of shards (transformers modeling_utils
    // load_sharded_checkpoint). Another name is used only when it is the only one.
    std::string index_name = "model.safetensors.index.json";
    if (std::find(indexes.begin(), indexes.end(), index_name) == indexes.end()) {
      if (indexes.size() > 1)
        throw InputError(dir, "holds several safetensors indexes (" + indexes[0] + ", " + indexes[1] +
                                  ") and no model.safetensors.index.json; keep one");
      index_name = indexes[0];
    }
    const std::string index_path = dir_prefix + index_name;
    nlohmann::json index;
    try {
      index = parse_json_input(read_input_file(index_path, index_path, kMaxIndexBytes), index_path);
    } catch (const std::bad_alloc&) {
      throw InputError(index_path, "does not fit in memory here (allocation failed)");
    }
    auto map = index.is_object() ? index.find("weight_map") : index.end();
    if (!index.is_object() || map == index.end() || !map->is_object() || map->empty())
      throw InputError(index_path + ": weight_map",
                       "is missing or empty; an object {tensor: shard file} is required");
    std::map<std::string, std::set<std::string>> tensors_of;  // shard -> tensors the index puts there
    for (const auto& [tensor, shard] : map->items()) {
      // A NUL would end the name at the system call: "a.safetensors\u0000x" is a.safetensors.
      if (!shard.is_string() || shard.get<std::string>().empty() ||
          shard.get<std::string>().find_first_of(std::string("/\0", 2)) != std::string::npos ||
          shard.get<std::string>() == "..")
        throw InputError(index_path + ": weight_map['" + tensor.substr(0, 128) + "']",
                         "must be a file name in the same directory");
      tensors_of[shard.get<std::string>()].insert(tensor);
    }
    for (const auto& [shard, tensors] : tensors_of) {
      const std::string path = dir_prefix + shard;
      if (!fs::exists(path, ec))
        throw InputError(index_path, "names shard '" + shard + "' (" + std::to_string(tensors.size()) +
                                         " tensors), which is missing from " + dir +
                                         "; the download is incomplete: fetch it again");
      const SafetensorsHeader header = shards.add(shard);
      std::set<std::string> present;
      for (const auto& t : header.tensors) present.insert(t.name);
      for (const auto& t : tensors)
        if (!present.count(t))
          throw InputError(index_path,
                           "puts tensor '" + t.substr(0, 128) + "' in '" + shard +
                               "', whose header does not have it; the shard and the index disagree");
      counted.insert(shard);
    }
    set.how = "the shards " + index_name + " lists";
  } else if (files.size() == 1) {
    shards.add(files[0]);
    counted.insert(files[0]);
    set.how = "the only safetensors file";
  } else {
    // Several files and no index: a complete set of NAME-0000i-of-0000N shards
    // (transformers' shard naming, utils/hub.py) is counted; anything else beside
    // it (consolidated copies, adapters) is not.
    static const std::regex shard_name(R"((.*)-(\d{5})-of-(\d{5})\.safetensors)");
    std::map<std::pair<std::string, std::uint64_t>, std::set<std::uint64_t>> groups;
    for (const auto& name : files) {
      std::smatch m;
      if (std::regex_match(name, m, shard_name))
        groups[{m[1].str(), std::stoull(m[3].str())}].insert(std::stoull(m[2].str()));
    }
    if (groups.size() != 1) {
      std::string listed;
      for (std::size_t i = 0; i < files.size() && i < 6; ++i) listed += (i ? ", " : "") + files[i];
      throw InputError(dir, "holds " + std::to_string(files.size()) + " safetensors files (" + listed +
                                ") and no model.safetensors.index.json, and they are not one set of "
                                "NAME-0000i-of-0000N shards; add the index, remove the extra files, or give "
                                "--weights-gib");
    }
    const auto& [key, present] = *groups.begin();
    const auto& [stem, total] = key;
    if (total == 0)
      throw InputError(
          dir, "shards '" + stem + "-*-of-00000.safetensors' say a set of 0 shards; a set has 1 or more");
    char buffer[64];
    for (std::uint64_t i = 1; i <= total; ++i) {
      std::snprintf(buffer, sizeof buffer, "-%05llu-of-%05llu.safetensors",
                    static_cast<unsigned long long>(i), static_cast<unsigned long long>(total));
      const std::string name = stem + buffer;
      if (!present.count(i))
        throw InputError(dir, "shard '" + name + "' of " + std::to_string(total) +
                                  " is missing; the download is incomplete: fetch it again");
      shards.add(name);
      counted.insert(name);
    }
    set.how = std::to_string(total) + " shards " + stem + "-*-of-" + std::to_string(total);
  }
  for (const auto& name : files)
    if (!counted.count(name)) set.skipped.push_back(name);
  return set;
}

std::optional<std::uint64_t> safetensors_bytes_in_dir(const std::string& dir) {
  if (auto set = safetensors_in_dir(dir)) return set->bytes;
  return std::nullopt;
}

}  // namespace kvsight
