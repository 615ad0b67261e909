// kvsight cliff --format csv carries every table of the table output (issue #9: formats
// are complete), in one CSV with a `table` column and raw numbers: parsed here as RFC
// 4180 and checked against figures derived by hand from the published per-call times
// (docs/reference/cliff.md, the same derivation as tests/test_cliff.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace kvsight {
namespace {

using test::run_kvsight;

// RFC 4180: fields separated by commas, quoted when they hold a comma, quote or newline,
// a quote inside a quoted field doubled.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n') {
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
    } else {
      field += c;
    }
  }
  EXPECT_FALSE(quoted) << "unterminated quote";
  EXPECT_TRUE(field.empty() && row.empty()) << "last line not ended";
  return rows;
}

// The CSV as records keyed by column name.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> records;

  std::vector<std::map<std::string, std::string>> table(const std::string& name) const {
    std::vector<std::map<std::string, std::string>> out;
    for (const auto& r : records)
      if (r.at("table") == name) out.push_back(r);
    return out;
  }
  // The value of a key/value row.
  std::string value(const std::string& name, const std::string& key, const std::string& kernel = "") const {
    for (const auto& r : records)
      if (r.at("table") == name && r.at("key") == key && (kernel.empty() || r.at("kernel") == kernel))
        return r.at("value");
    ADD_FAILURE() << "no row " << name << " / " << key;
    return "";
  }
};

Csv read_csv(const std::string& text) {
  const auto rows = parse_csv(text);
  Csv csv;
  if (rows.empty()) {
    ADD_FAILURE() << "empty CSV";
    return csv;
  }
  csv.header = rows.front();
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].size(), csv.header.size()) << "row " << i;
    std::map<std::string, std::string> record;
    for (std::size_t c = 0; c < csv.header.size() && c < rows[i].size(); ++c)
      record[csv.header[c]] = rows[i][c];
    csv.records.push_back(record);
  }
  return csv;
}

// A raw number: the whole field reads as a double (no "1,024", "28.3x", "+1.8%", " us").
double number(const std::string& field) {
  std::size_t used = 0;
  double value = std::nan("");
  try {
    value = std::stod(field, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  EXPECT_EQ(used, field.size()) << "'" << field << "' is not a raw number";
  return value;
}

// kernel_paged_attention_2d: 356.664 us at 1024, 10,095.188 us at 32768 (2 programs).
const double kSlope = (10095.188 - 356.664) / (32768.0 - 1024.0);  // 0.306784 us/token/call
const double kT0 = 356.664 - 1024.0 * kSlope;                      // 42.518 us
double call_us(double c) { return kT0 + kSlope * c; }
// Non-attention time: published 82.51 ms at 518 tokens less 16 attention calls there.
const double kBaselineMs = 82.51 - 16.0 * call_us(518) / 1000.0;  // 79.287 ms
double step_ms(double c) { return kBaselineMs + 16.0 * call_us(c) / 1000.0; }

TEST(CliCliff, CsvCarriesEveryTableWithRawNumbers) {
  const auto run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--format", "csv"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Csv csv = read_csv(run.out);
  // Units in the column names.
  for (const char* column :
       {"table", "context_tokens", "attention_us_per_call", "ms_per_token", "tok_s", "published_ms_per_token",
        "published_tok_s", "diff_percent", "key", "value", "unit"})
    EXPECT_NE(std::find(csv.header.begin(), csv.header.end(), column), csv.header.end()) << column;

  // "Model of one decode step": 16 layers, 2 KV heads, batch 1, block 784, 1 x 2 programs.
  EXPECT_EQ(csv.value("setup", "attention_path"), "triton_paged_attention_2d");
  EXPECT_EQ(csv.value("setup", "attention_layers"), "16");
  EXPECT_EQ(csv.value("setup", "kv_heads_per_rank"), "2");
  EXPECT_EQ(csv.value("setup", "block_size"), "784");
  EXPECT_EQ(csv.value("setup", "programs_per_call"), "2");
  // One program reads (256 + 256) x 2 B = 1024 B per token: 1024 / slope / 1000 GB/s.
  EXPECT_NEAR(number(csv.value("setup", "per_program_gbps")), 1024.0 / kSlope / 1000.0, 1e-9);
  EXPECT_NEAR(number(csv.value("setup", "call_overhead_us")), kT0, 1e-9);
  EXPECT_NEAR(number(csv.value("setup", "baseline_ms")), kBaselineMs, 1e-9);

  // "Context cost": growth 10,095.188 / 356.664 = 28.30x, slope 16 x 0.306784 us/token.
  EXPECT_NEAR(number(csv.value("context_cost", "growth_1k_to_32k")), 10095.188 / 356.664, 1e-9);
  EXPECT_NEAR(number(csv.value("context_cost", "attention_us_per_call_1k")), 356.664, 1e-9);
  EXPECT_NEAR(number(csv.value("context_cost", "attention_us_per_call_32k")), 10095.188, 1e-9);
  EXPECT_NEAR(number(csv.value("context_cost", "slope_us_per_token")), 16.0 * kSlope, 1e-9);
  // 14 splits at 32K: t0 + 32768 / 14 x slope + 4.117 us reduce.
  EXPECT_EQ(csv.value("context_cost", "split_splits_32k"), "14");
  EXPECT_NEAR(number(csv.value("context_cost", "split_attention_us_per_call_32k")),
              kT0 + 32768.0 / 14.0 * kSlope + 4.117, 1e-9);

  // The selected-path table: the four published contexts, raw (8026, not "8,026").
  const auto selected = csv.table("selected_path");
  const std::vector<double> contexts = {518, 8026, 16058, 32084};
  const std::vector<double> published = {82.51, 117.23, 157.60, 235.29};
  ASSERT_EQ(selected.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(number(selected[i].at("context_tokens")), contexts[i]);
    EXPECT_NEAR(number(selected[i].at("attention_us_per_call")), call_us(contexts[i]), 1e-9);
    EXPECT_NEAR(number(selected[i].at("ms_per_token")), step_ms(contexts[i]), 1e-9);
    EXPECT_NEAR(number(selected[i].at("tok_s")), 1000.0 / step_ms(contexts[i]), 1e-9);
    EXPECT_EQ(number(selected[i].at("published_ms_per_token")), published[i]);
    // diff in percent, raw: (predicted - published) / published x 100.
    EXPECT_NEAR(number(selected[i].at("diff_percent")),
                (step_ms(contexts[i]) - published[i]) / published[i] * 100, 1e-9);
  }
  // 32084: 79.287 + 16 x (42.518 + 0.306784 x 32084) / 1000 = 237.45 ms against 235.29 published: +0.92%.
  EXPECT_NEAR(number(selected[3].at("diff_percent")), 0.92, 0.01);

  // The split-KV table: 1024 does not split (below 84 x 16 = 1344 tokens), 8K..32K use 14.
  const auto split = csv.table("split_path");
  ASSERT_EQ(split.size(), 4u);
  EXPECT_EQ(split[0].at("context_tokens"), "1024");
  EXPECT_EQ(split[0].at("splits"), "1");
  EXPECT_NEAR(number(split[0].at("attention_us_per_call")), 356.664, 1e-9);
  EXPECT_EQ(split[3].at("context_tokens"), "32768");
  EXPECT_EQ(split[3].at("splits"), "14");
  EXPECT_EQ(number(split[3].at("published_ms_per_token")), 93.30);

  // The footer: the calibration, the split model and the published split run, as notes.
  const auto notes = csv.table("note");
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0].at("value").rfind("calibration: ", 0), 0u) << notes[0].at("value");
  EXPECT_EQ(notes[1].at("value").rfind("split model: ", 0), 0u);
  EXPECT_EQ(notes[2].at("value").rfind("published split run: ", 0), 0u);
  EXPECT_TRUE(csv.table("warning").empty());
}

