// Rendering of Tables and Reports in table / csv / markdown form.
#include "output.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"

namespace kvsight::cli {

Format parse_format(const std::string& text) {
  if (text == "table") return Format::table;
  if (text == "json") return Format::json;
  if (text == "csv") return Format::csv;
  if (text == "markdown" || text == "md") return Format::markdown;
  throw InputError("--format", "'" + text + "' is not a format; allowed: table, json, csv, markdown");
}

namespace {

std::string csv_field(const std::string& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string markdown_cell(const std::string& cell) {
  std::string out;
  for (char c : cell) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

// Display width of a UTF-8 string: count code points, not bytes.
std::size_t display_width(const std::string& text) {
  std::size_t width = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::string pad(const std::string& text, std::size_t width, bool right) {
  const std::size_t w = display_width(text);
  if (w >= width) return text;
  const std::string fill(width - w, ' ');
  return right ? fill + text : text + fill;
}

}  // namespace

std::string render_table(const Table& table, Format format) {
  std::ostringstream out;
  const std::size_t ncol = table.columns.size();
  auto right = [&](std::size_t c) { return c < table.right_align.size() && table.right_align[c]; };
  switch (format) {
    case Format::csv: {
      for (std::size_t c = 0; c < ncol; ++c) out << (c ? "," : "") << csv_field(table.columns[c]);
      out << "\n";
      for (const auto& row : table.rows) {
        for (std::size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << csv_field(row[c]);
        out << "\n";
      }
      break;
    }
    case Format::markdown: {
      if (!table.title.empty()) out << "### " << table.title << "\n\n";
      out << "|";
      for (const auto& col : table.columns) out << " " << markdown_cell(col) << " |";
      out << "\n|";
      for (std::size_t c = 0; c < ncol; ++c) out << (right(c) ? "---:|" : "---|");
      out << "\n";
      for (const auto& row : table.rows) {
        out << "|";
        for (const auto& cell : row) out << " " << markdown_cell(cell) << " |";
        out << "\n";
      }
      break;
    }
    case Format::table:
    case Format::json: {  // json callers render their own object; table as a fallback
      std::vector<std::size_t> width(ncol, 0);
      for (std::size_t c = 0; c < ncol; ++c) width[c] = display_width(table.columns[c]);
      for (const auto& row : table.rows)
        for (std::size_t c = 0; c < row.size() && c < ncol; ++c)
          width[c] = std::max(width[c], display_width(row[c]));
      if (!table.title.empty()) out << table.title << "\n";
      for (std::size_t c = 0; c < ncol; ++c)
        out << (c ? "  " : "") << pad(table.columns[c], c + 1 == ncol && !right(c) ? 0 : width[c], right(c));
      out << "\n";
      for (std::size_t c = 0; c < ncol; ++c) out << (c ? "  " : "") << std::string(width[c], '-');
      out << "\n";
      for (const auto& row : table.rows) {
        for (std::size_t c = 0; c < row.size() && c < ncol; ++c)
          out << (c ? "  " : "") << pad(row[c], c + 1 == ncol && !right(c) ? 0 : width[c], right(c));
        out << "\n";
      }
      break;
    }
  }
  return out.str();
}

std::string render_report(const Report& report, Format format) {
  std::ostringstream out;
  if (format == Format::csv) {
    out << "section,key,value,note\n";
    for (const auto& section : report.sections)
      for (const auto& row : section.rows)
        out << csv_field(section.title) << "," << csv_field(row.key) << "," << csv_field(row.value) << ","
            << csv_field(row.note) << "\n";
    return out.str();
  }
  if (format == Format::markdown) {
    if (!report.title.empty()) out << "## " << report.title << "\n\n";
    for (const auto& section : report.sections) {
      out << "### " << section.title << "\n\n| | value | note |\n|---|---:|---|\n";
      for (const auto& row : section.rows)
        out << "| " << markdown_cell(row.key) << " | " << markdown_cell(row.value) << " | "
            << markdown_cell(row.note) << " |\n";
      out << "\n";
    }
    for (const auto& line : report.footer) out << "- " << markdown_cell(line) << "\n";
    return out.str();
  }
  // Terminal: keys left-aligned in one column, values in the next (right-aligned unless
  // values_left), notes after.
  std::size_t key_width = 0, value_width = 0;
  for (const auto& section : report.sections)
    for (const auto& row : section.rows) {
      key_width = std::max(key_width, display_width(row.key));
      value_width = std::max(value_width, display_width(row.value));
    }
  if (!report.title.empty()) out << report.title << "\n";
  for (const auto& section : report.sections) {
    out << "\n" << section.title << "\n";
    for (const auto& row : section.rows) {
      // A left-aligned value with no note is not padded: no trailing spaces.
      const std::size_t width = report.values_left && row.note.empty() ? 0 : value_width;
      out << "  " << pad(row.key, key_width, false) << "  " << pad(row.value, width, !report.values_left);
      if (!row.note.empty()) out << "  " << row.note;
      out << "\n";
    }
  }
  if (!report.footer.empty()) {
    out << "\n";
    for (const auto& line : report.footer) out << line << "\n";
  }
  return out.str();
}

// Text from user files (a log line, a model name) may hold invalid UTF-8, which JSON cannot
// carry: each invalid byte becomes U+FFFD (issue #25: dump's default threw, "internal error").
std::string render_json(const nlohmann::json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace kvsight::cli
