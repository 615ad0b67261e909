#!/usr/bin/env python3
"""Golden outputs of every command in every format (issue #26 acceptance).

Every case below runs `kvsight ARGS --format F` for F in table, json, csv and markdown and
compares stdout and the exit code with tests/golden/<case>.<F>.txt, byte for byte. The files
were taken before the renderer rework of issue #26, so a refactor that changes one byte of any
command's output fails here; a change of output that is meant updates them with
`python3 tests/test_golden_outputs.py --update KVSIGHT_BINARY` (then read the diff).

Commands that measure on this machine (probe, cliff --measure-contexts, preflight) print timings
and the host's CPU name, so their bytes differ between runs: for those the golden file keeps
their shape only: the JSON key paths with their value types, and the header line of every
table (the line above a '---' rule; CSV's first line; markdown's header rows).

Usage: test_golden_outputs.py KVSIGHT_BINARY [--update]
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")
LOGS = os.path.join(ROOT, "tests", "fixtures", "logs")
FLEET = os.path.join(ROOT, "tests", "fixtures", "reports", "fleet")
FORMATS = ("table", "json", "csv", "markdown")


def log(name):
    return os.path.join(LOGS, name)


# (case name, arguments, measured). Paths are written relative to the repository root in the
# golden files ({root}), so a clone anywhere compares equal.
CASES = [
    ("models", ["models"], False),
    ("gpus", ["gpus"], False),
    ("plan-smollm3-h200", ["plan", "--model", "smollm3-3b", "--gpu", "h200"], False),
    ("plan-no-gpu", ["plan", "--model", "llama-3.1-8b", "--context", "8192", "--batch", "4"], False),
    ("plan-fleet", ["plan", "--model", "llama-3.1-8b,qwen3.6-27b", "--gpu", "h200,rtx4090", "--context", "32768"], False),
    ("plan-hybrid-tp2", ["plan", "--model", "qwen3.6-27b", "--gpu", "rx7900xt", "--tp", "2"], False),
    ("plan-mla-fp8", ["plan", "--model", "deepseek-r1", "--gpu", "h200", "--tp", "8", "--kv-cache-dtype", "fp8"], False),
    ("plan-sglang", ["plan", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--engine", "sglang"], False),
    ("plan-trtllm", ["plan", "--model", "gpt-oss-20b", "--gpu", "a100-80gb", "--engine", "trtllm"], False),
    ("plan-llamacpp", ["plan", "--model", "llama-3.1-8b", "--gpu", "rtx4090", "--engine", "llamacpp", "--ctx-size", "32768"], False),
    ("plan-exllamav2", ["plan", "--model", "llama-3.1-8b", "--gpu", "rtx4090", "--engine", "exllamav2"], False),
    ("plan-does-not-fit", ["plan", "--model", "llama-3.1-70b", "--gpu", "rtx4090"], False),
    ("inspect-smollm3", ["inspect", "--model", "smollm3-3b"], False),
    ("inspect-gemma3", ["inspect", "--model", "gemma-3-27b"], False),
    ("inspect-qwen36", ["inspect", "--model", "qwen3.6-27b"], False),
    ("inspect-deepseek", ["inspect", "--model", "deepseek-r1"], False),
    ("gates-cliff-case", ["gates", "--model", "qwen3.6-27b", "--gpu", "rx7900xt", "--tp", "2"], False),
    ("gates-h200", ["gates", "--model", "llama-3.1-8b", "--gpu", "h200"], False),
    ("gates-mi300x-sglang", ["gates", "--model", "qwen3-8b", "--gpu", "mi300x", "--engine", "sglang"], False),
    ("gates-refused", ["gates", "--model", "llama-3.1-8b", "--gpu", "mi300x", "--kv-cache-dtype", "nvfp4"], False),
    ("cliff-scenario", ["cliff", "--scenario", "vllm-50264"], False),
    ("cliff-model", ["cliff", "--model", "gemma-3-27b", "--gpu", "rx7900xt"], False),
    ("fit-readme", ["fit", "--model", "llama-3.1-8b", "--concurrency", "64", "--context", "32K", "--gpus", "h200,h100-sxm,l40s", "--top", "3"], False),
    ("fit-sglang", ["fit", "--model", "qwen3-8b", "--concurrency", "16", "--context", "8K", "--gpus", "rtx4090,l40s", "--engine", "sglang", "--top", "4"], False),
    ("explain-vllm", ["explain", "--log", log("vllm-lmcache-1739.log"), "--model", log("qwen3-14b.config.json"), "--engine-version", "0.11.0"], False),
    ("explain-vllm-gpu", ["explain", "--log", log("vllm-gptoss20b-a100.log"), "--model", "gpt-oss-20b", "--gpu", "a100-80gb"], False),
    ("explain-sglang", ["explain", "--log", log("sglang-21348.log"), "--model", log("qwen3-235b-a22b.config.json"), "--engine", "sglang"], False),
    ("explain-trtllm", ["explain", "--log", log("trtllm-224.log"), "--model", log("llama-2-7b.config.json"), "--engine", "trtllm"], False),
    ("explain-llamacpp", ["explain", "--log", log("llamacpp-kvcalc-llama3-8b.log"), "--model", "llama-3.1-8b", "--engine", "llamacpp"], False),
    ("report-merge", ["report", "merge", FLEET], False),
    ("probe-info", ["probe", "info"], True),
    ("probe-attention", ["probe", "attention", "--backend", "cpu", "--context", "1K", "--repeats", "3", "--warmup", "1"], True),
    ("probe-sweep", ["probe", "sweep", "--backend", "cpu", "--contexts", "512,1K", "--repeats", "3", "--warmup", "1"], True),
    ("probe-bandwidth", ["probe", "bandwidth", "--backend", "cpu", "--bytes", "64MiB", "--repeats", "3"], True),
    ("cliff-measured", ["cliff", "--model", "llama-3.1-8b", "--gpu", "h200", "--backend", "cpu", "--measure-contexts", "512,1K", "--repeats", "3"], True),
    ("preflight", ["preflight", "--model", "llama-3.1-8b", "--gpu", "h200", "--quick", "--backend", "cpu", "--quiet"], True),
]


def json_shape(value, path="$", out=None):
    """Every key path with its value type; array elements share the path 'x[]'."""
    if out is None:
        out = set()
    if isinstance(value, dict):
        out.add(path + ": object")
        for key, item in value.items():
            json_shape(item, path + "." + key, out)
    elif isinstance(value, list):
        out.add(path + ": array")
        for item in value:
            json_shape(item, path + "[]", out)
    else:
        kind = {bool: "bool", int: "number", float: "number", str: "string", type(None): "null"}[type(value)]
        out.add(path + ": " + kind)
    return out


def text_shape(text, fmt):
    """The header line of every table: above a '---' rule, CSV's first line, markdown header rows."""
    lines = text.split("\n")
    heads = []
    for i, line in enumerate(lines):
        rule = line.strip()
        if fmt == "markdown" and rule.startswith("|") and set(rule) <= set("|-: ") and "-" in rule:
            heads.append(lines[i - 1])
        elif fmt == "table" and rule and set(rule) <= set("- ") and rule.count("-") >= 3 and i > 0:
            heads.append(" ".join(lines[i - 1].split()))
    if fmt == "csv" and lines:
        heads.append(lines[0])
    return heads


