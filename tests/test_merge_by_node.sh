#!/usr/bin/env bash
# scripts/cluster/merge-by-node.sh (issue #23 item 6) on a run directory laid out as the
# Kubernetes Job writes it (<node>/gpu-<index>.json, .exit, .gpu), made from the fleet fixtures
# (tests/fixtures/reports/README.md: gpu-node-01..04 PASS, 05 WARN, each with its own host).
#
#   test_merge_by_node.sh KVSIGHT_BINARY REPO_ROOT      exit 0 pass, 1 fail
set -uo pipefail
kvsight=$1
repo=$2
script=$repo/scripts/cluster/merge-by-node.sh
fixtures=$repo/tests/fixtures/reports/fleet
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvsight-merge-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# place NODE INDEX FIXTURE [EXIT]: one pod's files
place() {
  mkdir -p "$tmp/run/$1"
  cp "$fixtures/$3.json" "$tmp/run/$1/gpu-$2.json"
  echo "${4:-0}" >"$tmp/run/$1/gpu-$2.exit"
  echo "GPU-fixture-$2, 00000000:0$2:00.0, NVIDIA H200" >"$tmp/run/$1/gpu-$2.gpu"
}
merge() { # merge ARGS...: output in $out, exit code in $code
  out=$(KVSIGHT=$kvsight bash "$script" "$@" 2>&1)
  code=$?
}

# 1. Two nodes of two GPUs, all PASS: exit 0, each node's merge has its two GPUs, the fleet four.
place node-a 0 gpu-node-01
place node-a 1 gpu-node-02
place node-b 2 gpu-node-03
place node-b 3 gpu-node-04
merge "$tmp/run" 2
[[ $code == 0 ]] || fail "all PASS, 2 of 2 GPUs per node: exit $code (0 expected)"$'\n'"$out"
grep -q "^== node node-a: 2 GPU(s) reported of 2$" <<<"$out" || fail "no line for node-a's 2 of 2 GPUs"$'\n'"$out"
grep -q "^== node node-b: 2 GPU(s) reported of 2$" <<<"$out" || fail "no line for node-b's 2 of 2 GPUs"
grep -q "^== fleet: every GPU of 2 node(s)$" <<<"$out" || fail "no fleet-wide merge"
# The fleet merge's rows: the four fixtures' hosts, each once (one row per GPU).
for host in gpu-node-01 gpu-node-02 gpu-node-03 gpu-node-04; do
  [[ $(grep -c "$host" <<<"${out##*== fleet}") -ge 1 ]] || fail "fleet merge has no row for $host"
done
# gpu-node-04 is slow against the fleet median: the fleet merge says so (README of the fixtures).
grep -q "slow: bandwidth" <<<"${out##*== fleet}" || fail "fleet merge does not flag gpu-node-04 as slow"

# 2. A third node whose second GPU's pod never ran (1 of 2), and a WARN GPU: exit 1, named.
place node-c 4 gpu-node-05 1
merge "$tmp/run" 2
[[ $code == 1 ]] || fail "a node with 1 of 2 GPUs and a WARN: exit $code (1 expected)"
grep -q "^node node-c: only 1 of 2 GPUs left a report" <<<"$out" || fail "node-c's missing GPU not named"$'\n'"$out"
# Without the expected count the missing GPU cannot be seen; the WARN still makes it 1.
merge "$tmp/run"
[[ $code == 1 ]] || fail "a WARN GPU without GPUS_PER_NODE: exit $code (1 expected)"
grep -q "only 1 of" <<<"$out" && fail "a missing GPU was claimed without GPUS_PER_NODE"

# 3. A pod that wrote only its exit code (preflight crashed): a "no report" row, exit 1.
rm -rf "$tmp/run/node-c"
mkdir -p "$tmp/run/node-c"
echo 3 >"$tmp/run/node-c/gpu-4.exit"
merge "$tmp/run" 2
[[ $code == 1 ]] || fail "a GPU with only an .exit file: exit $code (1 expected)"
grep -q "no report" <<<"$out" || fail "the GPU without a report is not a 'no report' row"$'\n'"$out"

# 4. Bad input: exit 2 with a message naming what is wrong.
merge "$tmp/empty-does-not-exist"
[[ $code == 2 ]] && grep -q "is not a directory" <<<"$out" || fail "missing RUN_DIR: exit $code: $out"
mkdir -p "$tmp/flat" && cp "$fixtures/gpu-node-01.json" "$tmp/flat/"
merge "$tmp/flat"
[[ $code == 2 ]] && grep -q "holds no node directories" <<<"$out" || fail "RUN_DIR without node directories: exit $code: $out"
merge "$tmp/run" two
[[ $code == 2 ]] && grep -q "GPUS_PER_NODE 'two' is not a count" <<<"$out" || fail "GPUS_PER_NODE 'two': exit $code: $out"
merge
[[ $code == 2 ]] || fail "no arguments: exit $code (2 expected)"

if ((failed)); then exit 1; fi
echo "ok: merge-by-node.sh: per-node and fleet merges, missing GPUs, no-report rows, bad input"
