#!/usr/bin/env bash
# Device check for a lent NVIDIA node (issues #15, #24 item 4), sized for one short call:
#
#   scripts/device-check.sh OUTDIR             run every check; results in OUTDIR
#   scripts/device-check.sh --dry-run [OUTDIR] host, driver and `probe info` only, then the plan
#   scripts/device-check.sh --build [DIR]      build the binary to carry (default build-device)
#   scripts/device-check.sh --help
#
# Carry exactly one file: build-device/kvsight (CUDA only, static cudart, sm_90; built with
# --build on a machine with CLI11, nlohmann-json and nvcc; the script prints its size). The GPU
# machine needs no network, no CLI11, no GoogleTest; python3 for the summary, torch for the peer.
#
# Steps (docs/measurements.md "Device check"):
#  0. host: the binary's newest GLIBC_ symbol against the host's glibc; the NVIDIA driver
#     (/proc/driver/nvidia/version, nvidia-smi --query-gpu=driver_version, libcuda.so.1); the
#     CUDA release the binary was built with (nvcc's "Cuda compilation tools, release X.Y" in
#     its device code) and the CUDA version the driver supports (nvidia-smi's header), checked:
#     a CUDA 13 build needs driver R580+, a CUDA 12 build R525+ (docs/reference/fleet.md
#     "Image"). Recorded in OUTDIR/host.txt and host.json.
#  1. `probe info`: the cuda backend must find the device (its status carries the runtime's
#     own words, e.g. "CUDA driver version is insufficient for CUDA runtime version").
#  2. correctness: one instance of each (head_dim x GQA class x block 16/784 x dtype: bf16,
#     fp16, and fp8 E4M3 K/V with bf16 q), both kernels, against the float64 reference; on
#     CUDA GQA 1, 3 and 6 run the warp-split walk and 16 the shared-tile walk (fp8: 3 the
#     warp-split walk with the sm_89+ hardware decode, 6 the shared-tile walk);
#  3. the stream probe (read and copy);
#  4. the headline shape (batch 4, 8 KV / 32 Q heads, hd128, block 16, bf16, 1K..128K) and the
#     cliff shape (batch 1, 2 KV / 12 Q heads, hd256, block 784, bf16), both kernels;
#  5. the peer (scripts/device-check-peer.py) on the same two shapes, when torch has CUDA:
#     FlashInfer's paged batch decode (page size 16, random page table) when its wheel imports,
#     else torch SDPA with the backend pinned (torch.nn.attention.sdpa_kernel) and recorded;
#     kvsight's time over the peer's per context, from this run's sweeps;
#  6. the headline shape with fp8 E4M3 K/V; `preflight --quick` for llama-3.1-8b (its verdict
#     is a finding; only exit 2 or 3 is a failed check);
#  7. OUTDIR/summary.json and summary.md: every check with its status, the failures counted.
#
# Every check runs even when one fails: each is one line of OUTDIR/steps.jsonl (name, status
# ok | failed | skipped, exit code, seconds, message). Time: the whole script stays under
# 8 minutes: each step runs under `timeout` with its own limit, cut to what is left of a
# budget of DEVICE_CHECK_BUDGET_S (default 450 s) less 20 s kept for the summary; a step
# with under 5 s left is not started and counts as skipped.
#
# Exit: 0 every check passed; 1 a check failed or was skipped for time (after the summary);
# 2 usage; 3 a host problem stops the run before the checks (no usable binary, glibc too old,
# no libcuda.so.1, a driver older than the binary's CUDA needs, or the cuda backend finds no
# device): the message says what to change, and the summary is still written; 4 no GPU on
# this machine ("device-check: no GPU: ..."): nothing to check (tests/test_device_check.sh).
#
# Environment: KVSIGHT_BIN (the binary; default build-device/kvsight, then build/kvsight),
# DEVICE_CHECK_BUDGET_S; for tests only, DEVICE_CHECK_NVIDIA_VERSION_FILE (default
# /proc/driver/nvidia/version).
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() {
  sed -n 4,7p "$0" | sed 's/^# //' >&2
  exit 2
}

