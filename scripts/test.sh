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
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DKVSIGHT_WERROR=ON ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
