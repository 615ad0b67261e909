"""Compare kvsight's vLLM arithmetic with vLLM's own planner (kv_cache_planning.py).

For every catalog model (planner/data/models/*.json, HF config.json form) and a fixed KV
budget, build the per-layer specs the way the model runner does (FullAttentionSpec,
SlidingWindowSpec, ChunkedLocalAttentionSpec, MLAAttentionSpec; MambaSpec for recurrent
layers), group them with get_global_kv_cache_groups, size them with get_kv_cache_configs,
and read the concurrency and the largest max_model_len from vLLM's own functions; then run
`kvsight plan --kv-cache-memory-bytes` on the same model and budget. A row passes when
fits agree and tokens and the largest max_model_len are within 0.5 %.

Written against the vllm 0.33.0 wheel's v1/core/kv_cache_planning.py and
v1/kv_cache_interface.py; the function names are version-specific (older releases keep them
in v1/core/kv_cache_utils.py). Exit code: 0 all rows pass, 1 a row differs, 2 bad input.
"""
import argparse
import json
import pathlib
import subprocess
import sys

BUDGET_GIB = 20.0


def text_config(cfg):
    return cfg.get("text_config", cfg)


def layer_specs(cfg, block_size, torch):
    from vllm.v1.kv_cache_interface import (ChunkedLocalAttentionSpec, FullAttentionSpec,
                                            MLAAttentionSpec, SlidingWindowSpec)
    t = text_config(cfg)
    n = t["num_hidden_layers"]
    heads = t["num_attention_heads"]
    kv_heads = t.get("num_key_value_heads", heads)
    head_dim = t.get("head_dim") or t["hidden_size"] // heads
    dtype = torch.bfloat16
    specs = {}
    layer_types = t.get("layer_types") or []
    window = t.get("sliding_window")
    chunk = t.get("attention_chunk_size")
    for i in range(n):
        name = f"model.layers.{i}.self_attn.attn"
        kind = layer_types[i] if i < len(layer_types) else "full_attention"
        if "kv_lora_rank" in t and t.get("kv_lora_rank"):
            specs[name] = MLAAttentionSpec(block_size=block_size, num_kv_heads=1,
                                           head_size=t["kv_lora_rank"] + t["qk_rope_head_dim"],
                                           dtype=dtype)
        elif kind == "sliding_attention" and window:
            specs[name] = SlidingWindowSpec(block_size=block_size, num_kv_heads=kv_heads,
                                            head_size=head_dim, dtype=dtype, sliding_window=window)
        elif kind == "chunked_attention" and chunk:
            specs[name] = ChunkedLocalAttentionSpec(block_size=block_size, num_kv_heads=kv_heads,
                                                    head_size=head_dim, dtype=dtype,
                                                    attention_chunk_size=chunk)
        elif kind in ("full_attention", "sliding_attention", "chunked_attention"):
            specs[name] = FullAttentionSpec(block_size=block_size, num_kv_heads=kv_heads,
                                            head_size=head_dim, dtype=dtype)
        else:
            return None  # recurrent / shared-KV layers: not built here yet (reported as skipped)
    return specs


def vllm_figures(model_dir, cfg, budget):
    import torch
    from vllm.config import VllmConfig, ModelConfig, CacheConfig
    from vllm.v1.core import kv_cache_planning as planning
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    model_config = ModelConfig(model=str(model_dir), skip_tokenizer_init=True, dtype="bfloat16")
    # VllmConfig fills the scheduler defaults from the model config (config/vllm.py).
    vllm_config = VllmConfig(model_config=model_config, cache_config=CacheConfig(block_size=16))
    specs = layer_specs(cfg, 16, torch)
    if specs is None:
        return None
    groups = planning.get_global_kv_cache_groups(vllm_config, [specs])
    config = planning.get_kv_cache_configs(vllm_config, [specs], [budget], groups)[0]
    concurrency = get_max_concurrency_for_kv_cache_config(vllm_config, config)
    tokens = int(concurrency * model_config.max_model_len)
    builder_mod = __import__("vllm.v1.core.kv_cache_config_builder", fromlist=["x"])
    builder = builder_mod.get_kv_cache_config_builder(vllm_config)
    largest = planning._estimate_max_model_len_from_groups(builder, vllm_config, groups, budget)
    return {"num_blocks": config.num_blocks, "tokens": tokens, "largest": largest,
            "fits": largest >= model_config.max_model_len}


def kvsight_figures(binary, model_id, budget, version):
    out = subprocess.run([binary, "plan", "--model", model_id, "--engine-version", version,
                          "--kv-cache-memory-bytes", str(budget), "--format", "json"],
                         capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(out.stderr)
    c = json.loads(out.stdout)["capacity"]
    return {"num_blocks": c["num_blocks"], "tokens": c["kv_tokens"],
            "largest": c["largest_max_model_len"], "fits": c["fits"]}


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
            (pathlib.Path(d) / "config.json").write_text(json.dumps(
                {k: v for k, v in cfg.items() if k != "_kvsight"}))
            try:
                ref = vllm_figures(pathlib.Path(d), cfg, budget)
            except Exception as e:  # a config vLLM itself cannot load: report, do not hide
                print(f"{model_id:30s} vLLM error: {e}")
                failures += 1
                continue
        if ref is None:
            print(f"{model_id:30s} skipped (recurrent / shared-KV layers not built by this script)")
            continue
        got = kvsight_figures(args.kvsight, model_id, budget, args.vllm_version)
        ok = got["fits"] == ref["fits"] and close(got["tokens"], ref["tokens"]) and close(
            got["largest"], ref["largest"])
        failures += 0 if ok else 1
        print(f"{model_id:30s} {'ok  ' if ok else 'DIFF'} vLLM {ref} kvsight {got}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
