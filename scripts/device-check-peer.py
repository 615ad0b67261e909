#!/usr/bin/env python3
"""The peer of scripts/device-check.sh (issue #24 item 4): a paged-decode kernel of another
project on the shapes kvsight's sweeps measure in the same run, and kvsight's time over the
peer's per context (the ratios), written as one JSON document to stdout.

Shapes (scripts/device-check.sh step 4): headline = batch 4, 8 KV / 32 Q heads, head_dim 128;
cliff = batch 1, 2 KV / 12 Q heads, head_dim 256; bf16 q, K, V; one decode query per sequence.

The peer, the first that works:
1. FlashInfer's paged batch decode (flashinfer.BatchDecodeWithPagedKVCacheWrapper, "NHD" layout:
   K and V pages [num_pages, page_size, num_kv_heads, head_dim], kvsight's own layout) with page
   size 16 and a random page table (a permutation of the pages, never contiguous), planned once
   per (shape, context) and run on rotated caches.
2. torch's scaled_dot_product_attention with its backend pinned by torch.nn.attention.sdpa_kernel
   (FLASH_ATTENTION, else EFFICIENT_ATTENTION, else MATH: the first that accepts the call) and
   recorded. K and V are contiguous [batch, kv_heads, context, head_dim]: SDPA has no page table,
   so this peer reads the same bytes without the indirection. GQA as group query rows per KV head
   (q [batch, kv_heads, group, head_dim], no mask): the arithmetic of one decode step.

Timed as kvsight's probe times (probes/src: cold inputs, events): input sets rotated so that more
than 2 x L2 is read between two uses of a set, 8 calls back to back between two CUDA events,
median of 10 samples. Bytes as kvsight's attention_bytes: K + V + q + out (no page table).

Usage: device-check-peer.py --contexts 1024,2048,... [--kvsight OUTDIR] [--peer auto|flashinfer|sdpa]
--kvsight reads OUTDIR/headline.json and cliff.json (kvsight probe sweep --format json of this
run) for the ratios. Exit 0 with a document; 1 when no peer ran at any point (the document says why).
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

SHAPES = {"headline": (4, 8, 32, 128), "cliff": (1, 2, 12, 256)}
PAGE_SIZE = 16

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--contexts", required=True)
parser.add_argument("--kvsight", help="device-check OUTDIR holding headline.json and cliff.json")
parser.add_argument("--peer", choices=("auto", "flashinfer", "sdpa"), default="auto")
args = parser.parse_args()
contexts = [int(c) for c in args.contexts.split(",")]
device = torch.device("cuda")
props = torch.cuda.get_device_properties(device)
l2 = getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)
result = {"device": props.name, "torch": torch.__version__, "torch_cuda": torch.version.cuda, "l2_bytes": l2,
          "page_size": PAGE_SIZE, "shapes": {}, "errors": []}

flashinfer = None
if args.peer in ("auto", "flashinfer"):
    try:
        import flashinfer  # noqa: F401  (the wheel, when the machine has it)
        result["flashinfer"] = getattr(flashinfer, "__version__", "unknown")
    except Exception as e:  # ImportError, or a wheel built for another torch / CUDA
        result["errors"].append(f"flashinfer not importable: {type(e).__name__}: {e}")
        if args.peer == "flashinfer":
            json.dump(result, sys.stdout, indent=1)
            sys.exit(1)


def sets_for(kv_bytes):
    """Input sets so that > 2 x L2 is read between two uses of one, within half the free memory."""
    sets = max(1, min(64, -(-2 * l2 // kv_bytes) + 1))
    free, _ = torch.cuda.mem_get_info()
    if sets * kv_bytes > 0.5 * free:
        sets = max(1, int(0.5 * free // kv_bytes))
    return sets if kv_bytes <= 0.5 * free else 0


def time_calls(call, sets):
    for i in range(3):
        call(i % sets)
    torch.cuda.synchronize()
    samples, turn = [], 0
    for _ in range(10):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(8):
            call(turn % sets)
            turn += 1
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0 / 8)
    samples.sort()
    return (samples[4] + samples[5]) / 2


def rand(*shape):
    return torch.rand(*shape, device=device, dtype=torch.bfloat16) * 2 - 1


def flashinfer_point(batch, kv_heads, q_heads, head_dim, context, tensor_cores):
    pages_per_seq = -(-context // PAGE_SIZE)
    num_pages = batch * pages_per_seq
    kv_bytes = 2 * num_pages * PAGE_SIZE * kv_heads * head_dim * 2
    sets = sets_for(kv_bytes)
    if not sets:
        return {"context": context, "error": "out of memory"}
    workspace = torch.empty(128 << 20, dtype=torch.uint8, device=device)
    # use_tensor_cores: FlashInfer's decode through its prefill kernels, for the GQA group sizes its
    # CUDA-core decode is not instantiated for (flashinfer/decode.py).
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD", use_tensor_cores=tensor_cores)
    indptr = torch.arange(0, batch + 1, dtype=torch.int32, device=device) * pages_per_seq
    indices = torch.randperm(num_pages, device=device).to(torch.int32)  # random page table
    last_len = context - (pages_per_seq - 1) * PAGE_SIZE
    last_page_len = torch.full((batch,), last_len, dtype=torch.int32, device=device)
    wrapper.plan(indptr, indices, last_page_len, q_heads, kv_heads, head_dim, PAGE_SIZE,
                 pos_encoding_mode="NONE", q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    caches = [(rand(num_pages, PAGE_SIZE, kv_heads, head_dim), rand(num_pages, PAGE_SIZE, kv_heads, head_dim))
              for _ in range(sets)]
    q = rand(batch, q_heads, head_dim)
    median = time_calls(lambda s: wrapper.run(q, caches[s]), sets)
    # Bytes of the context only (the last page's unused slots are not read), as kvsight counts.
    kv_read = 2 * batch * context * kv_heads * head_dim * 2
    return {"context": context, "time_us": median, "bytes": kv_read + 2 * batch * q_heads * head_dim * 2,
            "buffer_sets": sets}


SDPA_ORDER = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


def sdpa_point(batch, kv_heads, q_heads, head_dim, context, backend_names):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    group = q_heads // kv_heads
    kv_bytes = 2 * batch * kv_heads * context * head_dim * 2
    sets = sets_for(kv_bytes)
    if not sets:
        return {"context": context, "error": "out of memory"}
    ks = [rand(batch, kv_heads, context, head_dim) for _ in range(sets)]
    vs = [rand(batch, kv_heads, context, head_dim) for _ in range(sets)]
    q = rand(batch, kv_heads, group, head_dim)
    refused = []
    for name in backend_names:
        try:
            with sdpa_kernel([getattr(SDPBackend, name)]):
                median = time_calls(lambda s: F.scaled_dot_product_attention(q, ks[s], vs[s]), sets)
            return {"context": context, "time_us": median, "bytes": kv_bytes + 2 * batch * q_heads * head_dim * 2,
                    "buffer_sets": sets, "sdpa_backend": name, "refused": refused}
        except RuntimeError as e:  # this backend does not take the call: the next one
            refused.append(f"{name}: {str(e).splitlines()[0][:160]}")
    return {"context": context, "error": "no SDPA backend took the call: " + "; ".join(refused)}


def kvsight_points(shape):
    """{context: {kernel: time_us}} from this run's kvsight sweep of the shape."""
    if not args.kvsight:
        return {}
    try:
        with open(os.path.join(args.kvsight, shape + ".json")) as f:
            sweep = json.load(f)
    except (OSError, ValueError):
        return {}
    out = {}
    for value in (sweep.values() if isinstance(sweep, dict) else []):
        if isinstance(value, dict) and "points" in value and "kernel" in value:
            for p in value["points"]:
                if p.get("time_us"):
                    out.setdefault(p["context"], {})[value["kernel"]] = p["time_us"]
    return out


