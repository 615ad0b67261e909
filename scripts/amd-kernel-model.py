#!/usr/bin/env python3
"""Issue-and-bandwidth model of the HIP paged-decode tile loop on MI300X and RX 7900 XT, from AMDGPU
assembly (issue #24 item 1; the CUDA counterpart is scripts/kernel-model.py).

Input: the `--cuda-device-only -S` assembly of kernels/paged_decode.cuh for gfx942 (MI300X, CDNA3) or
gfx1100 (RX 7900 XT, RDNA3), as scripts/kernel-report.sh writes it. For the split-KV instance of each
shape issue #24 names (headline: bf16, hd128, GQA group 4; cliff: bf16, hd256, 12 Q / 2 KV heads =
group 6 on the group-8 instance) it walks the shared-tile loop (TileWalker in paged_decode.cuh; HIP
keeps the next tile in registers, KVS_KV_STAGES = 1) and counts, per wave and 32-token tile:
  - the instructions the wave issues, the VALU ones among them, the LDS cycles and the DRAM bytes
    (HBM3 on MI300X, GDDR6 on RX 7900 XT);
  - the serial LDS round trips and the serial global-memory round trips: waits (s_waitcnt) that stall
    on an access issued after the previous stalling wait, so their latencies add up along the wave.

How the assembly is read (docs/reference/amd-kernel-model.md has the rules and their sources):
  - loops and their nesting come from LLVM's block comments ("Loop Header: Depth=d", "in Loop:
    Header=BBx Depth=d", "Parent Loop"); the tile loop is the depth-1 loop that holds s_barrier;
  - its child loops are classified by what they hold and given the trip counts of the source:
    - the score loop (ds_read_b128 / ds_load_b128: a K chunk and its q floats, 4 to a read, so 3 reads
      a chunk with 16-bit K/V and 5 with fp8) runs ceil((32 x group - first lane) / 128) times for a
      wave; its inner loop runs (row chunks) / (chunks per iteration);
    - the softmax loop (v_exp_f32) runs ceil((group - wave) / waves) times;
    - the p.V loops (V element reads): one per accumulator, or a full-tile and a partial-tile one per
      accumulator. The full tile's runs 32 / (reads per iteration) times when the accumulator holds an
      element of the runtime group, else 0; the partial tile's runs 0 times.
    Anything else, or counts that do not match, exits 3 (model out of date);
  - every other block of the tile loop runs once per tile: a steady-state tile is full (32 tokens)
    and has a next tile, and on a SIMD a branch on the exec mask runs its block when any lane is
    active, so both sides of a lane-divergent branch run (the preheaders of p.V loops whose
    accumulator is idle are counted too: a few instructions, on the safe side);
  - s_barrier synchronises the program's waves: a segment between barriers costs the program the
    slowest wave's time.

Per CU, with P programs resident (the LDS of one program, DecodeShared, bounds P; registers and wave
slots are checked too), in the time each program consumes one tile:
  - issue: one wave's instruction stream, CDNA3 one instruction per wave per 4 cycles (a wave64 runs
    over a 16-lane SIMD in 4 cycles), RDNA3 one per cycle (wave32 on a 32-lane SIMD);
  - VALU: the busiest SIMD's VALU instructions (ceil(P x waves / SIMDs) waves) x cycles each;
  - LDS: P x the program's LDS cycles, at 128 bytes per cycle per CU, a lane's access at least 4 bytes;
  - DRAM: P x 2 x 32 x head_dim x 2 bytes at the device's bandwidth / CUs / clock.
The fraction of DRAM bandwidth is DRAM / the largest; that one binds. Latency is printed as what it would take
to bind: each cycle of LDS latency adds the serial LDS round trips to the wave's time, so latency
binds when an LDS round trip exceeds (largest other - issue) / round trips, with the same for the
global round trips; the table also gives the fraction at stated LDS latencies, which are inputs to
the model, not measurements.

Usage: amd-kernel-model.py ARCH=ASM [ARCH=ASM ...] [--all]   (ARCH gfx942 or gfx1100; ASM may be .gz).
--all adds a table of every bf16-q, block-16 split instance the assembly holds (bf16 and fp8 K/V), each
at its full group; an instance whose tile loop the model does not know is listed with the reason.
Exit 0, 2 usage or an unreadable ASM, 3 a headline or cliff function missing, or its loop does not match the model.
"""
import gzip
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_shared import TILE, tile_shared  # noqa: E402 (the scripts folder, just added)

