#!/usr/bin/env python3
"""Rewrites README.md's kvsight examples from the built binary.

Every fenced block whose first line is "$ kvsight ARGS" gets the stdout of `kvsight ARGS`
(tests/test_readme_examples.cpp compares them byte for byte). A block ending with "..." keeps
as many output lines as it shows now, then "...". Usage, from the repository root:

    python3 scripts/readme-examples.py [--binary build/kvsight] [--check]

--check changes nothing and exits 1 when a block is stale (what the test checks).
"""
import argparse
import pathlib
import shlex
import subprocess
import sys


def run(binary, command):
    args = shlex.split(command)[1:]  # drop "kvsight"
    done = subprocess.run([binary] + args, capture_output=True, text=True, timeout=120)
    if done.returncode > 1:
        sys.exit(f"readme-examples: `{command}` exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout.splitlines()


def rewrite(lines, binary):
    out, i, stale = [], 0, []
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if not line.startswith("```") or i >= len(lines) or not lines[i].startswith("$ kvsight "):
            continue
        command = lines[i][2:]
        out.append(lines[i])
        start = i + 1
        end = start
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        old = lines[start:end]
        new = run(binary, command)
        if old and old[-1] == "...":
            new = new[: len(old) - 1] + ["..."]
        if new != old:
            stale.append(f"README.md:{i + 1}: {command}")
        out.extend(new)
        i = end
    return out, stale


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default="build/kvsight")
    parser.add_argument("--check", action="store_true")
    options = parser.parse_args()
    readme = pathlib.Path("README.md")
    lines = readme.read_text().splitlines()
    new, stale = rewrite(lines, options.binary)
    for s in stale:
        print(("stale: " if options.check else "updated: ") + s)
    if options.check:
        sys.exit(1 if stale else 0)
    readme.write_text("\n".join(new) + "\n")


if __name__ == "__main__":
    main()
