// The calibration file format (kvsight/calibration.hpp): the one module that reads the
// JSON of `kvsight probe sweep --format json` into a Calibration. Untrusted input (a
// user's --calibration file): the parse is depth-limited, every value is type- and
// range-checked, and every message names the field by its path in the file.
#include <cmath>
#include <nlohmann/json.hpp>

#include "kvsight/calibration.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"

namespace kvsight {

namespace {

// Limits on what a calibration file may claim (issue #14 item 4; docs/reliability.md).
// Contexts: the probes' own range (probes/src/run_setup.hpp kMaxContext = 2^24, int32
// block-table indices), so a file can only hold contexts a probe could have run.
constexpr double kMaxCalibrationContext = 16777216.0;
// Times: one decode attention call over 1000 s (1e9 us) is not a measurement.
constexpr double kMaxCalibrationTimeUs = 1e9;
// Bandwidth: the fastest GPU in the catalog (planner/data/gpus.json) is b200 at
// 7,700 GB/s; 100,000 GB/s is 13x that, so a larger figure (gbps: 1e300) is a unit
// slip or a forged file, never a measurement.
constexpr double kMaxCalibrationGbps = 100000.0;
// Shapes: head_dim and KV heads of any model the planner reads are far below this.
constexpr double kMaxCalibrationShape = 65536.0;

// What a value is, for a message: a number is printed (it is one token), anything
// else only by its type name, never dump()ed (an untrusted value may be huge or deep).
std::string describe(const nlohmann::json& value) {
  if (value.is_number()) return value.dump();
  return std::string("a ") + value.type_name();
}

// A short printable copy of an untrusted string (backend/device names end up in
// tables and in the source line): at most 64 characters, controls replaced by '?'.
std::string printable(const nlohmann::json& value) {
  if (!value.is_string()) return "?";
  std::string text = value.get<std::string>().substr(0, 64);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text.empty() ? "?" : text;
}

class CalibrationReader {
 public:
  explicit CalibrationReader(const std::string& origin) : origin_(origin) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError("--calibration", "'" + origin_ + "': " + key + " " + what);
  }

  // A number at node[key] (node an object), present, finite and in [low, high].
  double number(const nlohmann::json& node, const std::string& where, const char* key, double low,
                double high, const std::string& allowed) const {
    const std::string name = where + "." + key;
    const auto it = node.find(key);
    if (it == node.end()) fail(name, "is missing; allowed: " + allowed);
    if (!it->is_number()) fail(name, "is " + describe(*it) + "; allowed: " + allowed);
    const double value = it->get<double>();
    if (!std::isfinite(value) || value < low || value > high)
      fail(name, "is " + describe(*it) + "; allowed: " + allowed);
    return value;
  }

  // As number(), and a whole number.
  double count(const nlohmann::json& node, const std::string& where, const char* key, double high,
               const std::string& allowed) const {
    const double value = number(node, where, key, 1, high, allowed);
    if (value != std::floor(value))
      fail(where + "." + key, "is " + describe(node.at(key)) + "; allowed: " + allowed);
    return value;
  }

  const nlohmann::json& points(const nlohmann::json& sweep, const std::string& where) const {
    const auto it = sweep.find("points");
    if (!it->is_array()) fail(where + ".points", "is " + describe(*it) + "; allowed: an array of points");
    for (std::size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_object())
        fail(where + ".points[" + std::to_string(i) + "]",
             "is " + describe((*it)[i]) + "; allowed: an object {context, time_us, ...}");
    }
    return *it;
  }

 private:
  const std::string& origin_;
};

struct FoundSweep {
  const nlohmann::json* node;
  std::string where;  // its path in the file, e.g. sweeps[0] or nosplit
};

// Every sweep object {kernel, points, ...}, wherever it is nested, in document
// order. An explicit stack, not recursion: the depth is bounded by the parser
// (parse_json_input, kMaxJsonDepth) but the walk does not rely on it.
std::vector<FoundSweep> find_sweeps(const nlohmann::json& root) {
  std::vector<FoundSweep> found;
  std::vector<FoundSweep> stack{{&root, "$"}};
  while (!stack.empty()) {
    const FoundSweep item = stack.back();
    stack.pop_back();
    const nlohmann::json& node = *item.node;
    std::vector<FoundSweep> children;
    if (node.is_array()) {
      for (std::size_t i = 0; i < node.size(); ++i)
        children.push_back({&node[i], item.where + "[" + std::to_string(i) + "]"});
    } else if (node.is_object()) {
      if (node.contains("points") && node.contains("kernel")) {
        found.push_back(item);
        continue;
      }
      // `probe sweep --format json` keys each kernel's sweep by its name ("nosplit",
      // "splitkv"); other layouts nest them under "sweeps" / "results": look everywhere.
      for (const auto& entry : node.items())
        children.push_back({&entry.value(), item.where + "." + entry.key()});
    }
    // Reversed onto the stack, so children are visited in document order.
    stack.insert(stack.end(), children.rbegin(), children.rend());
  }
  return found;
}

