#!/usr/bin/env bash
# scripts/device-check.sh without a GPU (issue #24 item 4):
#  A. this machine, or any machine made to look GPU-less: exit 4 and "device-check: no GPU";
#  B. a driver older than the binary's CUDA needs (fakes of nvidia-smi, ldconfig, the driver's
#     version file and a binary holding nvcc's "release 13.0" mark): exit 3 naming R580, and a
#     summary that says why it stopped;
#  C. every check runs though some fail: a fake kvsight fails the 4 fp16 head_dim-256 runs; all
#     84 correctness runs (bf16: 3 head_dims x 4 GQA x 2 blocks x 2 kernels = 48; fp16 at GQA 6:
#     12; fp8 at GQA 3 and 6: 24) and the 5 later checks are recorded, the summary counts 4 failures,
#     exit 1 after it;
#  D. the time budget: with DEVICE_CHECK_BUDGET_S=30 and 1 s per fake probe the script stops
#     starting checks, counts them as skipped, exits 1 and stays within the budget.
#
#   test_device_check.sh REPO_ROOT KVSIGHT_BINARY      exit 0 pass, 1 fail
set -uo pipefail
repo=$1
kvsight=$2
script=$repo/scripts/device-check.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvsight-device-check-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
summary_field() { python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v = v[k]
print(v)' "$1/summary.json" "$2" 2>/dev/null; }

# ---- fakes
mkdir -p "$tmp/nogpu-bin" "$tmp/gpu-bin"
cat >"$tmp/nogpu-bin/nvidia-smi" <<'EOF'
#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
exit 9
EOF
cat >"$tmp/gpu-bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  --query-gpu=driver_version*) echo "$FAKE_DRIVER" ;;
  --query-gpu=*) echo "name, driver_version, memory.total [MiB]"; echo "NVIDIA H200, $FAKE_DRIVER, 143771 MiB" ;;
  "") echo "| NVIDIA-SMI $FAKE_DRIVER    Driver Version: $FAKE_DRIVER    CUDA Version: $FAKE_DRIVER_CUDA |" ;;
esac
EOF
cat >"$tmp/gpu-bin/ldconfig" <<'EOF'
#!/bin/sh
echo "	libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
EOF
# A stand-in kvsight: as nvcc leaves it in real device code, this file holds the mark
# "Cuda compilation tools, release 13.0". Probe runs take FAKE_SLEEP seconds; the fp16 runs at
# head_dim 256 fail their reference check as the real binary does (exit 3).
cat >"$tmp/fake-kvsight" <<'EOF'
#!/bin/bash
# Cuda compilation tools, release 13.0, V13.0.88
sleep "${FAKE_SLEEP:-0}"
args=" $* "
case "$args" in
  *" probe info "*"--format csv"*) echo "backend,status,device"; echo "cuda,ok,NVIDIA H200"; echo "cpu,ok,host" ;;
  *" probe info "*) echo "{}" ;;
  *" probe attention "*"--head-dim 256 "*"--dtype fp16 "*)
    echo "kvsight: device error: cuda: result failed verification against the float64 reference" >&2; exit 3 ;;
  *" probe attention "*) echo '{"correct": true, "kernel": "splitkv"}' ;;
  *" probe bandwidth "*) echo '{"read_gbps": 4000.0, "copy_gbps": 3900.0}' ;;
  *" probe sweep "*) echo '{"splitkv": {"kernel": "splitkv", "points": [{"context": 1024, "time_us": 10.0, "gbps": 3000.0, "ratio_to_stream": 0.75, "splits": 4}]}}' ;;
  *" preflight "*) echo '{"verdict": "PASS"}' ;;
  *) echo "fake kvsight: unexpected arguments: $*" >&2; exit 2 ;;
