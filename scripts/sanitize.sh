#!/usr/bin/env bash
# Builds the planner, the cpu probes, the CLI and the tests with AddressSanitizer
# + UndefinedBehaviorSanitizer (KVSIGHT_SANITIZE=ON, no GPU backends) in
# build-asan and runs the whole ctest suite under them: any leak, out-of-bounds
# access, use-after-free or UB aborts the test that hit it (docs/reliability.md).
# Environment: ASAN_BUILD_DIR (default build-asan), JOBS (default nproc),
#              ASAN_OPT (default -O1: ASan's recommended level, 1.5x faster to compile than -O2
#              on this code; the cpu probe kernels keep their -O3), CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
JOBS=${JOBS:-$(nproc)}

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DKVSIGHT_SANITIZE=ON -DKVSIGHT_CUDA=OFF -DKVSIGHT_HIP=OFF \
  -DKVSIGHT_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVSIGHT_UNITY_BUILD=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="${ASAN_OPT:--O1} -g1" ${CMAKE_ARGS:-}  # no -DNDEBUG: asserts stay on
# -g1: line tables only, all a sanitizer report's symbolized stack needs (file:line per frame),
# at a fraction of full debug info's compile time.
cmake --build "$BUILD_DIR" -j "$JOBS"
# Every child the tests spawn (the kvsight binary) inherits these.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