THREADS = 128  # kThreadsPerProgram
# K/V element types of the split instances: bytes, the mangled template argument, the V element read.
KV_TYPES = {
    "bf16": (2, "S3_", re.compile(r"^ds_(read|load)_(u16|u16_d16|u16_d16_hi|d16_hi_u16)$")),
    "fp8_e4m3": (1, "12kvs_fp8_e4m3", re.compile(r"^ds_(read|load)_(u8|u8_d16|u8_d16_hi|d16_hi_u8)$")),
}
LDS_BYTES_PER_CYCLE = 128  # per CU: 32 banks x 4 bytes (CDNA3 and RDNA3)

# Devices (docs/reference/amd-kernel-model.md, "Devices", with sources): CUs, peak engine clock (GHz),
# DRAM bandwidth (TB/s), SIMDs per CU, wave size, cycles between two instructions of one wave,
# cycles a SIMD's VALU is busy per wave instruction, VGPRs per SIMD lane, wave slots per SIMD,
# LDS per CU (bytes), LDS allocation granule (bytes).
DEVICES = {
    "gfx942": dict(name="MI300X", cus=304, clock=2.1, bandwidth=5.3, simds=4, wave=64, cadence=4,
                   valu_cycles=4, vgprs=512, vgpr_granule=8, wave_slots=8, lds=65536, lds_granule=512),
    "gfx1100": dict(name="RX 7900 XT", cus=84, clock=2.4, bandwidth=0.8, simds=2, wave=32, cadence=1,
                    valu_cycles=1, vgprs=1536, vgpr_granule=24, wave_slots=16, lds=65536, lds_granule=512),
}

MANGLED = "_ZN7kvsight7kernels11hip_runtime20paged_decode_splitkvI12hip_bfloat16{kv}Li{hd}ELi{g}ELi16EEEvNS0_17PagedDecodeParamsENS0_11FastDividerE"
# (label, head_dim, template group, runtime group); bf16 K/V
SHAPES = [
    ("headline: hd128, group 4", 128, 4, 4),
    ("cliff: hd256, 12 Q / 2 KV = group 6 on the group-8 instance", 256, 8, 6),
]
LDS_LATENCIES = (32, 64, 128)  # cycles: stated inputs for the sensitivity columns

K_READ = re.compile(r"^ds_(read|load)_b128$")
FMA = re.compile(r"fmac?_f32")  # v_fmac_f32, v_fma_f32, v_pk_fma_f32, VOPD's v_dual_fmac_f32
LDS_WIDTH = [  # bytes per lane of an LDS instruction, by mnemonic
    (re.compile(r"b128$"), 16), (re.compile(r"(2addr_b64|read2_b64|write2_b64|2addr_stride64_b64)$"), 16),
    (re.compile(r"b96$"), 12), (re.compile(r"(b64|2addr_b32|read2_b32|write2_b32|2addr_stride64_b32|read2st64_b32)$"), 8),
]


class ModelError(Exception):
    pass


class Block:
    def __init__(self, name, index):
        self.name, self.index, self.insns = name, index, []
        self.header_depth = None  # set when this block heads a loop
        self.loop = None  # innermost loop (header name) or None
        self.parents = {}  # depth -> header, for a loop header


_TEXTS = {}


def lines_from(path, marker):
    """The lines of the assembly at `path` (read once, kept) from the first line that starts with
    `marker` to the end, or None where no line does."""
    if path not in _TEXTS:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", errors="replace") as f:
            _TEXTS[path] = f.read()
    text = _TEXTS[path]
    at = 0 if text.startswith(marker) else text.find("\n" + marker) + 1
    if at == 0 and not text.startswith(marker):
        return None
    return iter(text[at:].splitlines())


