// llama.cpp KV-cache budget: no paging, a fixed pool of cells allocated at start-up.
//
// Sources (ggml-org/llama.cpp):
//   src/llama-context.cpp        n_ctx = --ctx-size, 0 = n_ctx_train; n_seq_max = --parallel;
//                                kv_unified; n_ctx_seq = n_ctx / n_seq_max when not unified;
//                                from PR #17046 n_ctx = GGML_PAD(n_ctx, 256) and, not unified,
//                                n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256), n_ctx = n_ctx_seq x
//                                n_seq_max; refuses MLA with K type != V type and a quantized V
//                                cache with flash attention off (llama_init_from_model)
//   common/common.h              n_ctx 0 (the training context), fit_params on, fit min ctx 4096,
//                                1 GiB target per device (PR #16653); tools/server/server.cpp
//                                -np auto = 4 slots + unified KV (PR #16736)
//   src/llama-model.cpp          create_memory: kv_size = n_ctx (unified) or n_ctx_seq per stream;
//                                older builds padded n_ctx to llama_kv_cache::get_padding() = 256
//                                with flash attention (32 without)
//   src/llama-kv-cache-iswa.cpp  SWA cache = GGML_PAD(min(size_base, n_swa x (unified ? n_seq_max : 1)
//                                + n_ubatch), 256) cells unless --swa-full ("the SWA cache is always
//                                padded to 256 for performance", issue #17037)
//   src/llama-kv-cache.cpp       per layer K [n_embd_k_gqa, kv_size, n_stream] of type_k, V likewise;
//                                log "llama_kv_cache: size = ... MiB (... cells, ... layers, .../...
//                                seqs), K (f16): ... MiB, V (f16): ... MiB"
//   src/llama-memory-recurrent.cpp  recurrent state: max(1, n_seq_max) cells, r and s in f32
//                                (n_embd_r = (d_conv - 1)(d_inner + 2 n_group d_state), n_embd_s =
//                                d_state d_inner for Mamba-2 / Falcon-H1: llama-hparams.cpp)
// The rules of b11312 (llama.cpp vendored by llama-cpp-python 0.3.36, commit 0c1e57098) and
// the builds each change came in: docs/reference/llamacpp-current.md.
//   ggml/src/ggml-common.h       block sizes (q8_0 34 B per 32, ...: dtype.cpp)
// MLA (DeepSeek2 arch): before PR #12801 (Apr 2025) the cache held decompressed per-head K
// (n_head x (qk_nope + qk_rope)) and V (n_head x v_head_dim); from #12801 the GGUF sets
// key_length = kv_lora_rank + n_rot (576) and value_length = kv_lora_rank (512) with one KV
// head; PR #19067 (2026-01-24, "kv-cache : support V-less cache") drops V: K only.
// Build numbers for those boundaries are approximate.
#include <algorithm>
#include <cmath>
#include <string>

#include "common.hpp"
#include "launch_tables.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/dtype.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"
#include "llamacpp_offload.hpp"
#include "log_line.hpp"

