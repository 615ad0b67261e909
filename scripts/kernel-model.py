#!/usr/bin/env python3
"""Issue-and-bandwidth model of the CUDA paged-decode chunk loop, from its sm_90 SASS (issue #24 items 1, 2).

For the split-KV instance of each shape issue #24 names (headline: hd128, GQA group 4; cliff: hd256,
12 Q / 2 KV heads = group 6 on the group-8 instance) it reads the warp-split walk's chunk loop
(kernels/warp_walker.cuh) out of `cuobjdump -sass`, counts what one warp issues per chunk, the
shared-memory wavefronts and the HBM bytes, and with each device's SM count, clock and HBM bandwidth
predicts the fraction of HBM the loop can reach and names the resource that binds: issue, shared
memory or HBM (latency is checked separately by Little's law in kernel-report.sh).

How the SASS is read (docs/measurements.md, "The warp-split walk: the model after"):
  - a loop is a backward BRA; the chunk loop is the smallest loop that holds both LDGDEPBAR (the
    cp.async commit of the warp's next chunk) and LDGSTS (its copies);
  - its structure is checked against the kernel: 2 x 8 LDGSTS (8 steps of K and of V rows), 16
    LDS.128 (the same rows read back), at least 2 x 8 x group x (head_dim x 32 / 512) FFMA (the
    template group's q.K and p.V products of 8 steps); a mismatch means the model is out of date;
  - every instruction of the loop body is on the path of a chunk that is not one of the warp's last
    two: its guarded blocks are the next chunk's copies, the chunk after next's block-table load and
    its row offsets, all of which then run. So the instructions per warp per chunk are the loop
    body, counted once each (sm_90 issues one instruction per scheduler per cycle; `@!PT` fillers
    included, which take a slot);
  - shared memory, per warp and chunk: an LDS.128 of the warp reads 512 contiguous bytes (kRowsPerStep
    rows of head_dim elements), 4 wavefronts of 128 B; an LDGSTS writes 512 contiguous bytes, 4
    wavefronts; any other LDS / STS (row offsets: 1 or 2 distinct 8-byte words) 1 wavefront; an
    `@!PT` one none. One wavefront per SM per cycle;
  - per SM: each of the 4 schedulers runs its own warps (warp w of every resident program on
    scheduler w), so in the time one chunk of each warp is issued, the SM moves 4 chunks' bytes and
    serves 4 chunks' wavefronts. Issue cycles = one chunk's instructions; shared-memory cycles = 4 x
    its wavefronts; HBM cycles = 4 x its bytes / (bandwidth / SMs / clock). Fraction of HBM = HBM /
    the largest of the three. The warps' merge and the epilogue run once per program: outside this
    steady-state figure (kernel-report.sh prints the function's size).

Usage: kernel-model.py SASS_FILE [--all]   (SASS_FILE may be .gz). --all adds a table of every bf16-q,
block-16 split-KV instance (warp-split ones by the chunk model, 16-bit shared-tile ones by the tile
model's range, fp8 shared-tile ones not modelled). Exit 0, 2 usage or an unreadable SASS_FILE, 3 when a
headline or cliff instance is missing or its loop does not have the expected structure (the model is out of
date).
"""
import collections
import gzip
import re
import sys

THREADS = 128  # kThreadsPerProgram
WARPS = THREADS // 32
TILE = 32  # kTileTokens (the shared-tile walk)
SCHEDULERS = 4  # per SM on sm_90 (4 SM sub-partitions), each issuing one warp instruction per cycle
STEPS = 8  # kStepsPerChunk (kernels/warp_walker.cuh)
LANE_BYTES = 16  # one 16-byte copy or LDS.128 per lane
WARP_BYTES = 32 * LANE_BYTES  # 512: one warp-wide LDS.128 or LDGSTS

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

INSN = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*?);")


class ModelError(Exception):
    pass


