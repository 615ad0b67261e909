#!/usr/bin/env python3
"""The peer of scripts/device-check.sh: torch's scaled_dot_product_attention on
contiguous KV, for the headline shape (batch 4, 8 KV / 32 Q heads, hd128) and the
cliff shape (batch 1, 2 KV / 12 Q heads, hd256), bf16, at the given contexts.

Decode with GQA as SDPA: q [batch, kv_heads, group, head_dim] against K, V
[batch, kv_heads, context, head_dim] (no mask: every query row attends every
key), the same arithmetic as one decode step. Timed like kvsight's probe: input
sets rotated so that more than 2 x L2 is read between two uses of a set, 8 calls
back to back between two CUDA events, median of 10 samples; bytes counted like
kvsight's attention_bytes (K + V + q + out, no block table). Prints JSON."""
import json
import sys

import torch
import torch.nn.functional as F

contexts = [int(c) for c in sys.argv[1].split(",")]
device = torch.device("cuda")
props = torch.cuda.get_device_properties(device)
l2 = getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)
shapes = {"headline": (4, 8, 32, 128), "cliff": (1, 2, 12, 256)}
result = {"device": props.name, "torch": torch.__version__, "l2_bytes": l2, "shapes": {}}
for name, (batch, kv_heads, q_heads, head_dim) in shapes.items():
    group = q_heads // kv_heads
    points = []
    for context in contexts:
        kv_bytes = batch * kv_heads * context * head_dim * 2 * 2
        sets = max(1, min(64, -(-2 * l2 // kv_bytes) + 1))
        free, _ = torch.cuda.mem_get_info()
        if sets * kv_bytes > 0.5 * free:
            sets = max(1, int(0.5 * free // kv_bytes))
        if kv_bytes > 0.5 * free:
            points.append({"context": context, "error": "out of memory"})
            continue
        ks = [torch.rand(batch, kv_heads, context, head_dim, device=device, dtype=torch.bfloat16) * 2 - 1 for _ in range(sets)]
        vs = [torch.rand_like(ks[0]) * 2 - 1 for _ in range(sets)]
        q = torch.rand(batch, kv_heads, group, head_dim, device=device, dtype=torch.bfloat16) * 2 - 1
        for i in range(3):
            F.scaled_dot_product_attention(q, ks[i % sets], vs[i % sets])
        torch.cuda.synchronize()
        samples, turn = [], 0
        for _ in range(10):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(8):
                F.scaled_dot_product_attention(q, ks[turn % sets], vs[turn % sets])
                turn += 1
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop) * 1000.0 / 8)
        samples.sort()
        median = (samples[4] + samples[5]) / 2
        total = kv_bytes + batch * q_heads * head_dim * 2 * 2  # q in, out in bf16
        points.append({"context": context, "time_us": median, "bytes": total, "gbps": total / (median * 1e3),
                       "buffer_sets": sets})
        del ks, vs
        torch.cuda.empty_cache()
    result["shapes"][name] = {"batch": batch, "kv_heads": kv_heads, "q_heads": q_heads, "head_dim": head_dim,
                              "points": points}
json.dump(result, sys.stdout, indent=1)
