#!/usr/bin/env bash
# The node-level merge of the Kubernetes preflight Job (scripts/cluster/preflight-job.yaml,
# issue #23 item 6): the Job runs one pod per GPU and each pod writes
#   RUN_DIR/<node>/gpu-<index>.json, .exit, .gpu
# This script runs `kvsight report merge` on each node's directory (one row per GPU of the node:
# a slow GPU, memory held, a verdict that differs from its siblings), then once over every GPU
# of the fleet (the reports copied into one temporary directory as <node>.gpu-<index>.*), and
# counts each node's GPUs against GPUS_PER_NODE when given: a GPU whose pod never ran (Pending
# until the Job's deadline: the GPU was held by another workload) left no file, and would
# otherwise go unnoticed.
#
#   scripts/cluster/merge-by-node.sh RUN_DIR [GPUS_PER_NODE] [report merge flags, e.g. --format json]
#
# KVSIGHT names the binary (default: kvsight on PATH).
# Exit: 0 every GPU of every node PASS (and each node has GPUS_PER_NODE reports when given);
# 1 a GPU is WARN or FAIL, wrote no report, or a node has fewer GPUs than GPUS_PER_NODE;
# 2 bad input (usage, RUN_DIR without node directories, or a merge refused a report: its
# message names the file). docs/reference/fleet.md "Kubernetes".
set -uo pipefail

usage() {
  echo "usage: merge-by-node.sh RUN_DIR [GPUS_PER_NODE] [kvsight report merge flags]" >&2
  exit 2
}
[[ $# -ge 1 && -n "$1" && "$1" != -* ]] || usage
run_dir=$1
shift
expected=""
if [[ $# -ge 1 && "$1" != -* ]]; then
  expected=$1
  shift
  [[ "$expected" =~ ^[1-9][0-9]{0,3}$ ]] ||
    { echo "merge-by-node.sh: GPUS_PER_NODE '$expected' is not a count; allowed: 1..9999" >&2; exit 2; }
fi
kvsight=${KVSIGHT:-kvsight}
[[ -d "$run_dir" ]] || { echo "merge-by-node.sh: RUN_DIR '$run_dir' is not a directory" >&2; exit 2; }

nodes=()
for dir in "$run_dir"/*/; do
  [[ -d "$dir" ]] && nodes+=("$(basename "$dir")")
done
((${#nodes[@]})) ||
  { echo "merge-by-node.sh: '$run_dir' holds no node directories (<node>/gpu-<index>.json from the Job)" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvsight-merge.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
worst=0
note() { # note CODE: keep the worst exit code (2 over 1 over 0)
  if (($1 == 2 || ($1 == 1 && worst == 0))); then worst=$1; fi
}

for node in "${nodes[@]}"; do
  dir=$run_dir/$node
  # A pod writes .exit after every run that got so far, the .json only when preflight wrote one.
  gpus=0
  for f in "$dir"/gpu-*.exit "$dir"/gpu-*.json; do
    [[ -e "$f" ]] || continue
    stem=$(basename "${f%.*}")
    [[ -e "$tmp/$node.$stem.seen" ]] && continue
    : >"$tmp/$node.$stem.seen"
    gpus=$((gpus + 1))
    for ext in json exit; do
      [[ -e "$dir/$stem.$ext" ]] && cp -- "$dir/$stem.$ext" "$tmp/$node.$stem.$ext"
    done
  done
  echo "== node $node: $gpus GPU(s) reported${expected:+ of $expected}"
  if [[ -n "$expected" && $gpus -lt $expected ]]; then
    echo "node $node: only $gpus of $expected GPUs left a report: a pod did not run (GPU held by another workload, or the Job's deadline passed)"
    note 1
  fi
  if ((gpus > 0)); then
    "$kvsight" report merge "$dir" "$@"
    note $?
  fi
done

# The whole fleet, every GPU a row. The .seen markers are hidden from the merge (it reads *.json
# and *.exit only).
echo "== fleet: every GPU of ${#nodes[@]} node(s)"
"$kvsight" report merge "$tmp" "$@"
note $?
exit "$worst"