def read_blocks(path, function):
    """The blocks of `function`, each with its instructions and LLVM's loop annotations."""
    lines = lines_from(path, function + ":")
    if lines is None:
        raise ModelError(f"{function} not found in {path}")
    next(lines)
    current = Block("entry", 0)
    blocks = [current]
    for line in lines:
        if line.startswith(".Lfunc_end") or re.match(r"^\s*\.(size|section)\b", line):
            break
        label = re.match(r"^(\.L(BB\d+_\d+)|; %(bb\.\d+)):(.*)", line)
        if label:
            current = Block(label.group(2) or label.group(3), len(blocks))
            blocks.append(current)
            annotate(current, label.group(4))
            continue
        stripped = line.strip()
        if stripped.startswith(";") and not stripped.startswith(";;") and not current.insns:
            annotate(current, stripped)  # the label's comment continues
            continue
        if not stripped or stripped.startswith((";", ".", "//")) or stripped.endswith(":"):
            continue
        current.insns.append(stripped.split(";")[0].strip())
        if stripped.startswith("s_endpgm"):
            break
    return blocks


def annotate(block, text):
    m = re.search(r"This (?:Inner )?Loop Header: Depth=(\d+)", text)
    if m:
        block.header_depth = int(m.group(1))
        block.loop = block.name
    for header, depth in re.findall(r"Parent Loop (BB\d+_\d+) Depth=(\d+)", text):
        block.parents[int(depth)] = header
    m = re.search(r"in Loop: Header=(BB\d+_\d+) Depth=(\d+)", text)
    if m and block.loop is None:
        block.loop = m.group(1)


class Loops:
    """The loop tree: depth and parent of each header, and the loops enclosing each block."""

    def __init__(self, blocks):
        self.blocks = blocks
        self.depth, self.parent = {}, {}
        for b in blocks:
            if b.header_depth is not None:
                self.depth[b.name] = b.header_depth
                self.parent[b.name] = b.parents.get(b.header_depth - 1)

    def chain(self, block):
        """Enclosing loops of a block, innermost first."""
        out, loop = [], block.loop
        while loop is not None:
            out.append(loop)
            loop = self.parent.get(loop)
        return out

    def members(self, loop):
        return [b for b in self.blocks if loop in self.chain(b)]

    def children(self, loop):
        return [h for h, p in self.parent.items() if p == loop]


def mnemonic(insn):
    return insn.split()[0] if insn else ""


def body_insns(loops, loop):
    return [mnemonic(i) for b in loops.members(loop) for i in b.insns]


def tile_loop(loops):
    candidates = [h for h, d in loops.depth.items() if d == 1 and "s_barrier" in body_insns(loops, h)]
    if len(candidates) != 1:
        raise ModelError(f"expected one depth-1 loop with s_barrier (the tile loop), found {len(candidates)}")
    return candidates[0]


