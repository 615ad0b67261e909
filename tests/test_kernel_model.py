#!/usr/bin/env python3
"""scripts/kernel-model.py (issue #24 items 1, 2) on the sm_90 SASS of the two split-KV instances
(tests/fixtures/sass/splitkv-sm90.sass.gz, cut from what scripts/kernel-report.sh compiles): the
per-chunk counts and the H200 / H100 predictions, each derived here by hand from the loop the SASS
shows; a chunk loop whose cp.async commit is gone, or whose copies are not the kernel's, is refused
(exit 3), not modelled.
Usage: test_kernel_model.py SCRIPT FIXTURE"""
import gzip
import os
import subprocess
import sys
import tempfile


def run(script, sass, *options):
    return subprocess.run([sys.executable, script, sass, *options], capture_output=True, text=True, timeout=120)


def main():
    script, fixture = sys.argv[1], sys.argv[2]
    # A SASS file that cannot be read: exit 2 with its name, no traceback.
    r = run(script, "/nonexistent/kernel.sass")
    assert r.returncode == 2 and "SASS_FILE /nonexistent/kernel.sass" in r.stderr, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    r = run(script, fixture)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| headline") or line.startswith("| cliff")]
    assert len(rows) == 2, r.stdout
    head = [c.strip() for c in rows[0].split("|")[1:-1]]
    cliff = [c.strip() for c in rows[1].split("|")[1:-1]]

    # Headline (hd128, group 4): a row is 128 x 2 B = 256 B = 16 lanes x 16 B, so a warp step is
    # 2 rows and a chunk of 8 steps 16 tokens. The chunk loop (the fixture's 1,211 instructions)
    # holds 8 + 8 LDGSTS, 16 LDS.128 and 8 x (32 + 32) = 512 product FFMA (4 heads x 8 elements
    # for K and for V per step) + 1 (the running sum's update) = 513.
    assert head[1] == "16" and head[2] == "1,211 (513, 77, 9)", head
    # Wavefronts per warp and chunk: 16 LDGSTS x 4 + 16 LDS.128 x 4 + 8 LDS.64 (row offsets) + 1
    # STS.64 (the chunk after next's offsets) = 137; per SM, one chunk per scheduler: 4 x 137 = 548;
    # bytes 4 x 16 x 512 = 32,768.
    assert head[3] == "137" and head[4] == "1,211; 548; 32,768", head
    # H200: 4.8e12 / 132 / 1.98e9 = 18.37 B per SM-cycle; 32,768 / 18.37 = 1,784 HBM cycles, more than
    # the 1,211 issue cycles and 548 wavefronts: HBM binds, 100 %. H100: 3.35e12 / 132 / 1.98e9 = 12.82;
    # 32,768 / 12.82 = 2,556.
    assert head[5] == "1,784; 100 %; HBM" and head[6] == "2,556; 100 %; HBM", head

    # Cliff (hd256, group-8 instance): a row is 512 B, one row per step, 8 tokens a chunk;
    # FFMA 8 x (64 + 64) + 1 = 1,025 (8 heads x 8 elements). Same bytes and wavefronts per chunk.
    assert cliff[1] == "8" and cliff[2] == "1,951 (1,025, 144, 9)", cliff
    assert cliff[3] == "137" and cliff[4] == "1,951; 548; 32,768", cliff
    # H200: issue binds, 1,784 / 1,951 = 91 %; H100: 2,556 > 1,951, HBM binds.
    assert cliff[5] == "1,784; 91 %; issue" and cliff[6] == "2,556; 100 %; HBM", cliff

    # --all: every bf16-q block-16 split instance the SASS holds (here the two), each by its walk.
    r = run(script, fixture, "--all")
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("Every split-KV instance", 1)[1]
    assert "| bf16 | 128 | 4 | warp-split | 100 %; HBM | 100 %; HBM |" in table, table
    assert "| bf16 | 256 | 8 | warp-split | 91 %; issue | 100 %; HBM |" in table, table

    with gzip.open(fixture, "rt") as f:
        text = f.read()
    with tempfile.TemporaryDirectory() as d:
        broken = os.path.join(d, "broken.sass")
        # Without LDGDEPBAR there is no chunk loop to model: refused.
        with open(broken, "w") as f:
            f.write("".join(line + "\n" for line in text.splitlines() if "LDGDEPBAR" not in line))
        r = run(script, broken)
        assert r.returncode == 3 and "no chunk loop" in r.stderr, (r.returncode, r.stderr)
        # A loop whose copies are not the kernel's 8 K and 8 V rows a lane (the last copy before
        # each commit dropped): the model is out of date.
        lines = text.splitlines()
        commits = [i for i, line in enumerate(lines) if "LDGDEPBAR" in line]
        dropped = {max(j for j in range(c) if "LDGSTS" in lines[j]) for c in commits}
        with open(broken, "w") as f:
            f.write("".join(line + "\n" for i, line in enumerate(lines) if i not in dropped))
        r = run(script, broken)
        assert r.returncode == 3 and "15 LDGSTS" in r.stderr, (r.returncode, r.stderr)
    print("kernel-model: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
