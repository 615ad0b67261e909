// Drawing a FigureDoc in each format (cli/figure_output.hpp). The readable views reuse the
// key/value report and the aligned table of cli/output.cpp; CSV and JSON read the raw values.
#include "figure_output.hpp"

namespace kvsight::cli {

namespace {

// The labelled figures, as key/value rows under their sections.
Report readable_report(const app::FigureDoc& doc) {
  Report report;
  report.title = doc.title;
  report.values_left = doc.values_left;
  for (const app::FigureSection& section : doc.sections) {
    ReportSection rows{section.title, {}};
    for (const app::Figure& figure : section.figures)
      if (!figure.label.empty()) rows.rows.push_back({figure.label, figure.text, figure.note});
    if (!rows.rows.empty()) report.sections.push_back(std::move(rows));
  }
  return report;
}

// The table's columns that a view shows: readable views the labelled ones, CSV the keyed.
Table view_of(const app::FigureTable& source, bool csv, bool round_trip = false) {
  Table table;
  table.title = source.title;
  std::vector<std::size_t> shown;
  for (std::size_t c = 0; c < source.columns.size(); ++c) {
    const app::FigureColumn& column = source.columns[c];
    if ((csv ? column.key : column.label).empty()) continue;
    shown.push_back(c);
    table.columns.push_back(csv ? column.key : column.label);
    table.right_align.push_back(!csv && column.right_align);
  }
  auto add = [&](const std::vector<app::FigureCell>& cells) {
    std::vector<std::string> row;
    for (std::size_t c : shown)
      row.push_back(csv ? app::raw_text(cells[c].value, round_trip) : cells[c].text);
    table.rows.push_back(std::move(row));
  };
  for (const auto& cells : source.rows) add(cells);
  if (!csv && source.summary_row) add(*source.summary_row);
  return table;
}

// A CSV figure's row, by column name: the section (under "section", or "table" in one
// table of every part) and key from the path, the raw value, unit and note; with `others`
// its csv_fields and "" under any other name, else the note under the last name.
std::vector<std::string> figure_row(const app::FigureDoc& doc, const app::Figure& figure, bool others) {
  const std::string& path = figure.csv_key ? *figure.csv_key : figure.key;
  const std::size_t dot = path.find('.');
  std::vector<std::string> row;
  for (const std::string& column : doc.csv_header) {
    if (column == "section" || column == "table")
      row.push_back(path.substr(0, dot));
    else if (column == "key")
      row.push_back(dot == std::string::npos ? "" : path.substr(dot + 1));
    else if (column == "value")
      row.push_back(app::raw_text(figure.value, doc.csv_round_trip));
    else if (column == "unit")
      row.push_back(figure.unit);
    else if (!others || column == "note")
      row.push_back(figure.csv_note.value_or(figure.note));
    else
      row.push_back(figure.csv_fields.contains(column)
                        ? app::raw_text(figure.csv_fields[column], doc.csv_round_trip)
                        : "");
  }
  return row;
}

bool in_csv(const app::Figure& figure) {
  return figure.in_csv && !(figure.csv_key ? *figure.csv_key : figure.key).empty();
}

// Every CSV-visible figure as a row: section and key from the path, the raw value, unit, note.
Table figure_rows(const app::FigureDoc& doc) {
  Table table;
  table.columns = doc.csv_header;
  for (const app::FigureSection& section : doc.sections)
    for (const app::Figure& figure : section.figures)
      if (in_csv(figure)) table.rows.push_back(figure_row(doc, figure, false));
  return table;
}

bool has_csv_columns(const app::FigureTable& table) {
  for (const app::FigureColumn& column : table.columns)
    if (!column.key.empty()) return true;
  return false;
}

// The first table with CSV columns: the CSV view of a document whose rows are the answer.
const app::FigureTable* csv_table(const app::FigureDoc& doc) {
  for (const app::FigureTable& table : doc.tables)
    if (has_csv_columns(table)) return &table;
  return nullptr;
}

// FigureDoc::csv_one_table: the figure rows and every CSV table's rows, by column name.
Table one_table(const app::FigureDoc& doc) {
  Table table;
  table.columns = doc.csv_header;
  const auto add_tables = [&] {
    for (const app::FigureTable& source : doc.tables) {
      if (!has_csv_columns(source)) continue;  // a readable-only table
      for (const auto& cells : source.rows) {
        std::vector<std::string> row;
        for (const std::string& name : doc.csv_header) {
          std::size_t c = 0;
          while (c < source.columns.size() && source.columns[c].key != name) ++c;
          row.push_back(c < source.columns.size() ? app::raw_text(cells[c].value, doc.csv_round_trip) : "");
        }
        table.rows.push_back(std::move(row));
      }
    }
  };
  for (std::size_t s = 0; s < doc.sections.size(); ++s) {
    if (s == doc.csv_tables_after) add_tables();
    for (const app::Figure& figure : doc.sections[s].figures)
      if (in_csv(figure)) table.rows.push_back(figure_row(doc, figure, true));
  }
  if (doc.csv_tables_after >= doc.sections.size()) add_tables();
  return table;
}

// The list and footer under the tables (no report), a blank line above them unless
// !footer_spaced or they come first.
std::string footer_text(const app::FigureDoc& doc, Format format, bool first = false) {
  if (doc.footer.empty() && !doc.list) return "";
  std::string footer;
  if (doc.list) {
    footer += doc.list->title + "\n";
    for (const std::string& item : doc.list->items)
      footer += (format == Format::markdown ? "- " : "  ") + item + "\n";
    if (doc.list->items.empty()) footer += "  " + doc.list->when_empty + "\n";
  }
  for (const std::string& line : doc.footer) footer += line + "\n";
  return (doc.footer_spaced && !first ? "\n" : "") + footer;
}

}  // namespace

std::string render_figures(const app::FigureDoc& doc, Format format) {
  if (format == Format::json) return render_json(app::figures_json(doc));
  if (format == Format::csv && doc.csv_readable) return render_report(readable_report(doc), format);
  if (format == Format::csv) {
    const app::FigureTable* table = csv_table(doc);
    std::string text = render_table(doc.csv_one_table ? one_table(doc)
                                    : table           ? view_of(*table, true, doc.csv_round_trip)
                                                      : figure_rows(doc),
                                    format);
    if (doc.csv_footer) text += footer_text(doc, format);
    return text;
  }
  Report report = readable_report(doc);
  // The footer closes the report when there is one (notes under its figures), else the table.
  const bool has_report = !report.sections.empty() || !report.title.empty();
  if (has_report) report.footer = doc.footer;
  std::string text;
  auto part = [&text](const std::string& block) {
    if (block.empty()) return;
    if (!text.empty()) text += "\n";
    text += block;
  };
  std::string header;
  for (const std::string& line : doc.header) header += line + "\n";
  part(header);
  if (has_report) part(render_report(report, format));
  for (const app::FigureTable& table : doc.tables) {
    const Table view = view_of(table, false);
    if (view.columns.empty()) continue;  // a CSV-only table
    if (table.rows.empty() && table.when_empty) part(table.when_empty->empty() ? "" : *table.when_empty + "\n");
    else part(render_table(view, format));
  }
  if (!has_report) text += footer_text(doc, format, text.empty());
  return text;
}

}  // namespace kvsight::cli
