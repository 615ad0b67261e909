// kvsight probe: info | bandwidth | attention | sweep. Thin: the work is in
// probes/ (kvsight/probes/probes.hpp), the figures in app/ (kvsight/app/probe.hpp);
// this file parses flags and renders.
#include <charconv>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "figure_output.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/probe.hpp"
#include "kvsight/counts.hpp"
#include "kvsight/error.hpp"
#include "kvsight/probes/faults.hpp"
#include "kvsight/probes/probes.hpp"

namespace kvsight::cli {
namespace {

namespace kp = kvsight::probes;

struct ProbeFlags {
  kp::AttentionShape shape;
  kp::ProbeOptions options;
  std::string backend = "auto";
  std::string kernel = "splitkv";
  std::string kernels = "nosplit,splitkv";
  std::string context = "4096";
  std::string contexts = "512,1024,2048,4096,8192,16384,32768";
  std::string max_mem = "0.5";
  std::string bytes = "0";
  std::string json_output;   // sweep: also write the JSON here
  std::string inject_fault;  // testing only: alloc|kernel|verify[:N] (overrides KVSIGHT_INJECT_FAULT)
  // --batch in the shared grammar (add_batch_flag: at most 2^24, so it fits the shape's 32
  // bits); the probes' own range check (probes/src/shape.cpp) then applies.
  std::uint64_t batch = 1;
};

// --max-mem: a plain decimal in (0, 1] is a fraction of free device memory; anything
// else is a byte size in the one grammar (kvsight/counts.hpp parse_byte_size: 2GiB,
// 512MiB, 4096).
void apply_max_mem(const std::string& text, kp::ProbeOptions& options) {
  const bool plain = !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos;
  if (plain) {
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size() && value > 0 && value <= 1) {
      options.max_mem_fraction = value;
      return;
    }
  }
  try {
    options.max_mem_bytes = parse_byte_size(text, "--max-mem");
  } catch (const OverflowError&) {
    throw;
  } catch (const InputError& e) {
    const std::string message = e.what();  // "--max-mem: '...' is not a byte size; allowed: ..."
    throw InputError("--max-mem", message.substr(message.find(": ") + 2) +
                                      "; or a fraction of free memory in (0, 1] such as 0.5");
  }
  options.max_mem_fraction = 0.9;  // an explicit size still leaves a tenth of free memory alone
  if (options.max_mem_bytes == 0)
    throw InputError("--max-mem",
                     "is 0; allowed: a fraction of free memory in (0, 1] or a size > 0 such as 2GiB");
}

void add_shape_options(CLI::App& command, ProbeFlags& flags) {
  command.add_option("--head-dim", flags.shape.head_dim, "Head dimension: " + kp::supported_head_dims_text())
      ->transform(decimal_integer())->default_val(128);
  command
      .add_option("--block-size", flags.shape.block_size,
                  "Tokens per KV block: " + kp::supported_block_sizes_text())
      ->transform(decimal_integer())->default_val(16);
  command.add_option("--kv-heads", flags.shape.kv_heads, "KV heads")->transform(decimal_integer())->default_val(8);
  command.add_option("--q-heads", flags.shape.q_heads, "Query heads (GQA ratio q/kv in 1..16)")
      ->transform(decimal_integer())->default_val(32);
  add_batch_flag(command, flags.batch, "Sequences decoded together (default 1)");
  command.add_option("--dtype", flags.shape.dtype, "q and KV dtype: bf16, fp16")->default_val("bf16");
  command
      .add_option("--kv-dtype", flags.shape.kv_dtype,
                  "K/V cache dtype: auto (the --dtype), fp8_e4m3 (fp8 E4M3 bytes with per-tensor k/v "
                  "scales, dequantized in the kernel; q stays in --dtype)")
      ->default_val("auto");
}

void add_run_options(CLI::App& command, ProbeFlags& flags) {
  add_backend_flag(command, flags.backend, "auto (cuda, then hip, then cpu), cpu, cuda, hip")->default_val("auto");
  command.add_option("--repeats", flags.options.repeats, "Timed runs (median of them)")->transform(decimal_integer())->default_val(20);
  command.add_option("--warmup", flags.options.warmup, "Untimed runs first")->transform(decimal_integer())->default_val(3);
  command
      .add_option("--max-mem", flags.max_mem,
                  "Most device memory to take: a fraction of free memory (0.5) or a size (2GiB); the cpu "
                  "backend is also capped at 2 GiB unless a size is given")
      ->default_val("0.5");
  command.add_option("--threads", flags.options.threads, "cpu backend threads (0 = all hardware threads)")
      ->transform(decimal_integer())->default_val(0);
  command
      .add_option("--cpu-kernel", flags.options.cpu_kernel,
                  "cpu backend kernel: auto (bf16: avx512-bf16 where the CPU has AVX-512 BF16, else avx2; "
                  "fp16 and fp8 K/V: avx512-fp16 where it has AVX-512 F/BW/DQ/VL, else avx2; portable where "
                  "it lacks AVX2+FMA+F16C), avx512-bf16 (for bf16), avx512-fp16 (for fp16 and fp8 K/V: "
                  "VCVTPH2PS at 16 lanes), avx2 (every dtype), portable (8-lane vector code, the fallback); "
                  "`probe info` names each dtype's kernel")
      ->default_val("auto");
  command.add_option("--seed", flags.options.seed, "Seed of the random inputs")->transform(decimal_integer())->default_val(20260729);
  command
      .add_option("--launches", flags.options.launches_per_sample,
                  "Launches timed back to back per sample (0 = auto: 8 on GPUs, 1 on cpu)")
      ->transform(decimal_integer())->default_val(0);
  command.add_option("--inject-fault", flags.inject_fault,
                     "Testing only: alloc|kernel|verify[:N] makes the Nth allocation, kernel launch or "
                     "reference check fail (exit 3); also KVSIGHT_INJECT_FAULT");
}

void apply_inject_fault(const ProbeFlags& flags) {
  if (!flags.inject_fault.empty()) kp::set_injected_fault(flags.inject_fault);
}

void apply_batch(ProbeFlags& flags) { flags.shape.batch = static_cast<std::uint32_t>(flags.batch); }

void run_info(CliState& state) {
  emit(state, render_figures(app::probe_info_figures(kp::list_backends()), state.format()));
}

// The probes run with the reference check on, and a result that fails it
// throws DeviceError (exit 3), so every result that reaches the figures
// passed its check.
void run_bandwidth(CliState& state, ProbeFlags& flags) {
  apply_max_mem(flags.max_mem, flags.options);
  apply_inject_fault(flags);
  const auto result =
      kp::run_bandwidth(flags.backend, parse_byte_size(flags.bytes, "--bytes"), flags.options);
  emit(state, render_figures(app::probe_bandwidth_figures(result), state.format()));
}

void run_attention(CliState& state, ProbeFlags& flags) {
  apply_max_mem(flags.max_mem, flags.options);
  apply_inject_fault(flags);
  apply_batch(flags);
  flags.shape.context = parse_count_in(flags.context, "--context", 1, UINT64_MAX);  // kvsight/counts.hpp
  kp::validate_kernel(flags.kernel);
  const auto result = kp::run_attention(flags.backend, flags.kernel, flags.shape, flags.options);
  emit(state, render_figures(app::probe_attention_figures(result), state.format()));
}

void run_sweep(CliState& state, ProbeFlags& flags) {
  apply_max_mem(flags.max_mem, flags.options);
  apply_inject_fault(flags);
  std::vector<std::string> kernels;
  {
    std::stringstream in(flags.kernels);
    for (std::string item; std::getline(in, item, ',');) {
      if (item.empty()) continue;
      try {
        kp::validate_kernel(item);
      } catch (const InputError&) {
        throw InputError("--kernels", "'" + item + "' unknown; allowed: nosplit, splitkv (comma-separated)");
      }
      kernels.push_back(item);
    }
  }
  if (kernels.empty()) throw InputError("--kernels", "empty; allowed: nosplit, splitkv (comma-separated)");
  apply_batch(flags);
  const auto contexts = parse_count_list(flags.contexts, "--contexts", 1, UINT64_MAX);
  flags.options.progress = [](const std::string& line) {
    std::cerr << "kvsight probe sweep: " << line << "\n";
  };
  const auto results = kp::run_sweeps(flags.backend, kernels, flags.shape, contexts, flags.options);
  const app::FigureDoc figures = app::probe_sweep_figures(results, kernels, contexts);
  if (!flags.json_output.empty()) {
    // The same JSON beside another --format (scripts/device-check.sh keeps both);
    // queued, and written only after every point passed its check and the whole
    // command returned (a fault throws before this: no file, no partial sweep).
    add_artefact(state, flags.json_output, "--json-output", render_figures(figures, Format::json));
  }
  emit(state, render_figures(figures, state.format()));
}

}  // namespace

