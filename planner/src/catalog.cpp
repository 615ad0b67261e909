// The built-in catalogs, embedded at build time (cmake/embed_catalog.cmake).
#include "kvsight/catalog.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvsight/catalog_data.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/suggest.hpp"

namespace kvsight {

using json = nlohmann::json;

namespace {

std::vector<CatalogModel> load_models() {
  std::vector<CatalogModel> models;
  for (std::size_t i = 0; i < catalog_data::model_count; ++i) {
    const auto& file = catalog_data::models[i];
    // A broken catalog file is a build defect, not user input; the catalog test
    // parses every entry, so this cannot ship.
    const json root = json::parse(file.text);
    const json meta = root.value("_kvsight", json::object());
    CatalogModel entry;
    std::string name = file.name;
    entry.id = meta.value("id", name.substr(0, name.size() - 5));
    entry.name = meta.value("name", entry.id);
    entry.source = meta.value("source", std::string("planner/data/models/") + file.name);
    entry.config_text = file.text;
    models.push_back(std::move(entry));
  }
  return models;
}

std::uint64_t u64(const json& g, const char* key) {
  auto it = g.find(key);
  return it != g.end() && it->is_number() ? it->get<std::uint64_t>() : 0;
}

std::vector<GpuSpec> load_gpus() {
  std::vector<GpuSpec> gpus;
  const json root = json::parse(catalog_data::gpus_json);
  for (const json& g : root.at("gpus")) {
    GpuSpec spec;
    spec.id = g.at("id").get<std::string>();
    spec.name = g.value("name", spec.id);
    spec.vendor = g.value("vendor", "");
    spec.arch = g.value("arch", "");
    spec.family = g.value("family", "");
    spec.memory_bytes = u64(g, "memory_bytes");
    spec.bandwidth_gbps = g.value("bandwidth_gbps", 0.0);
    spec.multiprocessors = static_cast<std::uint32_t>(u64(g, "multiprocessors"));
    spec.runtime_multiprocessors = static_cast<std::uint32_t>(u64(g, "runtime_multiprocessors"));
    if (spec.runtime_multiprocessors == 0) spec.runtime_multiprocessors = spec.multiprocessors;
    spec.l2_bytes = u64(g, "l2_bytes");
    spec.last_level_cache_bytes = u64(g, "last_level_cache_bytes");
    if (spec.last_level_cache_bytes == 0) spec.last_level_cache_bytes = spec.l2_bytes;
    spec.fp16_tflops = g.value("fp16_tflops", 0.0);
    spec.unified_memory = g.value("unified_memory", false);
    spec.source = g.value("source", "");
    spec.notes = g.value("notes", "");
    spec.aliases = g.value("aliases", std::vector<std::string>{});
    gpus.push_back(std::move(spec));
  }
  return gpus;
}

}  // namespace

const std::vector<CatalogModel>& model_catalog() {
  static const std::vector<CatalogModel> models = load_models();
  return models;
}

namespace {
bool same_ignoring_case(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace

const CatalogModel* find_catalog_model(const std::string& id) {
  // By kvsight id ("llama-3.1-8b") or by the Hugging Face id the entry was taken from
  // ("meta-llama/Llama-3.1-8B"), ignoring case as the Hub does.
  for (const auto& m : model_catalog())
    if (same_ignoring_case(m.id, id) || same_ignoring_case(m.name, id)) return &m;
  return nullptr;
}

const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> gpus = load_gpus();
  return gpus;
}

namespace {
// "NVIDIA  H100 80GB HBM3 " and "nvidia h100 80gb hbm3" are the same name: case and runs of
// spaces do not matter in a pasted device name.
std::string name_key(const std::string& name) {
  std::string key;
  for (char c : name) {
    if (c == ' ' || c == '\t') {
      if (!key.empty() && key.back() != ' ') key += ' ';
      continue;
    }
    key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (!key.empty() && key.back() == ' ') key.pop_back();
  return key;
}
}  // namespace

const GpuSpec& find_gpu(const std::string& id) {
  // "H200", "h200" and "RTX4090" name the same entries; so do the aliases ("h100", and the
  // names nvidia-smi and rocm-smi print: "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X").
  for (const auto& g : gpu_catalog())
    if (same_ignoring_case(g.id, id)) return g;
  const std::string key = name_key(id);
  for (const auto& g : gpu_catalog())
    for (const std::string& alias : g.aliases)
      if (name_key(alias) == key) return g;
  std::string ids;
  std::vector<std::string> names;
  for (const auto& g : gpu_catalog()) {
    ids += (ids.empty() ? "" : ", ") + g.id;
    names.push_back(g.id);
    names.insert(names.end(), g.aliases.begin(), g.aliases.end());
  }
  throw InputError("--gpu", "unknown GPU '" + id + "'" + did_you_mean(id, names) + "; allowed: " + ids +
                                " (or --gpu-mem-gib X)");
}

std::vector<std::string> expand_gpu_list(const std::string& arg) {
  std::vector<std::string> out;
  if (arg == "all") {
    for (const auto& g : gpu_catalog()) out.push_back(g.id);
    return out;
  }
  std::stringstream stream(arg);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) throw InputError("--gpu", "'" + arg + "' has an empty entry; give ids separated by commas, or all");
    const std::string id = find_gpu(item).id;  // validate now, with the list of ids in the message
    // A GPU listed twice ("h200,H200") would be planned twice: duplicate rows in a fleet
    // table, duplicate candidates in fit (issue #25 class 6).
    if (std::find(out.begin(), out.end(), id) != out.end())
      throw InputError("--gpu", "'" + arg + "' lists " + id + " twice; give each GPU once, or all");
    out.push_back(id);
  }
  if (out.empty()) throw InputError("--gpu", "is empty; give ids separated by commas, or all");
  return out;
}

}  // namespace kvsight
