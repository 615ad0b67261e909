#!/usr/bin/env bash
# Device check for a lent NVIDIA node (issue #15), sized for one short call:
#
#   scripts/device-check.sh OUTDIR          run it; results in OUTDIR
#   scripts/device-check.sh --build [DIR]   build the binary to carry (default build-device)
#   scripts/device-check.sh --help
#
# Carry exactly one file: build-device/kvsight (CUDA only, static cudart, sm_90;
# built with --build on a machine with CLI11, nlohmann-json and nvcc; the
# script prints its size). Nothing else is needed there: no CLI11, no GoogleTest.
#
# Steps, about 3-5 minutes on an H200, every step with its own time limit:
#  0. host: glibc version against the binary's newest GLIBC_ symbol, the NVIDIA
#     driver (/proc/driver/nvidia/version, libcuda.so.1, nvidia-smi); says what is
#     missing and stops with exit 3;
#  1. `probe info`; exit 3 when the cuda backend finds no device;
#  2. correctness: one instance of each (head_dim x GQA class x block 16/runtime x
#     dtype: bf16, fp16, and fp8 E4M3 K/V with bf16 q), both kernels, against float64;
#  3. the stream probe (read and copy);
#  4. the headline shape (batch 4, 8 KV / 32 Q heads, hd128, block 16, bf16 and
#     fp8 E4M3 K/V, 1K..128K) and the cliff shape (batch 1, 2 KV / 12 Q heads, hd256, block 784,
#     bf16, 1K..128K), both kernels;
#  5. the peer, when `python3 -c "import torch"` works: torch's
#     scaled_dot_product_attention on contiguous KV of the same shapes (GQA as
#     group query rows per KV head), timed the same way (cold inputs, events around
#     back-to-back calls);
#  6. OUTDIR/summary.json and OUTDIR/summary.md: per context, split-KV and no-split
#     GB/s, their ratio to the stream probe, torch's GB/s and kvsight's time over
#     torch's.
# Exit: 0 all checks passed, 1 a check failed, 2 usage, 3 no device / host
# problem / runtime error.
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() {
  sed -n 4,6p "$0" | sed 's/^# //' >&2
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

[ $# -ge 1 ] || usage
case "$1" in
  --help | -h) sed -n 2,33p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --build)
    [ $# -le 2 ] || usage
    build_device "${2:-}" || exit 3
    exit 0
    ;;
  -*) usage ;;
esac
[ $# -eq 1 ] || usage
OUT="$1"
mkdir -p "$OUT" || { echo "device-check: cannot create $OUT" >&2; exit 2; }
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }

BIN="${KVSIGHT_BIN:-}"
if [ -z "$BIN" ]; then
  for candidate in "$ROOT/build-device/kvsight" "$ROOT/build/kvsight"; do
    if [ -x "$candidate" ]; then BIN="$candidate"; break; fi
  done
fi
[ -n "$BIN" ] && [ -x "$BIN" ] || {
  echo "device-check: no kvsight binary: carry build-device/kvsight (scripts/device-check.sh --build) or set KVSIGHT_BIN" >&2
  exit 3
}
echo "device-check: using $BIN ($(du -h "$BIN" | cut -f1))" >&2

