#pragma once
// Engine budgets: how much memory an engine gives to KV on a GPU, and what that
// buys (blocks, tokens, concurrency, the largest max_model_len that fits). One
// implementation per engine (planner/src/engines/<name>.cpp), each citing the
// engine source it follows (docs/reference/formulas.md, overheads.md).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvsight/engine_exllama.hpp"
#include "kvsight/engine_llamacpp.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/engine_sglang.hpp"
#include "kvsight/engine_trtllm.hpp"
#include "kvsight/engine_version.hpp"
#include "kvsight/engine_vllm.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model_spec.hpp"
#include "kvsight/weights.hpp"

namespace kvsight {

// Runtime overhead overrides (GiB, plan's --activation-gib, --non-torch-gib,
// --cuda-graph-gib, --weights-gib); unset = the engine's stated estimate. Shared because
// each engine reads the ones its budget has a term for (weights: every engine; CUDA
// graphs: vLLM only).
struct OverheadOverrides {
  std::optional<double> activation_gib;
  std::optional<double> non_torch_gib;
  std::optional<double> cuda_graph_gib;
  std::optional<double> weights_gib;  // the whole model's weights instead of the estimate
  // GPU memory a KV-transfer connector (LMCache, NIXL, ...) takes on each rank, stated by the
  // user (--kv-transfer-gib): vLLM does not size it, the connector allocates it.
  std::optional<double> kv_transfer_gib;
};

// The options of a plan: the fields every engine reads, then each engine's own struct
// (kvsight/engine_<name>.hpp), which only that engine reads. Unset optionals mean "the
// engine's default for this version/device", which the engine fills in and reports in
// PlanResult::assumptions. The flags that set them: kvsight/engine_options.hpp.
struct EngineOptions {
  std::string engine = "vllm";  // vllm | sglang | trtllm | llamacpp | exllamav2 | exllamav3
  std::string engine_version;   // "" = the engine's default (kvsight/engine_version.hpp grammar)
  std::uint64_t context = 0;    // --context: tokens per sequence for the kv.* figures (0 = max_model_len)
  std::uint64_t batch = 1;      // --batch
  std::uint32_t tp = 1;         // --tensor-parallel-size / --tp
  std::uint32_t pp = 1;         // --pipeline-parallel-size / --pp
  std::string kv_cache_dtype = "auto";  // vLLM/SGLang/TRT-LLM --kv-cache-dtype
  std::optional<std::uint32_t>
      block_size;  // vLLM --block-size (tokens_per_block for TRT-LLM, page size SGLang)
  // The user's length (vLLM --max-model-len, SGLang --context-length, TensorRT-LLM
  // --max_seq_len); -1 = search the largest that fits (vLLM semantics).
  std::optional<std::int64_t> max_model_len;
  std::optional<std::uint64_t> gpu_memory_bytes;  // --gpu-mem-gib, instead of the catalog figure
  OverheadOverrides overheads;