build_device() {
  local dir="${1:-$ROOT/build-device}"
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S "$ROOT" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKVSIGHT_CUDA=ON -DKVSIGHT_HIP=OFF \
    -DKVSIGHT_BUILD_TESTS=OFF "-DKVSIGHT_CUDA_ARCHS=${KVSIGHT_CUDA_ARCHS:-90}" &&
    cmake --build "$dir" --target kvsight -j "${JOBS:-2}" &&
    echo "device-check: carry $dir/kvsight ($(du -h "$dir/kvsight" | cut -f1))" >&2
}

DRY_RUN=0
[ $# -ge 1 ] || usage
case "$1" in
  --help | -h) sed -n 2,49p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --build)
    [ $# -le 2 ] || usage
    build_device "${2:-}" || exit 3
    exit 0
    ;;
  --dry-run)
    DRY_RUN=1
    shift
    [ $# -le 1 ] || usage
    OUT="${1:-$(mktemp -d "${TMPDIR:-/tmp}/device-check-dry.XXXXXX")}"
    ;;
  -*) usage ;;
  *)
    [ $# -eq 1 ] || usage
    OUT="$1"
    ;;
esac
mkdir -p "$OUT" || { echo "device-check: cannot create $OUT" >&2; exit 2; }
START=$(date +%s)
BUDGET=${DEVICE_CHECK_BUDGET_S:-450}
case "$BUDGET" in '' | *[!0-9]*) echo "device-check: DEVICE_CHECK_BUDGET_S '$BUDGET' is not whole seconds" >&2; exit 2 ;; esac
RESERVE=20 # seconds kept for the summary
elapsed() { echo $(($(date +%s) - START)); }
: > "$OUT/steps.jsonl"
HOST="$OUT/host.txt"
: > "$HOST"

