#!/usr/bin/env python3
"""scripts/device-check-peer.py's logic without torch or a GPU (issue #24 item 4): run against
stand-ins of torch and flashinfer (tests/fixtures/fake_torch, fake_flashinfer), it must choose the
peer as its header says, record every refusal, count bytes as kvsight's attention_bytes and
write kvsight's time over the peer's as the ratios. The times are the host clock's: only the
arithmetic on them is checked.

Usage: test_device_check_peer.py REPO_ROOT. Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile

repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
peer = os.path.join(repo, "scripts", "device-check-peer.py")
fixtures = os.path.join(repo, "tests", "fixtures")
failures = []


def check(what, condition):
    if not condition:
        failures.append(what)


def run(paths, kvsight_dir, extra=()):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, peer, "--contexts", "1000,2048", "--kvsight", kvsight_dir, *extra],
                          capture_output=True, text=True, env=env, timeout=120)
    try:
        return done.returncode, json.loads(done.stdout), done.stderr
    except ValueError:
        return done.returncode, {}, done.stderr + done.stdout


with tempfile.TemporaryDirectory() as tmp:
    # kvsight's sweep of the headline shape in this run: split-KV 5 us, no split 20 us at 1000 tokens.
    with open(os.path.join(tmp, "headline.json"), "w") as f:
        json.dump({"splitkv": {"kernel": "splitkv", "points": [{"context": 1000, "time_us": 5.0}]},
                   "nosplit": {"kernel": "nosplit", "points": [{"context": 1000, "time_us": 20.0}]}}, f)

    # 1. No flashinfer: torch SDPA, backend pinned and recorded.
    code, doc, err = run([os.path.join(fixtures, "fake_torch")], tmp)
    check(f"SDPA run exits 0 (got {code}: {err})", code == 0)
    if doc:
        check("flashinfer's absence is recorded", any("flashinfer not importable" in e for e in doc["errors"]))
        head = doc["shapes"]["headline"]
        p = head["points"][0]
        check("headline peer is SDPA", head["peer"].startswith("torch scaled_dot_product_attention"))
        check("headline runs on FLASH_ATTENTION, nothing refused", p.get("sdpa_backend") == "FLASH_ATTENTION"
              and p.get("refused") == [])
        # Bytes as kvsight counts them: K + V = 2 x batch 4 x 1000 tokens x 8 KV heads x 128 x 2 B
        # = 16,384,000; q in and out = 2 x 4 x 32 heads x 128 x 2 B = 65,536; 16,449,536 in all.
        check(f"headline bytes {p.get('bytes')} = 16,449,536", p.get("bytes") == 16_449_536)
        check("ratio split-KV = 5 us / peer time", abs(p["splitkv_over_peer"] - 5.0 / p["time_us"]) < 1e-12)
        check("ratio no split = 20 us / peer time", abs(p["nosplit_over_peer"] - 20.0 / p["time_us"]) < 1e-12)
        check("gbps = bytes / time", abs(p["gbps"] - p["bytes"] / (p["time_us"] * 1e3)) < 1e-9)
        check("no kvsight point at 2048: no ratio", head["points"][1]["splitkv_over_peer"] is None)
        cliff = doc["shapes"]["cliff"]["points"][0]
        # The planted refusal: FLASH_ATTENTION refuses head_dim 256, EFFICIENT_ATTENTION takes it.
        check("cliff falls to EFFICIENT_ATTENTION and records FLASH's refusal",
              cliff.get("sdpa_backend") == "EFFICIENT_ATTENTION" and len(cliff.get("refused", [])) == 1
              and cliff["refused"][0].startswith("FLASH_ATTENTION: No available kernel"))
        # Cliff bytes: 2 x 1 x 1000 x 2 x 256 x 2 = 2,048,000 + 2 x 1 x 12 x 256 x 2 = 12,288.
        check(f"cliff bytes {cliff.get('bytes')} = 2,060,288", cliff.get("bytes") == 2_060_288)
        check("both backends recorded", doc["sdpa_backends"] == ["EFFICIENT_ATTENTION", "FLASH_ATTENTION"])

    # 2. flashinfer importable: its paged decode; the cliff's GQA group 6 is refused by the CUDA-core
    #    decode and taken by the tensor-core path, and the refusal is recorded.
    code, doc, err = run([os.path.join(fixtures, "fake_torch"), os.path.join(fixtures, "fake_flashinfer")], tmp)
    check(f"flashinfer run exits 0 (got {code}: {err})", code == 0)
    if doc:
        check("flashinfer version recorded", doc.get("flashinfer") == "0.0-fake")
        check("headline on flashinfer's CUDA-core decode", doc["shapes"]["headline"]["peer"].startswith(
            "flashinfer BatchDecodeWithPagedKVCacheWrapper (NHD, page size 16"))
        check("cliff on the tensor-core path", "use_tensor_cores=True" in doc["shapes"]["cliff"]["peer"])
        check("the group-6 refusal is recorded",
              any(e.startswith("cliff: flashinfer refused context 1000") for e in doc["errors"]))
        # Paged bytes: the context's tokens only, as for SDPA (the last page's empty slots are not read).
        check("headline bytes as kvsight counts", doc["shapes"]["headline"]["points"][0].get("bytes") == 16_449_536)

    # 3. --peer flashinfer without the wheel: exit 1, saying why.
    code, doc, err = run([os.path.join(fixtures, "fake_torch")], tmp, ["--peer", "flashinfer"])
    check(f"--peer flashinfer without it exits 1 (got {code})", code == 1)
    check("and says flashinfer is not importable", any("flashinfer not importable" in e for e in doc.get("errors", [])))

if failures:
    for line in failures:
        print("FAIL: " + line)
    sys.exit(1)
print("ok: device-check-peer.py: SDPA pinned and recorded, flashinfer and its fallback, bytes and ratios")
