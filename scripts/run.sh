#!/usr/bin/env bash
# Sets up and builds if needed, then runs kvsight with the given arguments.
# With none, runs the default job: `preflight` for the default model (llama-3.1-8b) on
# this node: the devices found (the CPU when there is no GPU, said in the first
# lines), bandwidth, gates, both probe kernels, capacity, decode, and a verdict.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR=${BUILD_DIR:-$root/build}
if [[ ! -x "$BUILD_DIR/kvsight" ]]; then
  bash "$root/scripts/setup.sh" >&2
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake -S "$root" -B "$BUILD_DIR" "${generator[@]}" >&2
fi
# Always bring the build up to date (a no-op when it is).
cmake --build "$BUILD_DIR" -j "$(nproc)" --target kvsight >&2
if (($# == 0)); then
  set -- preflight --model llama-3.1-8b
fi
exec "$BUILD_DIR/kvsight" "$@"
