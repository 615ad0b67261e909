// ModelSpec queries, and resolving --model to a config: catalog id, file,
// directory, or an org/name in the local Hugging Face cache (never the network).
#include "kvsight/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvsight/catalog.hpp"
#include "kvsight/error.hpp"

namespace kvsight {

namespace fs = std::filesystem;

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::full_attention: return "full";
    case LayerKind::sliding_window: return "sliding";
    case LayerKind::chunked_local: return "chunked";
    case LayerKind::mla: return "mla";
    case LayerKind::recurrent: return "recurrent";
    case LayerKind::shared_kv: return "shared_kv";
    case LayerKind::none: return "none";
  }
  return "?";
}

std::string_view to_string(RecurrentKind kind) {
  switch (kind) {
    case RecurrentKind::mamba1: return "mamba1";
    case RecurrentKind::mamba2: return "mamba2";
    case RecurrentKind::gated_delta_net: return "gated_delta_net";
    case RecurrentKind::short_conv: return "short_conv";
  }
  return "?";
}

std::uint32_t ModelSpec::count(LayerKind kind) const {
  return static_cast<std::uint32_t>(
      std::count_if(layers.begin(), layers.end(), [kind](const LayerSpec& l) { return l.kind == kind; }));
}

std::uint32_t ModelSpec::attention_layer_count() const {
  return static_cast<std::uint32_t>(
      std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.allocates_kv(); }));
}

std::uint32_t ModelSpec::rope_layer_count() const {
  return static_cast<std::uint32_t>(std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) {
    return (l.is_attention() || l.kind == LayerKind::shared_kv) && l.rope;
  }));
}

std::uint32_t ModelSpec::nope_layer_count() const {
  return static_cast<std::uint32_t>(std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) {
    return (l.is_attention() || l.kind == LayerKind::shared_kv) && !l.rope;
  }));
}

bool ModelSpec::is_hybrid() const { return count(LayerKind::recurrent) > 0 && attention_layer_count() > 0; }

std::uint64_t derived_max_model_len(const ModelSpec& model) {
  std::uint64_t length = model.config_max_len != 0 ? model.config_max_len : model.max_position_embeddings;
  const RopeScaling& rs = model.rope_scaling;
  const bool gemma3 = model.model_type.find("gemma3") != std::string::npos;
  if (!rs.type.empty() && !gemma3 && rs.type != "su" && rs.type != "longrope" && rs.type != "llama3") {
    if (rs.type == "yarn" && rs.original_max_position_embeddings > 0) length = rs.original_max_position_embeddings;
    const double scaled = static_cast<double>(length) * rs.factor;
    // llround beyond 2^63 gives an unspecified value: a confident wrong length.
    if (!(scaled < 9.2e18))
      throw OverflowError("rope_scaling.factor", "max length " + std::to_string(length) + " x " +
                                                     std::to_string(rs.factor) + " exceeds 2^63 tokens");
    length = static_cast<std::uint64_t>(std::llround(scaled));
  }
  return length;
}

namespace {

std::string read_text_file(const fs::path& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(field, "cannot read '" + path.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
// (huggingface_hub constants.py).
std::vector<fs::path> hf_cache_roots() {
  std::vector<fs::path> roots;
  if (const char* hub = std::getenv("HF_HUB_CACHE"); hub && *hub) roots.emplace_back(hub);
  if (const char* home = std::getenv("HF_HOME"); home && *home) roots.push_back(fs::path(home) / "hub");
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) roots.push_back(fs::path(xdg) / "huggingface" / "hub");
  if (const char* user = std::getenv("HOME"); user && *user) roots.push_back(fs::path(user) / ".cache" / "huggingface" / "hub");
  return roots;
}

// models--org--name/snapshots/<rev>/config.json; the revision refs/main names
// when present, else the most recently modified snapshot.
std::optional<fs::path> find_in_hf_cache(const std::string& org_name, std::vector<std::string>& tried) {
  const auto slash = org_name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == org_name.size()) return std::nullopt;
  const std::string folder = "models--" + org_name.substr(0, slash) + "--" + org_name.substr(slash + 1);
  for (const auto& root : hf_cache_roots()) {
    const fs::path repo = root / folder;
    tried.push_back((repo / "snapshots" / "*" / "config.json").string());
    std::error_code ec;
    if (!fs::is_directory(repo / "snapshots", ec)) continue;
    std::string main_rev;
    if (std::ifstream ref(repo / "refs" / "main"); ref) std::getline(ref, main_rev);
    if (!main_rev.empty() && fs::is_regular_file(repo / "snapshots" / main_rev / "config.json", ec))
      return repo / "snapshots" / main_rev / "config.json";
    std::optional<fs::path> best;
    fs::file_time_type best_time{};
    for (const auto& entry : fs::directory_iterator(repo / "snapshots", ec)) {
      const fs::path config = entry.path() / "config.json";
      if (!fs::is_regular_file(config, ec)) continue;
      const auto t = fs::last_write_time(config, ec);
      if (!best || t > best_time) {
        best = config;
        best_time = t;
      }
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace

ModelSpec resolve_model(const std::string& model_arg) {
  if (model_arg.empty()) throw InputError("--model", "is empty; give a catalog id (see `kvsight models`), a config.json path, a directory or an org/name in the local HF cache");
  if (const CatalogModel* entry = find_catalog_model(model_arg)) {
    ModelSpec spec = parse_hf_config(entry->config_text, "catalog:" + entry->id);
    spec.id = entry->id;
    spec.display_name = entry->name;
    spec.source = entry->source;
    return spec;
  }
  std::error_code ec;
  const fs::path path(model_arg);
  if (fs::is_regular_file(path, ec)) {
    ModelSpec spec = parse_hf_config(read_text_file(path, "--model"), path.string());
    spec.id = model_arg;
    spec.display_name = path.parent_path().filename().string();
    spec.local_dir = path.parent_path().string();
    return spec;
  }
  if (fs::is_directory(path, ec)) {
    const fs::path config = path / "config.json";
    if (!fs::is_regular_file(config, ec))
      throw InputError("--model", "directory '" + model_arg + "' holds no config.json");
    ModelSpec spec = parse_hf_config(read_text_file(config, "--model"), config.string());
    spec.id = model_arg;
    spec.display_name = fs::absolute(path, ec).filename().string();
    spec.local_dir = path.string();
    return spec;
  }
  std::vector<std::string> tried;
  if (auto cached = find_in_hf_cache(model_arg, tried)) {
    ModelSpec spec = parse_hf_config(read_text_file(*cached, "--model"), cached->string());
    spec.id = model_arg;
    spec.display_name = model_arg;
    spec.local_dir = cached->parent_path().string();
    return spec;
  }
  std::string message = "'" + model_arg + "' is not a catalog id (see `kvsight models`), not a file or directory";
  if (!tried.empty()) {
    message += ", and not in the local Hugging Face cache (looked for";
    for (const auto& t : tried) message += " " + t;
    message += "; kvsight never downloads)";
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
    if (item.empty()) throw InputError("--model", "'" + arg + "' has an empty entry; give ids separated by commas, or all");
    out.push_back(item);
  }
  if (out.empty()) throw InputError("--model", "is empty");
  return out;
}

}  // namespace kvsight