  VllmOptions vllm;
  SglangOptions sglang;
  TrtllmOptions trtllm;
  LlamacppOptions llamacpp;
  ExllamaOptions exllama;
};

// A number the output should flag: an estimate with its range, or a default assumed.
struct Assumption {
  std::string name;   // "activation peak"
  std::string value;  // "1.23 GiB (range 0.9-1.6)"
  std::string why;    // "overheads.md estimate: T x (3I/TP + 4H) x 2 B ..."
};

struct KvFigures {
  std::uint64_t bytes_per_token = 0;
  std::uint64_t bytes_per_token_all_layers = 0;
  // Bytes one token takes in the pool whose size the engine logs (explain divides the logged
  // size by it): every attention layer for SGLang's token pool and TensorRT-LLM's paged pool,
  // the full-attention layers for llama.cpp's first (non-SWA) cache and for vLLM.
  std::uint64_t pool_bytes_per_token = 0;
  std::uint64_t state_bytes_per_sequence = 0;
  std::uint64_t bytes_per_sequence = 0;   // one sequence at `context` under the engine's rules
  std::uint64_t bytes_per_batch = 0;      // x batch
  std::uint32_t block_size = 0;           // after engine adjustment (vLLM hybrid raise)
  std::uint64_t blocks_per_sequence = 0;  // sum over KV cache groups of pages for one sequence
  std::uint64_t context = 0;
  std::uint64_t batch = 0;
};

struct Capacity {
  std::uint64_t gpu_memory_bytes = 0;    // total as the runtime reports it
  std::uint64_t requested_bytes = 0;     // total x utilization (vLLM), or the fraction's share
  std::uint64_t overhead_bytes = 0;      // activations + non-torch + graphs (estimates)
  std::uint64_t available_kv_bytes = 0;  // what the engine gives to KV, per rank (min over ranks)
  // The same in GiB as vLLM prints it, signed: budget - non-KV memory, negative when the model
  // does not fit (available_kv_bytes stops at 0). 0 for engines that print no such figure.
  double available_kv_signed_gib = 0.0;
  std::uint64_t page_bytes = 0;  // bytes of one block across one KV cache group
  std::uint64_t num_blocks = 0;
  std::uint64_t kv_tokens = 0;
  double max_concurrency = 0.0;             // at max_model_len
  std::uint64_t max_model_len = 0;          // the length used for max_concurrency
  bool fits = false;                        // at least one sequence of max_model_len fits
  std::uint64_t largest_max_model_len = 0;  // the largest max_model_len that fits (search)
  std::uint32_t limiting_rank = 0;          // rank (tp*stage+r) that gave the minimum
  // The most sequences the engine runs at once whatever the KV cache holds (issue #22 item 4):
  // vLLM max_num_seqs, SGLang --max-running-requests, TensorRT-LLM max_batch_size, llama.cpp's
  // slots; 0 when kvsight knows no such cap of the engine. `max_running_source` says where
  // it comes from ("--max-num-seqs", "vLLM default ...").
  std::uint64_t max_running = 0;
  std::string max_running_source;
};

// What a layer-splitting engine keeps on the GPU and in host memory (llama.cpp: -ngl and
// --no-kv-offload; issue #22 item 5). Absent for engines that load everything on the GPU.
struct Placement {
  std::uint32_t layers = 0;            // repeating layers (llama.cpp n_layer)
  std::uint32_t layers_on_device = 0;  // the last ones
  bool output_on_device = true;        // final norm and LM head
  bool kv_on_device = true;            // each layer's KV with its layer; false: all in host memory
  std::uint64_t weights_device_bytes = 0;
  std::uint64_t weights_host_bytes = 0;  // the input layer (token embeddings) at least
  bool weights_exact = false;            // from the GGUF's tensor infos
  std::uint64_t kv_device_bytes = 0;     // the start-up cache (n_ctx cells, every slot)
  std::uint64_t kv_host_bytes = 0;
  std::string rule;  // which layers go where and why, one line with its source
};

struct PlanResult {
  std::string engine;
  std::string engine_version;
  KvFigures kv;
  WeightsEstimate weights;
  std::optional<Placement> placement;   // llama.cpp only
  std::optional<Capacity> capacity;     // present when a GPU (or memory size) was given
  std::vector<std::string> engine_log;  // lines the engine itself would log
  std::vector<Assumption> assumptions;
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
};

// The option fields of EngineOptions that a user sets by flag. Each engine says which
// it reads and how it spells them (Engine::flags); kvsight's own neutral spellings
// are in option_fields() (kvsight/engine_options.hpp).
enum class OptionField {
  tensor_parallel_size,
  pipeline_parallel_size,
  kv_cache_dtype,
  block_size,
  max_model_len,
  gpu_memory_utilization,
  max_num_batched_tokens,
  max_num_seqs,
  kv_cache_memory_bytes,
  enforce_eager,
  enable_prefix_caching,
  disable_prefix_caching,
  async_scheduling,
  no_async_scheduling,
  offline,
  mem_fraction_static,
  free_gpu_memory_fraction,
  ctx_size,
  parallel,
  cache_type_k,
  cache_type_v,
  flash_attn,
  swa_full,
  ubatch_size,
  kv_unified,
  no_kv_offload,
  max_total_tokens,
  disable_radix_cache,
  speculative_config,
  kv_transfer_config,
  n_gpu_layers,
  gdn_prefill_backend,
};

// One option as an engine's own command line spells it ("--tp-size" for SGLang).
struct EngineFlag {
  OptionField field;
  std::vector<std::string> spellings;  // the engine's names for it, long form first
};

// One KV cache type option an engine reads, and its value.
struct KvTypeSetting {
  OptionField field;
  std::string value;
};

// The attention block (page) size an engine will really use, and why.
struct BlockSizeChoice {
  std::uint32_t tokens = 0;  // tokens per block (1 for llama.cpp: one cell per token)
  std::string source;        // "--block-size", "vLLM default", "raised by vLLM ..."
  bool paged = true;         // false: no paged KV blocks (llama.cpp's one cell pool)
  std::string derivation{};  // the figures behind a derived size ("" when given or a default)
};

// The max_model_len an engine runs with (vLLM --max-model-len, SGLang --context-length,
// TensorRT-LLM max_seq_len, llama.cpp n_ctx, ExLlama cache size), and why.
struct LengthChoice {
  std::uint64_t tokens = 0;   // the effective length
  std::uint64_t derived = 0;  // the model's own maximum (derived_max_model_len)
  bool search = false;        // vLLM --max-model-len -1: search the largest that fits
  std::string source;         // "--max-model-len", "the model's maximum (config.py ...)"
};

// One start-up check an engine applies before it serves (TP divides heads, ...).
struct StartupCheck {
  std::string name;
  bool ok = true;
  std::string detail;
  std::string source;  // engine file and version the rule was read from
};

struct EngineDecision;  // kvsight/engine_decision.hpp
struct Launcher;        // kvsight/launcher.hpp
struct GateInput;       // kvsight/gates.hpp
struct KernelVerdict;
struct GateResult;

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  virtual std::vector<std::string> known_versions() const = 0;