// The sweeps of the file as typed structs: every value the fit reads is type- and
// range-checked here, with its path in the file in the message.
Calibration read_calibration_json(const std::string& json_text, const std::string& origin) {
  // Depth-limited, NUL- and trailing-byte-refusing parse (kvsight/input_file.hpp).
  const nlohmann::json root = parse_json_input(json_text, "--calibration");
  const CalibrationReader reader(origin);
  const nlohmann::json* nosplit = nullptr;
  const nlohmann::json* split = nullptr;
  std::string nosplit_where, split_where;
  for (const FoundSweep& sweep : find_sweeps(root)) {
    const nlohmann::json& kernel = sweep.node->at("kernel");
    if (!kernel.is_string())
      reader.fail(sweep.where + ".kernel",
                  "is " + describe(kernel) + "; allowed: \"nosplit\" or \"splitkv\"");
    if (kernel == "nosplit" && !nosplit) {
      nosplit = sweep.node;
      nosplit_where = sweep.where;
    }
    if (kernel == "splitkv" && !split) {
      split = sweep.node;
      split_where = sweep.where;
    }
  }
  Calibration out;
  out.origin = origin;
  // No nosplit sweep: fit_calibration says so (the split one is not even read).
  if (!nosplit) return out;
  CalibrationSweep& sweep = out.nosplit.emplace();
  sweep.where = nosplit_where;
  const auto shape_it = nosplit->find("shape");
  if (shape_it == nosplit->end() || !shape_it->is_object())
    reader.fail(nosplit_where + ".shape", shape_it == nosplit->end()
                                              ? "is missing; allowed: {head_dim, kv_heads, dtype, ...}"
                                              : "is " + describe(*shape_it) + "; allowed: an object");
  const nlohmann::json& shape = *shape_it;
  const std::string shape_where = nosplit_where + ".shape";
  sweep.head_dim =
      static_cast<std::uint32_t>(reader.count(shape, shape_where, "head_dim", kMaxCalibrationShape,
                                              "a whole number 1..65536 (the probe's head dimension)"));
  sweep.kv_heads = static_cast<std::uint32_t>(
      reader.count(shape, shape_where, "kv_heads", kMaxCalibrationShape, "a whole number 1..65536"));
  // batch: the probes write it; a file without it was measured at the probes' default, 1.
  if (shape.contains("batch"))
    sweep.batch = static_cast<std::uint32_t>(
        reader.count(shape, shape_where, "batch", kMaxCalibrationShape, "a whole number 1..65536"));
  // The probes always write dtype; an older file without it was measured in bf16,
  // the probes' default (cli/cmd_probe.cpp --dtype).
  if (const auto it = shape.find("dtype"); it != shape.end()) {
    if (!it->is_string() || (*it != "bf16" && *it != "fp16" && *it != "fp32"))
      reader.fail(shape_where + ".dtype", "is " +
                                              (it->is_string() ? "'" + printable(*it) + "'" : describe(*it)) +
                                              "; allowed: bf16, fp16, fp32");
    sweep.dtype = it->get<std::string>();
  }
  const nlohmann::json& nosplit_points = reader.points(*nosplit, nosplit_where);
  for (std::size_t i = 0; i < nosplit_points.size(); ++i) {
    const std::string where = nosplit_where + ".points[" + std::to_string(i) + "]";
    CalibrationPoint point;
    point.context = static_cast<std::uint64_t>(reader.count(
        nosplit_points[i], where, "context", kMaxCalibrationContext, "a whole number of tokens 1..16777216"));
    point.time_us = reader.number(nosplit_points[i], where, "time_us", 0, kMaxCalibrationTimeUs,
                                  "a finite time in microseconds, 0..1e9");
    if (!(point.time_us > 0))
      reader.fail(where + ".time_us", "is 0; allowed: a measured time > 0 microseconds");
    sweep.points.push_back(point);
  }
  const auto text_at = [&](const char* key) {
    const auto it = nosplit->find(key);
    return it == nosplit->end() ? std::string("?") : printable(*it);
  };
  sweep.backend = text_at("backend");
  sweep.device = text_at("device");
  if (split) {
    CalibrationSweep& splitkv = out.splitkv.emplace();
    splitkv.where = split_where;
    const nlohmann::json& split_points = reader.points(*split, split_where);
    for (std::size_t i = 0; i < split_points.size(); ++i) {
      const std::string where = split_where + ".points[" + std::to_string(i) + "]";
      CalibrationPoint point;
      point.gbps = reader.number(split_points[i], where, "gbps", 0, kMaxCalibrationGbps,
                                 "a finite bandwidth in GB/s, 0..100000");
      splitkv.points.push_back(point);
    }
    // The probe's own split plan came from its kernel's occupancy; outside 1..1024 it
    // is not a figure the kernels can report, and the default stays.
    const double ctas = split->value("ctas_per_multiprocessor", 0.0);
    if (ctas >= 1 && ctas <= 1024) splitkv.ctas_per_multiprocessor = static_cast<std::uint32_t>(ctas);
  }
  return out;
}

}  // namespace

Calibration calibration_from_json(const std::string& json_text, const std::string& origin) {
  try {
    return read_calibration_json(json_text, origin);
  } catch (const nlohmann::json::exception& e) {
    // Wrong JSON types anywhere in the file (points: [1, 2], head_dim: "128") are bad
    // input too (fuzz finding, docs/reliability.md).
    throw InputError("--calibration",
                     "'" + origin + "' does not have the layout of `kvsight probe sweep --format json` (" +
                         std::string(e.what()) + ")");
  }
}

KernelCalibration calibration_from_probe_json(const std::string& json_text, const std::string& origin,
                                              const GpuSpec& gpu) {
  return fit_calibration(calibration_from_json(json_text, origin), gpu);
}

}  // namespace kvsight
