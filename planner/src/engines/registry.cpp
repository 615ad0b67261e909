// The engine registry (make_engine, engine_names) and the helpers the engine
// budgets share (common.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "common.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"

namespace kvsight {

// Defined in engine_<name>.cpp.
std::unique_ptr<Engine> make_vllm_engine();
std::unique_ptr<Engine> make_sglang_engine();
std::unique_ptr<Engine> make_trtllm_engine();
std::unique_ptr<Engine> make_llamacpp_engine();
std::unique_ptr<Engine> make_exllama_engine(int generation);

namespace {

struct Entry {
  const char* name;
  std::function<std::unique_ptr<Engine>()> make;
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {"vllm", make_vllm_engine},
      {"sglang", make_sglang_engine},
      {"trtllm", make_trtllm_engine},
      {"llamacpp", make_llamacpp_engine},
      {"exllamav2", [] { return make_exllama_engine(2); }},
      {"exllamav3", [] { return make_exllama_engine(3); }},
  };
  return entries;
}

}  // namespace

std::vector<std::string> engine_names() {
  std::vector<std::string> names;
  for (const auto& e : registry()) names.emplace_back(e.name);
  return names;
}

std::unique_ptr<Engine> make_engine(const std::string& name) {
  std::string key = name;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Spellings users type for the same engines.
  if (key == "llama.cpp" || key == "llama-cpp" || key == "llama_cpp") key = "llamacpp";
  if (key == "tensorrt-llm" || key == "tensorrt_llm" || key == "trt-llm") key = "trtllm";
  for (const auto& e : registry())
    if (key == e.name) return e.make();
  std::string allowed;
  for (const auto& n : engine_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw InputError("--engine", "unknown engine '" + name + "'; allowed: " + allowed);
}

namespace engine_detail {

Version parse_version(const std::string& text, const std::vector<std::string>& known) {
  std::string s = text;
  if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) s.erase(0, 1);
  Version v;
  v.text = text;
  int* parts[3] = {&v.major, &v.minor, &v.patch};
  std::size_t pos = 0;
  int count = 0;
  while (count < 3 && pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
    long value = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      value = value * 10 + (s[pos] - '0');
      if (value > 100000) break;
      ++pos;
    }
    *parts[count++] = static_cast<int>(value);
    if (pos < s.size() && s[pos] == '.')
      ++pos;
    else
      break;
  }
  if (count < 2) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw InputError("--engine-version", "cannot read '" + text + "' as MAJOR.MINOR[.PATCH]; known: " + list);
  }
  return v;
}

std::string fixed2(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  const std::size_t len = digits.size();
  for (std::size_t i = 0; i < len; ++i) {
    out += digits[i];
    const std::size_t left = len - 1 - i;
    if (left > 0 && left % 3 == 0) out += ',';
  }
  return out;
}

std::string gib2(std::uint64_t bytes) { return fixed2(to_gib(bytes)) + " GiB"; }

double check_fraction(double value, std::string_view flag) {
  if (!(value > 0.0 && value <= 1.0))
    throw InputError(std::string(flag), "is " + std::to_string(value) + "; allowed: a fraction in (0, 1]");
  return value;
}

std::uint64_t gib_to_bytes(double gib, std::string_view flag) {
  if (!(gib >= 0.0) || !std::isfinite(gib) || gib > 1.0e9)
    throw InputError(std::string(flag), "is " + std::to_string(gib) + " GiB; allowed: a size >= 0");
  return static_cast<std::uint64_t>(std::llround(gib * kGiB));
}

void check_common_options(const EngineOptions& options) {
  if (options.tp == 0) throw InputError("--tp", "is 0; allowed: a positive integer");
  if (options.pp == 0) throw InputError("--pp", "is 0; allowed: a positive integer");
  if (options.batch == 0) throw InputError("--batch", "is 0; allowed: a positive integer");
  if (options.gpu_memory_bytes && *options.gpu_memory_bytes == 0)
    throw InputError("--gpu-mem-gib", "is 0; allowed: a positive size");
}

std::optional<std::uint64_t> total_memory(const GpuSpec* gpu, const EngineOptions& options) {
  if (options.gpu_memory_bytes) return *options.gpu_memory_bytes;
  if (gpu != nullptr && gpu->memory_bytes > 0) return gpu->memory_bytes;
  return std::nullopt;
}

WeightsEstimate weights_for(const ModelSpec& model, const EngineOptions& options, PlanResult& result) {
  WeightsEstimate w = estimate_weights(model, options.tp, options.pp);
  if (options.weights_gib) {
    // --weights-gib is the whole model; each of the tp x pp ranks holds an even share.
    const std::uint64_t bytes = gib_to_bytes(*options.weights_gib, "--weights-gib");
    const std::uint64_t ranks = std::uint64_t{options.tp} * options.pp;
    w.bytes = bytes;
    w.bytes_per_rank = ceil_div(bytes, ranks);
    w.exact = false;
    w.method =
        "given with --weights-gib (whole model, split evenly over " + std::to_string(ranks) + " ranks)";
    result.assumptions.push_back({"weights per rank", gib2(w.bytes_per_rank), w.method});
  } else {
    result.assumptions.push_back(
        {"weights per rank", gib2(w.bytes_per_rank),
         w.method.empty() ? "estimate_weights() from the config's shapes" : w.method});
  }
  return w;
}

std::uint32_t heaviest_stage(const ModelSpec& model, const KvTypes& types, const EngineOptions& options) {
  std::uint32_t best = 0;
  std::uint64_t best_bytes = 0;
  for (std::uint32_t s = 0; s < options.pp; ++s) {
    const TokenFootprint f = token_footprint(model, types, options.tp, options.pp, s);
    const std::uint64_t bytes = f.bytes_per_token_all_layers + f.state_bytes_per_sequence;
    if (s == 0 || bytes > best_bytes) {
      best = s;
      best_bytes = bytes;
    }
  }
  return best;
}

}  // namespace engine_detail
}  // namespace kvsight
