#!/usr/bin/env python3
"""scripts/kernel-model.py (issue #24 item 1) on the sm_90 SASS of the two split-KV instances
(tests/fixtures/sass/splitkv-sm90.sass.gz, cut from what scripts/kernel-report.sh compiles): the
per-tile counts and the H200 prediction, each derived here by hand from the loop sizes the SASS
shows; and a tile loop whose cp.async commit is gone is refused (exit 3), not modelled.
Usage: test_kernel_model.py SCRIPT FIXTURE"""
import gzip
import os
import subprocess
import sys
import tempfile


def run(script, sass):
    return subprocess.run([sys.executable, script, sass], capture_output=True, text=True, timeout=120)


def main():
    script, fixture = sys.argv[1], sys.argv[2]
    r = run(script, fixture)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| headline") or line.startswith("| cliff")]
    assert len(rows) == 2, r.stdout
    head = [c.strip() for c in rows[0].split("|")[1:-1]]
    cliff = [c.strip() for c in rows[1].split("|")[1:-1]]

    # Headline (hd128, group 4): loops of 22 (pairs, outside its K-chunk loop) + 81 (K chunk, 32 FFMA:
    # 128 / 32 = 4 trips), softmax 144, V 59 (16 tokens: 2 trips) for each of kAcc = 4 x 128 / 128 = 4
    # accumulators. Every warp takes ceil((4 x 32 - 32 w) / 128) = 1 pair trip:
    # 1 x (22 + 81 x 4) + 1 x 144 + 4 x 59 x 2 = 346 + 144 + 472 = 962; + 642 straight-line = 1,604.
    assert head[1] == "1,205" and head[3] == "642", head
    assert head[4] == "962-1,604", head
    # Wavefronts: per warp 1 pair trip x 4 K-chunk trips x (4 K rows x 4 + 8 q broadcasts) = 96, and
    # 4 accumulators x 2 trips x (16 LDS.U16 + 4 score broadcasts) = 160; x 4 warps = 1,024; + the
    # next tile's cp.async writes 32 x 128 x 2 x 2 B / 128 = 128 -> 1,152.
    assert head[5] == "1,152" and head[6] == "16,384", head
    # H200: 4.8e12 / 132 / 1.98e9 = 18.37 B per SM-cycle; 16,384 / 18.37 = 892 HBM cycles.
    # Optimistic: max(892, 962, 1,152) = 1,152 (shared memory) -> 892 / 1,152 = 77 %;
    # pessimistic: max(892, 1,604, 1,152) = 1,604 (issue) -> 56 %.
    assert head[7] == "892; 56-77 %; shared memory / issue", head

    # Cliff (hd256, group 6 on the group-8 instance): warp 0 takes ceil(6 x 32 / 128) = 2 pair trips
    # of 22 + 81 x 8 (256 / 32 K-chunk trips), ceil(6 / 4) = 2 softmax trips, and
    # min(kAcc = 8 x 256 / 128 = 16, ceil(6 x 256 / 128) = 12) accumulators:
    # 2 x 670 + 2 x 144 + 12 x 118 = 1,340 + 288 + 1,416 = 3,044; + 1,759 = 4,803.
    assert cliff[1] == "3,270" and cliff[3] == "1,759", cliff
    assert cliff[4] == "3,044-4,803", cliff
    # Wavefronts: 2 + 2 + 1 + 1 = 6 pair trips x 8 x (16 + 8) = 1,152; 4 warps x 12 x 2 x 20 = 1,920;
    # writes 32 x 256 x 4 / 128 = 256 -> 3,328. HBM: 32,768 / 18.37 = 1,784 cycles;
    # 1,784 / 3,328 = 54 % (shared memory), 1,784 / 4,803 = 37 % (issue).
    assert cliff[5] == "3,328" and cliff[6] == "32,768", cliff
    assert cliff[7] == "1,784; 37-54 %; shared memory / issue", cliff

    # Without LDGDEPBAR there is no tile loop to model: refused.
    with gzip.open(fixture, "rt") as f:
        text = "".join(line for line in f if "LDGDEPBAR" not in line)
    with tempfile.TemporaryDirectory() as d:
        broken = os.path.join(d, "broken.sass")
        with open(broken, "w") as f:
            f.write(text)
        r = run(script, broken)
        assert r.returncode == 3 and "no tile loop" in r.stderr, (r.returncode, r.stderr)
    print("kernel-model: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