  // --- What the engine knows about itself (issue #9: one registration per engine).
  // "vLLM", "llama.cpp": for messages.
  virtual std::string display_name() const = 0;
  // Other spellings users type for --engine ("llama.cpp", "tensorrt-llm").
  virtual std::vector<std::string> aliases() const { return {}; }
  // The version planned for when --engine-version is not given.
  virtual std::string default_version() const = 0;
  // The form of its versions (kvsight/engine_version.hpp): dotted, or llama.cpp builds.
  virtual VersionForm version_form() const { return VersionForm::dotted; }
  // options.engine_version (default_version() when empty) in the engine's form. Throws
  // InputError("--engine-version", ...) naming the form and known_versions().
  EngineVersion version(const EngineOptions& options) const;
  // The options the engine reads, in its own spellings.
  virtual std::vector<EngineFlag> flags() const = 0;
  // Whether `field` is one of them (flags()).
  bool reads(OptionField field) const;
  // The command that starts the engine's server, every flag of its parser and what kvsight
  // does with each (kvsight/launcher.hpp, issue #22); a static the engine owns. nullptr: no
  // launch line is read for this engine.
  virtual const Launcher* launcher() const { return nullptr; }
  // Allowed values of the KV cache type option(s) the engine reads (kv_cache_dtype,
  // or cache_type_k / cache_type_v for llama.cpp and exllama).
  virtual std::vector<std::string> kv_cache_dtypes() const = 0;
  // The KV cache type option(s) the engine reads, with their values in `options`, the
  // one holding the K cache's type first: kv_cache_dtype for most; llama.cpp's
  // cache_type_k and cache_type_v; exllama's one mode (under cache_type_k).
  virtual std::vector<KvTypeSetting> kv_cache_type_settings(const EngineOptions& options) const {
    return {{OptionField::kv_cache_dtype, options.kv_cache_dtype}};
  }
  // What the KV cache type option(s) store for this model (K and V). Default: vLLM's
  // grammar of --kv-cache-dtype (kvsight/footprint.hpp resolve_kv_types).
  virtual KvTypes kv_types(const ModelSpec& model, const EngineOptions& options) const;
  // The block size the engine uses for this model, after its own adjustments; `gpu` (null when
  // no device is named) where the engine's choice depends on the device (vLLM's FlashInfer GDN
  // prefill on Hopper / Blackwell). Throws InputError("block_size", ...) for a --block-size the
  // engine refuses.
  virtual BlockSizeChoice block_size(const ModelSpec& model, const GpuSpec* gpu,
                                     const EngineOptions& options) const = 0;
  // The max_model_len the engine runs with. Default: the user's length when positive,
  // else the model's derived maximum. Throws InputError for a length the engine refuses.
  virtual LengthChoice max_model_len(const ModelSpec& model, const EngineOptions& options) const;
  // Whether the engine refuses to start when the memory free now is below its budget of the
  // device's total (vLLM: worker/utils.py request_memory, formulas.md step 1), for these options
  // on this device (vLLM 0.34 skips the check with its extensible KV cache).
  virtual bool needs_free_memory_for_budget(const EngineOptions&, const GpuSpec*) const { return false; }
  // Whether the weights are sharded over TP x PP ranks (false: llama.cpp and ExLlama plan
  // the whole model, split by layer across devices).
  virtual bool shards_weights() const { return true; }
  // The checks the engine applies at start-up that depend on the model and options only
  // (kernel availability is the gates' part). gpu may be null.
  virtual std::vector<StartupCheck> startup_checks(const ModelSpec& model, const GpuSpec* gpu,
                                                   const EngineOptions& options) const = 0;
  // Whether planner/src/gates has attention-kernel rules for this engine.
  virtual bool has_gate_rules() const { return false; }

