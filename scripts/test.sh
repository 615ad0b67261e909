#!/usr/bin/env bash
# The test command (README). Two depths:
#
#   scripts/test.sh            fast default: installs dependencies if needed, one build
#                              (-Werror, no GPU device code), every ctest test. A few
#                              minutes on 2 cores from a fresh clone (docs/reliability.md).
#   scripts/test.sh --gpu      the same, with the CUDA and HIP backends compiled where
#                              nvcc / hipcc are found (AUTO), e.g. on a GPU node.
#   scripts/test.sh --full     the hardening run (.ci/run): the build with BOTH GPU
#                              backends required (ON: a missing compiler is an error),
#                              ctest, then the suite again under ASan + UBSan
#                              (scripts/sanitize.sh) and a libFuzzer smoke run per reader
#                              (scripts/fuzz.sh, KVSIGHT_FUZZ_SECONDS per target, default 30).
#
# CI=1 in the environment asks for the GPU backends as --full does (ON).
# ccache (setup.sh installs it) caches the C++ objects and nvcc's (CMAKE_CUDA_COMPILER_LAUNCHER),
# so a second run, or a second clone on the same machine, recompiles little.
# Environment: BUILD_DIR (default build), JOBS (default nproc), CMAKE_ARGS, KVSIGHT_FUZZ_SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

mode=fast
gpu=OFF
for arg in "$@"; do
  case "$arg" in
    --full) mode=full; gpu=ON ;;
    --gpu) gpu=AUTO ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option '$arg'; allowed: --full, --gpu, --help" >&2; exit 2 ;;
  esac
done
if [[ -n "${CI:-}" ]]; then gpu=ON; fi

bash scripts/setup.sh
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q "CMAKE_GENERATOR:INTERNAL=${generator[1]:-Unix Makefiles}" "$BUILD_DIR/CMakeCache.txt"; then
  rm -rf "$BUILD_DIR"
fi
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache); fi
start=$(date +%s)
# -O2 without -g: debug info is a third of the compile time and of no use in a CI log;
# unity batches for the libraries (CMakeLists.txt KVSIGHT_UNITY_BUILD). CMAKE_ARGS overrides.
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DKVSIGHT_WERROR=ON -DKVSIGHT_CUDA=$gpu -DKVSIGHT_HIP=$gpu \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DKVSIGHT_UNITY_BUILD=ON \
  "${launcher[@]}" ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
echo "test.sh: build and ctest passed in $(($(date +%s) - start)) s (GPU backends $gpu)"

if [[ "$mode" == full ]]; then
  # Hardening (docs/reliability.md): sanitizers over the whole suite, then fuzzing.
  bash scripts/sanitize.sh
  bash scripts/fuzz.sh "${KVSIGHT_FUZZ_SECONDS:-30}"
  echo "test.sh --full: build, ctest, ASan + UBSan suite and fuzz smoke passed in $(($(date +%s) - start)) s"
fi
