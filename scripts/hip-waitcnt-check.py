#!/usr/bin/env python3
"""Does the HIP tile loop pipeline? Reads the AMDGPU assembly of the paged-decode
kernels (hipcc --cuda-device-only -S, one file per arch) and, per kernel instance,
counts in the tile loop the s_waitcnt vmcnt(0) and the counted vmcnt(N > 0), and
fails when the next tile's 16-byte loads are waited for before their data is
needed (issue #24 item 3).

  scripts/hip-waitcnt-check.py OUT.md ARCH=FILE.s [ARCH=FILE.s ...]

The tile loop: the outermost loop (LLVM's "=>This Loop Header: Depth=1") of a
paged_decode_{nosplit,splitkv} function with the most s_barrier. Its blocks are
walked in layout order; a 16-byte global load (global_load_dwordx4 /
global_load_b128 / buffer_load_dwordx4: a K/V copy of kernels/paged_decode.cuh
issue) adds one load in flight, s_waitcnt vmcnt(N) leaves at most N. A
vmcnt(0) while loads are in flight is
  - "store": the next instruction is the LDS store of the loaded data (store_next's
    last store: the data is needed there), fine;
  - "drain": anything else, e.g. a barrier: the next tile is waited for before the
    current one is used. Any drain fails the check (exit 1); a drain right before
    s_barrier is listed as such.
Layout order is not execution order, so this is a model of the loop, good for the
straight-line issue / consume / store_next body this kernel has.
Exit: 0 no drain, 1 a drain (or no decode kernel in a file, or no tile loop in one), 2 usage.
"""
import re
import subprocess
import sys

LOAD16 = re.compile(r"^\s*(global_load_dwordx4|global_load_b128|buffer_load_dwordx4|buffer_load_b128)\b")
LDS_STORE = re.compile(r"^\s*(ds_write|ds_store)")
WAIT = re.compile(r"^\s*s_waitcnt\b(.*)")
ANY_WAIT = re.compile(r"^\s*s_waitcnt")  # s_waitcnt, s_waitcnt_vscnt (gfx10+), ...
OTHER_LOAD = re.compile(r"^\s*(global|buffer|scratch|flat)_load")
VMCNT = re.compile(r"vmcnt\((\d+)\)")
BARRIER = re.compile(r"^\s*s_barrier\b")
LABEL = re.compile(r"^(\.LBB\d+_\d+):(.*)")
FUNCTION = re.compile(r"^(_Z\S*paged_decode_(?:nosplit|splitkv)\S*):")


def instructions(lines, keep_comment=False):
    """Lines that are instructions (no labels, directives or comment lines), comments cut
    unless keep_comment (a spill reload says "Reload" there)."""
    for line in lines:
        code = line.split(";")[0].rstrip()
        if not code.strip() or code.lstrip().startswith(".") or LABEL.match(code) or code.endswith(":"):
            continue
        yield line.rstrip() if keep_comment else code


def functions(path):
    current, body = None, []
    for line in open(path, errors="replace"):
        m = FUNCTION.match(line)
        if m:
            current, body = m.group(1), []
            continue
        if current is None:
            continue
        if line.startswith(".Lfunc_end"):
            yield current, body
            current = None
            continue
        body.append(line.rstrip("\n"))


def blocks(body):
    """(label, comment, lines) in layout order; the entry block has label None."""
    out, label, comment, lines = [], None, "", []
    for line in body:
        m = LABEL.match(line)
        if m:
            out.append((label, comment, lines))
            label, comment, lines = m.group(1)[2:], m.group(2), []  # ".LBB0_3" -> "BB0_3"
        else:
            lines.append(line)
    out.append((label, comment, lines))
    return out


def tile_loop(body):
    """Lines of the Depth=1 loop with the most barriers, in layout order."""
    bs = blocks(body)
    best = None
    for label, comment, _ in bs:
        if label is None or "=>This Loop Header: Depth=1" not in comment:
            continue
        member = [b for b in bs if b[0] == label or f"Header={label} " in b[1] + " " or
                  f"Parent Loop {label} " in b[1] + " "]
        lines = [line for b in member for line in b[2]]
        barriers = sum(1 for code in instructions(lines) if BARRIER.match(code))
        if barriers >= 2 and (best is None or barriers > best[0]):
            best = (barriers, lines)
    return best[1] if best else None


