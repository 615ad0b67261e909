#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz and runs each
# for SECONDS (default 30). Exits non-zero on any finding: a crash, UB, a leak,
# an exception other than kvsight::InputError, a timeout (> 5 s on one input),
# more than 2 GB of memory, or an invariant a harness checks. Crashing inputs are
# saved in build-fuzz/artifacts/<target>/; turn each into a regression test in
# tests/test_bad_input.cpp (docs/reliability.md).
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (targets: config safetensors calibration gguf log merge)
# Environment: FUZZ_BUILD_DIR (default build-fuzz), JOBS (default 2), CMAKE_ARGS,
#              FUZZ_MAX_LEN (default 262144: inputs up to 256 KiB; issue #14's crashes
#              were a 100 KB config of 50,000 nested arrays and a 60 KB calibration
#              file, beyond the old 16 KiB cap), FUZZ_NICE (default 0; e.g. 19 for a
#              long run on a shared machine), FUZZ_RUNS (stop after N executions
#              instead of SECONDS, e.g. 10000000 for a nightly-length run), FUZZ_TIMEOUT
#              (default 5: seconds one input may take; 30 for a long run beside other work),
#              FUZZ_SANITIZERS (default address,undefined; "undefined" for a faster long run, in
#              its own FUZZ_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-30}
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then TARGETS=(config safetensors calibration gguf log merge); fi
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
MAX_LEN=${FUZZ_MAX_LEN:-262144}
NICE=${FUZZ_NICE:-0}
limit=(-max_total_time="$SECONDS_PER_TARGET")
if [[ -n "${FUZZ_RUNS:-}" ]]; then limit=(-runs="$FUZZ_RUNS"); fi
JOBS=${JOBS:-2}
CXX_FUZZ=${CXX_FUZZ:-$(command -v clang++ || command -v clang++-14 || true)}
if [[ -z "$CXX_FUZZ" ]]; then
  echo "fuzz: clang++ not found (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
# No -Werror here: clang 14 warns where g++ does not (the warning gate is the g++
# build in scripts/test.sh); this build exists to fuzz.
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  # -g1 and unity batches as in scripts/sanitize.sh (docs/reliability.md): line tables are all
  # a crash report's stack needs, and the build is most of the smoke run's time.
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DKVSIGHT_UNITY_BUILD=ON \
    -DKVSIGHT_FUZZ=ON -DKVSIGHT_BUILD_TESTS=OFF -DKVSIGHT_CUDA=OFF -DKVSIGHT_HIP=OFF \
    -DKVSIGHT_FUZZ_SANITIZERS="${FUZZ_SANITIZERS:-address,undefined}" ${CMAKE_ARGS:-}
fi
build_targets=()
for t in "${TARGETS[@]}"; do build_targets+=(--target "fuzz_$t"); done
cmake --build "$BUILD_DIR" -j "$JOBS" "${build_targets[@]}"

# Runs one target for its time into its log; returns the fuzzer's exit status.
run_target() {
  local t=$1
  local work="$BUILD_DIR/corpus/$t"          # grows as the fuzzer finds new coverage; seeds stay untouched
  local artifacts="$BUILD_DIR/artifacts/$t/"
  mkdir -p "$work" "$artifacts"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
    nice -n "$NICE" "$BUILD_DIR/fuzz/fuzz_$t" "${limit[@]}" -timeout="${FUZZ_TIMEOUT:-5}" -rss_limit_mb=2048 \
    -max_len="$MAX_LEN" -dict="fuzz/$t.dict" -artifact_prefix="$artifacts" -print_final_stats=1 \
    "$work" "fuzz/corpus/$t" >"$BUILD_DIR/fuzz-$t.log" 2>&1
}

# Says how target $1 ended (its fuzzer exited $2); returns 1 on a finding.
report() {
  local t=$1 rc=$2
  local log="$BUILD_DIR/fuzz-$t.log" work="$BUILD_DIR/corpus/$t" artifacts="$BUILD_DIR/artifacts/$t/"
  local execs
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{s += $2} END {print s + 0}')
  if ((rc != 0)); then
    echo "fuzz: FINDING in $t (exit $rc) after $execs executions; artifacts in $artifacts" >&2
    grep -E 'ERROR|SUMMARY|finding|runtime error|uncaught|deadly|Test unit written' "$log" | head -20 >&2 || true
    return 1
  fi
  local secs
  secs=$(grep -E '^stat::' "$log" >/dev/null && grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | awk '{print $5}' | tail -1)
  echo "fuzz: $t ok, $execs executions in ${secs:-$SECONDS_PER_TARGET}s, corpus $(ls "$work" | wc -l) inputs"
}

# JOBS targets at a time (each fuzzer is one process on one core), reported in
# order once their batch is done: with 2 cores the 6-target smoke takes 3 slots
# of SECONDS instead of 6.
status=0
batch=()
pids=()
finish_batch() {
  local i rc
  for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then rc=0; else rc=$?; fi
    report "${batch[$i]}" "$rc" || status=1
  done
  batch=()
  pids=()
}
for t in "${TARGETS[@]}"; do
  echo "fuzz: $t for ${FUZZ_RUNS:-${SECONDS_PER_TARGET}s} ${FUZZ_RUNS:+executions }(log $BUILD_DIR/fuzz-$t.log)"
  run_target "$t" &
  pids+=($!)
  batch+=("$t")
  if ((${#pids[@]} >= JOBS)); then finish_batch; fi
done
finish_batch
exit $status