namespace kvsight {
namespace {

using namespace engine_detail;

const std::vector<std::string>& llamacpp_versions() {
  static const std::vector<std::string> v = {"b5000", "b5200", "b6000", "b6900", "b7900", "b11312"};
  return v;
}
// b11312: llama.cpp vendored by llama-cpp-python 0.3.36 (commit 0c1e57098, 2026-10-01),
// read for issue #13 (docs/reference/llamacpp-current.md).
constexpr int kNewestBuild = 11312;
constexpr int kMlaLatentBuild = 5150;  // PR #12801, approximate
constexpr int kKvUnifiedBuild = 5900;  // --kv-unified / per-sequence streams (PR #14363), approximate
constexpr int kNoCtxPadBuild = 6900;   // n_ctx no longer padded (only the SWA cache is), approximate
constexpr int kVlessMlaBuild = 7850;   // PR #19067, approximate
// PR #16736 (server: unified cache across slots; merged after #16812 = b6900, present in
// b7079, issue #17300): llama-server's -np defaults to auto = 4 slots + unified KV. Approximate.
constexpr int kAutoParallelBuild = 6920;
// PR #17046 (2025-11-07, between b6900 and b7045 = 2025-11-13): n_ctx padded to 256 again and,
// without --kv-unified, each sequence's n_ctx_seq padded to 256 (llama-context.cpp). Approximate.
constexpr int kSeqPadBuild = 6980;
// PR #16653 (llama_params_fit, merged 2025-12-15; b7437 has it, issue #18097): common.h n_ctx
// default 0 = the training context, fitted down (not below 4096) when it does not fit. Approximate.
constexpr int kTrainCtxDefaultBuild = 7400;
// PR #10136 (merged 2024-11-02, "llama : adjust default context size"): the examples' n_ctx
// default became 4096 instead of the training context; before it, unset = n_ctx_train (the
// b3332 CI log of docs/fidelity.md row 20: 2048 cells for pythia-2.8b). Approximate build.
constexpr int kCtx4096DefaultBuild = 4000;
// PR #18148 ("llama: offload output layer to GPU first", opened 2025-12-17, after #16653 of
// b7437; b11312 has it): -ngl N puts the output layer and N - 1 repeating layers on the GPU,
// where builds before it put N repeating layers and the output layer only for N > n_layer
// (llamacpp_offload.cpp). Approximate.
constexpr int kOutputFirstBuild = 7480;

std::string ggml_name(const KvDtype& t) {
  if (t.name == "fp16") return "f16";
  if (t.name == "fp32") return "f32";
  return t.name;
}

const KvDtype& llama_type(const std::string& name, std::string_view flag) {
  const KvDtype& t = find_kv_dtype(name, flag);
  if (!t.llamacpp)
    throw InputError(std::string(flag), "'" + name +
                                            "' is not a ggml cache type; allowed: f32, f16, bf16, q8_0, "
                                            "q4_0, q4_1, iq4_nl, q5_0, q5_1");
  return t;
}

// Bytes per cell of one layer: K and V rows (no tensor parallelism in llama.cpp: layers
// are split across devices, every head stays on one).
struct LayerCell {
  std::uint64_t k = 0, v = 0;
  bool swa = false;        // sliding window or chunked: the SWA cache
  bool recurrent = false;  // recurrent memory
};

std::vector<LayerCell> layer_cells(const ModelSpec& model, const KvDtype& tk, const KvDtype& tv, int build,
                                   PlanResult* result) {
  std::vector<LayerCell> out;
  bool mla_noted = false;
  for (const LayerSpec& l : model.layers) {
    LayerCell c;
    switch (l.kind) {
      case LayerKind::full_attention:
      case LayerKind::sliding_window:
      case LayerKind::chunked_local:
        c.k = tk.row_bytes(std::uint64_t{l.kv_heads} * l.head_dim_k);
        c.v = tv.row_bytes(std::uint64_t{l.kv_heads} * l.head_dim_v);
        c.swa = l.kind != LayerKind::full_attention;
        break;
      case LayerKind::mla: {
        const MlaSpec mla = model.mla.value_or(MlaSpec{});
        std::string how;
        // A GGUF without the MLA keys is cached decompressed by every build (model.hpp MlaSpec).
        if ((build < kMlaLatentBuild || mla.gguf_decompressed_cache) && model.mla) {
          // Decompressed per-head K and V.
          c.k = tk.row_bytes(std::uint64_t{model.num_attention_heads} *
                             (mla.qk_nope_head_dim + mla.qk_rope_head_dim));
          c.v = tv.row_bytes(std::uint64_t{model.num_attention_heads} * mla.v_head_dim);
          how = "decompressed per-head K (n_head x (qk_nope + qk_rope)) and V (n_head x v_head_dim)";
        } else if (build < kVlessMlaBuild) {
          c.k = tk.row_bytes(l.head_dim_k);  // kv_lora_rank + qk_rope_head_dim
          c.v = tv.row_bytes(model.mla ? mla.kv_lora_rank : l.head_dim_k - 64);
          how = "latent K (kv_lora_rank + rope) and latent V (kv_lora_rank), one head";
        } else {
          c.k = tk.row_bytes(l.head_dim_k);
          how = "latent K only (kv_lora_rank + rope); V-less cache (PR #19067)";
        }
        if (result && !mla_noted) {
          result->notes.push_back("MLA in llama.cpp: " + how);
          mla_noted = true;
        }
        break;
      }
      case LayerKind::recurrent: {
        if (!model.recurrent) break;
        RecurrentSpec f32 = *model.recurrent;  // llama.cpp keeps r and s states in f32
        f32.conv_dtype = "fp32";
        f32.ssm_dtype = "fp32";
        const RecurrentStateBytes rs = recurrent_state_bytes(f32, 1);
        c.k = rs.conv;  // R: n_embd_r x f32
        c.v = rs.ssm;   // S: n_embd_s x f32
        c.recurrent = true;
        break;
      }
      case LayerKind::shared_kv:
      case LayerKind::none:
        break;
    }
    out.push_back(c);
  }
  return out;
}

struct Cache {
  std::uint64_t base_cells = 0, swa_cells = 0, rec_cells = 0;
  std::uint64_t base_k = 0, base_v = 0, swa_k = 0, swa_v = 0, rec_r = 0, rec_s = 0;  // bytes
  std::uint32_t base_layers = 0, swa_layers = 0, rec_layers = 0;
  std::uint64_t n_ctx = 0;      // after padding: all cells of the base cache
  std::uint64_t n_ctx_seq = 0;  // cells per stream (= n_ctx when unified)
  std::uint64_t streams = 1;    // n_stream: 1 unified, else n_seq_max
  std::uint64_t swa_per_stream = 0;
  std::uint64_t total() const { return base_k + base_v + swa_k + swa_v + rec_r + rec_s; }
};

struct CacheParams {
  std::uint64_t n_ctx = 0;
  std::uint64_t n_seq = 1;
  bool unified = false;
  bool swa_full = false;
  std::uint64_t n_ubatch = 512;
  int build = kNewestBuild;
  bool flash_attn_off = false;  // -fa off: the old padding was 32 cells instead of 256
};

Cache size_cache(const ModelSpec& model, const std::vector<LayerCell>& cells, const CacheParams& p) {
  Cache c;
  const bool pad_ctx = p.build < kNoCtxPadBuild || p.build >= kSeqPadBuild;
  // Before kNoCtxPadBuild the pad was llama_kv_cache_get_padding(cparams) = flash_attn ? 256 : 32
  // (src/llama.cpp in llama-cpp-python 0.2.82, src/llama-kv-cache.cpp in 0.3.8;
  // docs/reference/llamacpp-published-logs.md); PR #17046's pad is 256 whatever the attention.
  const std::uint64_t ctx_pad = p.build < kNoCtxPadBuild && p.flash_attn_off ? 32 : 256;
  c.n_ctx = pad_ctx ? round_up(p.n_ctx, ctx_pad, "n_ctx") : p.n_ctx;
  const bool unified = p.unified || p.build < kKvUnifiedBuild;
  const std::uint64_t streams = unified ? 1 : p.n_seq;
  std::uint64_t per_stream = unified ? c.n_ctx : c.n_ctx / p.n_seq;
  if (!unified && p.build >= kSeqPadBuild) {
    // llama-context.cpp (PR #17046): n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256); 0 is refused
    // ("n_ctx_seq == 0"); n_ctx = n_ctx_seq x n_seq_max.
    if (per_stream == 0)
      throw InputError("--parallel", std::to_string(p.n_seq) + " slots leave n_ctx " +
                                         std::to_string(c.n_ctx) +
                                         " / parallel = 0 cells each (llama.cpp: \"n_ctx_seq == 0\"); "
                                         "allowed: at most --ctx-size (padded to 256) slots");
    per_stream = round_up(per_stream, 256, "n_ctx_seq");
    c.n_ctx = checked_mul(per_stream, streams, "n_ctx");
  }
  c.n_ctx_seq = per_stream;
  c.streams = streams;
  std::uint64_t n_swa = 0;
  for (const LayerSpec& l : model.layers)
    if (l.kind == LayerKind::sliding_window || l.kind == LayerKind::chunked_local)
      n_swa = std::max(n_swa, l.window);
  c.base_cells = checked_mul(per_stream, streams, "cells");
  std::uint64_t swa_stream =
      std::min(per_stream, checked_add(checked_mul(n_swa, unified ? p.n_seq : 1, "swa"), p.n_ubatch, "swa"));
  swa_stream = round_up(swa_stream, 256, "swa cells");
  if (p.swa_full) swa_stream = per_stream;
  c.swa_per_stream = swa_stream;
  c.swa_cells = checked_mul(swa_stream, streams, "swa cells");
  c.rec_cells = std::max<std::uint64_t>(1, p.n_seq);
  for (const LayerCell& l : cells) {
    if (l.recurrent) {
      c.rec_r = checked_add(c.rec_r, checked_mul(l.k, c.rec_cells, "state"), "state");
      c.rec_s = checked_add(c.rec_s, checked_mul(l.v, c.rec_cells, "state"), "state");
      ++c.rec_layers;
    } else if (l.swa) {
      c.swa_k = checked_add(c.swa_k, checked_mul(l.k, c.swa_cells, "kv"), "kv");
      c.swa_v = checked_add(c.swa_v, checked_mul(l.v, c.swa_cells, "kv"), "kv");
      ++c.swa_layers;
    } else if (l.k + l.v > 0) {
      c.base_k = checked_add(c.base_k, checked_mul(l.k, c.base_cells, "kv"), "kv");
      c.base_v = checked_add(c.base_v, checked_mul(l.v, c.base_cells, "kv"), "kv");
      ++c.base_layers;
    }
  }
  return c;
}

// llama.cpp's n_layer: a parallel hybrid (Falcon-H1) is listed as two entries per decoder layer
// (attention, then its Mamba-2 state: FamilyTraits::parallel_hybrid), llama.cpp counts the
// decoder layer once.
std::uint32_t llama_n_layer(const ModelSpec& model) {
  return model.traits.parallel_hybrid ? model.num_layers() / 2 : model.num_layers();
}

// printf's "%*s": right-aligned in `width` columns, as llama.cpp's log pads its figures.
std::string right_aligned(std::string text, int width) {
  const auto columns = static_cast<std::size_t>(std::max(width, 0));
  if (text.size() < columns) text.insert(0, columns - text.size(), ' ');
  return text;
}

// "%*.2f" of MiB, for the log line of the header comment ("llama_kv_cache: size = ...").
std::string mib(std::uint64_t bytes, int width) {
  return right_aligned(fixed_text(static_cast<double>(bytes) / (1024.0 * 1024.0), 2), width);
}

std::string padded(std::uint64_t n, int width) { return right_aligned(std::to_string(n), width); }

class LlamaCppEngine final : public Engine {
 public:
  std::string name() const override { return "llamacpp"; }
  std::vector<std::string> known_versions() const override { return llamacpp_versions(); }
  PlanResult budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                    const EngineOptions& options) const override;