def check(lines):
    stats = {"barriers": 0, "zero": 0, "counted": 0, "zero_store": 0, "zero_idle": 0, "drains": 0,
             "barrier_drains": 0, "max_in_flight": 0, "loads": 0, "counted_values": set(), "drain_lines": []}
    code = list(instructions(lines))
    raw = list(instructions(lines, keep_comment=True))
    in_flight = 0
    last_other_load = ""
    for i, line in enumerate(code):
        if OTHER_LOAD.match(line) and not LOAD16.match(line) and in_flight:
            last_other_load = " ".join(raw[i].split())
        if LOAD16.match(line):
            in_flight += 1
            stats["loads"] += 1
            stats["max_in_flight"] = max(stats["max_in_flight"], in_flight)
            continue
        if BARRIER.match(line):
            stats["barriers"] += 1
            continue
        w = WAIT.match(line)
        if not w:
            continue
        m = VMCNT.search(w.group(1))
        if not m:
            continue
        n = int(m.group(1))
        if n > 0:
            stats["counted"] += 1
            stats["counted_values"].add(n)
        else:
            stats["zero"] += 1
            if in_flight == 0:
                stats["zero_idle"] += 1
            else:
                following = next((c for c in code[i + 1:] if not ANY_WAIT.match(c)), "")
                if LDS_STORE.match(following):
                    stats["zero_store"] += 1
                else:
                    stats["drains"] += 1
                    cause = f" (a later load to wait for: `{last_other_load}`)" if last_other_load else ""
                    stats["drain_lines"].append(f"`{line.strip()}` with {in_flight} loads in flight, then "
                                                f"`{following.strip()}`{cause}")
                    if BARRIER.match(following):
                        stats["barrier_drains"] += 1
        in_flight = min(in_flight, n)
        if in_flight == 0:
            last_other_load = ""
    return stats


def demangle(name):
    try:
        text = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
    except OSError:
        return name
    m = re.search(r"paged_decode_(nosplit|splitkv)<([^,]+), ([^,]+), (\d+), (\d+), (\d+)>", text)
    if not m:
        return text
    kv = "fp8_e4m3" if "fp8" in m.group(3) else ("bf16" if "bfloat" in m.group(3) else "fp16")
    q = "bf16" if "bfloat" in m.group(2) else "fp16"
    block = m.group(6) if m.group(6) != "0" else "runtime"
    return f"{m.group(1)} q {q} K/V {kv} hd{m.group(4)} group {m.group(5)} block {block}"


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out_path = argv[1]
    out = ["## HIP tile loop: waits on the next tile's loads (s_waitcnt vmcnt)\n",
           "Per arch and decode kernel instance, in the tile loop: 16-byte K/V loads, most in flight, "
           "vmcnt(0) waits (with loads in flight before their LDS store / with none in flight / drains: "
           "with loads in flight before anything else), counted vmcnt(N > 0) waits and their N, barriers. "
           "A drain fails the check (scripts/hip-waitcnt-check.py).\n"]
    failed = []
    for spec in argv[2:]:
        arch, path = spec.split("=", 1)
        rows, totals = [], {"instances": 0, "zero": 0, "counted": 0, "drains": 0, "barrier_drains": 0,
                        "draining": 0}
        for name, body in functions(path):
            loop = tile_loop(body)
            label = demangle(name)
            totals["instances"] += 1
            if loop is None:
                failed.append(f"{arch} {label}: no tile loop (Depth=1 loop with >= 2 s_barrier) found")
                continue
            s = check(loop)
            for k in ("zero", "counted", "drains", "barrier_drains"):
                totals[k] += s[k]
            if s["drains"]:
                totals["draining"] += 1
                failed.append(f"{arch} {label}: " + "; ".join(s["drain_lines"][:3]))
            rows.append((label, s))
        if totals["instances"] == 0:
            failed.append(f"{arch}: no paged_decode_nosplit / paged_decode_splitkv function in {path}")
        out.append(f"### {arch}: {totals['instances']} instances; vmcnt(0) {totals['zero']}, counted vmcnt(N>0) "
                   f"{totals['counted']}, drains {totals['drains']} (before s_barrier: {totals['barrier_drains']}) in "
                   f"{totals['draining']} instances\n")
        out.append("| instance | 16-B loads | most in flight | vmcnt(0): store / none in flight / drain | "
                   "counted vmcnt(N>0) (N) | barriers |")
        out.append("|---|---:|---:|---|---|---:|")
        for label, s in rows:
            if ("splitkv" in label and "block 16" in label and "q bf16" in label and
                    ("hd128 group 4" in label or "hd256 group 8" in label)) or s["drains"]:
                values = ",".join(str(v) for v in sorted(s["counted_values"], reverse=True))
                out.append(f"| {label} | {s['loads']} | {s['max_in_flight']} | {s['zero_store']} / {s['zero_idle']} / "
                           f"{s['drains']} | {s['counted']} ({values}) | {s['barriers']} |")
        out.append("")
    out.append("Result: " + ("FAIL\n\n" + "\n".join(f"- {f}" for f in failed[:40]) if failed else
                             "PASS (no vmcnt(0) with the next tile's loads in flight before their store)"))
    text = "\n".join(out) + "\n"
    open(out_path, "w").write(text)
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
