#!/usr/bin/env python3
"""Each x86 cpu-backend decode kernel against the stream read of the same moment (issue #24 item 5).

Runs `kvsight probe attention --backend cpu` at issue #24's headline shape (split-KV, batch 4,
8 KV / 32 Q heads, head_dim 128, context 32,768, block 16, all hardware threads) once per kernel
path per round, the paths interleaved within each round and the order rotated between rounds, so
that a drift of the machine's memory speed falls on every path alike. Each invocation measures its
own stream read first and then the kernel (`ratio_to_stream`: the pair); the figure reported per
path is the median of its pairs' ratios, with their range, beside the medians of the kernel's and
the stream's GB/s. Each result is checked against float64 by the probe (`correct`); a wrong one
stops the script (exit 1).

With --against OTHER_KVSIGHT, every path also runs on a second binary (a build before a change, say)
inside the same rounds, next to the first, so that a before / after comparison meets the same drift;
the table then has a row per (path, binary). --fp8 adds fp8 E4M3 K/V with bf16 and with fp16 q, on each
kernel that reads them (avx512-fp16 and avx2 widen E4M3 through fp16; auto gives fp8 K/V fp16's kernel).

--kernels LIST (comma-separated, of avx512-bf16, avx512-fp16, avx2, portable) keeps only those kernels, so a
change to one kernel can be measured in more rounds in the same time.

Usage: cpu-kernel-pairs.py KVSIGHT [ROUNDS=6] [--context N] [--against OTHER_KVSIGHT] [--fp8] [--kernels LIST]
                           [--markdown]
Prints the CPU (model name and the AVX-512 flags it has) and one row per (dtype, kernel[, binary]).
"""
import json
import statistics
import subprocess
import sys

PATHS = [("bf16", "avx512-bf16"), ("bf16", "avx2"), ("bf16", "portable"),
         ("fp16", "avx512-fp16"), ("fp16", "avx2"), ("fp16", "portable")]
FP8_PATHS = [(q + "/fp8_e4m3", kernel) for q in ("bf16", "fp16") for kernel in ("avx512-fp16", "avx2", "portable")]


def cpu_model():
    model, flags = "unknown", set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return model, flags


def supported(kernel, flags):
    if kernel == "avx512-bf16":
        return "avx512_bf16" in flags
    if kernel == "avx512-fp16":
        return {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
    if kernel == "avx2":
        return {"avx2", "fma", "f16c"} <= flags
    return True


def run(binary, dtype, kernel, context):
    # dtype: the q and K/V dtype, or "Q/fp8_e4m3" for fp8 K/V beside q in Q.
    q_dtype, _, kv_dtype = dtype.partition("/")
    cmd = [binary, "probe", "attention", "--backend", "cpu", "--kernel", "splitkv", "--context", str(context),
           "--batch", "4", "--kv-heads", "8", "--q-heads", "32", "--head-dim", "128", "--dtype", q_dtype,
           "--kv-dtype", kv_dtype or "auto", "--block-size", "16", "--cpu-kernel", kernel, "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"cpu-kernel-pairs: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    j = json.loads(r.stdout)
    if not j.get("correct", False):
        print(f"cpu-kernel-pairs: {dtype} {kernel}: result wrong against float64", file=sys.stderr)
        sys.exit(1)
    return j["gbps"], j["stream_read_gbps"], j["ratio_to_stream"]


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    binaries = [argv[1]]
    rounds, context, fp8, kernels = 6, 32768, False, None
    rest = argv[2:]
    if rest and rest[0].isdigit():
        rounds = int(rest.pop(0))
    while rest:
        option = rest.pop(0)
        if option in ("--context", "--against", "--kernels") and rest:
            value = rest.pop(0)
            if option == "--context":
                context = int(value)
            elif option == "--kernels":
                kernels = value.split(",")
                known = {kernel for _, kernel in PATHS}
                if not kernels or not set(kernels) <= known:
                    print(f"cpu-kernel-pairs: --kernels '{value}': allowed: {', '.join(sorted(known))} "
                          "(comma-separated)", file=sys.stderr)
                    return 2
            else:
                binaries.append(value)
        elif option == "--fp8":
            fp8 = True
        elif option != "--markdown":
            print(f"cpu-kernel-pairs: unknown option '{option}'; allowed: ROUNDS, --context N, "
                  "--against KVSIGHT, --fp8, --kernels LIST, --markdown", file=sys.stderr)
            return 2
    model, flags = cpu_model()
    paths = [p for p in PATHS + (FP8_PATHS if fp8 else []) if supported(p[1], flags)]
    if kernels is not None:
        paths = [p for p in paths if p[1] in kernels]
    runs = [(path, binary) for path in paths for binary in binaries]
    results = {r: [] for r in runs}
    for r in range(rounds):
        shift = r * len(binaries) % len(runs)
        for (dtype, kernel), binary in runs[shift:] + runs[:shift]:
            results[((dtype, kernel), binary)].append(run(binary, dtype, kernel, context))
            print(f"round {r + 1}/{rounds}: {dtype} {kernel} {binary} "
                  f"{results[((dtype, kernel), binary)][-1][2]:.3f}", file=sys.stderr)
    avx512 = sorted(f for f in flags if f.startswith("avx512"))
    print(f"CPU: {model}; {' '.join(avx512) or 'no AVX-512'}; rounds {rounds}, context {context}")
    print()
    compare = len(binaries) > 1
    print("| dtype | kernel |" + (" binary |" if compare else "") +
          " pairs | median ratio to stream | range | median kernel GB/s | median stream GB/s |")
    print("|---|---|" + ("---|" if compare else "") + "---:|---:|---|---:|---:|")
    for ((dtype, kernel), binary), rows in results.items():
        ratios = [x[2] for x in rows]
        print(f"| {dtype} | {kernel} |" + (f" {binary} |" if compare else "") +
              f" {len(rows)} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} | {statistics.median(x[0] for x in rows):.1f} | "
              f"{statistics.median(x[1] for x in rows):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