  std::string display_name() const override { return "llama.cpp"; }
  std::vector<std::string> aliases() const override { return {"llama.cpp", "llama-cpp", "llama_cpp"}; }
  std::string default_version() const override { return llamacpp_versions().back(); }
  // Release tags are build numbers (github.com/ggml-org/llama.cpp/releases: b6000).
  VersionForm version_form() const override { return VersionForm::build; }
  bool has_gate_rules() const override { return true; }
  // common/arg.cpp (llama-server, llama-cli): -c/--ctx-size, -np/--parallel,
  // -ctk/--cache-type-k, -ctv/--cache-type-v, -fa/--flash-attn, --swa-full,
  // -ub/--ubatch-size, -kvu/--kv-unified.
  // Its server command and what kvsight does with each flag (llamacpp_launch.cpp, issue #22).
  const Launcher* launcher() const override { return &engine_detail::llamacpp_launcher(); }
  std::vector<EngineFlag> flags() const override {
    return {{OptionField::ctx_size, {"--ctx-size", "-c"}},
            {OptionField::parallel, {"--parallel", "-np"}},
            {OptionField::cache_type_k, {"--cache-type-k", "-ctk"}},
            {OptionField::cache_type_v, {"--cache-type-v", "-ctv"}},
            {OptionField::flash_attn, {"--flash-attn", "-fa"}},
            {OptionField::swa_full, {"--swa-full"}},
            {OptionField::ubatch_size, {"--ubatch-size", "-ub"}},
            {OptionField::kv_unified, {"--kv-unified", "-kvu"}},
            {OptionField::n_gpu_layers, {"--n-gpu-layers", "-ngl", "--gpu-layers"}},
            {OptionField::no_kv_offload, {"--no-kv-offload", "-nkvo"}}};
  }
  // common/arg.cpp kv_cache_types.
  std::vector<std::string> kv_cache_dtypes() const override {
    return {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"};
  }
  std::vector<KvTypeSetting> kv_cache_type_settings(const EngineOptions& options) const override {
    return {{OptionField::cache_type_k, options.llamacpp.cache_type_k},
            {OptionField::cache_type_v, options.llamacpp.cache_type_v}};
  }
  KvTypes kv_types(const ModelSpec&, const EngineOptions& options) const override {
    KvTypes types;
    types.k = llama_type(options.llamacpp.cache_type_k, "--cache-type-k");
    types.v = llama_type(options.llamacpp.cache_type_v, "--cache-type-v");
    return types;
  }
  BlockSizeChoice block_size(const ModelSpec&, const GpuSpec*, const EngineOptions& options) const override {
    if (options.block_size)
      throw InputError("block_size",
                       "llama.cpp has no paged KV blocks (one cell per token); allowed: omit it");
    return {1, "llama.cpp has no paged KV: one cell per token in one slot pool", false};
  }
  LengthChoice max_model_len(const ModelSpec& model, const EngineOptions& options) const override;
  // Layers are split across devices (--split-mode layer): the figures are the whole model's.
  bool shards_weights() const override { return false; }
  std::vector<StartupCheck> startup_checks(const ModelSpec&, const GpuSpec*,
                                           const EngineOptions&) const override {
    return {};  // the flash-attention dependent checks are kernel_checks (kernel selection)
  }
  // common/arg.cpp -fa off: flash attention is not used even where admitted.
  std::string kernel_disabled_by(const std::string& kernel, const EngineOptions& options) const override {
    return kernel == "llamacpp_flash_attn" && options.llamacpp.flash_attn == "off" ? "--flash-attn off" : "";
  }
  std::vector<StartupCheck> kernel_checks(const GateResult& gates,
                                          const EngineDecision& decision) const override {
    // src/llama-context.cpp: "V cache quantization requires flash_attn".
    const bool fa = gates.primary.selected == "llamacpp_flash_attn";
    const bool ok = decision.kv_types.v.group_size == 0 || fa;
    return {{"quantized V cache needs FlashAttention", ok,
             "cache_type_v " + decision.kv_settings.back().value +
                 (ok ? "" : " is quantized but FlashAttention is refused"),
             "src/llama-context.cpp (llama.cpp master)"}};
  }
  void options_from_log(const EngineLogFigures& f, EngineOptions& options,
                        std::vector<std::string>& inputs) const override;
  std::unique_ptr<EngineLogReader> log_reader() const override;
  std::vector<std::string> gate_notes(const GpuSpec&, const EngineOptions&) const override {
    return {"llama.cpp splits a model across GPUs by layer (-sm layer) by default; --tp is ignored"};
  }
};

// The llama_kv_cache size line gives n_ctx (its cells) and "S/T seqs": S = --parallel, T = 1 a
// unified cache (kv_line below).
void LlamaCppEngine::options_from_log(const EngineLogFigures& f, EngineOptions& options,
                                      std::vector<std::string>& inputs) const {
  if (!f.kv_tokens || options.llamacpp.ctx_size) return;
  options.llamacpp.ctx_size = *f.kv_tokens;
  inputs.push_back("n_ctx " + std::to_string(*f.kv_tokens) + " cells (llama_kv_cache size line)");
  if (f.llamacpp_seqs && *f.llamacpp_seqs > 0 && !options.llamacpp.parallel_given) {
    options.llamacpp.parallel = *f.llamacpp_seqs;
    options.llamacpp.parallel_given = true;
    options.llamacpp.kv_unified =
        options.llamacpp.kv_unified || (f.llamacpp_streams.value_or(1) == 1 && *f.llamacpp_seqs > 1);
  }
}

// The cache line of src/llama-kv-cache.cpp, which budget() prints (one per cache) and explain
// reads back (log_line.hpp): "%6u cells" is kv_size, the cells of ONE stream, and "%2u/%u seqs"
// n_seq_max / n_stream (n_stream = 1 unified, else n_seq_max), so "( 2048 cells, 22 layers,  4/4
// seqs)" holds 4 x 2048 cells (b11312). Older builds print "S seqs" (one stream) or no seqs part,
// and name the cache llama_kv_cache_unified. Builds before the llama_kv_cache rename (~b5000 and
// older) print, read only, "llama_new_context_with_model: n_ctx = N" (llama_init_from_model from
// ~b4500) and "KV self size  = X MiB, K (f16): ..." (src/llama.cpp of llama-cpp-python 0.2.82 /
// 0.3.8).
const LogLine kLlamaCacheLine{
    "llama_kv_cache{a-z_}: { }size = { }{X:mib} MiB ({ }{N:cells} cells"
    "[, { }{N} layers, { }{N:seqs}[/{N:streams}] seqs][), K ({T}): { }{X} MiB, V ({T}): { }{X} MiB]"};
const LogLine kLlamaOldContextLine{"llama_new_context_with_model: n_ctx { }={s}{N:n_ctx}",
                                   "llama_init_from_model: n_ctx { }={s}{N:n_ctx}"};
const LogLine kLlamaOldSizeLine{"llama_new_context_with_model: KV self size { }= { }{X:mib} MiB",
                                "llama_init_from_model: KV self size { }= { }{X:mib} MiB"};

class LlamaCppLogReader final : public EngineLogReader {
 public:
  LogLineRead read(std::string_view line, EngineLogFigures& f) override {
    LogLineRead read = LogLineRead::other;
    // An iSWA model (gpt-oss, Gemma 2/3) prints two cache lines, the non-SWA cache first
    // (llama-kv-cache-iswa.cpp: "creating non-SWA KV cache", then "creating SWA KV cache"): the
    // first carries n_ctx, so a later line does not replace it.
    if (const std::optional<LogMatch> m = kLlamaCacheLine.read(line); m && !cache_line_read_) {
      cache_line_read_ = true;
      f.kv_size_gib = m->number("mib") / 1024.0;
      // Cells per stream x streams ("S/T seqs"; "S seqs" and no seqs part: one stream).
      const std::uint64_t streams = m->has("streams") ? m->count("streams") : 1;
      const std::uint64_t cells = m->count("cells"), t = streams > 0 ? streams : 1;
      f.kv_tokens = cells > UINT64_MAX / t ? UINT64_MAX : cells * t;  // saturate as count() does
      if (m->has("seqs"))
        f.llamacpp_seqs = static_cast<std::uint32_t>(std::min<std::uint64_t>(m->count("seqs"), 1u << 20));
      if (m->has("streams"))
        f.llamacpp_streams = static_cast<std::uint32_t>(std::min<std::uint64_t>(streams, 1u << 20));
      read = LogLineRead::figures;
    }
    if (const std::optional<LogMatch> m = kLlamaOldContextLine.read(line)) {
      old_n_ctx_ = m->count("n_ctx");
      if (read == LogLineRead::other) read = LogLineRead::context;
    }
    if (const std::optional<LogMatch> m = kLlamaOldSizeLine.read(line); m && !cache_line_read_) {
      cache_line_read_ = true;
      f.kv_size_gib = m->number("mib") / 1024.0;
      if (old_n_ctx_) f.kv_tokens = old_n_ctx_;  // one stream of n_ctx cells in those builds
      read = LogLineRead::figures;
    }
    return read;
  }