def read_functions(path, wanted):
    """The instructions (address, opcode, operands, guard) of the functions whose mangled name
    `wanted` accepts (a set of names or a predicate)."""
    accept = wanted if callable(wanted) else (lambda name: name in wanted)
    funcs = {} if callable(wanted) else {name: [] for name in wanted}
    opener = gzip.open if path.endswith(".gz") else open
    current = None
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            m = re.search(r"Function : (\S+)", line)
            if m:
                current = m.group(1) if accept(m.group(1)) else None
                if current:
                    funcs.setdefault(current, [])
                continue
            if current:
                m = INSN.match(line)
                if m:
                    funcs[current].append((int(m.group(1), 16), m.group(3), m.group(4), (m.group(2) or "").strip()))
    return funcs


def loops_of(ins):
    out = []
    for addr, op, args, _ in ins:
        if op == "BRA":
            t = re.search(r"0x([0-9a-f]+)", args)
            if t and int(t.group(1), 16) < addr:
                out.append((int(t.group(1), 16), addr))
    return out


def analyse(ins, head_dim, template_group, kv_bytes=2):
    def body(loop):
        return [x for x in ins if loop[0] <= x[0] <= loop[1]]

    def has(loop, op):
        return any(x[1].startswith(op) for x in body(loop))

    loops = [l for l in loops_of(ins) if has(l, "LDGDEPBAR") and has(l, "LDGSTS")]
    if not loops:
        raise ModelError("no loop holds both LDGDEPBAR and LDGSTS: no chunk loop")
    loop = min(loops, key=lambda l: l[1] - l[0])
    insns = body(loop)
    ops = collections.Counter(op for _, op, _, _ in insns)
    copies = sum(n for op, n in ops.items() if op.startswith("LDGSTS"))
    lds128 = ops["LDS.128"]
    ffma = ops["FFMA"]
    # FFMA of one chunk: 8 steps x (q.K + p.V) x group x the lane's 16 bytes of elements.
    rows_per_step = WARP_BYTES // (head_dim * kv_bytes)
    elements_per_lane = LANE_BYTES // kv_bytes
    want_ffma = 2 * STEPS * template_group * elements_per_lane
    if copies != 2 * STEPS:
        raise ModelError(f"chunk loop has {copies} LDGSTS, expected {2 * STEPS} (8 K and 8 V rows a lane)")
    if lds128 != 2 * STEPS:
        raise ModelError(f"chunk loop has {lds128} LDS.128, expected {2 * STEPS}")
    if ffma < want_ffma:
        raise ModelError(f"chunk loop has {ffma} FFMA, fewer than the {want_ffma} of its products")
    wavefronts = 0
    for _, op, _, guard in insns:
        if guard == "@!PT":
            continue  # never executes
        if op.startswith("LDGSTS") or op == "LDS.128":
            wavefronts += WARP_BYTES // 128
        elif op.startswith("LDS") or op.startswith("STS"):
            wavefronts += 1
    chunk_bytes = copies * WARP_BYTES  # K and V rows of the chunk, one KV head
    return {
        "loop": len(insns),
        "ffma": ffma,
        "shfl": sum(n for op, n in ops.items() if op.startswith("SHFL")),
        "mufu": sum(n for op, n in ops.items() if op.startswith("MUFU")),
        "lds128": lds128,
        "copies": copies,
        "tokens": STEPS * rows_per_step,
        "chunk_bytes": chunk_bytes,
        "wavefronts": wavefronts,
        "issue": len(insns),
        "sm_wavefronts": SCHEDULERS * wavefronts,
        "sm_bytes": SCHEDULERS * chunk_bytes,
    }