def observed(binary, args, fmt, measured):
    run = subprocess.run([binary] + args + ["--format", fmt], capture_output=True, text=True, timeout=600)
    out = run.stdout.replace(ROOT + "/", "{root}/")
    # fit's JSON times its own search: the one timing in a deterministic command's output.
    out = re.sub(r'"search_ms": [0-9.e+-]+', '"search_ms": "(time)"', out)
    if measured:
        if fmt == "json":
            try:
                shape = sorted(json_shape(json.loads(run.stdout)))
            except ValueError as error:
                shape = ["not JSON: " + str(error)]
            out = "\n".join(shape) + "\n"
        else:
            out = "\n".join(text_shape(run.stdout, fmt)) + "\n"
    return "# exit %d\n%s" % (run.returncode, out)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary, update = sys.argv[1], "--update" in sys.argv[2:]
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    failed, compared = [], 0
    os.makedirs(GOLDEN, exist_ok=True)
    for name, args, measured in CASES:
        if only and name not in only:
            continue
        for fmt in FORMATS:
            path = os.path.join(GOLDEN, "%s.%s.txt" % (name, fmt))
            text = observed(binary, args, fmt, measured)
            compared += 1
            if update:
                with open(path, "w") as f:
                    f.write(text)
                continue
            expected = open(path).read() if os.path.exists(path) else "(no golden file)\n"
            if text != expected:
                failed.append(path)
                exp, got = expected.split("\n"), text.split("\n")
                first = next((i for i in range(max(len(exp), len(got)))
                              if i >= len(exp) or i >= len(got) or exp[i] != got[i]), 0)
                print("MISMATCH %s (line %d)\n  expected: %r\n  got:      %r" % (
                    os.path.relpath(path, ROOT), first + 1,
                    exp[first] if first < len(exp) else "(end)", got[first] if first < len(got) else "(end)"))
    if update:
        print("updated %d golden files" % compared)
        return 0
    print("%d passed, %d failed" % (compared - len(failed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