# Per shape, the first peer that takes its first context: FlashInfer (CUDA-core decode, then its
# tensor-core path), else SDPA; what each refused is kept in errors.
PEERS = ([("flashinfer", False), ("flashinfer-tensor-cores", True)] if flashinfer is not None else []) + \
    ([("sdpa", None)] if args.peer != "flashinfer" else [])
PEER_TEXT = {"flashinfer": f"flashinfer BatchDecodeWithPagedKVCacheWrapper (NHD, page size {PAGE_SIZE}, random page table)",
             "flashinfer-tensor-cores": f"flashinfer BatchDecodeWithPagedKVCacheWrapper use_tensor_cores=True (NHD, "
                                        f"page size {PAGE_SIZE}, random page table)",
             "sdpa": "torch scaled_dot_product_attention, backend pinned (contiguous K/V, no page table)"}


def measure(peer, shape, context):
    try:
        if peer == "sdpa":
            return sdpa_point(*shape, context, SDPA_ORDER)
        return flashinfer_point(*shape, context, peer == "flashinfer-tensor-cores")
    except Exception as e:  # one context's failure is recorded; the others still run
        return {"context": context, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}


ran = 0
for name, shape in SHAPES.items():
    batch, kv_heads, q_heads, head_dim = shape
    ours = kvsight_points(name)
    peers = list(PEERS)
    points = []
    for context in contexts:
        point = measure(peers[0][0], shape, context)
        while "error" in point and not points and len(peers) > 1:  # the first context decides the peer
            result["errors"].append(f"{name}: {peers[0][0]} refused context {context}: {point['error']}")
            peers.pop(0)
            point = measure(peers[0][0], shape, context)
        if "time_us" in point:
            ran += 1
            point["gbps"] = point["bytes"] / (point["time_us"] * 1e3)
            for kernel in ("splitkv", "nosplit"):
                t = ours.get(context, {}).get(kernel)
                point[f"kvsight_{kernel}_us"] = t
                point[f"{kernel}_over_peer"] = t / point["time_us"] if t else None
        points.append(point)
        torch.cuda.empty_cache()
    result["shapes"][name] = {"batch": batch, "kv_heads": kv_heads, "q_heads": q_heads, "head_dim": head_dim,
                              "peer": PEER_TEXT[peers[0][0]], "points": points}
backends = sorted({p.get("sdpa_backend") for s in result["shapes"].values() for p in s["points"]} - {None})
result["sdpa_backends"] = backends
result["peer"] = sorted({shape["peer"] for shape in result["shapes"].values()})
json.dump(result, sys.stdout, indent=1)
sys.exit(0 if ran else 1)
