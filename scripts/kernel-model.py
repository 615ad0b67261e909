#!/usr/bin/env python3
"""Issue-and-bandwidth model of the CUDA paged-decode tile loop, from its sm_90 SASS (issue #24 item 1).

For each kernel instance of the two shapes issue #24 names (headline: split-KV, hd128, GQA group 4;
cliff: hd256, 12 Q / 2 KV heads = group 6 on the group-8 instance), it reads the tile loop out of
`cuobjdump -sass`, counts per 32-token tile the instructions each warp issues, the shared-memory
wavefronts and the HBM bytes of one program (CTA), and with each device's SM count, clock and HBM
bandwidth predicts the fraction of HBM the loop can reach and names the resource that binds:
issue, shared memory or HBM (latency is checked separately by Little's law in kernel-report.sh).

How the SASS is read (the method of docs/measurements.md "Issue and shared memory per tile"):
  - a loop is a backward BRA; the tile loop is the largest one holding LDGDEPBAR (the cp.async
    commit of the next tile); the loops inside it are classified by what they hold:
      K:       the one top-level loop with a loop nested in it (the (head, token) pairs loop, its
               nested loop the unrolled K-chunk dot product),
      V main:  loops with 16 LDS.U16 (16 tokens of one V element, unrolled),
      V tail:  loops with fewer LDS.U16 (the remainder of a partial tile: 0 trips on a full one),
      softmax: the remaining top-level loop (one head's max, exp and sum per warp);
  - trips per tile follow from the kernel's structure (kernels/paged_decode.cuh): with 128 threads
    (4 warps) and 32 tokens a tile, warp w runs ceil((group x 32 - 32 w) / 128) pair trips, each
    with head_dim / (FFMA of the nested body) K-chunk trips; ceil((group - w) / 4) softmax trips;
    and min(kAcc, ceil((group x head_dim - 32 w) / 128)) active V accumulators of 32 / 16 = 2 trips;
  - the instructions of the tile loop outside these loops (guards, the copy issue, barriers, the
    paths of ifs) run in part, which the SASS does not say: 0 at the optimistic end, all of them
    at the pessimistic end, so every figure is a range;
  - shared memory, per warp: a K-row LDS.128 reads 32 different rows, 4 wavefronts of 128 B; the
    q and score loads are broadcasts, 1 wavefront; an LDS.U16 of V is 1; the cp.async writes of
    the next tile are its bytes / 128. One wavefront per SM per cycle.
  - per SM and tile: issue cycles = the busiest warp's instructions (4 schedulers, warp w of every
    resident CTA on scheduler w); shared-memory cycles = the CTA's wavefronts; HBM cycles = the
    tile's K and V bytes / (bandwidth / SMs / clock). Fraction of HBM = HBM / max of the three.

Usage: kernel-model.py SASS_FILE [--markdown]   (SASS_FILE may be .gz). Exit 0, 2 usage, 3 when
an instance is missing or its loops do not have the expected structure (the model is out of date).
"""
import collections
import gzip
import math
import re
import sys

THREADS = 128  # kThreadsPerProgram
WARPS = THREADS // 32
TILE = 32  # kTileTokens

# Devices: SMs, max boost clock (GHz), HBM bandwidth (TB/s), from NVIDIA's datasheets
# (H100 SXM5 and H200 SXM: 132 SMs, 1,980 MHz max boost; 3.35 and 4.8 TB/s).
DEVICES = [
    ("H200", 132, 1.98, 4.8),
    ("H100 SXM", 132, 1.98, 3.35),
]

MANGLED = "_ZN7kvsight7kernels12cuda_runtime20paged_decode_splitkvI13__nv_bfloat16S3_Li{hd}ELi{g}ELi16EEEvNS0_17PagedDecodeParamsENS0_11FastDividerE"
# (label, head_dim, template group, runtime group)
SHAPES = [
    ("headline: hd128, group 4, bf16 (<bf16, bf16, 128, 4, 16>)", 128, 4, 4),
    ("cliff: hd256, 12 Q / 2 KV = group 6 on <bf16, bf16, 256, 8, 16>", 256, 8, 6),
]

