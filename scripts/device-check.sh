#!/usr/bin/env bash
# Device check for an NVIDIA node with no network (nvcc, cmake, ninja; no CLI11,
# nlohmann-json or GoogleTest there). One command:
#
#   scripts/device-check.sh OUTDIR
#
# 1. finds a kvsight binary: $KVSIGHT_BIN, else build-device/kvsight (build it on a
#    machine with the dependencies: scripts/device-check.sh --build [DIR]; CUDA
#    only, static cudart, sm_80 + sm_90), else tries to configure one here;
# 2. records `probe info`; exits 3 if the cuda backend finds no device;
# 3. checks every kernel instantiation (head_dim 64/128/256 x block 8/16/32/784 x
#    bf16/fp16 x nosplit/splitkv, GQA 1..16) against the float64 reference;
# 4. measures bandwidth (read and copy);
# 5. sweeps both kernels at head_dim 128 and 256, block 16 and 784, batch 1 and 8,
#    2 and 8 KV heads, contexts 512 .. 131072;
# and writes JSON plus a markdown summary to OUTDIR. Sized for under 8 minutes on
# an H200. Exit: 0 all checks passed, 1 a check failed, 2 usage, 3 no device /
# runtime error.
set -u -o pipefail

usage() {
  echo "usage: $0 OUTDIR        run the device check, results in OUTDIR" >&2
  echo "       $0 --build [DIR] build a CUDA-only kvsight into DIR (default build-device)" >&2
  exit 2
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

build_device() {
  local dir="${1:-$ROOT/build-device}"
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S "$ROOT" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKVSIGHT_CUDA=ON -DKVSIGHT_HIP=OFF \
    -DKVSIGHT_BUILD_TESTS=OFF "-DKVSIGHT_CUDA_ARCHS=${KVSIGHT_CUDA_ARCHS:-80;90}" && \
    cmake --build "$dir" --target kvsight -j "${JOBS:-2}"
}

[ $# -ge 1 ] || usage
if [ "$1" = "--build" ]; then
  build_device "${2:-}" || exit 3
  exit 0
fi
case "$1" in -*) usage ;; esac
[ $# -eq 1 ] || usage
OUT="$1"
mkdir -p "$OUT" || { echo "cannot create $OUT" >&2; exit 2; }

BIN="${KVSIGHT_BIN:-}"
if [ -z "$BIN" ]; then
  for candidate in "$ROOT/build-device/kvsight" "$ROOT/build/kvsight"; do
    if [ -x "$candidate" ]; then BIN="$candidate"; break; fi
  done
fi
if [ -z "$BIN" ]; then
  echo "device-check: no kvsight binary carried in; trying to build one (needs CLI11 and nlohmann-json)" >&2
  build_device "$ROOT/build-device" > "$OUT/build.log" 2>&1 || {
    echo "device-check: build failed (see $OUT/build.log); carry build-device/kvsight in (built with" >&2
    echo "  'scripts/device-check.sh --build' on a machine with the dependencies) or set KVSIGHT_BIN" >&2
    exit 3
  }
  BIN="$ROOT/build-device/kvsight"
fi
[ -x "$BIN" ] || { echo "device-check: $BIN is not executable" >&2; exit 3; }
echo "device-check: using $BIN" >&2

START=$(date +%s)
"$BIN" probe info --format json > "$OUT/info.json" || { echo "device-check: probe info failed" >&2; exit 3; }
"$BIN" probe info > "$OUT/info.txt"
if ! grep -q '"name": "cuda"' "$OUT/info.json" || ! "$BIN" probe info --format csv | grep -q '^cuda,ok,'; then
  echo "device-check: no CUDA device:" >&2
  grep '^cuda' "$OUT/info.txt" >&2 || true
  # Show the driver's own message (exit 3 from the probe).
  "$BIN" probe attention --backend cuda --context 512 --repeats 1 > /dev/null
  exit 3
fi

FAILED=0
SUMMARY="$OUT/summary.md"
{
  echo "# kvsight device check"
  echo
  echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); host $(hostname); binary $BIN"
  echo
  cat "$OUT/info.txt"
  echo
} > "$SUMMARY"

# 1) Every kernel instantiation against float64 (small shapes).
echo "## Correctness: every instantiation vs float64" >> "$SUMMARY"
echo >> "$SUMMARY"
echo "| head_dim | block | dtype | GQA | kernel | splits | max rel. error | correct |" >> "$SUMMARY"
echo "|---:|---:|---|---:|---|---:|---:|---|" >> "$SUMMARY"
: > "$OUT/check.jsonl"
gqas=(1 4 6 16 2 8 3)
i=0
for hd in 64 128 256; do
  for bs in 8 16 32 784; do
    for dtype in bf16 fp16; do
      gqa=${gqas[$((i % 7))]}; i=$((i + 1))
      context=$((2 * bs + 37))
      for kernel in nosplit splitkv; do
        splits=0
        [ "$kernel" = splitkv ] && splits=5
        json=$("$BIN" probe attention --backend cuda --kernel "$kernel" --head-dim "$hd" --block-size "$bs" \
          --dtype "$dtype" --kv-heads 2 --q-heads $((2 * gqa)) --batch 3 --context "$context" --splits "$splits" \
          --repeats 3 --warmup 1 --format json)
        rc=$?
        echo "$json" | tr -d '\n' >> "$OUT/check.jsonl"; echo >> "$OUT/check.jsonl"
        correct=$(echo "$json" | grep -o '"correct": [a-z]*' | awk '{print $2}')
        error=$(echo "$json" | grep -o '"max_error": [^,]*' | awk '{print $2}')
        used=$(echo "$json" | grep -o '"splits": [0-9]*' | awk '{print $2}')
        echo "| $hd | $bs | $dtype | $gqa | $kernel | ${used:-?} | ${error:-?} | ${correct:-rc $rc} |" >> "$SUMMARY"
        if [ $rc -ne 0 ] || [ "$correct" != "true" ]; then FAILED=1; fi
        [ $rc -eq 3 ] && { echo "device-check: runtime error, stopping" >&2; exit 3; }
      done
    done
  done
done
echo >> "$SUMMARY"

# 2) Bandwidth.
echo "## Bandwidth" >> "$SUMMARY"
echo >> "$SUMMARY"
"$BIN" probe bandwidth --backend cuda --repeats 20 --warmup 3 --format json --output "$OUT/bandwidth.json" || FAILED=1
"$BIN" probe bandwidth --backend cuda --repeats 20 --warmup 3 --format markdown >> "$SUMMARY" || FAILED=1
echo >> "$SUMMARY"

# 3) Sweeps, both kernels side by side.
CONTEXTS=512,1024,2048,4096,8192,16384,32768,65536,131072
echo "## Sweeps (contexts $CONTEXTS)" >> "$SUMMARY"
for hd in 128 256; do
  for bs in 16 784; do
    for batch in 1 8; do
      for kv in 2 8; do
        q=$((kv == 2 ? 12 : 32))  # GQA 6 (the cliff's per-rank shape) and GQA 4
        name="sweep_hd${hd}_bs${bs}_b${batch}_kv${kv}"
        echo "device-check: $name ($(( $(date +%s) - START )) s elapsed)" >&2
        echo >> "$SUMMARY"
        "$BIN" probe sweep --backend cuda --head-dim "$hd" --block-size "$bs" --batch "$batch" --kv-heads "$kv" \
          --q-heads "$q" --dtype bf16 --contexts "$CONTEXTS" --repeats 10 --warmup 2 --max-mem 0.6 \
          --json-output "$OUT/$name.json" --format markdown >> "$SUMMARY" 2> "$OUT/$name.log"
        rc=$?
        [ $rc -eq 0 ] || FAILED=1
        [ $rc -eq 3 ] && { echo "device-check: runtime error in $name (see $OUT/$name.log)" >&2; exit 3; }
      done
    done
  done
done
echo >> "$SUMMARY"
echo "Finished in $(( $(date +%s) - START )) s; checks $([ $FAILED -eq 0 ] && echo passed || echo FAILED)." >> "$SUMMARY"
echo "device-check: done in $(( $(date +%s) - START )) s, results in $OUT" >&2
exit $FAILED