esac
EOF
chmod +x "$tmp"/nogpu-bin/* "$tmp"/gpu-bin/* "$tmp/fake-kvsight"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:29 UTC 2025" >"$tmp/version-580"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan 16 2025" >"$tmp/version-570"

run() { # run OUT ENV... -- ARGS: output in $out, exit code in $code
  local outdir=$1
  shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  out=$(env "${envs[@]}" bash "$script" "$@" 2>&1)
  code=$?
  : "$outdir"
}

# ---- A. no GPU.
if [[ ! -e /proc/driver/nvidia/version ]] && ! command -v nvidia-smi >/dev/null; then
  # This machine really has none: the script as a user runs it.
  run x KVSIGHT_BIN="$kvsight" -- "$tmp/a0"
  [[ $code == 4 ]] || fail "A (this machine): exit $code, 4 expected: $out"
  grep -q "^device-check: no GPU: no NVIDIA kernel driver (/proc/driver/nvidia/version is absent)" <<<"$out" ||
    fail "A (this machine): no 'no GPU' message: $out"
fi
for mode in full dry; do
  args=("$tmp/a-$mode")
  [[ $mode == dry ]] && args=(--dry-run "$tmp/a-$mode")
  run x PATH="$tmp/nogpu-bin:$PATH" DEVICE_CHECK_NVIDIA_VERSION_FILE="$tmp/absent" KVSIGHT_BIN="$kvsight" -- "${args[@]}"
  [[ $code == 4 ]] || fail "A ($mode run, nvidia-smi failing, no driver file): exit $code, 4 expected: $out"
  grep -q "^device-check: no GPU: .* and nvidia-smi -L: NVIDIA-SMI has failed" <<<"$out" ||
    fail "A ($mode run): the message does not say no GPU and why: $out"
done

# ---- B. driver 570 for a CUDA 13.0 binary.
gpu_env=(PATH="$tmp/gpu-bin:$PATH" KVSIGHT_BIN="$tmp/fake-kvsight")
run x "${gpu_env[@]}" FAKE_DRIVER=570.86.15 FAKE_DRIVER_CUDA=12.8 DEVICE_CHECK_NVIDIA_VERSION_FILE="$tmp/version-570" \
  -- "$tmp/b"
[[ $code == 3 ]] || fail "B: exit $code, 3 expected: $out"
grep -q "NVIDIA driver 570.86.15 is older than R580, which CUDA 13 programs need (this binary was built with CUDA 13.0)" \
  <<<"$out" || fail "B: no clear driver message: $out"
[[ $(summary_field "$tmp/b" passed) == False ]] || fail "B: summary.json missing or passed"
grep -q "R580" <<<"$(summary_field "$tmp/b" stopped)" || fail "B: summary.json does not say why it stopped"
[[ $(summary_field "$tmp/b" host.driver_version) == 570.86.15 ]] || fail "B: driver version not recorded"
[[ $(summary_field "$tmp/b" host.binary_cuda_release) == 13.0 ]] || fail "B: the binary's CUDA release not recorded"

# ---- C. every check runs; 4 fail; exit 1 after the summary.
c_env=("${gpu_env[@]}" FAKE_DRIVER=580.65.06 FAKE_DRIVER_CUDA=13.0 DEVICE_CHECK_NVIDIA_VERSION_FILE="$tmp/version-580")
run x "${c_env[@]}" -- --dry-run "$tmp/c-dry"
[[ $code == 0 ]] || fail "C (dry run with a GPU): exit $code, 0 expected: $out"
grep -q "84 correctness runs" <<<"$out" || fail "C (dry run): no plan printed: $out"
run x "${c_env[@]}" -- "$tmp/c"
[[ $code == 1 ]] || fail "C: exit $code, 1 expected: $out"
# 3 head_dims x 2 blocks x (4 GQA classes bf16 + fp16 at GQA 6 + fp8 at GQA 3 and 6) x 2 kernels = 84 runs, then
# bandwidth, headline, cliff, headline_fp8, preflight = 89 (no torch with CUDA here: no peer step).
[[ $(summary_field "$tmp/c" correctness.runs) == 84 ]] || fail "C: correctness runs $(summary_field "$tmp/c" correctness.runs), 84 expected"
# fp16 at head_dim 256: GQA 6 only, blocks 16 and 784, both kernels = 2 x 2 = 4.
[[ $(summary_field "$tmp/c" steps.failed) == 4 ]] || fail "C: failed $(summary_field "$tmp/c" steps.failed), 4 expected"
total=$(summary_field "$tmp/c" steps.total)
[[ $total == 89 || $total == 90 ]] || fail "C: $total checks recorded, 89 (90 with a peer) expected"
[[ $(summary_field "$tmp/c" steps.skipped) == 0 ]] || fail "C: checks skipped within the budget"
grep -q "| check_nosplit_hd256_g6_bs784_fp16 | failed | 3 | kvsight: device error" "$tmp/c/summary.md" ||
  fail "C: summary.md does not list the failed check with its message"
grep -q "^Checks FAILED.$" "$tmp/c/summary.md" || fail "C: summary.md does not end FAILED"
grep -q "could not be written" <<<"$out" && fail "C: the script claims the summary was not written"
[[ -s "$tmp/c/headline.json" && -s "$tmp/c/preflight.json" ]] || fail "C: the checks after the failures did not run"

# ---- D. the budget: 30 s, 1 s per probe call; the summary still comes, within the budget.
begin=$(date +%s)
run x "${c_env[@]}" FAKE_SLEEP=1 DEVICE_CHECK_BUDGET_S=30 -- "$tmp/d"
took=$(($(date +%s) - begin))
[[ $code == 1 ]] || fail "D: exit $code, 1 expected: $out"
skipped=$(summary_field "$tmp/d" steps.skipped)
[[ -n "$skipped" && $skipped -gt 0 ]] || fail "D: nothing skipped with a 30 s budget"
grep -q "not started: the time budget (30 s) is spent" "$tmp/d/summary.md" || fail "D: skipped checks not named"
# 30 s budget: steps start until 30 - 20 (summary reserve) - 5 s; the host checks and summary add a few.
((took <= 40)) || fail "D: took $took s with a 30 s budget"

if ((failed)); then exit 1; fi
echo "ok: device-check.sh: no GPU exit 4, old driver exit 3, every check runs and failures counted, budget kept (${took} s)"
