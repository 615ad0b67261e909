#!/usr/bin/env python3
"""scripts/hip-waitcnt-check.py on two hand-written tile loops (issue #24 item 3): one
that waits for the next tile's loads at a barrier (the check must fail, exit 1) and one
whose only waits on them are counted ones before their LDS stores (exit 0).
Usage: test_hip_waitcnt_check.py SCRIPT"""
import os
import subprocess
import sys
import tempfile

NAME = "_ZN7kvsight7kernels11hip_runtime20paged_decode_splitkvI12hip_bfloat16S3_Li128ELi4ELi16EEEvNS0_17PagedDecodeParamsENS0_11FastDividerE"


def function(loop_body):
    return "\n".join([
        f"{NAME}:",
        "\ts_load_dwordx4 s[0:3], s[4:5], 0x0",
        ".LBB0_1:                                ; =>This Loop Header: Depth=1",
        "\ts_waitcnt lgkmcnt(0)",
        "\ts_barrier",
        *loop_body,
        ".LBB0_2:                                ;   in Loop: Header=BB0_1 Depth=1",
        "\ts_cbranch_scc0 .LBB0_1",
        "\ts_endpgm",
        ".Lfunc_end0:",
        ""])


LOADS = ["\tglobal_load_dwordx4 v[2:5], v[2:3], off", "\tglobal_load_dwordx4 v[6:9], v[6:7], off"]
# Two loads in flight; the barrier that follows waits for both (the old __syncthreads()).
DRAINED = LOADS + ["\ts_waitcnt vmcnt(0) lgkmcnt(0)", "\ts_barrier", "\tds_read_b128 v[10:13], v1",
                   "\ts_waitcnt lgkmcnt(0)", "\ts_barrier", "\ts_waitcnt vmcnt(0)", "\tds_write_b128 v1, v[2:5]"]
# LDS-only barriers; vmcnt(1) before the first store (1 of 2 may still be in flight), vmcnt(0) before the last.
COUNTED = LOADS + [";;#ASMSTART", "\ts_waitcnt lgkmcnt(0)", "\ts_barrier", ";;#ASMEND", "\tds_read_b128 v[10:13], v1",
                   "\ts_waitcnt lgkmcnt(0)", "\ts_barrier", "\ts_waitcnt vmcnt(1)", "\tds_write_b128 v1, v[2:5]",
                   "\ts_waitcnt vmcnt(0)", "\tds_write_b128 v1, v[6:9] offset:16"]


def run(script, body, directory, label):
    path = os.path.join(directory, label + ".s")
    open(path, "w").write(function(body))
    out = os.path.join(directory, label + ".md")
    result = subprocess.run([sys.executable, script, out, f"gfx90a={path}"], capture_output=True, text=True)
    return result.returncode, open(out).read() if os.path.exists(out) else result.stderr


def main():
    script = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as directory:
        rc, text = run(script, DRAINED, directory, "drained")
        if rc != 1 or "drains 1 (before s_barrier: 1) in 1 instances" not in text or "Result: FAIL" not in text:
            failures.append(f"drained loop: exit {rc}, expected 1 and one drain before s_barrier:\n{text}")
        rc, text = run(script, COUNTED, directory, "counted")
        # vmcnt(0) 1 (before the last store), counted 1 (vmcnt(1)), no drain.
        if rc != 0 or "vmcnt(0) 1, counted vmcnt(N>0) 1, drains 0" not in text or "Result: PASS" not in text:
            failures.append(f"counted loop: exit {rc}, expected 0:\n{text}")
        rc, _ = run(script, ["\ts_nop 0"], directory, "no_loop")  # one barrier only: no tile loop
        if rc != 1:
            failures.append(f"a decode kernel without a tile loop: exit {rc}, expected 1")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
