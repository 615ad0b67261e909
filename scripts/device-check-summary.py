#!/usr/bin/env python3
"""Summary of scripts/device-check.sh: OUTDIR/summary.json and summary.md with,
per context of each shape, kvsight split-KV and no-split GB/s, their ratio to the
stream probe of the same run, torch's GB/s, and kvsight split-KV time / torch time."""
import json
import os
import sys

out_dir, elapsed, failed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def load(name):
    try:
        with open(os.path.join(out_dir, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


checks = []
try:
    for line in open(os.path.join(out_dir, "check.jsonl")):
        if line.strip():
            checks.append(json.loads(line))
except (OSError, ValueError):
    pass
bandwidth = load("bandwidth.json") or {}
torch_result = load("torch.json") or {}
stream = bandwidth.get("read_gbps", 0.0)
summary = {"elapsed_s": elapsed, "checks": len(checks),
           "checks_failed": sum(1 for c in checks if not c.get("correct")),
           "stream_read_gbps": stream, "stream_copy_gbps": bandwidth.get("copy_gbps"),
           "torch": {k: torch_result.get(k) for k in ("device", "torch", "error")}, "shapes": {}}
md = ["# kvsight device check", "", f"Finished in {elapsed} s. Correctness: {summary['checks']} runs, "
      f"{summary['checks_failed']} failed. Stream probe: read {stream:.0f} GB/s, copy "
      f"{bandwidth.get('copy_gbps', 0):.0f} GB/s.", ""]
for shape in ("headline", "cliff"):
    sweep = load(shape + ".json") or {}
    by_kernel = {}
    for value in (sweep.values() if isinstance(sweep, dict) else []):
        if isinstance(value, dict) and "points" in value and "kernel" in value:
            by_kernel[value["kernel"]] = {p["context"]: p for p in value["points"]}
    peer = {p["context"]: p for p in torch_result.get("shapes", {}).get(shape, {}).get("points", []) if "time_us" in p}
    rows = []
    contexts = sorted(set(by_kernel.get("splitkv", {})) | set(by_kernel.get("nosplit", {})))
    md += [f"## {shape}", "", "| context | splitkv us | splitkv GB/s | / stream (same run) | splits | nosplit GB/s | "
           "torch us | torch GB/s | splitkv time / torch |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in contexts:
        s, n, t = by_kernel.get("splitkv", {}).get(c, {}), by_kernel.get("nosplit", {}).get(c, {}), peer.get(c, {})
        row = {"context": c, "splitkv_us": s.get("time_us"), "splitkv_gbps": s.get("gbps"),
               "splitkv_ratio_to_stream": s.get("ratio_to_stream"), "splits": s.get("splits"),
               "nosplit_gbps": n.get("gbps"), "torch_us": t.get("time_us"), "torch_gbps": t.get("gbps")}
        row["splitkv_over_torch_time"] = (s["time_us"] / t["time_us"]) if s.get("time_us") and t.get("time_us") else None
        rows.append(row)
        f = lambda v, d=1: "-" if v is None else f"{v:.{d}f}"
        md.append(f"| {c} | {f(row['splitkv_us'])} | {f(row['splitkv_gbps'], 0)} | {f(row['splitkv_ratio_to_stream'], 2)} | "
                  f"{row['splits'] or '-'} | {f(row['nosplit_gbps'], 0)} | {f(row['torch_us'])} | {f(row['torch_gbps'], 0)} | "
                  f"{f(row['splitkv_over_torch_time'], 2)} |")
    md.append("")
    summary["shapes"][shape] = rows
summary["passed"] = failed == 0 and summary["checks_failed"] == 0
md.append("Checks " + ("passed." if summary["passed"] else "FAILED."))
with open(os.path.join(out_dir, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
with open(os.path.join(out_dir, "summary.md"), "w") as f:
    f.write("\n".join(md) + "\n")
print("\n".join(md))
sys.exit(0 if summary["passed"] else 1)
