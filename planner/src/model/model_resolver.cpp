// Resolving --model to a config: catalog id, file, directory, or an org/name in the
// local Hugging Face cache (never the network).
#include "kvsight/model_resolver.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "kvsight/ascii.hpp"
#include "kvsight/catalog.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gguf.hpp"
#include "kvsight/input_file.hpp"
#include "kvsight/suggest.hpp"
#include "kvsight/weights.hpp"

namespace kvsight {

namespace fs = std::filesystem;

namespace {

// The largest config.json kvsight reads. Real ones are a few KB; the largest with
// per-layer lists (Gemma 3n, Nemotron-NAS block_configs) are under 200 KB.
constexpr std::uint64_t kMaxConfigBytes = 4ull << 20;

enum class FileKind { json, gguf, safetensors, other };

struct Sniffed {
  FileKind kind = FileKind::other;
  std::uint64_t size = 0;
  std::string first_bytes;  // for the message when nothing matched
};

// What a file is, from its first bytes (never its name): GGUF's magic "GGUF"
// (ggml docs/gguf.md), safetensors' 8-byte header length followed by '{', JSON's
// first non-blank character. Reads at most 4 KB, after checking it is a
// regular file (a FIFO or a device is refused before any read).
Sniffed sniff(const fs::path& path, const std::string& field) {
  Sniffed out;
  out.size = regular_file_size(path, field);
  const std::string head = read_file_range(path, field, 0, std::min<std::uint64_t>(out.size, 4096));
  out.first_bytes = head.substr(0, 8);
  if (head.size() >= 4 && head.compare(0, 4, "GGUF") == 0) {
    out.kind = FileKind::gguf;
    return out;
  }
  if (head.size() >= 9) {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(head[static_cast<std::size_t>(i)]);
    if (head[8] == '{' && n <= out.size - 8) {
      out.kind = FileKind::safetensors;
      return out;
    }
  }
  std::size_t i = 0;
  if (head.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // UTF-8 byte order mark
  while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
  // Any JSON value's first character (the config reader then says what is wrong
  // with it), or nothing at all (an empty file is invalid JSON, said as such).
  if (i == head.size() || std::string_view("{[\"-0123456789tfn").find(head[i]) != std::string_view::npos)
    out.kind = FileKind::json;
  return out;
}

std::string hex_bytes(const std::string& bytes) {
  std::string out;
  char buffer[4];
  for (unsigned char c : bytes) {
    std::snprintf(buffer, sizeof buffer, "%02x", c);
    out += (out.empty() ? "" : " ") + std::string(buffer);
  }
  return out.empty() ? "(empty)" : out;
}

// Reads a config.json after checking what it is and how large.
std::string read_config_text(const fs::path& path, const std::string& field) {
  const Sniffed s = sniff(path, field);
  if (s.kind != FileKind::json)
    throw InputError(field, "'" + path.string() + "' is not a JSON config: it begins with bytes " +
                                hex_bytes(s.first_bytes) +
                                "; allowed: a config.json, a directory holding one, a .gguf file");
  return read_input_file(path, field, kMaxConfigBytes);
}

void attach_safetensors(ModelSpec& spec, const std::string& dir) {
  auto set = safetensors_in_dir(dir);
  if (!set) return;
  ExactWeights w;
  w.bytes = set->bytes;
  w.format = "safetensors";
  w.files = set->files;
  w.skipped = set->skipped;
  w.method = "exact: sum of tensor sizes in the safetensors headers of " + set->how + " (" +
             std::to_string(set->files.size()) + " file" + (set->files.size() == 1 ? "" : "s") + ") in " +
             dir;
  if (set->encoder_tensors > 0) {
    w.method +=
        "; of which " + std::to_string(set->encoder_bytes) + " B in " + std::to_string(set->encoder_tensors) +
        " vision/audio encoder and projector tensors (vision_tower., visual., multi_modal_projector., ...)";
  } else if (spec.vision_params > 0) {
    spec.notes.push_back(
        "weights: the config has a vision_config but the safetensors hold no vision tensors "
        "(a text-only checkpoint): the exact bytes have no vision tower");
  }
  if (!set->skipped.empty()) {
    std::string skipped;
    for (const auto& f : set->skipped) skipped += (skipped.empty() ? "" : ", ") + f;
    w.method += "; not counted: " + skipped;
    spec.notes.push_back("weights: not counted (not among " + set->how + "): " + skipped);
  }
  spec.exact_weights = std::move(w);
}

ModelSpec from_config_file(const fs::path& config, const std::string& model_arg, const std::string& dir_arg) {
  ModelSpec spec = parse_hf_config(read_config_text(config, "--model"), config.string());
  const std::string dir = dir_arg.empty() ? "." : dir_arg;  // a bare "config.json"
  spec.id = model_arg;
  spec.local_dir = dir;
  attach_safetensors(spec, dir);
  return spec;
}

// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
// (huggingface_hub constants.py).
std::vector<fs::path> hf_cache_roots() {
  std::vector<fs::path> roots;
  if (const char* hub = std::getenv("HF_HUB_CACHE"); hub && *hub) roots.emplace_back(hub);
  if (const char* home = std::getenv("HF_HOME"); home && *home) roots.push_back(fs::path(home) / "hub");
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    roots.push_back(fs::path(xdg) / "huggingface" / "hub");
  if (const char* user = std::getenv("HOME"); user && *user)
    roots.push_back(fs::path(user) / ".cache" / "huggingface" / "hub");
  return roots;
}

// refs/main holds the commit hash of the main revision (huggingface_hub
// file_download.py writes it); read it as an input file: a FIFO or a device
// there is refused, not read.
std::string read_ref(const fs::path& ref) {
  std::string text = read_input_file(ref, "HF cache " + ref.string(), 256);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(),
                   [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; }) ||
      text == "." || text == "..")
    throw InputError("HF cache " + ref.string(), "does not hold a revision name; expected a commit hash");
  return text;
}

bool is_gguf_name(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0;
}

// The GGUF files of a snapshot directory, at its top level and one folder down
// (-GGUF repositories keep large quantizations in folders such as Q4_K_M/), as
// paths relative to the snapshot; at most `limit`.
std::vector<std::string> gguf_files(const fs::path& dir, std::size_t limit) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (out.size() >= limit) break;
    const std::string name = entry.path().filename().string();
    if (is_gguf_name(name)) {
      out.push_back(name);
    } else if (entry.is_directory(ec)) {
      for (const auto& inner : fs::directory_iterator(entry.path(), ec))
        if (out.size() < limit && is_gguf_name(inner.path().filename().string()))
          out.push_back(name + "/" + inner.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether a snapshot directory holds a GGUF file (a repository of GGUF files only,
// e.g. the -GGUF repositories llama.cpp users download).
bool holds_gguf(const fs::path& dir) { return !gguf_files(dir, 1).empty(); }

// What a snapshot offers: its config.json, else (no config.json) the snapshot
// directory itself when it holds GGUF files; nullopt when neither.
std::optional<fs::path> snapshot_model(const fs::path& snapshot) {
  std::error_code ec;
  if (fs::exists(snapshot / "config.json", ec)) return snapshot / "config.json";
  if (fs::is_directory(snapshot, ec) && holds_gguf(snapshot)) return snapshot;
  return std::nullopt;
}

// models--org--name/snapshots/<rev>/config.json (or, for a repository of GGUF
// files only, the snapshot directory); the revision refs/main names when
// present, else the most recently modified snapshot.
std::optional<fs::path> find_in_hf_cache(const std::string& org_name, std::vector<std::string>& tried) {
  const auto slash = org_name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == org_name.size()) return std::nullopt;
  const std::string folder = "models--" + org_name.substr(0, slash) + "--" + org_name.substr(slash + 1);
  for (const auto& root : hf_cache_roots()) {
    const fs::path repo = root / folder;
    tried.push_back((repo / "snapshots" / "*" / "config.json").string() + " (or *.gguf)");
    std::error_code ec;
    if (!fs::is_directory(repo / "snapshots", ec)) continue;
    std::string main_rev;
    if (fs::exists(fs::symlink_status(repo / "refs" / "main", ec)))
      main_rev = read_ref(repo / "refs" / "main");
    if (!main_rev.empty())
      if (auto found = snapshot_model(repo / "snapshots" / main_rev)) return found;
    std::optional<fs::path> best;
    fs::file_time_type best_time{};
    for (const auto& entry : fs::directory_iterator(repo / "snapshots", ec)) {
      const auto found = snapshot_model(entry.path());
      if (!found) continue;
      const auto t = fs::last_write_time(*found, ec);
      if (!best || t > best_time) {
        best = found;
        best_time = t;
      }
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace

namespace {

// "meta-llama/Llama-3.1-8B-Instruct" -> "meta-llama/llama-3.1-8b": the Hub id without the
// suffixes that name a chat or instruct tune of the same base model.
std::string base_model_key(const std::string& hub_id) {
  std::string key = ascii_lower(hub_id);
  bool stripped = true;
  while (stripped) {
    stripped = false;
    for (const char* suffix : {"-instruct", "-chat", "-it", "-base", "-hf"}) {
      const std::string s(suffix);
      if (key.size() > s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0) {
        key.erase(key.size() - s.size());
        stripped = true;
      }
    }
  }
  return key;
}

// The catalog entry whose Hub id is `hub_id`'s base or instruct variant, or nullptr.
const CatalogModel* catalog_variant(const std::string& hub_id) {
  if (hub_id.find('/') == std::string::npos) return nullptr;
  const std::string key = base_model_key(hub_id);
  for (const auto& m : model_catalog())
    if (base_model_key(m.name) == key) return &m;
  return nullptr;
}

}  // namespace

ModelSpec resolve_model(const std::string& model_arg) {
  if (model_arg.empty())
    throw InputError("--model",
                     "is empty; give a catalog id (see `kvsight models`), a config.json path, a directory, a "
                     ".gguf file or an org/name in the local HF cache");
  if (const CatalogModel* entry = find_catalog_model(model_arg)) {
    ModelSpec spec = parse_hf_config(entry->config_text, "catalog:" + entry->id);
    spec.id = entry->id;
    spec.display_name = entry->name;
    spec.source = entry->source;
    return spec;
  }
  std::error_code ec;
  const fs::path path(model_arg);
  const auto status = fs::status(path, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    // A file (or a FIFO or device, which sniff() refuses): identified by its bytes.
    const Sniffed s = sniff(path, "--model");
    if (s.kind == FileKind::gguf) {
      ModelSpec spec = read_gguf_model(path.string());
      spec.id = model_arg;
      return spec;
    }
    if (s.kind == FileKind::safetensors)
      throw InputError("--model", "'" + model_arg +
                                      "' is a safetensors weights file, which has no model shape; give " +
                                      "the directory holding it and its config.json");
    if (s.kind != FileKind::json)
      throw InputError(
          "--model", "'" + model_arg +
                         "' is neither a JSON config, a GGUF nor a safetensors file: it begins with bytes " +
                         hex_bytes(s.first_bytes) +
                         "; allowed: a catalog id, a config.json, a model directory, a .gguf file");
    ModelSpec spec = from_config_file(path, model_arg, path.parent_path().string());
    spec.display_name = path.parent_path().filename().string();
    return spec;
  }
  if (fs::is_directory(status)) {
    const fs::path config = path / "config.json";
    if (!fs::exists(config, ec)) {
      if (auto gguf = gguf_in_dir(path.string())) {
        ModelSpec spec = read_gguf_model(*gguf);
        spec.id = model_arg;
        return spec;
      }
      throw InputError("--model", "directory '" + model_arg + "' holds no config.json and no .gguf file");
    }
    ModelSpec spec = from_config_file(config, model_arg, path.string());
    spec.display_name = fs::absolute(path, ec).filename().string();
    return spec;
  }
  std::vector<std::string> tried;
  if (auto cached = find_in_hf_cache(model_arg, tried)) {
    std::error_code dir_ec;
    if (fs::is_directory(*cached, dir_ec)) {
      // A repository of GGUF files only (no config.json): its one GGUF model or
      // split set; several are refused listing them (gguf_in_dir).
      const auto gguf = gguf_in_dir(cached->string());
      if (!gguf) {
        // Only in folders (one per quantization): which one is the user's choice.
        std::string listed;
        for (const auto& f : gguf_files(*cached, 6)) listed += (listed.empty() ? "" : ", ") + f;
        throw InputError("--model", "'" + model_arg + "' in the HF cache (" + cached->string() +
                                        ") holds GGUF files only in folders (" + listed +
                                        "); pass the path of the one to plan");
      }
      ModelSpec spec = read_gguf_model(*gguf);
      spec.id = model_arg;
      spec.display_name = model_arg;
      spec.notes.push_back("read from the HF cache: " + fs::path(*gguf).filename().string() +
                           " (the repository has no config.json)");
      return spec;
    }
    ModelSpec spec = from_config_file(*cached, model_arg, cached->parent_path().string());
    spec.display_name = model_arg;
    return spec;
  }
  std::string message =
      "'" + model_arg + "' is not a catalog id (see `kvsight models`), not a file or directory";
  // Issue #22 item 6: a Hub id whose base or instruct variant is in the catalog has the same
  // shape (fine-tunes keep config.json's shape); a near miss of a catalog id is a typo.
  if (const CatalogModel* variant = catalog_variant(model_arg)) {
    throw InputError("--model", message + ", and not in the local Hugging Face cache; the catalog's " +
                                    variant->id + " (" + variant->name + ") is the same model's " +
                                    "base or instruct variant, with the same shape: use --model " + variant->id +
                                    " (kvsight never downloads)");
  }
  if (model_arg.find('/') == std::string::npos) {
    std::vector<std::string> ids;
    for (const auto& m : model_catalog()) ids.push_back(m.id);
    message += did_you_mean(model_arg, ids);
  }
  if (!tried.empty()) {
    message += ", and not in the local Hugging Face cache (looked for";
    for (const auto& t : tried) message += " " + t;
    message +=
        "; kvsight never downloads). To get its config run `huggingface-cli download " + model_arg +
        " config.json` (or `hf download " + model_arg +
        " config.json`) and run again, or pass the path of a config.json, a model directory or a .gguf file";
  } else {
    message += "; an org/name is looked up in the local Hugging Face cache only";
  }
  throw InputError("--model", message);
}

std::vector<std::string> expand_model_list(const std::string& arg) {
  std::vector<std::string> out;
  if (arg == "all") {
    for (const auto& m : model_catalog()) out.push_back(m.id);
    return out;
  }
  std::stringstream stream(arg);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty())
      throw InputError("--model", "'" + arg + "' has an empty entry; give ids separated by commas, or all");
    out.push_back(item);
  }
  if (out.empty()) throw InputError("--model", "is empty");
  return out;
}

}  // namespace kvsight
