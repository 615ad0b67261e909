#pragma once
// What a use case hands to the renderers (issue #26): its figures, each written once.
// A figure is one fact with every view of it side by side: its JSON path and raw value
// (JSON and CSV), its unit (CSV), and how a reader sees it (label, text, note: the table
// and markdown views). cli/figure_output.cpp draws a FigureDoc in each format; no command
// formats a figure itself.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kvsight::app {

struct Figure {
  Figure(std::string key_, nlohmann::json value_, std::string unit_ = "", std::string label_ = "",
         std::string text_ = "", std::string note_ = "", std::optional<std::string> csv_note_ = std::nullopt)
      : key(std::move(key_)), value(std::move(value_)), unit(std::move(unit_)), label(std::move(label_)),
        text(std::move(text_)), note(std::move(note_)), csv_note(std::move(csv_note_)) {}
  // JSON path, dotted ("kv.bytes_per_token"); the CSV's section and key are its parts
  // before and after the first dot. Empty: the figure is only read (label, text).
  std::string key;
  nlohmann::json value;  // raw: a number, string, bool, null, or a whole JSON object/array
  std::string unit;      // CSV unit column: "B", "tokens", "sequences", ...
  std::string label;     // table/markdown label; empty: not in the readable views
  std::string text;      // the value as a reader sees it ("4,831,838,208 B (4.500 GiB)")
  std::string note;      // why, source, "estimate": shown beside the text
  // The CSV's note when it differs from the readable one (shorter, or a reader's note
  // that names a section the CSV has not).
  std::optional<std::string> csv_note;
  // The CSV's "section.key" when it differs from the JSON path (gates: JSON "model",
  // CSV "summary,model").
  std::optional<std::string> csv_key;
  bool in_csv = true;
  bool in_json = true;
  // More CSV fields of this figure's row, by column name (csv_one_table: the kernel a
  // measured figure is of).
  nlohmann::json csv_fields = nlohmann::json::object();
};

struct FigureSection {
  std::string title;  // readable views only
  std::vector<Figure> figures;
};

// A table of rows: one column per fact, each cell its text and raw value.
struct FigureColumn {
  FigureColumn(std::string label_, std::string key_, bool right_align_ = false)
      : label(std::move(label_)), key(std::move(key_)), right_align(right_align_) {}
  std::string label;  // table/markdown header; empty: not in the readable views
  std::string key;    // CSV header (raw values, units in the name); empty: not in the CSV
  bool right_align = false;
};
struct FigureCell {
  std::string text;       // readable views
  nlohmann::json value;   // CSV (null: an empty field)
};
struct FigureTable {
  std::string title;
  std::vector<FigureColumn> columns;
  std::vector<std::vector<FigureCell>> rows;
  // With no rows, the readable views print this line instead ("" : nothing); unset, they
  // print the empty table (its header).
  std::optional<std::string> when_empty;
  // A last row for the readable views only (the fleet's medians under its nodes).
  std::optional<std::vector<FigureCell>> summary_row;
};

// A titled list the readable views print before the footer ("Outliers": one item a line).
struct FigureList {
  std::string title;
  std::vector<std::string> items;
  std::string when_empty;  // the one item when there is none ("none")
};

// One command's output. Views: table and markdown draw the header lines, the title and the
// sections' labelled figures (as key/value rows) with the footer under them, then each
// table with labelled columns (a blank line between parts), then the footer if there was
// no report; CSV draws the first table that has CSV columns, else every figure of the
// sections as rows (section, key, value, unit, note); JSON is the object the sections'
// figures build by their keys.
struct FigureDoc {
  std::vector<std::string> header;  // readable views only: lines before everything else
  std::string title;
  std::vector<FigureSection> sections;
  std::vector<FigureTable> tables;
  std::optional<FigureList> list;   // readable views only: before the footer
  std::vector<std::string> footer;  // readable views only: notes, warnings, log lines
  // A blank line between the last table and the footer (plan's fleet table: none).
  bool footer_spaced = true;
  bool values_left = false;         // a report whose values are words (aligned left)
  // CSV of the readable rows (section title, label, text, note) instead of the raw
  // figures: the layout inspect, gates and probe reports had before figures (kept so their
  // CSV does not change).
  bool csv_readable = false;
  // The CSV header of the figure rows, by name: section, key, value, unit, and the note
  // under the last name (gates print no unit and call the note "detail").
  std::vector<std::string> csv_header = {"section", "key", "value", "unit", "note"};
  // CSV of every part in one table under csv_header (cliff, issue #9: formats are complete):
  // a row per CSV figure (its section under "table", then key, value, unit, note, and its
  // csv_fields) and the rows of every table with CSV columns (each cell under the column of
  // its key), the tables' after the first csv_tables_after sections; other columns empty.
  bool csv_one_table = false;
  std::size_t csv_tables_after = SIZE_MAX;
  bool csv_round_trip = false;  // CSV numbers: the shortest text that reads back the same double
  bool csv_footer = false;      // the footer follows the CSV too, as it follows a table (probe info)
};

// An optional figure's raw value: the value, or null when it is absent.
template <typename T>
nlohmann::json value_or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// A figure only JSON carries (the readable views and the CSV show it in their own form).
Figure json_figure(std::string key, nlohmann::json value);
// A figure only the CSV carries as a row (JSON has it in another form), with its note.
Figure csv_figure(std::string key, nlohmann::json value, std::string note = "");
// A figure of the readable views only (label, text, note): its JSON and CSV are written by
// the command's own report.
Figure shown_figure(std::string label, std::string text, std::string note);
// JSON-only figures, in order, as a section with no readable rows.
FigureSection json_section(std::vector<std::pair<std::string, nlohmann::json>> entries);
// The same for a JSON object built whole elsewhere (a probe's result, preflight's versioned
// report): a figure per top-level key (which has no dot), so figures_json gives it back.
FigureSection json_object_section(const nlohmann::json& object);

// The JSON object of a document's figures (keys are paths; objects nest).
nlohmann::json figures_json(const FigureDoc& doc);

// A raw value as a CSV field: integers in decimal, other numbers with 6 decimals (or, with
// round_trip, the shortest text that reads back the same double), bools true/false,
// strings as they are, null empty.
std::string raw_text(const nlohmann::json& value, bool round_trip = false);

}  // namespace kvsight::app