# json_string TEXT: TEXT as a JSON string (RFC 8259: backslash and quote escaped, tab and
# newline as \t and \n, other control characters dropped). In bash: a record per check must not
# cost a process start.
json_string() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/\\t}
  s=${s//$'\n'/\\n}
  s=${s//[$'\001'-$'\037']/}
  printf '"%s"' "$s"
}

# record NAME STATUS RC SECONDS MESSAGE: one line of steps.jsonl.
record() {
  printf '{"name": %s, "status": "%s", "rc": %s, "seconds": %s, "message": %s}\n' \
    "$(json_string "$1")" "$2" "$3" "$4" "$(json_string "$5")" >> "$OUT/steps.jsonl"
  [ "$2" = ok ] || echo "device-check: $1: $2${5:+ ($5)}" >&2
}

# summary [STOPPED_REASON]: writes summary.json / summary.md (device-check-summary.py).
# (The summary script exits 1 when the checks did not pass; whether it wrote is the file.)
summary() {
  rm -f "$OUT/summary.json"
  python3 "$ROOT/scripts/device-check-summary.py" "$OUT" "$(elapsed)" "${1:-}"
  [ -s "$OUT/summary.json" ] || echo "device-check: the summary could not be written (python3?)" >&2
}

# stop CODE MESSAGE: a problem no check can run past; the summary says why.
stop() {
  echo "device-check: $2" | tee -a "$HOST" >&2
  summary "$2" > /dev/null
  exit "$1"
}

# ---- 0. host: is there a GPU at all, then the binary, glibc, driver, runtime.
VERSION_FILE=${DEVICE_CHECK_NVIDIA_VERSION_FILE:-/proc/driver/nvidia/version}
smi_list=""
smi_error="nvidia-smi is not on PATH"
if command -v nvidia-smi > /dev/null; then
  if smi_list=$(timeout 20 nvidia-smi -L 2>&1) && grep -q '^GPU ' <<< "$smi_list"; then
    smi_error=""
  else
    smi_error="nvidia-smi -L: $(head -n 1 <<< "$smi_list")"
    smi_list=""
  fi
fi
if [ ! -r "$VERSION_FILE" ] && [ -z "$smi_list" ]; then
  echo "device-check: no GPU: no NVIDIA kernel driver ($VERSION_FILE is absent) and $smi_error;" \
    "nothing to check on this machine (run it on the lent GPU node; exit 4)" | tee -a "$HOST" >&2
  exit 4
fi

BIN="${KVSIGHT_BIN:-}"
if [ -z "$BIN" ]; then
  for candidate in "$ROOT/build-device/kvsight" "$ROOT/build/kvsight"; do
    if [ -x "$candidate" ]; then BIN="$candidate"; break; fi
  done
fi
[ -n "$BIN" ] && [ -x "$BIN" ] ||
  stop 3 "no kvsight binary: carry build-device/kvsight (scripts/device-check.sh --build) or set KVSIGHT_BIN"
echo "binary: $BIN, $(stat -c %s "$BIN") bytes" >> "$HOST"

problems=()
glibc_host=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{print $2}')
glibc_needed=$( (objdump -T "$BIN" 2> /dev/null || true) | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
echo "glibc: host ${glibc_host:-unknown}, binary needs ${glibc_needed:-unknown (no objdump)}" >> "$HOST"
if [ -n "$glibc_host" ] && [ -n "$glibc_needed" ] &&
  [ "$(printf '%s\n%s\n' "$glibc_needed" "$glibc_host" | sort -V | head -1)" != "$glibc_needed" ]; then
  problems+=("glibc $glibc_needed (host has $glibc_host): build the binary on an older distribution")
fi

# The driver: its version (nvidia-smi, else the kernel module's line) and the CUDA version it
# supports (nvidia-smi's header "CUDA Version: X.Y").
driver_version=""
if [ -n "$smi_list" ]; then
  driver_version=$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2> /dev/null | head -n 1 | tr -d ' ')
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv \
    >> "$HOST" 2>&1 || true
fi
if [ -r "$VERSION_FILE" ]; then
  kernel_line=$(head -n 1 "$VERSION_FILE")
  echo "driver: $kernel_line" >> "$HOST"
  [ -n "$driver_version" ] || driver_version=$(grep -o '[0-9]\{3,\}\.[0-9]\+\(\.[0-9]\+\)\?' <<< "$kernel_line" | head -n 1)
fi
driver_cuda=$( (timeout 20 nvidia-smi 2> /dev/null || true) | grep -o 'CUDA Version: [0-9.]*' | head -n 1 | sed 's/.*: //')
# nvcc leaves "Cuda compilation tools, release X.Y" in the code it compiles; the static
# cudart linked beside it is the same toolkit's (probes/CMakeLists.txt CUDA::cudart_static).
built_cuda=$(grep -ao 'Cuda compilation tools, release [0-9][0-9.]*' "$BIN" | head -n 1 | sed 's/.*release //')
driver_major=${driver_version%%.*}
built_major=${built_cuda%%.*}
needs=""
case "$built_major" in
  13) needs=580 ;; # CUDA 13.x: R580+ (CUDA 13.0 GA: >= 580.65.06), NVIDIA CUDA 13.0 release notes, Table 3
  12) needs=525 ;; # CUDA 12.x minor-version compatibility: >= 525.60.13
esac
{
  echo "driver version: ${driver_version:-unknown}; CUDA version the driver supports: ${driver_cuda:-unknown}"
  echo "CUDA release the binary was built with: ${built_cuda:-none found (built without nvcc?)}${needs:+; needs driver R$needs+}"
} >> "$HOST"
python3 - "$OUT/host.json" "${driver_version:-}" "${driver_cuda:-}" "${built_cuda:-}" "${needs:-}" "${glibc_host:-}" \
  "${glibc_needed:-}" <<'PY'
import json, sys
keys = ("driver_version", "driver_cuda_version", "binary_cuda_release", "driver_major_needed", "glibc_host",
        "glibc_needed")
json.dump({k: (v or None) for k, v in zip(keys, sys.argv[2:])}, open(sys.argv[1], "w"), indent=1)
PY
if [ -z "$built_cuda" ]; then
  problems+=("$BIN holds no CUDA device code (built without nvcc): build it with scripts/device-check.sh --build")
