"""Compare kvsight's vLLM arithmetic with vLLM's own planner (kv_cache_planning.py).

For every catalog model (planner/data/models/*.json, HF config.json form) and a fixed KV
budget, build the per-layer specs the way the model runner does (FullAttentionSpec,
SlidingWindowSpec, ChunkedLocalAttentionSpec, MLAAttentionSpec; for hybrid models
MambaSpec and the block size from vLLM's own hybrid alignment, as on an SM80 CUDA worker), group them with get_global_kv_cache_groups, size them with get_kv_cache_configs,
and read the concurrency and the largest max_model_len from vLLM's own functions; then run
`kvsight plan --kv-cache-memory-bytes` on the same model and budget. A row passes when
fits agree and tokens and the largest max_model_len are within 0.5 %.

Written against the vllm 0.33.0 wheel's v1/core/kv_cache_planning.py and
v1/kv_cache_interface.py; the function names are version-specific (older releases keep them
in v1/core/kv_cache_utils.py). Exit code: 0 all rows pass, 1 a row differs, 2 bad input.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

# No GPU here: vLLM's platform detection would fail ("Failed to infer device type"). The CPU
# platform keeps the interface's KV-cache config builder (platforms/interface.py
# get_kv_cache_config_builder_cls, 0.33.0), so grouping and sizing are the ones a CUDA worker
# runs; the per-layer specs below carry the block size, so the CPU backend's own block-size
# choice does not enter.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
# 0.34's CPU platform refuses to configure on x86 without an active Triton driver
# (platforms/cpu.py check_and_update_config; vllm/triton_utils/importing.py). An empty
# CUDA_VISIBLE_DEVICES is the case importing.py keeps Triton for with no active driver; the
# oracle never launches a kernel, so the check does not bear on what it compares.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

BUDGET_GIB = 20.0


def layer_specs(model_config, block_size, torch):
    """The per-layer specs the model runner would register, read from the transformers config
    vLLM itself loaded (hf_text_config), so that derived fields (layer_types computed from a
    sliding-window pattern or no_rope_layers, sliding_window cleared by use_sliding_window) are
    vLLM's. Layers that share another layer's KV (Gemma 3n's last num_kv_shared_layers) get no
    spec, as in the model runner (Attention with kv_sharing_target_layer_name)."""
    from vllm.v1.kv_cache_interface import (ChunkedLocalAttentionSpec, FullAttentionSpec,
                                            MLAAttentionSpec, SlidingWindowSpec)
    t = model_config.hf_text_config
    n = t.num_hidden_layers
    heads = t.num_attention_heads
    kv_heads = getattr(t, "num_key_value_heads", None) or heads
    head_dim = getattr(t, "head_dim", None) or t.hidden_size // heads
    dtype = torch.bfloat16
    specs = {}
    layer_types = list(getattr(t, "layer_types", None) or [])
    window = model_config.get_sliding_window()
    chunk = getattr(t, "attention_chunk_size", None)
    shared = getattr(t, "num_kv_shared_layers", 0) or 0
    for i in range(n):
        if i >= n - shared:
            continue
        name = f"model.layers.{i}.self_attn.attn"
        kind = layer_types[i] if i < len(layer_types) else (
            "sliding_attention" if window else "full_attention")
        if getattr(t, "kv_lora_rank", None):
            specs[name] = MLAAttentionSpec(block_size=block_size, num_kv_heads=1,
                                           head_size=t.kv_lora_rank + t.qk_rope_head_dim,
                                           dtype=dtype)
        elif kind == "sliding_attention" and window:
            specs[name] = SlidingWindowSpec(block_size=block_size, num_kv_heads=kv_heads,
                                            head_size=head_dim, dtype=dtype, sliding_window=window)
        elif kind == "chunked_attention" and chunk:
            specs[name] = ChunkedLocalAttentionSpec(block_size=block_size, num_kv_heads=kv_heads,
                                                    head_size=head_dim, dtype=dtype,
                                                    attention_chunk_size=chunk)
        elif kind in ("full_attention", "sliding_attention", "chunked_attention", "attention"):
            specs[name] = FullAttentionSpec(block_size=block_size, num_kv_heads=kv_heads,
                                            head_size=head_dim, dtype=dtype)
        else:
            return None  # recurrent layers: hybrid_specs builds these models
    return specs


def hybrid_layer_kinds(t):
    """'attention' or 'recurrent' per layer, from the fields the HF config classes derive:
    layer_types (Qwen3-Next, Qwen3.5 / 3.6: "full_attention" / "linear_attention") or
    layers_block_type (Jamba: "attention" / "mamba")."""
    kinds = list(getattr(t, "layer_types", None) or getattr(t, "layers_block_type", None) or [])
    if len(kinds) != t.num_hidden_layers:
        return None
    return ["attention" if k in ("full_attention", "attention") else "recurrent" for k in kinds]


def hybrid_specs(model_config, vllm_config, torch):
    """Per-layer specs of a hybrid (attention + Mamba / linear-attention) model as a CUDA worker
    on SM80 (A100) builds them in vllm 0.33.0:
    - the block size from vLLM's own Platform._align_hybrid_block_size (platforms/interface.py),
      with FLASH_ATTN as the attention backend (kernel blocks MultipleOf(16)). What the oracle
      supplies: the backend list (_find_non_ssm_backends reads built layers, which this script
      does not build) and "no prefill checkpoint alignment" (get_mamba_prefill_checkpoint_alignment
      is None unless every Mamba layer exports checkpoints, which the GDN layer does only with
      the FlashInfer GDN prefill on SM90 / SM10x: qwen_gdn_linear_attn.py 0.33.0);
    - MambaSpec exactly as MambaBase.get_kv_cache_spec (layers/mamba/abstract.py), its shapes and
      dtypes from the model class's get_mamba_state_shape_from_config /
      get_mamba_state_dtype_from_config, mamba_block_size / page_size_padded / mamba_cache_mode
      as the config update left them (prefix caching is on by default for hybrids since 0.28:
      mamba_cache_mode "align", MambaModelConfig in models/config.py)."""
    from vllm.model_executor.layers.mamba import abstract as mamba_abstract
    from vllm.model_executor.models import ModelRegistry
    from vllm.platforms.interface import Platform
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec
    t = model_config.hf_text_config
    kinds = hybrid_layer_kinds(t)
    if kinds is None:
        return None
    mamba_abstract.get_mamba_prefill_checkpoint_alignment = lambda _config: None
    Platform._find_non_ssm_backends = classmethod(lambda cls, _config: [FlashAttentionBackend])
    Platform._align_hybrid_block_size.__func__(Platform, vllm_config, FlashAttentionBackend)
    cache = vllm_config.cache_config
    model_cls, _ = ModelRegistry.resolve_model_cls(model_config.architecture,
                                                   model_config=model_config)
    shapes = tuple(tuple(s) for s in model_cls.get_mamba_state_shape_from_config(vllm_config))
    dtypes = tuple(model_cls.get_mamba_state_dtype_from_config(vllm_config))
    heads = t.num_attention_heads
    kv_heads = getattr(t, "num_key_value_heads", None) or heads
    head_dim = getattr(t, "head_dim", None) or t.hidden_size // heads
    specs = {}
    for i, kind in enumerate(kinds):
        if kind == "attention":
            specs[f"model.layers.{i}.self_attn.attn"] = FullAttentionSpec(
                block_size=cache.block_size, num_kv_heads=kv_heads, head_size=head_dim,
                dtype=torch.bfloat16)
        else:
            specs[f"model.layers.{i}.mixer"] = MambaSpec(
                shapes=shapes, dtypes=dtypes, block_size=cache.mamba_block_size,
                page_size_padded=cache.mamba_page_size_padded,
                mamba_cache_mode=cache.mamba_cache_mode, num_speculative_blocks=0)
    return specs


def vllm_figures(model_dir, cfg, budget):
    import torch
    from vllm.config import VllmConfig, ModelConfig, CacheConfig
    from vllm.v1.core import kv_cache_planning as planning
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    model_config = ModelConfig(model=str(model_dir), skip_tokenizer_init=True, dtype="bfloat16")
    hybrid = model_config.is_hybrid
    # VllmConfig fills the scheduler defaults from the model config (config/vllm.py). A CUDA
    # serve has prefix caching on for every model vLLM supports it on (engine/arg_utils.py:
    # is_prefix_caching_supported, true for hybrids since 0.28); for hybrids it decides the
    # Mamba cache mode, so it is set as a CUDA serve would (the CPU platform may not).
    # The block size is the version's CacheConfig.DEFAULT_BLOCK_SIZE (16 through 0.33.0, 64 from
    # 0.34.0), which FLASH_ATTN on a CUDA worker keeps (update_block_size_for_backend); given
    # explicitly so that the CPU platform does not pick its own.
    block = CacheConfig.DEFAULT_BLOCK_SIZE
    # On a CPU with AVX-512 BF16 the CPU platform resets mamba_ssm_cache_dtype to float32 for
    # its own GDN / Mamba kernels (platforms/cpu.py check_and_update_config, 0.34.0: "Reset SSM
    # cache type to float32 for accelerated GDN mamba backend"); a CUDA worker keeps "auto" (the
    # config's mamba_ssm_dtype, else the model dtype). Reported as absent so the states are a
    # CUDA worker's whatever this machine's CPU is.
    torch.cpu._is_avx512_bf16_supported = lambda: False
    cache_config = CacheConfig(block_size=block, enable_prefix_caching=True)
    vllm_config = VllmConfig(model_config=model_config, cache_config=cache_config)
    specs = (hybrid_specs(model_config, vllm_config, torch) if hybrid
             else layer_specs(model_config, block, torch))
    if specs is None:
        return None
    # The engine core resolves one KV-cache layout before grouping (v1/engine/core.py,
    # resolve_kv_cache_layout, 0.33.0). FLASH_ATTN declares no layouts
    # (AttentionBackend.supported_kv_cache_layouts returns None), so a CUDA worker reports the
    # default preference: the same list is given here.
    from vllm.v1.attention.backends import utils as backend_utils
    default_layouts = [layout.name for layout in backend_utils._DEFAULT_LAYOUT_PREFERENCE]
    backend_utils.resolve_kv_cache_layout(vllm_config, [default_layouts], list(specs.values()))
    groups = planning.get_global_kv_cache_groups(vllm_config, [specs])
    builder_mod = __import__("vllm.v1.core.kv_cache_config_builder", fromlist=["x"])
    builder = builder_mod.get_kv_cache_config_builder(vllm_config)
    largest = planning._estimate_max_model_len_from_groups(builder, vllm_config, groups, budget)
    sched = vllm_config.scheduler_config
    figures = {"largest": largest, "fits": largest >= model_config.max_model_len,
               "block_size": vllm_config.cache_config.block_size,
               "mamba_cache_mode": vllm_config.cache_config.mamba_cache_mode,
               "mamba_ssm_cache_dtype": vllm_config.cache_config.mamba_ssm_cache_dtype,
               "scheduler": {"max_num_batched_tokens": sched.max_num_batched_tokens,
                             "max_num_seqs": sched.max_num_seqs,
                             "async_scheduling": bool(sched.async_scheduling)}}
    try:
        config = planning.get_kv_cache_configs(vllm_config, [specs], [budget], groups)[0]
    except ValueError as e:
        # check_enough_kv_cache_memory refuses a max_model_len that does not fit, naming the
        # estimated maximum length: the comparison is then fits and the largest length.
        if "estimated maximum model length" not in str(e):
            raise
        figures["fits"] = False
        return figures
    concurrency = get_max_concurrency_for_kv_cache_config(vllm_config, config)
    figures["tokens"] = int(concurrency * model_config.max_model_len)
    return figures


def kvsight_figures(binary, model_id, budget, version, scheduler):
    """kvsight plan on the same budget and the same scheduler limits vLLM's config resolved
    (T and S decide the sliding-window and chunked-local reservations)."""
    args = [binary, "plan", "--model", model_id, "--engine-version", version,
            "--kv-cache-memory-bytes", str(budget), "--format", "json",
            "--max-num-batched-tokens", str(scheduler["max_num_batched_tokens"]),
            "--max-num-seqs", str(scheduler["max_num_seqs"]),
            "--async-scheduling" if scheduler["async_scheduling"] else "--no-async-scheduling"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(out.stderr)
    c = json.loads(out.stdout)["capacity"]
    return {"tokens": c["kv_tokens"], "largest": c["largest_max_model_len"], "fits": c["fits"]}


def close(a, b):
    return a == b or (max(a, b) > 0 and abs(a - b) / max(a, b) <= 0.005)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-version", required=True)
    ap.add_argument("--kvsight", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    budget = int(BUDGET_GIB * 2**30)
    failures = 0
    import tempfile
    for path in sorted(pathlib.Path(args.models).glob("*.json")):
        cfg = json.loads(path.read_text())
        model_id = cfg.get("_kvsight", {}).get("id", path.stem)
        with tempfile.TemporaryDirectory() as d:
            hf = {k: v for k, v in cfg.items() if k != "_kvsight"}
            # Llama 4's config.json has "attn_temperature_tuning": 4, which the transformers
            # that vllm 0.33.0 pins validates as a bool; any non-zero value means "on".
            for part in (hf, hf.get("text_config") or {}):
                if isinstance(part.get("attn_temperature_tuning"), int) and not isinstance(
                        part.get("attn_temperature_tuning"), bool):
                    part["attn_temperature_tuning"] = bool(part["attn_temperature_tuning"])
            (pathlib.Path(d) / "config.json").write_text(json.dumps(hf))
            try:
                ref = vllm_figures(pathlib.Path(d), cfg, budget)
            except Exception as e:  # a config vLLM itself cannot load: report, do not hide
                print(f"{model_id:30s} vLLM error: {e}")
                failures += 1
                continue
        if ref is None:
            print(f"{model_id:30s} skipped (recurrent / shared-KV layers not built by this script)")
            continue
        got = kvsight_figures(args.kvsight, model_id, budget, args.vllm_version, ref["scheduler"])
        ok = got["fits"] == ref["fits"] and close(got["largest"], ref["largest"])
        if "tokens" in ref:  # no token count when vLLM refuses the model's max_model_len
            ok = ok and close(got["tokens"], ref["tokens"])
        else:
            got.pop("tokens")
        failures += 0 if ok else 1
        print(f"{model_id:30s} {'ok  ' if ok else 'DIFF'} vLLM {ref} kvsight {got}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
