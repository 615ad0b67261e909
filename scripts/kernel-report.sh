#!/usr/bin/env bash
# Evidence about the GPU probe kernels without a GPU (issue #15): compiles the
# CUDA backend for sm_90 with `-Xptxas -v`, reads the SASS with cuobjdump and
# writes a markdown report:
#   - per kernel instance: registers, spill stores/loads (bytes), static shared
#     memory, the dynamic shared memory of its walk (WarpShared or DecodeShared), and the occupancy on
#     an H200 (CTAs per SM from registers, shared memory and threads);
#   - for the hd128 and hd256 split kernels (block 16) with bf16 K/V and with fp8
#     E4M3 K/V (bf16 q): the 16-byte copies (LDGSTS, cp.async) issued per thread
#     per commit group in the main loop, and the plain 16-byte loads (LDG.E.128) left;
#   - a Little's-law estimate of the fraction of H200 HBM the headline shape and
#     the cliff shape reach, with and without split, for both K/V types (latency only);
#   - the issue-and-bandwidth model of the chunk loop (scripts/kernel-model.py, issue #24
#     items 1, 2): per warp chunk of the warp-split walk the instructions, shared-memory
#     wavefronts and HBM bytes, the predicted fraction of HBM on H200 and H100 and what binds.
#
#   - HIP (issue #24 item 3), when hipcc is found: the paged-decode kernels compiled
#     to AMDGPU assembly for gfx90a, gfx1030 (hipcc), gfx942 and gfx1100 (a clang of
#     LLVM >= 17, Debian's clang-19, when found; else hipcc, which cannot do gfx942), and per
#     arch and instance the tile loop's s_waitcnt vmcnt(0) vs counted vmcnt(N > 0)
#     (scripts/hip-waitcnt-check.py); the report FAILS (exit 1) when the next
#     tile's loads are waited for (vmcnt(0)) before their data is needed;
#   - the issue-and-bandwidth model of the HIP tile loop on MI300X (gfx942) and RX 7900 XT
#     (gfx1100) (scripts/amd-kernel-model.py, issue #24 item 1).
#
#   scripts/kernel-report.sh [OUT.md]          (default build-kernel-report/report.md)
#   scripts/kernel-report.sh --hip [OUT.md]    the HIP part only (default .../report-hip.md)
#
# Environment: NVCC (default: nvcc on PATH or /usr/local/cuda/bin/nvcc),
# CUOBJDUMP (default: on PATH, else the PyPI package nvidia-cuda-cuobjdump is
# installed into build-kernel-report/venv), KVS_REPORT_DIR (work directory),
# KVS_REPORT_OBJECT (an already compiled object + its ptxas log at OBJECT.log:
# skips the compile), HIPCC (default: hipcc on PATH), KVS_HIP_CLANG (the clang for gfx942
# and gfx1100, default clang++-19 on PATH; "none" uses hipcc), KVS_HIP_ARCHS (default
# "gfx90a gfx1030 gfx1100 gfx942"), KVS_LLVM_BIN (llvm-dis / llvm-as for the synthesized
# device libraries, default /usr/lib/llvm-15/bin). Exit: 0 report written, 1 the HIP wait check
# failed (report written), 2 usage, 3 a tool is missing or the compile failed.
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HIP_ONLY=0
case "${1:-}" in
  -h | --help) sed -n 2,37p "$0"; exit 0 ;;
  --hip) HIP_ONLY=1; shift ;;
  -*) echo "usage: $0 [--hip] [OUT.md]" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "usage: $0 [--hip] [OUT.md]" >&2; exit 2; }
WORK="${KVS_REPORT_DIR:-$ROOT/build-kernel-report}"
mkdir -p "$WORK" || exit 3

