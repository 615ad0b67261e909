#!/usr/bin/env bash
# vLLM's own planner as a test oracle for kvsight (issue #13 acceptance). Installs the vllm
# wheel (and the torch it pulls, several GiB) into a scratch venv, then runs oracle.py, which
# builds each catalog model's per-layer KV-cache specs and calls vLLM's grouping, capacity
# and max-length functions on the CPU, and compares with `kvsight plan` as built.
# A documented check, not run by CI (the wheel pulls torch). Usage:
#   scripts/vllm-oracle/run.sh [VLLM_VERSION] [KVSIGHT_BINARY]
set -euo pipefail
version="${1:-0.33.0}"
kvsight="${2:-build/kvsight}"
venv="${VLLM_ORACLE_VENV:-/tmp/kvsight-vllm-oracle-$version}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "vllm==$version"
fi
exec "$venv/bin/python" "$(dirname "$0")/oracle.py" --vllm-version "$version" --kvsight "$kvsight" \
  --models "$(dirname "$0")/../../planner/data/models"
