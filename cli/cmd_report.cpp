// kvsight report merge DIR: the preflight reports of a fleet (one kvsight.preflight/1
// JSON per node) as one row per node, fleet medians, and the outliers with their reason.
#include <memory>

#include "commands.hpp"
#include "figure_output.hpp"
#include "kvsight/app/report_merge.hpp"

namespace kvsight::cli {

namespace {

void run_merge(const std::string& directory, CliState& state) {
  const app::MergeOutcome out = app::merge_reports(directory);
  state.exit_code = out.exit_code;
  emit(state, render_figures(app::merge_figures(out), state.format()));
}

}  // namespace

void add_report_command(CLI::App& app, CliState& state) {
  auto* report = app.add_subcommand("report", "Fleet reports: merge the preflight reports of many nodes");
  report->require_subcommand(1);
  auto directory = std::make_shared<std::string>();
  auto* merge = report->add_subcommand(
      "merge",
      "One row per node from a directory of preflight JSON reports, fleet medians, outliers with reasons");
  merge->description(
      "Reads every *.json (schema kvsight.preflight/1, docs/preflight-report.md) in DIR, as written by\n"
      "scripts/cluster/preflight.sbatch or preflight-job.yaml, one per node. Outliers: bandwidth below 90% "
      "of the\n"
      "fleet median, memory held by other processes, a verdict, device or driver version that differs from "
      "the\n"
      "majority, a node that wrote an exit code but no report.\n"
      "Example:\n"
      "  kvsight report merge /shared/preflight/run-42 --format markdown");
  merge->add_option("DIR", *directory, "Directory holding one <node>.json preflight report per node")
      ->required();
  add_output_options(*merge, state);
  merge->footer(
      "Exit codes: 0 every node PASS; 1 any WARN or FAIL; 2 bad input (a file that is not a\n"
      "kvsight.preflight/1 report: the message names the file and key).");
  merge->callback([directory, &state] { run_merge(*directory, state); });
}

}  // namespace kvsight::cli
