// The JSON view of a document's figures and the raw text of a value (kvsight/app/figures.hpp).
#include "kvsight/app/figures.hpp"

#include <stdexcept>

#include "kvsight/number_text.hpp"

namespace kvsight::app {

Figure json_figure(std::string key, nlohmann::json value) {
  Figure figure{std::move(key), std::move(value)};
  figure.in_csv = false;
  return figure;
}

Figure csv_figure(std::string key, nlohmann::json value, std::string note) {
  Figure figure{std::move(key), std::move(value), "", "", "", std::move(note)};
  figure.in_json = false;
  return figure;
}

Figure shown_figure(std::string label, std::string text, std::string note) {
  return {"", nullptr, "", std::move(label), std::move(text), std::move(note)};
}

FigureSection json_section(std::vector<std::pair<std::string, nlohmann::json>> entries) {
  FigureSection section{"", {}};
  for (auto& [key, value] : entries) section.figures.push_back(json_figure(std::move(key), std::move(value)));
  return section;
}

FigureSection json_object_section(const nlohmann::json& object) {
  FigureSection section{"", {}};
  for (const auto& [key, value] : object.items()) {
    // A dot would make figures_json nest the key: a caller's defect, not user input.
    if (key.find('.') != std::string::npos)
      throw std::logic_error("json_object_section: key '" + key + "' has a dot");
    section.figures.push_back(json_figure(key, value));
  }
  return section;
}

nlohmann::json figures_json(const FigureDoc& doc) {
  nlohmann::json out = nlohmann::json::object();
  for (const FigureSection& section : doc.sections)
    for (const Figure& figure : section.figures) {
      if (!figure.in_json || figure.key.empty()) continue;
      // "kv.bytes_per_token" -> out["kv"]["bytes_per_token"]; a path whose parent was
      // given as null (capacity without a GPU) keeps its parent null.
      nlohmann::json* node = &out;
      std::size_t start = 0;
      for (std::size_t dot; (dot = figure.key.find('.', start)) != std::string::npos; start = dot + 1)
        node = &(*node)[figure.key.substr(start, dot - start)];
      (*node)[figure.key.substr(start)] = figure.value;
    }
  return out;
}

std::string raw_text(const nlohmann::json& value, bool round_trip) {
  if (value.is_null()) return "";
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_unsigned()) return std::to_string(value.get<std::uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<std::int64_t>());
  if (value.is_number_float())
    return round_trip ? round_trip_text(value.get<double>()) : fixed_text(value.get<double>(), 6);
  if (value.is_string()) return value.get<std::string>();
  // A list or object may carry text from user files: invalid UTF-8 as U+FFFD (render_json).
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvsight::app