  // --- Hooks of the attention-kernel selection (planner/src/gates/gates.cpp), so that no
  // code outside the engine switches on its name.
  // The engine lays this model's KV out stride-padded (vLLM hybrids: forces Triton).
  virtual bool padded_kv_layout(const ModelSpec&) const { return false; }
  // Reorders the candidates where the engine's priority depends on the device.
  virtual void order_kernels(const GateInput&, std::vector<KernelVerdict>&) const {}
  // Why an option turns `kernel` off even where it is admitted ("" = it does not).
  virtual std::string kernel_disabled_by(const std::string&, const EngineOptions&) const { return ""; }
  // Start-up checks that depend on the kernels selected (llama.cpp: quantized V).
  virtual std::vector<StartupCheck> kernel_checks(const GateResult&, const EngineDecision&) const {
    return {};
  }
  // How a user makes this version use an attention backend (a gates KernelVerdict::backend)
  // on its command line or environment, ready to paste; "" when it has no such switch.
  virtual std::string attention_backend_option(const EngineVersion&, const std::string&) const { return ""; }
  // Notes the engine attaches to its kernel selection on this device.
  virtual std::vector<std::string> gate_notes(const GpuSpec&, const EngineOptions&) const { return {}; }
  // Refuses (InputError naming the field) a KV cache type outside kv_cache_dtypes(), for
  // each cache-type field the engine reads; every use case calls it before planning.
  void check_options(const EngineOptions& options) const;

  // --- explain: replaying a start-up log.
  // The reader of the start-up lines the engine prints (kvsight/engine_log.hpp), their formats
  // defined once beside the code that prints them; read_engine_log asks every engine's.
  // nullptr: the engine prints no line that explain reads.
  virtual std::unique_ptr<EngineLogReader> log_reader() const { return nullptr; }
  // Sets the options the log's figures stand for that the engine would read from its own
  // command line (llama.cpp: n_ctx and the slots of its cache line), each named in `inputs`.
  virtual void options_from_log(const EngineLogFigures&, EngineOptions&, std::vector<std::string>&) const {}

  // The engine's budget on a decision made for the same model, device and options
  // (decide(), kvsight/engine_decision.hpp): blocks, tokens, concurrency, its log lines.
  // gpu may be null: then only the kv and weights figures are computed.
  virtual PlanResult budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                            const EngineOptions& options) const = 0;
  // decide() once, then budget() on that decision.
  PlanResult plan(const ModelSpec& model, const GpuSpec* gpu, const EngineOptions& options) const;
};

// The one list of engines (planner/src/engines/registry.cpp). Names and aliases are
// matched case-insensitively. Throws InputError("--engine", ...) listing the engines.
std::unique_ptr<Engine> make_engine(const std::string& name);
std::vector<std::string> engine_names();
// What a unified-memory device (GpuSpec::unified_memory: GB10) means for every engine's budget,
// for the plan's notes; nullopt for a device with memory of its own.
std::optional<std::string> unified_memory_note(const GpuSpec& gpu);
// Every engine, in registry order (for --help and flag tables).
std::vector<std::unique_ptr<Engine>> all_engines();

}  // namespace kvsight
