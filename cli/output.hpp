#pragma once
// Output in the four formats every command offers: table (aligned, for a
// terminal), json, csv (RFC 4180), markdown. Commands build a Report (sections of
// key/value rows) or a Table (rows x columns) plus a JSON object. Numbers are
// formatted by kvsight/number_text.hpp (commas_text, fixed_text, gib_text), the one
// formatter of each kind for every layer.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvsight/number_text.hpp"

namespace kvsight::cli {

enum class Format { table, json, csv, markdown };
// Throws InputError("--format", ...) for anything else.
Format parse_format(const std::string& text);

struct Table {
  std::string title;  // printed above the table in table/markdown formats
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right_align;  // per column; numbers read better right-aligned
};

struct ReportRow {
  std::string key;
  std::string value;
  std::string note;  // "estimate", "assumed", source, ...
};
struct ReportSection {
  std::string title;
  std::vector<ReportRow> rows;
};
struct Report {
  std::string title;
  std::vector<ReportSection> sections;
  std::vector<std::string> footer;  // notes, warnings, log lines
  // Terminal layout: labels left-aligned in one column, values in the next, notes after.
  // Values are right-aligned (figures: their digits line up) unless values_left, for a
  // report whose values are words (preflight: device names, verdict codes).
  bool values_left = false;
};

std::string render_table(const Table& table, Format format);
std::string render_report(const Report& report, Format format);
std::string render_json(const nlohmann::json& value);

}  // namespace kvsight::cli
