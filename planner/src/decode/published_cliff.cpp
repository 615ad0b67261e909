// The published figures of the vLLM #50264 cliff (kvsight/decode_model.hpp PublishedCliff),
// read once from the embedded planner/data/published/vllm-50264.json.
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kvsight/catalog_data.hpp"
#include "kvsight/decode_model.hpp"

namespace kvsight {

namespace {

const char* embedded_text(const char* name) {
  for (std::size_t i = 0; i < catalog_data::published_count; ++i)
    if (std::strcmp(catalog_data::published[i].name, name) == 0) return catalog_data::published[i].text;
  // A build defect (the file is embedded at build time), not user input.
  throw std::logic_error(std::string("planner/data/published/") + name + " is not embedded");
}

std::vector<PublishedPoint> decode_points(const nlohmann::json& list, bool tok_s_published) {
  std::vector<PublishedPoint> points;
  for (const nlohmann::json& p : list) {
    const double ms = p.at("ms_per_token").get<double>();
    // The split run published ms per token only: its tokens per second are 1000 / ms.
    points.push_back({p.at("context").get<std::uint64_t>(), ms,
                      tok_s_published ? p.at("tok_s").get<double>() : 1000.0 / ms});
  }
  return points;
}

PublishedCliff read_vllm_50264() {
  const nlohmann::json root = nlohmann::json::parse(embedded_text("vllm-50264.json"));
  const nlohmann::json& collapse = root.at("collapse");
  const nlohmann::json& split = root.at("split");
  PublishedCliff f;
  f.collapse_source = collapse.at("source").get<std::string>();
  f.engine_version = collapse.at("engine_version").get<std::string>();
  f.collapse = decode_points(collapse.at("decode"), true);
  f.kernel = collapse.at("kernel").get<std::string>();
  f.call_us_1k = collapse.at("us_per_call_at_1024").get<double>();
  f.call_us_32k = collapse.at("us_per_call_at_32768").get<double>();
  f.slope_us_per_token = collapse.at("slope_us_per_token").get<double>();
  f.split_source = split.at("source").get<std::string>();
  f.split = decode_points(split.at("decode"), false);
  f.split_call_us_32k = split.at("us_per_call_at_32768").get<double>();
  f.reduce_us = split.at("reduce_us").get<double>();
  f.split_slope_us_per_token = split.at("slope_us_per_token").get<double>();
  return f;
}

}  // namespace

const PublishedCliff& vllm_50264_figures() {
  static const PublishedCliff figures = read_vllm_50264();
  return figures;
}

}  // namespace kvsight