def classify(loops, tile, head_dim, template_group, kv):
    """The tile loop's child loops by role: score (with its inner chunk loop), softmax, p.V (layout order)."""
    roles = {"score": [], "softmax": [], "pv": []}
    for child in sorted(loops.children(tile), key=lambda h: next(b.index for b in loops.blocks if b.name == h)):
        ops = body_insns(loops, child)
        if any(K_READ.match(o) for o in ops):
            roles["score"].append(child)
        elif any(o.startswith("v_exp_f32") for o in ops):
            roles["softmax"].append(child)
        elif any(KV_TYPES[kv][2].match(o) for o in ops) and any(FMA.search(o) for o in ops):
            roles["pv"].append(child)
        else:
            raise ModelError(f"tile-loop child {child} holds none of K reads, v_exp_f32 or V reads with an FMA")
    accumulators = -(-template_group * head_dim // THREADS)
    if len(roles["score"]) != 1 or len(roles["softmax"]) != 1 or len(roles["pv"]) not in (accumulators,
                                                                                          2 * accumulators):
        raise ModelError(f"tile loop has {len(roles['score'])} score, {len(roles['softmax'])} softmax and "
                         f"{len(roles['pv'])} p.V loops; the model expects 1, 1 and {accumulators} (or "
                         f"{2 * accumulators}: a full-tile and a partial-tile loop per accumulator)")
    roles["accumulators"] = accumulators  # kAcc of the instance
    return roles


def trip_counts(loops, roles, head_dim, group, wave, wave_size, kv):
    """Iterations of each loop of the tile loop for one wave of a full, steady-state tile."""
    waves = THREADS // wave_size
    first = wave * wave_size
    trips = {}
    score = roles["score"][0]
    pairs = TILE * group
    trips[score] = -(-(pairs - first) // THREADS) if first < pairs else 0
    kv_bytes, _, v_read = KV_TYPES[kv]
    chunks = head_dim * kv_bytes // 16
    # Each K chunk is read with the 16-byte reads of its q floats (16 / kv_bytes of them, 4 to a read).
    per_chunk = 1 + 16 // kv_bytes // 4
    inner = loops.children(score)
    if len(inner) > 1:
        raise ModelError(f"score loop {score} has {len(inner)} inner loops; the model expects at most 1")
    reads_outside = sum(1 for b in loops.members(score) if b.loop == score
                        for i in b.insns if K_READ.match(mnemonic(i)))
    if inner:
        reads = sum(1 for o in body_insns(loops, inner[0]) if K_READ.match(o))
        if reads == 0 or reads % per_chunk or chunks % (reads // per_chunk) or reads_outside:
            raise ModelError(f"score inner loop has {reads} 16-byte reads an iteration (and {reads_outside} outside "
                             f"it); a K chunk takes {per_chunk} with its q, and a row has {chunks} chunks")
        trips[inner[0]] = chunks // (reads // per_chunk)
    elif reads_outside != chunks * per_chunk:
        raise ModelError(f"score loop has {reads_outside} 16-byte reads; a row takes {chunks * per_chunk}")
    trips[roles["softmax"][0]] = -(-(group - wave) // waves) if wave < group else 0
    # One p.V loop per accumulator, or (the full tile's loop of known length next to the partial tile's)
    # two: of each pair, the one with more V reads an iteration is the full tile's, which a steady-state
    # tile runs; the other runs 0 times (the branch on count == kTileTokens is uniform).
    pv = roles["pv"]
    per_accumulator = len(pv) // roles["accumulators"]
    for i in range(roles["accumulators"]):
        group_loops = pv[i * per_accumulator:(i + 1) * per_accumulator]
        reads = [sum(1 for o in body_insns(loops, h) if v_read.match(o)) for h in group_loops]
        full = max(range(len(group_loops)), key=lambda j: reads[j])
        if per_accumulator == 2 and reads[0] == reads[1]:
            raise ModelError(f"p.V loops {group_loops} read {reads[0]} V elements an iteration each: "
                             "which one a full tile runs is not known")
        if TILE % reads[full]:
            raise ModelError(f"p.V loop {group_loops[full]} reads {reads[full]} V elements an iteration; "
                             f"{TILE} is not a multiple")
        active = i * THREADS + first < group * head_dim
        for j, h in enumerate(group_loops):
            trips[h] = TILE // reads[full] if active and j == full else 0
    return trips


def trace(loops, loop, trips, out):
    """The tile loop's instructions in execution order for one tile: blocks in layout order, each child
    loop's blocks repeated its trip count."""
    done = set()
    for b in sorted(loops.members(loop), key=lambda b: b.index):
        chain = loops.chain(b)
        if chain[0] == loop:
            out.extend(b.insns)
            continue
        child = chain[chain.index(loop) - 1]
        if child in done:
            continue
        done.add(child)
        for _ in range(trips[child]):
            trace(loops, child, trips, out)
    return out


def lds_cycles(op, wave_size):
    width = 4
    for pattern, bytes_ in LDS_WIDTH:
        if pattern.search(op):
            width = bytes_
            break
    return wave_size * max(4, width) / LDS_BYTES_PER_CYCLE


def waitcnt(insn):
    """(vmcnt, lgkmcnt) an s_waitcnt asks for; None where it does not wait on that counter."""
    if not insn.startswith("s_waitcnt ") and insn != "s_waitcnt":
        return None, None
    vm = re.search(r"vmcnt\((\d+)\)", insn)
    lgkm = re.search(r"lgkmcnt\((\d+)\)", insn)
    return (int(vm.group(1)) if vm else None), (int(lgkm.group(1)) if lgkm else None)


def segments(insns, wave_size):
    """Per barrier-delimited segment: instructions, VALU instructions, LDS cycles, serial LDS and serial
    global-memory round trips."""
    out = []
    lgkm, vm = [], []  # outstanding accesses: position issued
    last_lgkm_stall = last_vm_stall = -1

    def new():
        return dict(insns=0, valu=0, lds=0.0, lds_trips=0, vm_trips=0)

    seg = new()
    for pos, insn in enumerate(insns):
        op = mnemonic(insn)
        seg["insns"] += 1
        if op.startswith("v_"):
            seg["valu"] += 1
        elif op.startswith("ds_"):
            seg["lds"] += lds_cycles(op, wave_size)
            lgkm.append(pos)
        elif op.startswith("s_load") or op.startswith("s_buffer_load"):
            lgkm.append(pos)
        elif op.startswith(("global_load", "buffer_load", "scratch_load")):
            vm.append(pos)
        elif op.startswith("flat_load"):
            vm.append(pos)
            lgkm.append(pos)
        v, l = waitcnt(insn)
        if l is not None and len(lgkm) > l:
            completed, lgkm = lgkm[:len(lgkm) - l], lgkm[len(lgkm) - l:]
            if max(completed) > last_lgkm_stall:
                seg["lds_trips"] += 1
                last_lgkm_stall = pos
        if v is not None and len(vm) > v:
            completed, vm = vm[:len(vm) - v], vm[len(vm) - v:]
            if max(completed) > last_vm_stall:
                seg["vm_trips"] += 1
                last_vm_stall = pos
        if op == "s_barrier":
            out.append(seg)
            seg = new()
    out.append(seg)
    return out


def descriptor(path, function):
    """VGPRs (arch + accumulation) and static LDS from the kernel descriptor."""
    lines = lines_from(path, "\t.amdhsa_kernel " + function) or iter(())
    body = []
    for line in lines:
        if line.strip().startswith(".end_amdhsa_kernel"):
            break
        body.append(line)
    text = "\n".join(body)
    vgpr = re.search(r"\.amdhsa_next_free_vgpr (\d+)", text)
    lds = re.search(r"\.amdhsa_group_segment_fixed_size (\d+)", text)
    if not vgpr or not lds:
        raise ModelError(f"kernel descriptor of {function} not found")
    return int(vgpr.group(1)), int(lds.group(1))


def compiler_occupancy(path, function):
    """The waves per SIMD the compiler states for `function` ("; Occupancy: N" in the kernel info it
    writes after the function), or None where the file has no such line."""
    lines = lines_from(path, function + ":") or iter(())
    next(lines, None)
    ended = False
    for line in lines:
        if not ended:
            ended = line.startswith(".Lfunc_end")
        elif re.match(r"^\S+:", line) and not line.startswith(".L"):
            return None  # the next function: no kernel info for this one
        else:
            m = re.match(r"^; Occupancy: (\d+)", line)
            if m:
                return int(m.group(1))
    return None


def model(arch, path, label, head_dim, template_group, group, kv="bf16"):
    dev = DEVICES[arch]
    kv_bytes = KV_TYPES[kv][0]
    function = MANGLED.format(kv=KV_TYPES[kv][1], hd=head_dim, g=template_group)
    loops = Loops(read_blocks(path, function))
    tile = tile_loop(loops)
    roles = classify(loops, tile, head_dim, template_group, kv)
    waves = THREADS // dev["wave"]
    per_wave = []
    for w in range(waves):
        trips = trip_counts(loops, roles, head_dim, group, w, dev["wave"], kv)
        per_wave.append(segments(trace(loops, tile, trips, []), dev["wave"]))
    counts = {len(s) for s in per_wave}
    if len(counts) != 1:
        raise ModelError("the waves of a program pass different numbers of barriers")
    nseg = counts.pop()
    # The program: per segment, the slowest wave (issue); the chain adds the slowest wave's round trips.
    issue = sum(max(pw[s]["insns"] for pw in per_wave) for s in range(nseg)) * dev["cadence"]
    lds_trips = sum(max(pw[s]["lds_trips"] for pw in per_wave) for s in range(nseg))
    vm_trips = sum(max(pw[s]["vm_trips"] for pw in per_wave) for s in range(nseg))
    valu = max(sum(seg["valu"] for seg in pw) for pw in per_wave)
    lds_program = sum(seg["lds"] for pw in per_wave for seg in pw)
    insns = [sum(seg["insns"] for seg in pw) for pw in per_wave]

    vgpr, static_lds = descriptor(path, function)
    shared = static_lds + tile_shared(head_dim, template_group, kv_bytes, stages=1)  # HIP: KVS_KV_STAGES 1
    shared_alloc = -(-shared // dev["lds_granule"]) * dev["lds_granule"]
    by_lds = dev["lds"] // shared_alloc
    vgpr_alloc = -(-max(vgpr, 1) // dev["vgpr_granule"]) * dev["vgpr_granule"]
    waves_per_simd = min(dev["wave_slots"], dev["vgprs"] // vgpr_alloc)
    stated = compiler_occupancy(path, function)
    if stated is not None and stated != waves_per_simd:
        raise ModelError(f"{function}: {vgpr} VGPRs give {waves_per_simd} waves a SIMD by the model's constants, "
                         f"the compiler says {stated}: the device constants are out of date")
    by_vgpr = waves_per_simd * dev["simds"] // waves
    programs = min(by_lds, by_vgpr)
    if programs < 1:
        raise ModelError(f"{function}: no program fits a CU ({shared} B LDS, {vgpr} VGPRs)")

    busiest_simd = -(-programs * waves // dev["simds"])
    valu_cycles = busiest_simd * valu * dev["valu_cycles"]
    lds_time = programs * lds_program
    bytes_tile = 2 * TILE * head_dim * kv_bytes
    per_cycle = dev["bandwidth"] * 1e12 / dev["cus"] / (dev["clock"] * 1e9)
    hbm = programs * bytes_tile / per_cycle
    bounds = {"issue": issue, "VALU": valu_cycles, "LDS": lds_time, "DRAM": hbm}
    binds = max(bounds, key=bounds.get)
    busiest = bounds[binds]
    others = max(v for k, v in bounds.items() if k != "issue")
    lds_break_even = (others - issue) / lds_trips if lds_trips else math.inf
    at_latency = {lat: hbm / max(busiest, issue + lds_trips * lat) for lat in LDS_LATENCIES}
    return dict(device=dev["name"], arch=arch, label=label, insns=insns, issue=issue, valu_cycles=valu_cycles,
                lds=lds_time, hbm=hbm, programs=programs, shared=shared, vgpr=vgpr,
                lds_trips=lds_trips, vm_trips=vm_trips, fraction=hbm / busiest, binds=binds,
                lds_break_even=max(0.0, lds_break_even), at_latency=at_latency,
                vm_break_even_ns=(others - issue) / vm_trips / dev["clock"] if vm_trips else math.inf)


def every_instance(specs):
    """Rows (K/V, head_dim, group, one cell per spec) for every bf16-q, block-16 split instance the
    assembly holds, at its full group; an instance whose loops the model does not know says why."""
    rows = []
    for kv, (_, mangled, _) in KV_TYPES.items():
        for hd in (64, 128, 256):
            for g in (1, 2, 4, 8, 16):
                function = MANGLED.format(kv=mangled, hd=hd, g=g)
                cells = []
                for arch, path in specs:
                    if lines_from(path, function + ":") is None:
                        cells.append(None)
                        continue
                    try:
                        r = model(arch, path, "", hd, g, g, kv)
                        cells.append(f"{100 * r['fraction']:.0f} %, {r['binds']}; {r['lds_trips']}; "
                                     f"{100 * r['at_latency'][64]:.0f} %")
                    except ModelError as e:
                        cells.append(f"not modelled: {e}")
                if any(c is not None for c in cells):
                    rows.append((kv, hd, g, [c or "not in the file" for c in cells]))
    return rows


def usage(argv):
    print(f"usage: {argv[0]} ARCH=ASM [ARCH=ASM ...] [--all]   (ARCH one of {', '.join(DEVICES)})", file=sys.stderr)
    return 2


def main(argv):
    specs = []
    every = False
    for arg in argv[1:]:
        if arg == "--all":
            every = True
            continue
        arch, _, path = arg.partition("=")
        if arch not in DEVICES or not path:
            return usage(argv)
        specs.append((arch, path))
    if not specs:
        return usage(argv)
    for arch, path in specs:
        try:
            lines_from(path, "")
        except OSError as e:
            print(f"amd-kernel-model: {arch}={path}: {e.strerror or e}", file=sys.stderr)
            return 2
    rows = []
    try:
        for arch, path in specs:
            for label, hd, tg, g in SHAPES:
                rows.append(model(arch, path, label, hd, tg, g))
    except (ModelError, OSError) as e:
        print(f"amd-kernel-model: {e}", file=sys.stderr)
        return 3
    lat = " | ".join(f"at {x} cyc" for x in LDS_LATENCIES)
    print(f"| device (arch) | shape | programs / CU | instr. / wave / tile | issue | VALU | LDS | DRAM "
          f"| DRAM fraction, binds | serial LDS / global trips | latency binds above | {lat} |")
    print("|" + "---|" * (12 + len(LDS_LATENCIES) - 1))
    for r in rows:
        cells = " | ".join(f"{100 * r['at_latency'][x]:.0f} %" for x in LDS_LATENCIES)
        lds = "any (issue binds)" if r["lds_break_even"] <= 0 else f"LDS {r['lds_break_even']:,.1f} cyc"
        if not math.isinf(r["vm_break_even_ns"]) and r["lds_break_even"] > 0:
            lds += f", global {max(0.0, r['vm_break_even_ns']):,.0f} ns"
        print(f"| {r['device']} ({r['arch']}) | {r['label']} | {r['programs']} ({r['shared']:,} B LDS, {r['vgpr']} VGPRs) "
              f"| {' / '.join(f'{n:,}' for n in r['insns'])} | {r['issue']:,.0f} | {r['valu_cycles']:,.0f} | {r['lds']:,.0f} "
              f"| {r['hbm']:,.0f} | **{100 * r['fraction']:.0f} %**, {r['binds']} | {r['lds_trips']} / {r['vm_trips']} "
              f"| {lds} | {cells} |")
    print()
    print("Cycles per CU while each resident program consumes one 32-token tile (steady state). Instructions are per "
          "wave of a program (waves differ in the score and softmax loops). 'latency binds above': the LDS round trip "
          "(and global-memory round trip) beyond which the wave's serial waits, not issue, set the time; the last "
          "columns give the fraction with every serial LDS round trip taking that many cycles (stated inputs, not "
          "measurements).")
    if every:
        try:
            table = every_instance(specs)
        except OSError as e:
            print(f"amd-kernel-model: {e}", file=sys.stderr)
            return 3
        print()
        print("Every split-KV instance (bf16 q, block 16) at its full group: DRAM fraction with latency hidden, what "
              "binds; serial LDS round trips per wave and tile; the fraction at 64 cycles an LDS round trip")
        print()
        print("| K/V | head_dim | group | " + " | ".join(f"{DEVICES[a]['name']} ({a})" for a, _ in specs) + " |")
        print("|---|---:|---:|" + "---|" * len(specs))
        for kv, hd, g, cells in table:
            print(f"| {kv} | {hd} | {g} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