 private:
  bool cache_line_read_ = false;
  std::uint64_t old_n_ctx_ = 0;  // the n_ctx line that precedes an old "KV self size" line
};

std::unique_ptr<EngineLogReader> LlamaCppEngine::log_reader() const {
  return std::make_unique<LlamaCppLogReader>();
}

// n_ctx: --ctx-size; 0 = the model's training context (llama-context.cpp: n_ctx_train).
// Unset: 4096 (common/common.h n_ctx, PR #10136) before PR #16653; from it common.h n_ctx = 0
// = the training context, which fit_params may shrink (fit_params_min_ctx 4096,
// fit_params_target 1 GiB per device) when it does not fit.
LengthChoice LlamaCppEngine::max_model_len(const ModelSpec& model, const EngineOptions& options) const {
  const int build = version(options).build;
  LengthChoice c;
  c.derived = model.max_position_embeddings;
  const bool train_default = build >= kTrainCtxDefaultBuild || build < kCtx4096DefaultBuild;
  c.tokens = options.llamacpp.ctx_size.value_or(train_default ? 0 : 4096);
  c.source = "given";
  if (!options.llamacpp.ctx_size && !train_default)
    c.source = "llama-server default 4096 (common.h); --ctx-size 0 = n_ctx_train";
  if (c.tokens == 0) {
    c.tokens = c.derived;
    c.source = options.llamacpp.ctx_size      ? "--ctx-size 0 = n_ctx_train (llama-context.cpp)"
               : build < kCtx4096DefaultBuild ? "unset = n_ctx_train (before the 4096 default of PR #10136)"
                                              : "unset = n_ctx_train (common.h n_ctx 0, PR #16653)";
  }
  if (c.tokens == 0)
    throw InputError("--ctx-size", "the model config gives no training context; pass --ctx-size");
  return c;
}

PlanResult LlamaCppEngine::budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                                  const EngineOptions& options) const {
  check_common_options(options);
  refuse_unused_overheads(options, name(), {OverheadFlag::activation, OverheadFlag::non_torch});
  if (model.layers.empty()) throw InputError("--model", "the model has no layers");
  if (options.llamacpp.parallel == 0) throw InputError("--parallel", "is 0; allowed: a positive integer");
  const int build = decision.version.build;
  // -np unset: llama-server's -np auto = 4 slots with a unified KV cache (tools/server/server.cpp,
  // common/arg.cpp n_parallel = -1; PR #16736); older builds and llama-cli use 1 slot.
  const bool np_auto =
      !options.llamacpp.parallel_given && options.llamacpp.parallel == 1 && build >= kAutoParallelBuild;
  const std::uint32_t n_par = np_auto ? 4 : options.llamacpp.parallel;
  const bool kv_unified_opt = options.llamacpp.kv_unified || np_auto;
  if (options.llamacpp.ubatch_size == 0)
    throw InputError("--ubatch-size", "is 0; allowed: a positive integer");
  PlanResult result;
  result.engine = "llamacpp";
  result.engine_version = "b" + std::to_string(build);
  if (auto newer = newer_than_known_warning(*this, decision.version)) result.warnings.push_back(*newer);
  const KvDtype& tk = decision.kv_types.k;
  const KvDtype& tv = decision.kv_types.v;
  // Start-up refusals of llama_init_from_model (src/llama-context.cpp, read in b11312): no context
  // is made, so no plan either (exit 2).
  const bool gguf_mla = model.mla && !model.mla->gguf_decompressed_cache &&
                        std::any_of(model.layers.begin(), model.layers.end(),
                                    [](const LayerSpec& l) { return l.kind == LayerKind::mla; });
  if (gguf_mla && build >= kVlessMlaBuild && tk.name != tv.name)
    throw InputError("--cache-type-v",
                     "'" + ggml_name(tv) + "' differs from --cache-type-k '" + ggml_name(tk) +
                         "' on an MLA model; llama.cpp refuses it at start-up: \"model does not "
                         "support different K (" +
                         ggml_name(tk) + ") and V (" + ggml_name(tv) +
                         ") cache types\"; allowed: -ctv equal to -ctk");
  if (tv.group_size > 0) {
    if (options.llamacpp.flash_attn == "off")
      throw InputError(
          "--cache-type-v",
          "'" + ggml_name(tv) +
              "' is a quantized V cache with -fa off; llama.cpp refuses it at start-up: \"quantized V "
              "cache requires flash_attn to be enabled\"; allowed: -fa on or auto, or -ctv f16, bf16 "
              "or f32");
    result.notes.push_back(
        "a quantized V cache needs flash attention (llama-context.cpp): with -fa auto llama.cpp enables it "
        "(\"enabling flash_attn since it is required for quantized V cache\"), with -fa off it refuses");
  }
  if (options.tp > 1 || options.pp > 1)
    result.notes.push_back(
        "llama.cpp splits layers across devices (--split-mode layer); --tp/--pp are ignored and "
        "all figures are for the whole model");
  const std::vector<LayerCell> cells = layer_cells(model, tk, tv, build, &result);
  // -ngl and --no-kv-offload: a layer's cache lives on its layer's device (llama-kv-cache.cpp,
  // llama-memory-recurrent.cpp: model.dev_layer(il) when offload), else in host memory. The
  // GPU's cache is sized from the cells of its layers; a parallel hybrid's two entries per
  // decoder layer (llama_n_layer) share the layer's device.
  const std::uint32_t n_layer = llama_n_layer(model);
  const LlamaOffload offload = llama_offload(n_layer, options.llamacpp.n_gpu_layers,
                                             options.llamacpp.no_kv_offload, build >= kOutputFirstBuild);
  std::vector<LayerCell> device_cells = cells;
  for (std::size_t i = 0; i < device_cells.size(); ++i) {
    const auto il = static_cast<std::uint32_t>(model.traits.parallel_hybrid ? i / 2 : i);
    if (!offload.kv_on_device(il)) device_cells[i] = LayerCell{};
  }

  // n_ctx: the decision's length (LlamaCppEngine::max_model_len).
  const std::uint64_t n_ctx_train = decision.length.derived;
  const std::uint64_t n_ctx = decision.length.tokens;
  if (!options.llamacpp.ctx_size && build >= kTrainCtxDefaultBuild)
    result.notes.push_back(
        "no -c: llama.cpp starts from the training context (" + std::to_string(n_ctx_train) +
        "); with fit_params on (the default, common.h) it shrinks the context when the model and KV do not "
        "fit the device, to no less than 4096 (fit_params_min_ctx), leaving 1 GiB free per device "
        "(fit_params_target); an explicit -c 0 is not shrunk (PR #19070)");
  if (np_auto)
    result.notes.push_back(
        "no -np: llama-server's -np auto = 4 slots sharing one unified KV cache (tools/server/server.cpp); "
        "llama-cli uses 1");
  result.assumptions.push_back({"--ctx-size", std::to_string(n_ctx), decision.length.source});
  const bool unified = kv_unified_opt || build < kKvUnifiedBuild;

  CacheParams p{n_ctx,
                n_par,
                kv_unified_opt,
                options.llamacpp.swa_full,
                options.llamacpp.ubatch_size,
                build,
                options.llamacpp.flash_attn == "off"};
  const Cache cache = size_cache(model, cells, p);
  const Cache device_cache = size_cache(model, device_cells, p);
  const std::uint64_t slot_ctx = cache.n_ctx_seq;
  if (!unified && build >= kSeqPadBuild && cache.n_ctx != round_up(n_ctx, 256, "n_ctx"))
    result.notes.push_back("n_ctx " + std::to_string(n_ctx) + " -> pad 256 -> / " + std::to_string(n_par) +
                           " slots -> n_ctx_seq pad 256 = " + std::to_string(slot_ctx) +
                           ": n_ctx = " + std::to_string(slot_ctx) + " x " + std::to_string(n_par) + " = " +
                           std::to_string(cache.n_ctx) + " (llama-context.cpp, PR #17046)");
  else if (!unified && build < kSeqPadBuild && cache.n_ctx % n_par != 0)
    result.notes.push_back("n_ctx " + std::to_string(cache.n_ctx) + " is not a multiple of --parallel " +
                           std::to_string(n_par) + ": each slot gets n_ctx / parallel (floor)");

  // kv figures: one sequence = a single slot of `context` cells; the batch = `batch` slots.
  std::uint64_t per_token_full = 0, per_token_all = 0, state = 0;
  for (const LayerCell& l : cells) {
    if (l.recurrent)
      state += l.k + l.v;
    else if (l.swa)
      per_token_all += l.k + l.v;
    else {
      per_token_full += l.k + l.v;
      per_token_all += l.k + l.v;
    }
  }
  result.kv.bytes_per_token = per_token_full;
  result.kv.bytes_per_token_all_layers = per_token_all;
  // The size line explain reads is the first, non-SWA cache's (LlamaCppLogReader).
  result.kv.pool_bytes_per_token = per_token_full;
  result.kv.state_bytes_per_sequence = state;
  const std::uint64_t context = options.context ? options.context : slot_ctx;
  result.kv.context = context;
  result.kv.batch = options.batch;
  result.kv.block_size = decision.block.tokens;  // cells, no paging
  // The start-up pool's parameters, with the context and slots of the kv figures.
  CacheParams one = p;
  one.n_ctx = context;
  one.n_seq = 1;
  one.unified = true;
  const Cache one_cache = size_cache(model, cells, one);
  result.kv.bytes_per_sequence = one_cache.total();
  result.kv.blocks_per_sequence = one_cache.base_cells;
  CacheParams many = p;
  many.n_ctx = checked_mul(context, options.batch, "context x batch");
  many.n_seq = options.batch;
  result.kv.bytes_per_batch = size_cache(model, cells, many).total();

  result.weights = decision.weights;  // the whole model (shards_weights false)
  // What the GPU holds of the weights: the blocks and output layer -ngl gives it, never the
  // token embeddings (llamacpp_offload.cpp).
  const LayerWeights by_layer = weights_by_layer(model, n_layer);
  WeightsSplit split = split_weights(by_layer, offload);
  if (options.overheads.weights_gib) {
    // --weights-gib: what the GPU holds with every layer offloaded (the "CUDA0 model buffer
    // size" a full-offload log prints); a partial -ngl keeps its layers' share of it.
    const WeightsSplit full =
        split_weights(by_layer, llama_offload(n_layer, "all", false, offload.output_first));
    const double scale = full.device > 0 ? static_cast<double>(result.weights.bytes_per_rank) /
                                               static_cast<double>(full.device)
                                         : 0.0;
    split.device = static_cast<std::uint64_t>(std::llround(static_cast<double>(split.device) * scale));
    split.host = static_cast<std::uint64_t>(std::llround(static_cast<double>(split.host) * scale));
    result.notes.push_back("--weights-gib under llama.cpp is what the GPU holds with every layer offloaded; -ngl " +
                           options.llamacpp.n_gpu_layers + " keeps its layers' share of it");
  }
  Placement placement;
  placement.layers = n_layer;
  placement.layers_on_device = offload.device_layers;
  placement.output_on_device = offload.output_on_device;
  placement.kv_on_device = offload.kv_offload;
  placement.weights_device_bytes = split.device;
  placement.weights_host_bytes = split.host;
  placement.weights_exact = by_layer.exact && !options.overheads.weights_gib;
  placement.kv_device_bytes = device_cache.total();
  placement.kv_host_bytes = cache.total() - device_cache.total();
  placement.rule = offload_rule(offload, options.llamacpp.n_gpu_layers);
  result.placement = placement;
  result.weights.bytes_per_rank = split.device;
  Assumption weights_assumption = decision.weights_assumption;
  weights_assumption.value = gib_text(split.device);
  weights_assumption.why += "; the GPU's share at -ngl " + options.llamacpp.n_gpu_layers +
                            " (the token embeddings stay in host memory: Placement)";
  result.assumptions.push_back(weights_assumption);
  if (placement.weights_host_bytes > 0 && (offload.device_layers < n_layer || !offload.kv_offload))
    result.notes.push_back("host memory holds " + gib_text(placement.weights_host_bytes) + " of weights and " +
                           gib_text(placement.kv_host_bytes) +
                           " of KV; the CPU runs the layers kept there, so decode slows with every layer "
                           "not offloaded");

  // The engine's own log lines: load_tensors' offload lines, then the context's.
  result.engine_log = offload_log_lines(offload);
  result.engine_log.push_back("llama_context: n_ctx         = " + std::to_string(cache.n_ctx));
  if (!unified) result.engine_log.push_back("llama_context: n_ctx_seq     = " + std::to_string(slot_ctx));
  // The cache line (kLlamaCacheLine): the cells of one stream, n_seq_max / n_stream.
  auto kv_line = [&](std::uint64_t k, std::uint64_t v, std::uint64_t stream_cells, std::uint32_t layers) {
    return kLlamaCacheLine.print({mib(k + v, 7), padded(stream_cells, 6), padded(layers, 3), padded(n_par, 2),
                                  std::to_string(cache.streams), ggml_name(tk), mib(k, 7), ggml_name(tv),
                                  mib(v, 7)});
  };
  if (cache.base_layers > 0)
    result.engine_log.push_back(kv_line(cache.base_k, cache.base_v, cache.n_ctx_seq, cache.base_layers));
  if (cache.swa_layers > 0)
    result.engine_log.push_back(kv_line(cache.swa_k, cache.swa_v, cache.swa_per_stream, cache.swa_layers));
  if (cache.rec_layers > 0) {
    // llama-memory-recurrent.cpp (b11312): "(%6u cells, %3d layers, %2u seqs %2u rs_seq), R (f32): ...,
    // S (f32): ..., P (f32): ..."; layers counts every layer of the model (r_l has n_layer entries,
    // the filtered ones empty); rs_seq 0 without speculative decoding; P (PLE history) 0 here.
    if (build >= kSeqPadBuild)
      result.engine_log.push_back(
          "llama_memory_recurrent: size = " + mib(cache.rec_r + cache.rec_s, 7) + " MiB (" +
          padded(cache.rec_cells, 6) + " cells, " + padded(llama_n_layer(model), 3) + " layers, " +
          padded(n_par, 2) + " seqs  0 rs_seq), R (f32): " + mib(cache.rec_r, 7) +
          " MiB, S (f32): " + mib(cache.rec_s, 7) + " MiB, P (f32): " + mib(0, 7) + " MiB");
    else
      result.engine_log.push_back("llama_memory_recurrent: size = " + mib(cache.rec_r + cache.rec_s, 7) +
                                  " MiB (" + padded(cache.rec_cells, 6) + " cells, " +
                                  padded(cache.rec_layers, 3) + " layers), R+S (f32)");
  }
  if (cache.swa_layers > 0 && !options.llamacpp.swa_full)
    result.notes.push_back("sliding-window layers keep " + std::to_string(cache.swa_cells) +
                           " cells (pad(min(n_ctx, n_swa x seqs + n_ubatch), 256)); --swa-full keeps n_ctx");

  const std::optional<std::uint64_t> total = total_memory(gpu, options);
  if (!total) return result;

  // Capacity: the GPU's weights and KV (-ngl, llamacpp_offload.cpp) + compute buffer must fit.
  Capacity cap;
  cap.gpu_memory_bytes = *total;
  cap.requested_bytes = *total;
  const double ub = static_cast<double>(options.llamacpp.ubatch_size);
  // Compute buffer with flash attention: logits n_ubatch x n_vocab f32 plus the FFN and
  // hidden intermediates, n_ubatch x (2 I + 4 H) x 4 B (Llama-3-8B at ubatch 512: ~258 MiB
  // reported; estimate range +-30%, more without flash attention).
  std::uint64_t compute = static_cast<std::uint64_t>(ub *
                                                     (static_cast<double>(model.vocab_size) +
                                                      2.0 * static_cast<double>(model.intermediate_size) +
                                                      4.0 * static_cast<double>(model.hidden_size)) *
                                                     4.0);
  std::string compute_why = "n_ubatch x (V + 2I + 4H) x 4 B (flash attention on; range +-30%)";
  if (options.overheads.activation_gib) {
    compute = gib_to_bytes(*options.overheads.activation_gib, "--activation-gib");
    compute_why = "given";
  }
  std::uint64_t runtime = static_cast<std::uint64_t>(0.3 * kGiB);
  std::string runtime_why = "CUDA/HIP context, cuBLAS workspace, output buffer: 0.3 GiB (range 0.2-0.6)";
  if (options.overheads.non_torch_gib) {
    runtime = gib_to_bytes(*options.overheads.non_torch_gib, "--non-torch-gib");
    runtime_why = "given";
  }
  result.assumptions.push_back({"compute buffer", gib_text(compute), compute_why});
  result.assumptions.push_back({"runtime overhead", gib_text(runtime), runtime_why});
  cap.overhead_bytes = compute + runtime;
  const std::uint64_t used = checked_add(result.weights.bytes_per_rank, cap.overhead_bytes, "non-KV memory");
  cap.available_kv_bytes = used < *total ? *total - used : 0;
  cap.page_bytes = per_token_all;  // one cell across all layers
  cap.num_blocks = cache.base_cells;
  cap.kv_tokens = cache.base_cells;
  cap.max_model_len = slot_ctx;
  // Only the GPU's share of the cache must fit there; the host's is listed in the placement.
  cap.fits = device_cache.total() <= cap.available_kv_bytes;
  cap.max_concurrency = cap.fits ? static_cast<double>(n_par) : 0.0;
  // Each slot serves one request at a time (tools/server: n_parallel slots).
  cap.max_running = n_par;
  cap.max_running_source = options.llamacpp.parallel_given ? "--parallel" : "llama-server's default slots";
  // Largest --ctx-size that fits (KV grows monotonically with n_ctx), reported per slot.
  auto fits_ctx = [&](std::uint64_t ctx) {
    CacheParams q = p;
    q.n_ctx = ctx;
    return size_cache(model, device_cells, q).total() <= cap.available_kv_bytes;
  };
  std::uint64_t lo = n_par, hi = std::max(n_ctx, n_ctx_train), best = 0;
  if (fits_ctx(lo)) {
    best = lo;
    while (lo <= hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (fits_ctx(mid)) {
        best = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
  }
  cap.largest_max_model_len = unified ? best : best / n_par;
  if (!cap.fits) {
    result.warnings.push_back("--ctx-size " + std::to_string(n_ctx) + " does not fit: weights " +
                              gib_text(result.weights.bytes_per_rank) + " + KV " + gib_text(device_cache.total()) +
                              " + compute " + gib_text(cap.overhead_bytes) + " > " + gib_text(*total) +
                              "; largest --ctx-size that fits is " + std::to_string(best) +
                              (options.llamacpp.n_gpu_layers == "auto"
                                   ? " (-ngl auto: with --fit on, the default, llama.cpp lowers -ngl or n_ctx "
                                     "until it fits: llama_params_fit)"
                                   : ""));
  }
  result.capacity = cap;
  return result;
}

}  // namespace

std::unique_ptr<Engine> make_llamacpp_engine() { return std::make_unique<LlamaCppEngine>(); }

}  // namespace kvsight