# ---- 0. host: glibc and driver.
HOST="$OUT/host.txt"
missing=()
glibc_host=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{print $2}')
glibc_needed=$( (objdump -T "$BIN" 2> /dev/null || true) | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
{
  echo "binary: $BIN, $(stat -c %s "$BIN") bytes"
  echo "glibc: host ${glibc_host:-unknown}, binary needs ${glibc_needed:-unknown (no objdump)}"
} > "$HOST"
if [ -n "$glibc_host" ] && [ -n "$glibc_needed" ] &&
  [ "$(printf '%s\n%s\n' "$glibc_needed" "$glibc_host" | sort -V | head -1)" != "$glibc_needed" ]; then
  missing+=("glibc $glibc_needed (host has $glibc_host): build the binary on an older distribution")
fi
if [ -r /proc/driver/nvidia/version ]; then
  echo "driver: $(head -1 /proc/driver/nvidia/version)" >> "$HOST"
else
  missing+=("the NVIDIA kernel driver (/proc/driver/nvidia/version is absent)")
fi
if (ldconfig -p 2> /dev/null || true) | grep -q 'libcuda\.so\.1'; then
  echo "libcuda.so.1: present" >> "$HOST"
else
  missing+=("libcuda.so.1 (the driver's user-space library) on the loader path")
fi
if command -v nvidia-smi > /dev/null; then
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv \
    >> "$HOST" 2>&1 || true
fi
cat "$HOST" >&2
if [ ${#missing[@]} -gt 0 ]; then
  for item in "${missing[@]}"; do echo "device-check: missing: $item" | tee -a "$HOST" >&2; done
  exit 3
fi

# ---- 1. probe info.
timeout 60 "$BIN" probe info --format json > "$OUT/info.json" || { echo "device-check: probe info failed" >&2; exit 3; }
timeout 60 "$BIN" probe info > "$OUT/info.txt"
if ! timeout 60 "$BIN" probe info --format csv | grep -q '^cuda,ok,'; then
  echo "device-check: no CUDA device:" >&2
  grep -i '^cuda' "$OUT/info.txt" >&2 || echo "  (this binary has no cuda backend)" >&2
  exit 3
fi

FAILED=0
run() {  # run LIMIT_S NAME ARGS...: one probe, JSON to OUT/NAME.json, log to OUT/NAME.log
  local limit=$1 name=$2
  shift 2
  timeout "$limit" "$BIN" "$@" --backend cuda --format json > "$OUT/$name.json" 2> "$OUT/$name.log"
  local rc=$?
  if [ $rc -ne 0 ]; then
    FAILED=1
    echo "device-check: $name exit $rc ($(tail -1 "$OUT/$name.log"))" >&2
  fi
  return $rc
}

# ---- 2. correctness, one instance per (head_dim, GQA class, block path, dtype).
echo "device-check: correctness ($(elapsed) s)" >&2
: > "$OUT/check.jsonl"
for hd in 64 128 256; do
  for gqa in 1 3 6 16; do
    for bs in 16 784; do
      for dtype in bf16 fp16 fp8; do
        # fp16 and fp8 K/V (bf16 q): one GQA per head_dim and block
        [ "$dtype" != bf16 ] && [ "$gqa" != 6 ] && continue
        qdtype=$dtype; kvdtype=auto
        [ "$dtype" = fp8 ] && { qdtype=bf16; kvdtype=fp8_e4m3; }
        context=$((2 * bs + 37))
        for kernel in nosplit splitkv; do
          name="check_${kernel}_hd${hd}_g${gqa}_bs${bs}_${dtype}"
          run 60 "$name" probe attention --kernel "$kernel" --head-dim "$hd" --block-size "$bs" --dtype "$qdtype" --kv-dtype "$kvdtype" \
            --kv-heads 2 --q-heads $((2 * gqa)) --batch 3 --context "$context" --splits "$([ "$kernel" = splitkv ] && echo 5 || echo 0)" \
            --repeats 2 --warmup 1
          [ $? -eq 3 ] && { echo "device-check: runtime error in $name" >&2; exit 3; }
          tr -d '\n' < "$OUT/$name.json" >> "$OUT/check.jsonl"
          echo >> "$OUT/check.jsonl"
          rm -f "$OUT/$name.json" "$OUT/$name.log"
        done
      done
    done
  done
done

# ---- 3. stream probe.
echo "device-check: bandwidth ($(elapsed) s)" >&2
run 60 bandwidth probe bandwidth --repeats 20 --warmup 3

# ---- 4. the two shapes.
CONTEXTS=1024,2048,4096,8192,16384,32768,65536,131072
echo "device-check: headline sweep ($(elapsed) s)" >&2
run 150 headline probe sweep --head-dim 128 --block-size 16 --batch 4 --kv-heads 8 --q-heads 32 --dtype bf16 \
  --contexts "$CONTEXTS" --repeats 10 --warmup 2 --max-mem 0.6
echo "device-check: headline sweep, fp8 K/V ($(elapsed) s)" >&2
run 150 headline_fp8 probe sweep --head-dim 128 --block-size 16 --batch 4 --kv-heads 8 --q-heads 32 --dtype bf16 \
  --kv-dtype fp8_e4m3 --contexts "$CONTEXTS" --repeats 10 --warmup 2 --max-mem 0.6
echo "device-check: cliff sweep ($(elapsed) s)" >&2
run 120 cliff probe sweep --head-dim 256 --block-size 784 --batch 1 --kv-heads 2 --q-heads 12 --dtype bf16 \
  --contexts "$CONTEXTS" --repeats 10 --warmup 2 --max-mem 0.6

# ---- 4b. preflight (issue #10) for the default model: its verdict is a finding, not a check failure.
echo "device-check: preflight ($(elapsed) s)" >&2
for fmt in json markdown; do
  timeout 90 "$BIN" preflight --model llama-3.1-8b --backend cuda --quiet --format $fmt > "$OUT/preflight.${fmt/markdown/md}" 2>> "$OUT/preflight.log"
  rc=$?
  if [ $rc -ge 2 ]; then FAILED=1; echo "device-check: preflight exit $rc ($(tail -1 "$OUT/preflight.log"))" >&2; fi
done

# ---- 5. the peer.
if timeout 60 python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  echo "device-check: torch peer ($(elapsed) s)" >&2
  timeout 150 python3 "$ROOT/scripts/device-check-peer.py" "$CONTEXTS" > "$OUT/torch.json" 2> "$OUT/torch.log" || {
    echo "device-check: torch peer failed ($(tail -1 "$OUT/torch.log"))" >&2
    echo '{"error": "torch peer failed"}' > "$OUT/torch.json"
  }
else
  echo "device-check: no torch with CUDA here: no peer" >&2
  echo '{"error": "python3 -c \"import torch\" failed or no CUDA device for torch"}' > "$OUT/torch.json"
fi

# ---- 6. summary.
python3 "$ROOT/scripts/device-check-summary.py" "$OUT" "$(elapsed)" "$FAILED" || FAILED=1
echo "device-check: done in $(elapsed) s, results in $OUT (summary.md, summary.json)" >&2
exit $FAILED