def analyse_tile(ins, head_dim, group):
    """The shared-tile walk (TileWalker; 16-bit K/V), as the model read it before the warp-split walk
    (docs/measurements.md, "Issue and shared memory per tile"): per 32-token tile, the busiest warp's
    instructions in the classified loops (low) plus the tile loop's straight-line code (high)."""
    def body(loop):
        return [x for x in ins if loop[0] <= x[0] <= loop[1]]

    def count(loop, op):
        return sum(1 for x in body(loop) if x[1] == op)

    n = lambda l: len(body(l))
    loops = loops_of(ins)
    tiles = [l for l in loops if any(x[1] == "LDGDEPBAR" for x in body(l))]
    if not tiles:
        raise ModelError("no loop holds LDGDEPBAR: no tile loop")
    tile = max(tiles, key=lambda l: l[1] - l[0])
    inner = [l for l in loops if tile[0] <= l[0] and l[1] < tile[1] and l != tile]
    top = [l for l in inner if not any(o != l and o[0] <= l[0] and l[1] <= o[1] for o in inner)]
    nested = {l: [o for o in inner if o != l and l[0] <= o[0] and o[1] <= l[1]] for l in top}
    k_loops = [l for l in top if nested[l]]
    v_main = [l for l in top if not nested[l] and count(l, "LDS.U16") == 16]
    v_tail = [l for l in top if not nested[l] and 0 < count(l, "LDS.U16") < 16]
    softmax = [l for l in top if l not in k_loops and l not in v_main and l not in v_tail]
    k_acc = -(-group * head_dim // THREADS)
    if len(k_loops) != 1 or len(nested[k_loops[0]]) != 1 or len(v_main) != k_acc or len(softmax) != 1:
        raise ModelError("the tile loop's loops are not the shared-tile walk's")
    pairs, kchunk, soft = k_loops[0], nested[k_loops[0]][0], softmax[0]
    kchunk_ffma = count(kchunk, "FFMA")
    if kchunk_ffma == 0 or head_dim % kchunk_ffma:
        raise ModelError(f"K-chunk loop has {kchunk_ffma} FFMA, not a divisor of head_dim {head_dim}")
    kchunk_trips = head_dim // kchunk_ffma
    k_row_loads = kchunk_ffma // 8
    q_loads = count(kchunk, "LDS.128") - k_row_loads
    v_u16 = count(v_main[0], "LDS.U16")
    v_trips = TILE // v_u16
    v_bcast = count(v_main[0], "LDS.128")
    per_pair = n(pairs) - n(kchunk) + kchunk_trips * n(kchunk)
    straight = n(tile) - sum(n(l) for l in top)
    issue, wavefronts = 0, 0
    for w in range(WARPS):
        p = max(0, -(-(group * TILE - 32 * w) // THREADS))
        sm = max(0, -(-(group - w) // WARPS))
        v = min(k_acc, max(0, -(-(group * head_dim - 32 * w) // THREADS)))
        issue = max(issue, p * per_pair + sm * n(soft) + v * v_trips * n(v_main[0]))
        wavefronts += p * kchunk_trips * (k_row_loads * 4 + q_loads) + v * v_trips * (v_u16 + v_bcast)
    tile_bytes = TILE * head_dim * 2 * 2
    return {"issue_low": issue, "issue_high": issue + straight, "wavefronts": wavefronts + tile_bytes // 128,
            "bytes": tile_bytes}


ALL = re.compile(r"_ZN7kvsight7kernels12cuda_runtime20paged_decode_splitkvI13__nv_bfloat16(S3_|12kvs_fp8_e4m3)"
                 r"Li(\d+)ELi(\d+)ELi16EEEvNS0_17PagedDecodeParamsENS0_11FastDividerE$")


def every_instance(path):
    """Rows of (K/V, head_dim, group, walk, prediction per device) for every bf16-q, block-16 split
    instance in the SASS."""
    funcs = read_functions(path, lambda name: ALL.match(name) is not None)
    rows = []
    for name, ins in funcs.items():
        m = ALL.match(name)
        kv = "fp8_e4m3" if "fp8" in m.group(1) else "bf16"
        kv_bytes = 1 if kv == "fp8_e4m3" else 2
        hd, group = int(m.group(2)), int(m.group(3))
        warp_walk = group * (LANE_BYTES // kv_bytes) <= 64  # warp_walk_fits (kernels/warp_walker.cuh)
        cells = []
        try:
            if warp_walk:
                a = analyse(ins, hd, group, kv_bytes)
                for dev, sms, clk, bw in DEVICES:
                    hbm, fraction, bind = predict(a, sms, clk, bw)
                    cells.append(f"{100 * fraction:.0f} %; {bind}")
            elif kv_bytes == 2:
                a = analyse_tile(ins, hd, group)
                for dev, sms, clk, bw in DEVICES:
                    # The pessimistic and the optimistic end: one tile per CTA, its busiest warp's issue.
                    (_, low, low_bind), (_, high, high_bind) = (
                        predict({"sm_bytes": a["bytes"], "issue": issue, "sm_wavefronts": a["wavefronts"]}, sms, clk, bw)
                        for issue in (a["issue_high"], a["issue_low"]))
                    binds = low_bind if low_bind == high_bind else f"{high_bind} / {low_bind}"
                    cells.append(f"{100 * low:.0f}-{100 * high:.0f} %; {binds}")
            else:
                cells = ["not modelled (fp8 shared-tile walk)"] * len(DEVICES)
        except ModelError as e:
            cells = [f"not modelled ({e})"] * len(DEVICES)
        rows.append((kv, hd, group, "warp-split" if warp_walk else "shared-tile", cells))
    return sorted(rows)


def predict(a, sms, clock_ghz, tbps):
    bytes_per_cycle = tbps * 1e12 / sms / (clock_ghz * 1e9)
    hbm = a["sm_bytes"] / bytes_per_cycle
    costs = {"HBM": hbm, "issue": a["issue"], "shared memory": a["sm_wavefronts"]}
    bind = max(costs, key=costs.get)
    return hbm, hbm / costs[bind], bind


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    path = argv[1]
    names = {MANGLED.format(hd=hd, g=g): (label, hd, g, rg) for label, hd, g, rg in SHAPES}
    try:
        funcs = read_functions(path, names)
    except OSError as e:
        print(f"kernel-model: SASS_FILE {path}: {e.strerror or e}", file=sys.stderr)
        return 2
    rows = []
    for name, (label, hd, g, rg) in names.items():
        if not funcs[name]:
            print(f"kernel-model: {label}: instance {name} not in {path}", file=sys.stderr)
            return 3
        try:
            a = analyse(funcs[name], hd, g)
        except ModelError as e:
            print(f"kernel-model: {label}: {e}: the model no longer matches the kernel", file=sys.stderr)
            return 3
        rows.append((label, a))

    print("| shape (instance) | tokens per chunk | per warp per chunk: instructions (FFMA, SHFL, MUFU) | "
          "shared-memory wavefronts per warp per chunk | per SM, one chunk per scheduler: issue cycles; "
          "wavefronts; HBM bytes | " +
          " | ".join(f"{d[0]}: HBM cycles; predicted fraction of HBM; binds" for d in DEVICES) + " |")
    print("|---|---:|---|---:|---|" + "---|" * len(DEVICES))
    for label, a in rows:
        cells = []
        for dev, sms, clk, bw in DEVICES:
            hbm, fraction, bind = predict(a, sms, clk, bw)
            cells.append(f"{hbm:,.0f}; {100 * fraction:.0f} %; {bind}")
        print(f"| {label} | {a['tokens']} | {a['loop']:,} ({a['ffma']:,}, {a['shfl']}, {a['mufu']}) | "
              f"{a['wavefronts']} | {a['issue']:,}; {a['sm_wavefronts']:,}; {a['sm_bytes']:,} | " + " | ".join(cells) + " |")
    if "--all" in argv[2:]:
        print()
        print("Every split-KV instance (bf16 q, block 16): predicted fraction of HBM; binds")
        print()
        print("| K/V | head_dim | group | walk | " + " | ".join(d[0] for d in DEVICES) + " |")
        print("|---|---:|---:|---|" + "---|" * len(DEVICES))
        for kv, hd, group, walk, cells in every_instance(path):
            print(f"| {kv} | {hd} | {group} | {walk} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