// With --backend cpu the measured table is in the CSV too: one summary per kernel and
// one row per measured point, the step slope 16 x the per-call slope.
TEST(CliCliff, CsvCarriesTheMeasuredTable) {
  const auto run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--backend", "cpu", "--measure-contexts",
                                "256,512", "--repeats", "1", "--format", "csv"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Csv csv = read_csv(run.out);
  EXPECT_EQ(csv.value("measured", "backend"), "cpu");
  for (const std::string kernel : {"nosplit", "splitkv"}) {
    const double slope = number(csv.value("measured", "slope_us_per_token_per_call", kernel));
    EXPECT_NEAR(number(csv.value("measured", "step_slope_us_per_token", kernel)), 16.0 * slope,
                1e-9 + 1e-12 * slope);
    std::vector<std::string> contexts;
    for (const auto& r : csv.table("measured_point"))
      if (r.at("kernel") == kernel) {
        contexts.push_back(r.at("context_tokens"));
        EXPECT_GT(number(r.at("attention_us_per_call")), 0.0);
      }
    EXPECT_EQ(contexts, (std::vector<std::string>{"256", "512"})) << kernel;
  }
}

// A model whose TP does not divide its heads: the engine would refuse to start; the CSV
// has the warning the table prints (exit 1), and JSON the notes of the footer.
TEST(CliCliff, WarningsAndNotesInCsvAndJson) {
  // SmolLM3 has 16 attention heads: 16 % 3 = 1, so vLLM refuses TP 3.
  const std::vector<std::string> args = {"cliff", "--model", "smollm3-3b", "--gpu", "h200", "--tp", "3"};
  auto csv_args = args;
  csv_args.insert(csv_args.end(), {"--format", "csv"});
  const auto run = run_kvsight(csv_args);
  ASSERT_EQ(run.exit_code, 1) << run.err;
  const Csv csv = read_csv(run.out);
  const auto warnings = csv.table("warning");
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].at("value").find("16"), std::string::npos) << warnings[0].at("value");
  EXPECT_EQ(csv.table("note").size(),
            2u);  // calibration, split model (no published run outside the scenario)

  auto json_args = args;
  json_args.insert(json_args.end(), {"--format", "json"});
  const auto json_run = run_kvsight(json_args);
  ASSERT_EQ(json_run.exit_code, 1) << json_run.err;
  const auto j = nlohmann::json::parse(json_run.out);
  ASSERT_EQ(j.at("notes").size(), 2u);
  EXPECT_EQ(j.at("notes")[0].get<std::string>().rfind("calibration: ", 0), 0u);
  EXPECT_FALSE(j.at("title").get<std::string>().empty());
}

}  // namespace
}  // namespace kvsight
