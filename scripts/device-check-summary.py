#!/usr/bin/env python3
"""Summary of scripts/device-check.sh (issue #24 item 4): OUTDIR/summary.json and summary.md.

Every check of the run (OUTDIR/steps.jsonl: name, status ok | failed | skipped, rc, seconds,
message) counted, the failures listed; the host's driver and CUDA versions (host.json); the
correctness runs; the stream probe; per context of each shape kvsight's split-KV and no-split
GB/s, split-KV's ratio to the stream probe of the same run, the peer's time and kvsight's time
over the peer's (device-check-peer.py's ratios); the preflight verdict.

Usage: device-check-summary.py OUTDIR ELAPSED_S [STOPPED_REASON]. passed = no reason to stop, at
least one check ran, and none failed or was skipped. Exit 0 passed, 1 not.
"""
import json
import os
import sys

out_dir, elapsed = sys.argv[1], int(sys.argv[2])
stopped = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None


def load(name):
    try:
        with open(os.path.join(out_dir, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def load_lines(name):
    rows = []
    try:
        with open(os.path.join(out_dir, name)) as f:
            for line in f:
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        rows.append({"name": "(unreadable line)", "status": "failed", "message": line.strip()})
    except OSError:
        pass
    return rows


steps = load_lines("steps.jsonl")
checks = [s for s in steps if s.get("name", "").startswith("check_")]
failed = [s for s in steps if s.get("status") == "failed"]
skipped = [s for s in steps if s.get("status") == "skipped"]
host = load("host.json") or {}
bandwidth = load("bandwidth.json") or {}
peer = load("peer.json") or {}
preflight = load("preflight.json") or {}
stream = bandwidth.get("read_gbps")


def fmt(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


summary = {
    "elapsed_s": elapsed,
    "stopped": stopped,
    "host": host,
    "steps": {"total": len(steps), "ok": sum(1 for s in steps if s.get("status") == "ok"),
              "failed": len(failed), "skipped": len(skipped)},
    "failures": [{k: s.get(k) for k in ("name", "status", "rc", "message")} for s in failed + skipped],
    "correctness": {"runs": len(checks), "failed": sum(1 for s in checks if s.get("status") != "ok")},
    "stream_read_gbps": stream,
    "stream_copy_gbps": bandwidth.get("copy_gbps"),
    "peer": {k: peer.get(k) for k in ("peer", "device", "torch", "torch_cuda", "flashinfer", "sdpa_backends",
                                      "errors", "error")},
    "preflight_verdict": preflight.get("verdict"),
    "shapes": {},
}
md = ["# kvsight device check", ""]
if stopped:
    md += [f"**Stopped before the checks:** {stopped}", ""]
md += [f"Finished in {elapsed} s. Driver {host.get('driver_version') or '?'} (supports CUDA "
       f"{host.get('driver_cuda_version') or '?'}); binary built with CUDA {host.get('binary_cuda_release') or '?'}.",
       f"Checks: {len(steps)} run or due, {summary['steps']['ok']} ok, {len(failed)} failed, {len(skipped)} skipped "
       f"for time. Correctness: {len(checks)} runs, {summary['correctness']['failed']} failed.",
       f"Stream probe: read {fmt(stream, 0)} GB/s, copy {fmt(bandwidth.get('copy_gbps'), 0)} GB/s. "
       f"Peer: {', '.join(peer.get('peer') or []) or peer.get('error') or 'none'}"
       f"{' (SDPA backend ' + ', '.join(peer['sdpa_backends']) + ')' if peer.get('sdpa_backends') else ''}. "
       f"Preflight verdict: {summary['preflight_verdict'] or '-'}.", ""]
if failed or skipped:
    md += ["## Failed or skipped", "", "| check | status | exit | message |", "|---|---|---:|---|"]
    md += [f"| {s.get('name')} | {s.get('status')} | {s.get('rc')} | {s.get('message') or ''} |" for s in failed + skipped]
    md.append("")

for shape in ("headline", "cliff"):
    sweep = load(shape + ".json") or {}
    by_kernel = {}
    for value in (sweep.values() if isinstance(sweep, dict) else []):
        if isinstance(value, dict) and "points" in value and "kernel" in value:
            by_kernel[value["kernel"]] = {p["context"]: p for p in value["points"]}
    peer_points = {p["context"]: p for p in peer.get("shapes", {}).get(shape, {}).get("points", [])}
    contexts = sorted(set(by_kernel.get("splitkv", {})) | set(by_kernel.get("nosplit", {})) | set(peer_points))
    rows = []
    md += [f"## {shape}", "", "| context | splitkv us | splitkv GB/s | / stream | splits | nosplit GB/s | "
           "peer us | peer GB/s | splitkv / peer time | nosplit / peer time |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in contexts:
        s, n, t = by_kernel.get("splitkv", {}).get(c, {}), by_kernel.get("nosplit", {}).get(c, {}), peer_points.get(c, {})
        row = {"context": c, "splitkv_us": s.get("time_us"), "splitkv_gbps": s.get("gbps"),
               "splitkv_ratio_to_stream": s.get("ratio_to_stream"), "splits": s.get("splits"),
               "nosplit_us": n.get("time_us"), "nosplit_gbps": n.get("gbps"),
               "peer_us": t.get("time_us"), "peer_gbps": t.get("gbps"), "peer_error": t.get("error"),
               "splitkv_over_peer": t.get("splitkv_over_peer"), "nosplit_over_peer": t.get("nosplit_over_peer")}
        rows.append(row)
        md.append(f"| {c} | {fmt(row['splitkv_us'])} | {fmt(row['splitkv_gbps'], 0)} | "
                  f"{fmt(row['splitkv_ratio_to_stream'], 2)} | {row['splits'] or '-'} | {fmt(row['nosplit_gbps'], 0)} | "
                  f"{fmt(row['peer_us'])} | {fmt(row['peer_gbps'], 0)} | {fmt(row['splitkv_over_peer'], 2)} | "
                  f"{fmt(row['nosplit_over_peer'], 2)} |")
    md.append("")
    summary["shapes"][shape] = rows

summary["passed"] = stopped is None and len(steps) > 0 and not failed and not skipped
md.append("Checks " + ("passed." if summary["passed"] else "FAILED."))
with open(os.path.join(out_dir, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
with open(os.path.join(out_dir, "summary.md"), "w") as f:
    f.write("\n".join(md) + "\n")
print("\n".join(md))
sys.exit(0 if summary["passed"] else 1)