INSN = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*?);")


class ModelError(Exception):
    pass


def read_functions(path, wanted):
    funcs = {name: [] for name in wanted}
    opener = gzip.open if path.endswith(".gz") else open
    current = None
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            m = re.search(r"Function : (\S+)", line)
            if m:
                current = m.group(1) if m.group(1) in funcs else None
                continue
            if current:
                m = INSN.match(line)
                if m:
                    funcs[current].append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs


def loops_of(ins):
    out = []
    for addr, op, args in ins:
        if op == "BRA":
            t = re.search(r"0x([0-9a-f]+)", args)
            if t and int(t.group(1), 16) < addr:
                out.append((int(t.group(1), 16), addr))
    return out


def body(ins, loop):
    return [x for x in ins if loop[0] <= x[0] <= loop[1]]


def count(ins, loop, op):
    return sum(1 for x in body(ins, loop) if x[1] == op)


def analyse(ins, head_dim, template_group, group):
    loops = loops_of(ins)
    tiles = [l for l in loops if any(op == "LDGDEPBAR" and l[0] <= a <= l[1] for a, op, _ in ins)]
    if not tiles:
        raise ModelError("no loop holds LDGDEPBAR: no tile loop")
    tile = max(tiles, key=lambda l: l[1] - l[0])
    inner = [l for l in loops if tile[0] <= l[0] and l[1] < tile[1] and l != tile]
    top = [l for l in inner if not any(o != l and o[0] <= l[0] and l[1] <= o[1] for o in inner)]
    nested = {l: [o for o in inner if o != l and l[0] <= o[0] and o[1] <= l[1]] for l in top}
    k_loops = [l for l in top if nested[l]]
    v_main = [l for l in top if not nested[l] and count(ins, l, "LDS.U16") == 16]
    v_tail = [l for l in top if not nested[l] and 0 < count(ins, l, "LDS.U16") < 16]
    softmax = [l for l in top if l not in k_loops and l not in v_main and l not in v_tail]
    k_acc = math.ceil(template_group * head_dim / THREADS)
    if len(k_loops) != 1 or len(nested[k_loops[0]]) != 1:
        raise ModelError(f"expected one pairs loop with one K-chunk loop, found {len(k_loops)}")
    if len(v_main) != k_acc or len(v_tail) != k_acc:
        raise ModelError(f"expected {k_acc} V loops and {k_acc} V tails (kAcc), found {len(v_main)} / {len(v_tail)}")
    if len(softmax) != 1:
        raise ModelError(f"expected one softmax loop, found {len(softmax)}")
    pairs, kchunk, soft = k_loops[0], nested[k_loops[0]][0], softmax[0]
    n = lambda l: len(body(ins, l))
    kchunk_ffma = count(ins, kchunk, "FFMA")
    if kchunk_ffma == 0 or head_dim % kchunk_ffma:
        raise ModelError(f"K-chunk loop has {kchunk_ffma} FFMA, not a divisor of head_dim {head_dim}")
    kchunk_trips = head_dim // kchunk_ffma
    k_row_loads = kchunk_ffma // 8  # one 16-byte LDS.128 per 8 bf16 K elements
    q_loads = count(ins, kchunk, "LDS.128") - k_row_loads
    v_u16 = count(ins, v_main[0], "LDS.U16")
    v_trips = TILE // v_u16
    v_bcast = count(ins, v_main[0], "LDS.128")
    per_pair = n(pairs) - n(kchunk) + kchunk_trips * n(kchunk)
    straight = n(tile) - sum(n(l) for l in top)

    warps = []
    for w in range(WARPS):
        p = max(0, math.ceil((group * TILE - 32 * w) / THREADS))
        s = max(0, math.ceil((group - w) / WARPS))
        v = min(k_acc, max(0, math.ceil((group * head_dim - 32 * w) / THREADS)))
        insns = p * per_pair + s * n(soft) + v * v_trips * n(v_main[0])
        wave = p * kchunk_trips * (k_row_loads * 4 + q_loads) + v * v_trips * (v_u16 + v_bcast)
        warps.append((p, s, v, insns, wave))
    tile_bytes = TILE * head_dim * 2 * 2  # K and V, bf16, one KV head per program
    wavefronts = sum(x[4] for x in warps) + tile_bytes // 128  # + the cp.async writes
    return {
        "tile_loop": n(tile),
        "per_pair": per_pair,
        "pairs_outer": n(pairs) - n(kchunk),
        "kchunk": n(kchunk),
        "kchunk_trips": kchunk_trips,
        "softmax": n(soft),
        "v_main": n(v_main[0]),
        "v_trips": v_trips,
        "k_acc": k_acc,
        "straight": straight,
        "warps": warps,
        "issue_low": max(x[3] for x in warps),
        "issue_high": max(x[3] for x in warps) + straight,
        "wavefronts": wavefronts,
        "tile_bytes": tile_bytes,
    }