void add_probe_command(CLI::App& app, CliState& state) {
  auto* probe =
      app.add_subcommand("probe", "Paged-attention and bandwidth probes on this node (cpu, cuda, hip)");
  probe->require_subcommand(1);
  auto flags = std::make_shared<ProbeFlags>();

  auto* info = probe->add_subcommand("info", "Backends compiled in this build and the devices they find");
  add_output_options(*info, state);
  info->callback([&state] { run_info(state); });

  auto* bandwidth =
      probe->add_subcommand("bandwidth", "Streaming read and copy bandwidth (BabelStream-style)");
  add_output_options(*bandwidth, state);
  add_run_options(*bandwidth, *flags);
  bandwidth->add_option("--bytes", flags->bytes, "Buffer size (e.g. 512MiB); 0 = far larger than the LLC")
      ->default_val("0");
  bandwidth->callback([&state, flags] { run_bandwidth(state, *flags); });

  auto* attention = probe->add_subcommand("attention", "One paged-decode attention kernel at one context");
  add_output_options(*attention, state);
  add_shape_options(*attention, *flags);
  add_run_options(*attention, *flags);
  attention->add_option("--kernel", flags->kernel, "nosplit or splitkv")->default_val("splitkv");
  attention->add_option("--context", flags->context, "Tokens of context per sequence (e.g. 32768 or 32K)")
      ->default_val("4096");
  attention->add_option("--splits", flags->options.splits, "split-KV split count (0 = automatic)")
      ->transform(decimal_integer())->default_val(0);
  attention->callback([&state, flags] { run_attention(state, *flags); });

  auto* sweep = probe->add_subcommand("sweep", "Both kernels side by side over contexts");
  add_output_options(*sweep, state);
  add_shape_options(*sweep, *flags);
  add_run_options(*sweep, *flags);
  sweep->add_option("--contexts", flags->contexts, "Comma-separated contexts (e.g. 512,1024,4K,32K)")
      ->default_val("512,1024,2048,4096,8192,16384,32768");
  sweep->add_option("--kernels", flags->kernels, "Kernels to run: nosplit,splitkv")
      ->default_val("nosplit,splitkv");
  sweep->add_option("--splits", flags->options.splits, "split-KV split count (0 = automatic)")
      ->transform(decimal_integer())->default_val(0);
  sweep->add_option("--json-output", flags->json_output, "Also write the JSON result to this file")
      ->check(output_target("--json-output"));
  sweep->callback([&state, flags] { run_sweep(state, *flags); });
}

}  // namespace kvsight::cli
