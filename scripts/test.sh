#!/usr/bin/env bash
# The one test command (README, .ci/run): installs dependencies if needed,
# configures, builds with warnings as errors and runs ctest.
# Environment: BUILD_DIR (default build), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

bash scripts/setup.sh
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q "CMAKE_GENERATOR:INTERNAL=${generator[1]:-Unix Makefiles}" "$BUILD_DIR/CMakeCache.txt"; then
  rm -rf "$BUILD_DIR"
fi
# In CI both GPU backends must compile (nvcc and Debian's hipcc are installed by
# the image and setup.sh): ON makes a missing compiler an error, not a skip.
gpu_backends=()
if [[ -n "${CI:-}" ]]; then gpu_backends=(-DKVSIGHT_CUDA=ON -DKVSIGHT_HIP=ON); fi
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DKVSIGHT_WERROR=ON "${gpu_backends[@]}" ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"

# Hardening (docs/reliability.md): the suite again under ASan + UBSan, then a
# 30 s libFuzzer smoke run per reader. KVSIGHT_QUICK=1 skips both.
if [[ "${KVSIGHT_QUICK:-0}" != "1" ]]; then
  bash scripts/sanitize.sh
  bash scripts/fuzz.sh "${KVSIGHT_FUZZ_SECONDS:-30}"
fi