# ---- HIP: AMDGPU assembly of every paged-decode instance per arch, the wait check, the AMD model.
# Debian's hipcc 5.2.3 (clang 15) compiles gfx90a and gfx1030. gfx942 (MI300X) needs LLVM >= 17
# and gfx1100 (RX 7900 XT) gets RDNA3's dual issue (VOPD) from newer LLVM releases: those two are
# compiled by KVS_HIP_CLANG (Debian bookworm's clang-19) against the same HIP headers and device
# libraries. The libraries stop at gfx1036: for the ISA only, a copy of the library directory
# gets oclc_isa_version_942.bc / _1100.bc, made from the gfx1030 file with its one constant changed
# (10300 -> 9402 / 11000; the file defines nothing else), and code object v4 is asked for (v5's
# oclc_abi_version library is not in ROCm 5.2's set).
isa_library() {  # isa_library ARCH VERSION: the synthesized oclc_isa_version file in $libs
  local llvm="${KVS_LLVM_BIN:-/usr/lib/llvm-15/bin}" file="$libs/oclc_isa_version_${1#gfx}.bc"
  [ -e "$file" ] && return 0
  [ -d "$bitcode" ] && [ -x "$llvm/llvm-dis" ] && [ -x "$llvm/llvm-as" ] || return 1
  mkdir -p "$libs" && ln -sf "$bitcode"/*.bc "$libs"/ && rm -f "$file" &&
    "$llvm/llvm-dis" "$bitcode/oclc_isa_version_1030.bc" -o - | sed "s/i32 10300/i32 $2/" |
    "$llvm/llvm-as" -o "$file"
}

hip_report() {
  local out="$1" hipcc="${HIPCC:-$(command -v hipcc || true)}" specs=() notes=() models=() arch
  local clang="${KVS_HIP_CLANG:-$(command -v clang++-19 || true)}"
  [ "$clang" = none ] && clang=""
  [ -n "$hipcc" ] || { echo "kernel-report: hipcc not found: HIP part skipped" >&2; return 0; }
  # libs and bitcode are read by isa_library (bash locals are visible to the functions called).
  local tu="$WORK/hip_decode_isa.hip.cpp" libs="$WORK/hip-device-libs" bitcode
  printf '%s\n' '// Every paged-decode instance, device code only (scripts/kernel-report.sh).' \
    '#include "paged_decode.cuh"' > "$tu"
  bitcode="$(dirname "$(find /usr/lib /opt/rocm -name oclc_isa_version_1030.bc 2> /dev/null | head -1)")"
  for arch in ${KVS_HIP_ARCHS:-gfx90a gfx1030 gfx1100 gfx942}; do
    local cmd=("$hipcc" -std=c++20 -O3 --offload-arch="$arch") asm="$WORK/hip_decode_$arch.s"
    local log="$WORK/hip_decode_$arch.log" version="" compiler=hipcc
    case "$arch" in gfx942) version=9402 ;; gfx1100) version=11000 ;; esac
    if [ -n "$version" ] && isa_library "$arch" "$version"; then
      notes+=("$arch: device library oclc_isa_version_${arch#gfx}.bc synthesized from the gfx1030 one (ISA only)")
      if [ -n "$clang" ]; then
        cmd=("$clang" -x hip -std=c++20 -O3 --offload-arch="$arch" -mcode-object-version=4)
        compiler="$("$clang" --version 2> /dev/null | head -1)"
      fi
      cmd+=(--rocm-device-lib-path="$libs")
    fi
    echo "kernel-report: $arch with ${cmd[0]} (every decode instance; minutes)" >&2
    if "${cmd[@]}" -I"$ROOT/kernels" --cuda-device-only -S "$tu" -o "$asm" > "$log" 2>&1; then
      specs+=("$arch=$asm")
      notes+=("$arch: compiled by \`$compiler\`")
      # The AMD model reads the newer clang's code (its loop shapes); hipcc's clang 15 gfx1100 code is
      # only wait-checked.
      if [ "$compiler" != hipcc ]; then
        case "$arch" in gfx942 | gfx1100) models+=("$arch=$asm") ;; esac
      elif [ "$arch" = gfx1100 ]; then
        notes+=("gfx1100: not modelled: the AMD model reads clang 19's code (apt-get install clang-19)")
      fi
    else
      notes+=("$arch: not compiled: $(grep -m1 -E 'error' "$log" | sed 's/^clang[^:]*: //')")
      rm -f "$asm"
    fi
  done
  [ ${#specs[@]} -gt 0 ] || { echo "kernel-report: no HIP arch compiled (logs $WORK/hip_decode_*.log)" >&2; return 3; }
  python3 "$ROOT/scripts/hip-waitcnt-check.py" "$out" "${specs[@]}"
  local rc=$?
  { echo; echo "Compiled with \`hipcc -std=c++20 -O3 --offload-arch=ARCH --cuda-device-only -S\` (Debian hipcc: \`$("$hipcc" --version 2> /dev/null | grep -m1 -i 'clang version')\`) or \`clang++ -x hip\` with the same flags, on a file that includes kernels/paged_decode.cuh."
    for note in "${notes[@]}"; do echo "- $note"; done; } >> "$out"
  printf '%s\n' "${notes[@]}" >&2
  if [ ${#models[@]} -gt 0 ]; then
    { echo; echo "### Issue-and-bandwidth model of the HIP tile loop (scripts/amd-kernel-model.py)"; echo
      python3 "$ROOT/scripts/amd-kernel-model.py" "${models[@]}" --all; } >> "$out" || {
      echo "kernel-report: amd-kernel-model.py failed: the model is out of date with the tile loop" >&2
      return 3
    }
  fi
  return $rc
}

if [ "$HIP_ONLY" = 1 ]; then
  hip_report "${1:-$WORK/report-hip.md}"
  exit $?
fi
OUT="${1:-$WORK/report.md}"

NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
OBJECT="${KVS_REPORT_OBJECT:-$WORK/cuda_backend_sm90.o}"
LOG="$OBJECT.log"
if [ -z "${KVS_REPORT_OBJECT:-}" ]; then
  [ -x "$NVCC" ] || { echo "kernel-report: nvcc not found (set NVCC)" >&2; exit 3; }
  echo "kernel-report: compiling probes/cuda/cuda_backend.cu for sm_90 (slow: every instance)" >&2
  "$NVCC" -std=c++17 -O3 -gencode arch=compute_90,code=sm_90 -Xptxas -v -I"$ROOT/probes/include" \
    -I"$ROOT/planner/include" -c "$ROOT/probes/cuda/cuda_backend.cu" -o "$OBJECT" > "$LOG" 2>&1 || {
    tail -20 "$LOG" >&2
    echo "kernel-report: compile failed (log $LOG)" >&2
    exit 3
  }
fi
[ -s "$OBJECT" ] && [ -s "$LOG" ] || { echo "kernel-report: $OBJECT or $LOG missing" >&2; exit 3; }

CUOBJDUMP="${CUOBJDUMP:-$(command -v cuobjdump || true)}"
if [ -z "$CUOBJDUMP" ]; then
  VENV="$WORK/venv"
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" > /dev/null 2>&1 || { echo "kernel-report: python3 -m venv failed" >&2; exit 3; }
  fi
  # cuobjdump -sass runs nvdisasm: both come from PyPI (NVIDIA's wheels).
  "$VENV/bin/pip" install -q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm > "$WORK/pip.log" 2>&1 ||
    { echo "kernel-report: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm failed (see $WORK/pip.log)" >&2; exit 3; }
  CUOBJDUMP="$(find "$VENV" -type f -name cuobjdump | head -1)"
  [ -n "$CUOBJDUMP" ] && chmod +x "$CUOBJDUMP"
fi
if ! command -v nvdisasm > /dev/null; then
  NVDISASM="$(find "$WORK/venv" -type f -name nvdisasm 2> /dev/null | head -1)"
  if [ -z "$NVDISASM" ]; then
    [ -x "$WORK/venv/bin/pip" ] || python3 -m venv "$WORK/venv" > /dev/null 2>&1
    "$WORK/venv/bin/pip" install -q nvidia-cuda-nvdisasm >> "$WORK/pip.log" 2>&1
    NVDISASM="$(find "$WORK/venv" -type f -name nvdisasm 2> /dev/null | head -1)"
  fi
  [ -n "$NVDISASM" ] || { echo "kernel-report: no nvdisasm (pip install nvidia-cuda-nvdisasm)" >&2; exit 3; }
  chmod +x "$NVDISASM"
  export PATH="$(dirname "$NVDISASM"):$PATH"
fi
[ -n "$CUOBJDUMP" ] && [ -x "$CUOBJDUMP" ] || { echo "kernel-report: no cuobjdump" >&2; exit 3; }
SASS="$WORK/cuda_backend_sm90.sass"
"$CUOBJDUMP" -sass "$OBJECT" > "$SASS" 2> "$WORK/cuobjdump.err" ||
  { echo "kernel-report: cuobjdump failed: $(head -3 "$WORK/cuobjdump.err")" >&2; exit 3; }

python3 - "$LOG" "$SASS" "$OUT" "$OBJECT" "$ROOT/scripts" << 'PY'
import re, subprocess, sys
log_path, sass_path, out_path, object_path, scripts_dir = sys.argv[1:6]

# ---- ptxas -v: registers, spills, static shared per mangled name.
props = {}
current = None
for line in open(log_path, errors="replace"):
    m = re.search(r"Function properties for (\S+)", line)
    if m:
        current = m.group(1); props.setdefault(current, {}); continue
    m = re.search(r"Compiling entry function '(\S+)'", line)
    if m:
        current = m.group(1); props.setdefault(current, {}); continue
    if current is None:
        continue
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m:
        props[current]["spill_stores"] = int(m.group(1)); props[current]["spill_loads"] = int(m.group(2))
    m = re.search(r"Used (\d+) registers", line)
    if m:
        props[current]["registers"] = int(m.group(1))
        s = re.search(r"(\d+) bytes smem", line)
        props[current]["static_smem"] = int(s.group(1)) if s else 0

def demangle(name):
    try:
        return subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
    except OSError:
        return name

# Instance parameters from the demangled name.
def parse(name):
    d = demangle(name)
    # <q type, K/V type, HEAD_DIM, GROUP, BLOCK_SIZE> (kernels/paged_decode.cuh).
    m = re.search(r"paged_decode_(nosplit|splitkv)<(__nv_bfloat16|__half), (__nv_bfloat16|__half|kvs_fp8_e4m3), "
                  r"(\d+), (\d+), (\d+)>", d)
    if m:
        kv = "fp8_e4m3" if "fp8" in m.group(3) else ("bf16" if "bfloat" in m.group(3) else "fp16")
        return {"kernel": m.group(1), "dtype": "bf16" if "bfloat" in m.group(2) else "fp16", "kv": kv,
                "head_dim": int(m.group(4)), "group": int(m.group(5)), "block": int(m.group(6))}
    m = re.search(r"paged_decode_reduce<(\d+)>", d)
    if m:
        return {"kernel": "reduce", "head_dim": int(m.group(1))}
    m = re.search(r"stream_(read|copy)", d)
    if m:
        return {"kernel": "stream_" + m.group(1)}
    return {"kernel": d}

# The dynamic shared memory of an instance on CUDA: the Shared of its walk (scripts/decode_shared.py).
sys.path.insert(0, scripts_dir)
from decode_shared import cuda_decode_shared as decode_shared

# H200 (sm_90) limits, CUDA C++ Programming Guide, "Compute capabilities" table:
# 65536 registers per SM, allocated per warp in units of 256; 228 KiB shared per SM,
# 1 KiB of it reserved per CTA; 2048 threads and 32 CTAs per SM.
def occupancy(registers, shared, threads=128):
    warps = threads // 32
    per_warp = -(-registers * 32 // 256) * 256
    by_registers = 65536 // (per_warp * warps) if registers else 32
    by_shared = (228 * 1024) // (shared + 1024)
    by_threads = 2048 // threads
    return min(by_registers, by_shared, by_threads, 32)

rows = []
for name, p in props.items():
    info = parse(name)
    if "registers" not in p:
        continue
    shared = p["static_smem"]
    if info["kernel"] in ("nosplit", "splitkv"):
        shared += decode_shared(info["head_dim"], info["group"], 1 if info["kv"] == "fp8_e4m3" else 2)
    threads = 256 if info["kernel"].startswith("stream") else 128
    rows.append((info, name, p, shared, occupancy(p["registers"], shared, threads)))

def key(row):
    i = row[0]
    return (i["kernel"], i.get("dtype", ""), i.get("kv", ""), i.get("head_dim", 0), i.get("group", 0),
            i.get("block", 0))
rows.sort(key=key)

# ---- SASS: per function, LDGSTS per commit group (LDGDEPBAR) and LDG.E.128.
functions = {}
current = None
for line in open(sass_path, errors="replace"):
    m = re.search(r"Function : (\S+)", line)
    if m:
        current = m.group(1); functions[current] = []; continue
    if current is not None and re.search(r"/\*[0-9a-f]{4,}\*/", line):
        functions[current].append(line)

def copy_groups(lines):
    groups, count = [], 0
    for line in lines:
        if "LDGSTS" in line:
            count += 1
        if "LDGDEPBAR" in line:
            groups.append(count); count = 0
    return groups

def plain_loads(lines):
    return sum(1 for line in lines if re.search(r"\bLDG\.E\.(128|ENL2\.128)", line) or re.search(r"\bLDG\.E\.[A-Z.]*128", line))

# Static instruction mix of a function: all instructions, the fp32 FMAs, and the
# int -> float conversions (I2F / I2FP: an fp8 decode that used one per element
# issued them at a fraction of the FMA rate).
def mix(lines):
    opcodes = [m.group(1) for m in (re.search(r"\*/\s+(?:@!?U?P[T\d]\s+)?([A-Z][A-Z0-9]*)", l) for l in lines) if m]
    return len(opcodes), sum(o == "FFMA" for o in opcodes), sum(o in ("I2F", "I2FP") for o in opcodes)

in_flight = {}
out = []
out.append("# Kernel report: sm_90 (H200)\n")
out.append(f"Regenerate: `scripts/kernel-report.sh` (nvcc -O3 -arch sm_90 -Xptxas -v on probes/cuda/cuda_backend.cu, "
           f"cuobjdump -sass). Object: `{object_path}`.\n")
out.append("Occupancy: CTAs per SM from registers (65536 per SM, 256 per warp granule), shared memory (228 KiB, 1 KiB "
           "reserved per CTA; dynamic = sizeof the instance's walk's Shared: WarpShared or DecodeShared) and threads (2048 per SM).\n")
out.append("| kernel | q dtype | K/V | head_dim | group | block | registers | spill stores / loads (B) | shared (B) | CTAs/SM |")
out.append("|---|---|---|---:|---:|---:|---:|---|---:|---:|")
for info, name, p, shared, occ in rows:
    out.append(f"| {info['kernel']} | {info.get('dtype', '')} | {info.get('kv', '')} | {info.get('head_dim', '')} | "
               f"{info.get('group', '')} | "
               f"{info.get('block', '') if info.get('block', 1) != 0 else 'runtime'} | {p['registers']} | "
               f"{p.get('spill_stores', 0)} / {p.get('spill_loads', 0)} | {shared} | {occ} |")
spills = sum(p.get("spill_stores", 0) + p.get("spill_loads", 0) for _, _, p, _, _ in rows)
out.append(f"\nInstances: {len(rows)}; total spill bytes: {spills}.\n")

out.append("## 16-byte copies in flight per thread (SASS, split kernels, bf16 q, block 16)\n")
out.append("LDGSTS = cp.async 16-byte global->shared copy; a commit group (LDGDEPBAR) is one chunk's K and V "
           "(warp-split walk: 8 KiB per warp, 16 copies a lane) or one 32-token tile's (shared-tile walk, groups "
           "above 8, or above 4 with fp8); the main loop issues the next group before it consumes the current one.\n")
out.append("| instance | K/V | LDGSTS per commit group (prologue, loop) | LDG.E.128 in the function | registers | CTAs/SM "
           "| SASS instructions / FFMA / I2F |")
out.append("|---|---|---|---:|---:|---:|---|")
for info, name, p, shared, occ in rows:
    if info["kernel"] == "splitkv" and info["dtype"] == "bf16" and info["block"] == 16 and info["head_dim"] in (128, 256):
        groups = copy_groups(functions.get(name, []))
        loads = plain_loads(functions.get(name, []))
        in_flight[(info["kv"], info["head_dim"], info["group"])] = (max(groups) if groups else 0, occ)
        total, ffma, i2f = mix(functions.get(name, []))
        out.append(f"| splitkv hd{info['head_dim']} group {info['group']} | {info['kv']} | "
                   f"{', '.join(map(str, groups)) or 'none'} | {loads} | {p['registers']} | {occ} | "
                   f"{total} / {ffma} / {i2f} |")

# ---- Little's law. H200: 132 SMs, 4.8 TB/s HBM3e (NVIDIA H200 product page);
# ~4.3 TB/s is what a streaming kernel reaches (issue #15); 800 ns loaded DRAM
# latency (assumed, the upper end of the issue's 20-26 KB per SM at 4.3 TB/s:
# 4.3e12 x 800e-9 / 132 = 26 KB). Bytes in flight = resident CTAs x 128 threads x
# copies per group x 16 B; rate = min(4.3 TB/s, in flight / latency).
SMS, PEAK, STREAM, LATENCY = 132, 4.8e12, 4.3e12, 800e-9

def plan_splits(sms, ctas, programs, context):
    # kvsight::plan_splits (planner/src/decode/split_plan.cpp), restated for the report.
    slots = sms * max(1, ctas)
    if programs >= slots or context <= 256:
        return 1
    target = min(slots // programs, 4096)
    tokens = -(-context // target)
    tokens = max(-(-tokens // 32) * 32, 256)
    return max(1, -(-context // tokens))

out.append("\n## Little's-law estimate of H200 HBM reached\n")
out.append("Assumptions: 132 SMs, peak 4.8 TB/s, streaming ceiling 4.3 TB/s, 800 ns latency; the next tile's group is in "
           "flight while the current one is consumed (the kernel is memory-bound, so it is most of the time).\n")
out.append("| case | K/V | head_dim | group | splits | CTAs | CTAs/SM | copies/thread | bytes in flight | estimate of 4.8 TB/s |")
out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
cases = [("headline split-KV: batch 4, 8 KV / 32 Q heads, 32K", 128, 4, 4 * 8, 32768, True),
         ("headline no split", 128, 4, 4 * 8, 32768, False),
         ("cliff split: batch 1, 2 KV / 12 Q heads, hd256, 32K", 256, 8, 1 * 2, 32768, True),
         ("cliff no split", 256, 8, 1 * 2, 32768, False)]
estimates = {}
for (label, hd, group, programs, context, split), kv in [(c, kv) for kv in ("bf16", "fp8_e4m3") for c in cases]:
    copies, occ = in_flight.get((kv, hd, group), (0, 0))
    splits = plan_splits(SMS, occ, programs, context) if split else 1
    ctas = programs * splits
    resident = min(ctas, SMS * occ)
    in_flight_bytes = resident * 128 * copies * 16
    rate = min(STREAM, in_flight_bytes / LATENCY)
    estimates[(label, kv)] = rate / PEAK
    out.append(f"| {label} | {kv} | {hd} | {group} | {splits} | {ctas} | {occ} | {copies} | {in_flight_bytes / 1024:.0f} KiB | "
               f"{100 * rate / PEAK:.1f}% |")
open(out_path, "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
[ $? -eq 0 ] || exit 3
# ---- The issue-and-bandwidth model (issue #24 item 1): what the tile loop's instructions and
# shared-memory wavefronts allow against HBM, per device, and which binds. The Little's-law table
# above is the latency side only: a cap from the bytes in flight, not a prediction.
{
  echo
  echo "## Issue-and-bandwidth model of the chunk loop (scripts/kernel-model.py)"
  echo
  python3 "$ROOT/scripts/kernel-model.py" "$SASS" --all
  echo
} > "$WORK/report-model.md" || { echo "kernel-report: the tile-loop model failed" >&2; exit 3; }
cat "$WORK/report-model.md" | tee -a "$OUT"
# The HIP part, appended to the same report; its check decides the exit status.
HIP_OUT="$WORK/report-hip.md"
hip_report "$HIP_OUT"
hip_rc=$?
[ -s "$HIP_OUT" ] && cat "$HIP_OUT" >> "$OUT"
exit $hip_rc