def predict(a, sms, clock_ghz, tbps):
    bytes_per_cycle = tbps * 1e12 / sms / (clock_ghz * 1e9)
    hbm = a["tile_bytes"] / bytes_per_cycle
    out = []
    for issue in (a["issue_low"], a["issue_high"]):
        costs = {"HBM": hbm, "issue": issue, "shared memory": a["wavefronts"]}
        bind = max(costs, key=costs.get)
        out.append((hbm / costs[bind], bind))
    return hbm, out


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    path = argv[1]
    names = {MANGLED.format(hd=hd, g=g): (label, hd, g, rg) for label, hd, g, rg in SHAPES}
    funcs = read_functions(path, names)
    rows = []
    for name, (label, hd, g, rg) in names.items():
        if not funcs[name]:
            print(f"kernel-model: {label}: instance {name} not in {path}", file=sys.stderr)
            return 3
        try:
            a = analyse(funcs[name], hd, g, rg)
        except ModelError as e:
            print(f"kernel-model: {label}: {e}: the model no longer matches the kernel", file=sys.stderr)
            return 3
        rows.append((label, a))

    print("| shape (instance) | tile loop | per warp per tile, in its loops (busiest warp) | straight-line | "
          "issue cycles | shared-memory wavefronts | HBM bytes | " +
          " | ".join(f"{d[0]}: HBM cycles; predicted fraction; binds (optimistic / pessimistic end)" for d in DEVICES) + " |")
    print("|---|---:|---|---:|---:|---:|---:|" + "---|" * len(DEVICES))
    for label, a in rows:
        w0 = max(a["warps"], key=lambda x: x[3])
        detail = (f"{a['issue_low']:,} = pairs {w0[0]} x ({a['pairs_outer']} + K {a['kchunk']} x {a['kchunk_trips']}), "
                  f"softmax {w0[1]} x {a['softmax']}, V {w0[2]} of {a['k_acc']} x {a['v_main']} x {a['v_trips']}")
        cells = []
        for dev, sms, clk, bw in DEVICES:
            hbm, pr = predict(a, sms, clk, bw)
            (lo, lo_bind), (hi, hi_bind) = pr[1], pr[0]
            binds = hi_bind if hi_bind == lo_bind else f"{hi_bind} / {lo_bind}"
            cells.append(f"{hbm:,.0f}; {100 * lo:.0f}-{100 * hi:.0f} %; {binds}")
        print(f"| {label} | {a['tile_loop']:,} | {detail} | {a['straight']:,} | "
              f"{a['issue_low']:,}-{a['issue_high']:,} | {a['wavefronts']:,} | {a['tile_bytes']:,} | " +
              " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
