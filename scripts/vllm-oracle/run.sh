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
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import vllm' 2>/dev/null; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet "vllm==$version"; then
    # An exact pin the index lacks (vllm 0.34.0's flashinfer-python==0.7.3 on some mirrors):
    # the wheel without its dependencies, then every other requirement. The oracle runs vLLM's
    # CPU platform and never imports FlashInfer.
    echo "vllm-oracle: installing vllm==$version without flashinfer-python" >&2
    tmp="$(mktemp -d)"
    "$venv/bin/pip" download --quiet --no-deps "vllm==$version" -d "$tmp"
    "$venv/bin/pip" install --quiet --no-deps "$tmp"/vllm-*.whl
    "$venv/bin/python" - "$tmp"/vllm-*.whl > "$tmp/requirements.txt" <<'PY'
import sys, zipfile
whl = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
for line in whl.read(meta).decode().splitlines():
    if line.startswith("Requires-Dist: ") and "extra ==" not in line:
        req = line[len("Requires-Dist: "):]
        if not req.startswith("flashinfer-python"):
            print(req)
PY
    "$venv/bin/pip" install --quiet -r "$tmp/requirements.txt"
    rm -rf "$tmp"
  fi
fi
exec "$venv/bin/python" "$(dirname "$0")/oracle.py" --vllm-version "$version" --kvsight "$kvsight" \
  --models "$(dirname "$0")/../../planner/data/models"
