#!/usr/bin/env python3
"""The portable cpu kernel's clones hold the kernel (issue #24 item 5).

probes/src/cpu_kernel_portable.cpp clones attend_portable for x86-64-v3 and the baseline
(target_clones). A clone's target reaches only the code inlined into it: when the head-dim dispatch
and its lambda were called instead of inlined, both clones were ~350-byte stubs calling the same
baseline (SSE2) kernel, and the portable path ran at a quarter of its speed with no test noticing.
Here, from the static library's symbols (nm -S): each clone is at least 16 KiB (the kernel's three
head dims and four dtype pairs, inlined), and the v3 clone uses 256-bit FMA (vfmadd...ymm) while
the baseline one uses no ymm register. Skipped (77) where there are no clones (not x86-64 GCC) or
no nm / objdump.
Usage: test_portable_clones.py LIBKVSIGHT_PROBES.a"""
import re
import shutil
import subprocess
import sys

SYMBOL = "kvsight::probes::detail::attend_portable("


def main():
    library = sys.argv[1]
    if not shutil.which("nm") or not shutil.which("objdump"):
        print("skipped: no nm / objdump")
        return 77
    symbols = subprocess.run(["nm", "-S", "-C", library], capture_output=True, text=True, check=True).stdout
    clones = {}
    for line in symbols.splitlines():
        m = re.match(r"([0-9a-f]+) ([0-9a-f]+) t (.*)", line)
        if m and m.group(3).startswith(SYMBOL) and "[clone .cold]" not in m.group(3):
            for tag in ("arch_x86_64_v3", "default"):
                if m.group(3).endswith(f"[clone .{tag}]"):
                    clones[tag] = int(m.group(2), 16)
    if not clones:
        print("skipped: attend_portable is not cloned in this build")
        return 77
    assert set(clones) == {"arch_x86_64_v3", "default"}, clones
    for tag, size in clones.items():
        assert size >= 16384, f"clone .{tag} of attend_portable is {size} bytes: the kernel is not inlined into it"
    listing = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", library], capture_output=True, text=True,
                             check=True).stdout
    bodies, current = {}, None
    for line in listing.splitlines():
        m = re.match(r"[0-9a-f]+ <(.*)>:$", line)
        if m:
            name = m.group(1)
            current = None
            if name.startswith(SYMBOL) and "[clone .cold]" not in name:
                for tag in clones:
                    if name.endswith(f"[clone .{tag}]"):
                        current = tag
                        bodies[tag] = []
            continue
        if current:
            bodies[current].append(line)
    v3 = "\n".join(bodies.get("arch_x86_64_v3", []))
    base = "\n".join(bodies.get("default", []))
    assert re.search(r"vfmadd\w+\s+%ymm", v3), "the x86-64-v3 clone has no 256-bit FMA"
    assert "%ymm" not in base, "the baseline clone uses a 256-bit register"
    print(f"portable clones: v3 {clones['arch_x86_64_v3']:,} B, baseline {clones['default']:,} B: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