elif [ -z "$driver_version" ]; then
  problems+=("the NVIDIA driver version could not be read (nvidia-smi --query-gpu=driver_version, $VERSION_FILE)")
elif [ -n "$needs" ] && [ "${driver_major:-0}" -lt "$needs" ] 2> /dev/null; then
  problems+=("NVIDIA driver $driver_version is older than R$needs, which CUDA $built_major programs need (this binary was built with CUDA $built_cuda); install driver R$needs or newer, or build the binary with an older CUDA toolkit that this driver supports (${driver_cuda:-its CUDA version unknown})")
fi
if (ldconfig -p 2> /dev/null || true) | grep -q 'libcuda\.so\.1'; then
  echo "libcuda.so.1: present" >> "$HOST"
else
  problems+=("libcuda.so.1 (the driver's user-space library) is not on the loader path (ldconfig -p)")
fi
cat "$HOST" >&2
if [ ${#problems[@]} -gt 0 ]; then
  for item in "${problems[@]}"; do echo "problem: $item" >> "$HOST"; done
  stop 3 "host problem: ${problems[*]}"
fi

# ---- 1. probe info.
timeout 60 "$BIN" probe info --format json > "$OUT/info.json" 2> "$OUT/info.log" ||
  stop 3 "probe info failed: $(tail -n 1 "$OUT/info.log")"
timeout 60 "$BIN" probe info > "$OUT/info.txt" 2>> "$OUT/info.log"
cuda_line=$(timeout 60 "$BIN" probe info --format csv 2>> "$OUT/info.log" | grep '^cuda,')
case "$cuda_line" in
  cuda,ok,*) ;;
  *) stop 3 "the cuda backend finds no device: ${cuda_line:-no cuda line in probe info} (driver $driver_version, binary CUDA $built_cuda)" ;;
esac

# ---- the checks, each under the budget.
CONTEXTS=1024,2048,4096,8192,16384,32768,65536,131072
# step LIMIT_S NAME COMMAND...: COMMAND's stdout to OUT/NAME.json, stderr to OUT/NAME.log, one
# line in steps.jsonl; exit codes in STEP_OK (default 0) pass. Returns the exit code (124: timed
# out, killed 5 s after the TERM if it must be; 125: not started, the budget is spent).
step() {
  local limit=$1 name=$2
  shift 2
  local left=$((BUDGET - RESERVE - $(elapsed)))
  if [ "$left" -lt 5 ]; then
    record "$name" skipped 125 0 "not started: the time budget (${BUDGET} s) is spent"
    return 125
  fi
  [ "$limit" -le "$left" ] || limit=$left
  local begin rc
  begin=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"
  rc=$?
  local seconds=$(($(date +%s) - begin))
  if [[ " ${STEP_OK:-0} " == *" $rc "* ]]; then
    record "$name" ok "$rc" "$seconds" ""
  elif [ $rc -eq 124 ]; then
    record "$name" failed 124 "$seconds" "timed out after $limit s"
  else
    record "$name" failed "$rc" "$seconds" "$(tail -n 1 "$OUT/$name.log")"
  fi
  return $rc
}
probe() { # probe LIMIT NAME kvsight-probe-args...
  local limit=$1 name=$2
  shift 2
  step "$limit" "$name" "$BIN" probe "$@" --backend cuda --format json
}

if [ "$DRY_RUN" = 1 ]; then
  cat >&2 << EOF
device-check: dry run: host, driver ($driver_version, CUDA $driver_cuda) and binary (CUDA $built_cuda) are fine and the cuda backend sees: ${cuda_line}
device-check: a full run (scripts/device-check.sh OUTDIR) would run, within ${BUDGET} s: 84 correctness runs (30 s each at most),
  the stream probe (60 s), the headline and cliff sweeps (120 s, 100 s), the peer (150 s), the fp8 headline sweep (120 s),
  preflight --quick (90 s), then the summary
EOF
  exit 0
fi

# 2. correctness, one instance per (head_dim, GQA class, block path, dtype).
echo "device-check: correctness ($(elapsed) s)" >&2
: > "$OUT/check.jsonl"
for hd in 64 128 256; do
  for gqa in 1 3 6 16; do
    for bs in 16 784; do
      for dtype in bf16 fp16 fp8; do
        # fp16 and fp8 K/V (bf16 q): GQA 6 per head_dim and block; fp8 GQA 3 too, whose
        # instance (group 4) is fp8's warp-split walk (kernels/warp_walker.cuh)
        [ "$dtype" != bf16 ] && [ "$gqa" != 6 ] && ! [ "$dtype.$gqa" = fp8.3 ] && continue
        qdtype=$dtype kvdtype=auto
        [ "$dtype" = fp8 ] && { qdtype=bf16; kvdtype=fp8_e4m3; }
        context=$((2 * bs + 37))
        for kernel in nosplit splitkv; do
          name="check_${kernel}_hd${hd}_g${gqa}_bs${bs}_${dtype}"
          if probe 30 "$name" attention --kernel "$kernel" --head-dim "$hd" --block-size "$bs" --dtype "$qdtype" \
            --kv-dtype "$kvdtype" --kv-heads 2 --q-heads $((2 * gqa)) --batch 3 --context "$context" \
            --splits "$([ "$kernel" = splitkv ] && echo 5 || echo 0)" --repeats 2 --warmup 1; then
            tr -d '\n' < "$OUT/$name.json" >> "$OUT/check.jsonl"
            echo >> "$OUT/check.jsonl"
            rm -f "$OUT/$name.json" "$OUT/$name.log"
          fi
        done
      done
    done
  done
done

# 3. stream probe.
echo "device-check: bandwidth ($(elapsed) s)" >&2
probe 60 bandwidth bandwidth --repeats 20 --warmup 3

# 4. the two shapes.
echo "device-check: headline sweep ($(elapsed) s)" >&2
probe 120 headline sweep --head-dim 128 --block-size 16 --batch 4 --kv-heads 8 --q-heads 32 --dtype bf16 \
  --contexts "$CONTEXTS" --repeats 10 --warmup 2 --max-mem 0.6
echo "device-check: cliff sweep ($(elapsed) s)" >&2
probe 100 cliff sweep --head-dim 256 --block-size 784 --batch 1 --kv-heads 2 --q-heads 12 --dtype bf16 \
  --contexts "$CONTEXTS" --repeats 10 --warmup 2 --max-mem 0.6

# 5. the peer: FlashInfer's paged decode, else torch SDPA pinned. No torch with CUDA is a
# finding (no peer), not a failed check; a peer that fails is one.
if timeout 60 python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  echo "device-check: peer ($(elapsed) s)" >&2
  step 150 peer python3 "$ROOT/scripts/device-check-peer.py" --contexts "$CONTEXTS" --kvsight "$OUT"
else
  echo '{"error": "no peer: python3 -c \"import torch\" failed or torch sees no CUDA device"}' > "$OUT/peer.json"
  echo "device-check: no torch with CUDA here: no peer" >&2
fi

# 6. fp8 K/V at the headline shape; preflight (its verdict is a finding: exit 0 or 1 pass).
echo "device-check: headline sweep, fp8 K/V ($(elapsed) s)" >&2
probe 120 headline_fp8 sweep --head-dim 128 --block-size 16 --batch 4 --kv-heads 8 --q-heads 32 --dtype bf16 \
  --kv-dtype fp8_e4m3 --contexts "$CONTEXTS" --repeats 10 --warmup 2 --max-mem 0.6
echo "device-check: preflight ($(elapsed) s)" >&2
STEP_OK="0 1" step 90 preflight "$BIN" preflight --model llama-3.1-8b --backend cuda --quick --quiet --format json

# 7. summary: exit 1 when any check failed or was skipped.
summary > /dev/null
echo "device-check: done in $(elapsed) s, results in $OUT (summary.md, summary.json)" >&2
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); sys.exit(0 if s["passed"] else 1)' "$OUT/summary.json"
