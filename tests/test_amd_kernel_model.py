#!/usr/bin/env python3
"""scripts/amd-kernel-model.py (issue #24 item 1) on
  - hand-written gfx942 assembly of the two instances it models, whose every count is derived here
    from the loops written (trip counts from the kernel's source rules, cycles from the device
    constants the model documents);
  - the real gfx942 / gfx1100 assembly of the two instances (tests/fixtures/amdgpu/*.s.gz, cut from
    what scripts/kernel-report.sh compiles): the occupancy and HBM figures derived here by hand, and
    the loop structure the model relies on;
  - tile loops that do not match the model (no softmax loop, a missing p.V loop), and a compiler-stated
    occupancy that the model's VGPR constants do not give: refused, exit 3.
Usage: test_amd_kernel_model.py SCRIPT FIXTURE_DIR"""
import gzip
import os
import subprocess
import sys
import tempfile

HEADLINE = "_ZN7kvsight7kernels11hip_runtime20paged_decode_splitkvI12hip_bfloat16S3_Li128ELi4ELi16EEEvNS0_17PagedDecodeParamsENS0_11FastDividerE"
CLIFF = "_ZN7kvsight7kernels11hip_runtime20paged_decode_splitkvI12hip_bfloat16S3_Li256ELi8ELi16EEEvNS0_17PagedDecodeParamsENS0_11FastDividerE"


def function(name, n, k_reads, pv_loops, vgprs):
    """A tile loop of the model's shape. Instructions per block are listed so the test can count them."""
    L = []
    a = L.append
    a(f"{name}: ; @{name}")
    a("; %bb.0:")
    a("\ts_load_dwordx2 s[0:1], s[4:5], 0x0")
    a("\ts_waitcnt lgkmcnt(0)")
    # Tile loop head: 5 instructions, one global round trip (the block table) and one LDS one.
    a(f".LBB{n}_1:                             ; =>This Loop Header: Depth=1")
    a(f";     Child Loop BB{n}_2 Depth 2")
    a("\tglobal_load_dword v1, v[2:3], off")
    a("\ts_waitcnt vmcnt(0)")
    a("\tds_write_b64 v4, v[6:7]")
    a("\ts_waitcnt lgkmcnt(0)")
    a("\ts_barrier")
    # Next tile's loads, barrier (B): 4 instructions.
    a("\tglobal_load_dwordx4 v[8:11], v[2:3], off")
    a("\tglobal_load_dwordx4 v[12:15], v[2:3], off")
    a("\ts_waitcnt lgkmcnt(0)")
    a("\ts_barrier")
    # Score loop (depth 2): 1 instruction at its head, an inner loop of k_reads + 3 (a K chunk is read with
    # its 8 q floats: 3 16-byte reads a chunk), 2 at its latch
    # (whose LDS write the wait before the next barrier stalls on: one LDS round trip a pass).
    a(f".LBB{n}_2:                             ;   Parent Loop BB{n}_1 Depth=1")
    a(";                                       =>  This Loop Header: Depth=2")
    a("\tv_mov_b32_e32 v5, 0")
    a(f".LBB{n}_3:                             ;   Parent Loop BB{n}_1 Depth=1")
    a(f";                                         Parent Loop BB{n}_2 Depth=2")
    a(";                                       =>    This Inner Loop Header: Depth=3")
    for _ in range(k_reads):
        a("\tds_read_b128 v[16:19], v4")
    a("\ts_waitcnt lgkmcnt(0)")
    a("\tv_fmac_f32_e32 v5, v16, v17")
    a(f"\ts_cbranch_scc0 .LBB{n}_3")
    a(f"; %bb.4:                               ;   in Loop: Header=BB{n}_2 Depth=2")
    a("\tds_write_b32 v4, v5")
    a(f"\ts_cbranch_execnz .LBB{n}_2")
    a(f"; %bb.5:                               ;   in Loop: Header=BB{n}_1 Depth=1")
    a("\ts_waitcnt lgkmcnt(0)")
    a("\ts_barrier")
    # Softmax loop: 2 instructions; then barrier (D): 2.
    a(f".LBB{n}_6:                             ;   Parent Loop BB{n}_1 Depth=1")
    a(";                                       =>  This Inner Loop Header: Depth=2")
    a("\tv_exp_f32_e32 v6, v6")
    a(f"\ts_cbranch_execnz .LBB{n}_6")
    a(f"; %bb.7:                               ;   in Loop: Header=BB{n}_1 Depth=1")
    a("\ts_waitcnt lgkmcnt(0)")
    a("\ts_barrier")
    # One p.V loop per accumulator: 5 instructions, 1 token an iteration, one LDS round trip.
    for i in range(pv_loops):
        a(f".LBB{n}_{10 + i}:                            ;   Parent Loop BB{n}_1 Depth=1")
        a(";                                       =>  This Inner Loop Header: Depth=2")
        a("\tds_read_b32 v7, v4")
        a("\tds_read_u16 v8, v4")
        a("\ts_waitcnt lgkmcnt(0)")
        a("\tv_fmac_f32_e32 v9, v7, v8")
        a(f"\ts_cbranch_scc0 .LBB{n}_{10 + i}")
    # store_next and the latch: 6 instructions, one global round trip (the first wait; the second
    # waits for a load issued before that stall).
    a(f"; %bb.9:                               ;   in Loop: Header=BB{n}_1 Depth=1")
    a("\ts_waitcnt lgkmcnt(0)")
    a("\ts_barrier")
    a("\ts_waitcnt vmcnt(1)")
    a("\tds_write_b128 v4, v[8:11]")
    a("\ts_waitcnt vmcnt(0)")
    a(f"\ts_cbranch_scc0 .LBB{n}_1")
    a("; %bb.99:")
    a("\ts_endpgm")
    a(f".Lfunc_end{n}:")
    a(f"\t.amdhsa_kernel {name}")
    a("\t\t.amdhsa_group_segment_fixed_size 0")
    a(f"\t\t.amdhsa_next_free_vgpr {vgprs}")
    a("\t.end_amdhsa_kernel")
    return "\n".join(L) + "\n"


def run(script, *specs):
    return subprocess.run([sys.executable, script, *specs], capture_output=True, text=True, timeout=120)


def rows(stdout):
    return [[c.strip() for c in line.split("|")[1:-1]] for line in stdout.splitlines()
            if line.startswith("| MI300X") or line.startswith("| RX 7900 XT")]


def synthetic(script, d):
    # Headline: 16 K chunks of a 256-byte row, 4 chunks (12 reads) an inner iteration; 4 accumulators
    # (4 x 128 / 128). Cliff: 32 chunks, 4 an iteration; 16 accumulators (8 x 256 / 128).
    path = os.path.join(d, "synthetic.s")
    with open(path, "w") as f:
        f.write(function(HEADLINE, 0, 12, 4, 92) + function(CLIFF, 1, 12, 16, 152))
    r = run(script, f"gfx942={path}")
    assert r.returncode == 0, r.stderr
    head, cliff = rows(r.stdout)

    # Headline, wave64 so 2 waves, runtime group 4. Per wave and tile:
    #   score loop: 32 x 4 = 128 pairs; wave 0 (lanes 0-63) ceil(128 / 128) = 1 pass, wave 1 (64-127)
    #   ceil(64 / 128) = 1; inner loop 16 / 4 = 4 passes of 12 + 3 = 15 -> 1 + 60 + 2 = 63;
    #   softmax: ceil(4 / 2) = 2 for wave 0, ceil(3 / 2) = 2 for wave 1 -> 2 x 2 = 4;
    #   p.V: 4 loops x 32 tokens x 5 = 640; straight: 5 + 4 + 2 + 2 + 6 = 19 (the %bb.5 and %bb.7
    #   barriers and the latch block included). Total 63 + 4 + 640 + 19 = 726 a wave.
    assert head[3] == "726 / 726", head
    # Issue: 4 cycles an instruction (wave64 on a 16-lane SIMD): 2,904. LDS rows of DecodeShared:
    # 2 x 32 x (256 + 16) + 4 x 128 x 4 + 512 + 4 x 32 x 4 + 48 = 20,528 B, 20,992 allocated (512-byte
    # granule): 65,536 / 20,992 = 3 programs; VGPRs 92 -> 96, 512 / 96 = 5 waves a SIMD, 20 a CU,
    # 10 programs: LDS binds, 3.
    assert head[2] == "3 (20,528 B LDS, 92 VGPRs)", head
    assert head[4] == "2,904", head
    # VALU per wave: 1 (score head) + 4 x 1 (fmac) + 2 (exp) + 128 (p.V fmac) = 135; 6 waves on 4 SIMDs,
    # the busiest has 2: 2 x 135 x 4 = 1,080.
    assert head[5] == "1,080", head
    # LDS cycles per wave: ds_write_b64 64 x 8 / 128 = 4; 48 ds_read_b128 x 8 = 384; ds_write_b32 2;
    # p.V 128 x (2 + 2) = 512; ds_write_b128 8 -> 910; a program 2 x 910 = 1,820; 3 programs 5,460.
    assert head[6] == "5,460", head
    # DRAM: 3 x 2 x 32 x 128 x 2 = 49,152 bytes at 5.3e12 / 304 / 2.1e9 = 8.302 B a cycle: 5,920.
    assert head[7] == "5,920", head
    assert head[8] == "**100 %**, DRAM", head
    # Serial round trips per wave: LDS 1 (head) + 4 (inner loop) + 1 (score latch) + 128 (p.V) = 134;
    # global 1 + 1 = 2 (store_next's second wait is on a load issued before its first stall).
    # Latency binds above (5,920 - 2,904) / 134 = 22.5 cycles an LDS round trip; the global break-even
    # (5,920 - 2,904) / 2 cycles at 2.1 GHz = 718 ns.
    assert head[9] == "134 / 2" and head[10] == "LDS 22.5 cyc, global 718 ns", head
    # At 32 cycles: 2,904 + 134 x 32 = 7,192 -> 5,920 / 7,192 = 82 %; at 64: 11,480 -> 52 %;
    # at 128: 20,056 -> 30 %.
    assert head[11:] == ["82 %", "52 %", "30 %"], head

    # Cliff, runtime group 6 on the group-8 instance: score passes: 192 pairs, wave 0 ceil(192 / 128)
    # = 2, wave 1 ceil(128 / 128) = 1; inner 32 / 4 = 8 passes of 15; softmax ceil(6 / 2) = 3 and
    # ceil(5 / 2) = 3 passes of 2; p.V loops with an element of the 6 x 256 = 1,536 used: wave 0 loop i
    # runs when 128 i < 1,536, i < 12; wave 1 when 128 i + 64 < 1,536, i < 12: 12 x 32 x 5 = 1,920.
    # Wave 0: 2 x (1 + 120 + 2) + 6 + 1,920 + 19 = 2,191; wave 1: 123 + 6 + 1,920 + 19 = 2,068.
    assert cliff[3] == "2,191 / 2,068", cliff
    # LDS 2 x 32 x 528 + 8 x 256 x 4 + 512 + 8 x 32 x 4 + 3 x 8 x 4 = 33,792 + 8,192 + 512 + 1,024 + 96
    # = 43,616 B, 44,032 allocated: 1 program a CU.
    assert cliff[2] == "1 (43,616 B LDS, 152 VGPRs)", cliff
    # Issue, by barrier segments, the slower wave each: all but the score segment are equal, the
    # score segment differs by one pass (123 instructions): 2,191 x 4 = 8,764.
    assert cliff[4] == "8,764", cliff
    # DRAM 1 x 2 x 32 x 256 x 2 = 32,768 bytes / 8.302 = 3,947: issue binds, 3,947 / 8,764 = 45 %.
    assert cliff[7] == "3,947" and cliff[8] == "**45 %**, issue", cliff
    assert cliff[10] == "any (issue binds)", cliff

    # --all: every instance in the file at its full group. The headline instance's group is 4 either way:
    # the row above. The cliff instance at group 8: 256 pairs, ceil(256 / 128) = 2 passes for wave 0 and
    # ceil(192 / 128) = 2 for wave 1; softmax ceil(8 / 2) = 4 passes of 2; all 16 p.V loops run for both
    # waves (128 i + 64 < 2,048): 16 x 32 x 5 = 2,560. A wave: 2 x 123 + 8 + 2,560 + 19 = 2,833, issue
    # 11,332 cycles against 3,947 of DRAM: 35 %, issue. LDS round trips: 1 (head) + 8 + 8 (the inner
    # iterations; the first pass's latch write completes with the second pass's first reads, one wait) + 1
    # (the second latch write) + 512 = 530; at 64 cycles 11,332 + 530 x 64 = 45,252: 3,947 / 45,252 = 9 %.
    r = run(script, f"gfx942={path}", "--all")
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("Every split-KV instance", 1)[1]
    assert "| bf16 | 128 | 4 | 100 %, DRAM; 134; 52 % |" in table, table
    assert "| bf16 | 256 | 8 | 35 %, issue; 530; 9 % |" in table, table
    assert table.count("\n| bf16 |") == 2 and "fp8" not in table, table


def fixtures(script, fixture_dir):
    gfx942 = os.path.join(fixture_dir, "splitkv-gfx942.s.gz")
    gfx1100 = os.path.join(fixture_dir, "splitkv-gfx1100.s.gz")
    r = run(script, f"gfx942={gfx942}", f"gfx1100={gfx1100}")
    assert r.returncode == 0, r.stderr
    mi_head, mi_cliff, rx_head, rx_cliff = rows(r.stdout)
    # Occupancy as above: 3 programs at the headline, 1 at the cliff, on both (64 KiB of LDS a CU).
    assert mi_head[2].startswith("3 (20,528 B LDS") and rx_head[2].startswith("3 (20,528 B LDS"), (mi_head, rx_head)
    assert mi_cliff[2].startswith("1 (43,616 B LDS") and rx_cliff[2].startswith("1 (43,616 B LDS"), mi_cliff
    # DRAM cycles: MI300X as above; RX 7900 XT 0.8e12 / 84 / 2.4e9 = 3.968 B a cycle: 3 x 16,384 / 3.968
    # = 12,386 and 32,768 / 3.968 = 8,258.
    assert mi_head[7] == "5,920" and mi_cliff[7] == "3,947", (mi_head, mi_cliff)
    assert rx_head[7] == "12,386" and rx_cliff[7] == "8,258", (rx_head, rx_cliff)
    # gfx1100 is wave32: 4 waves a program, instructions listed per wave.
    assert len(rx_head[3].split(" / ")) == 4 and len(mi_head[3].split(" / ")) == 2, (rx_head, mi_head)

    # The structure the model relies on, read from the fixture directly: the headline's tile loop has
    # a full-tile p.V loop of 16 tokens (16 V reads an iteration) next to a partial-tile one of 1 per
    # accumulator (4 accumulators): 8 depth-2 loops with V reads.
    with gzip.open(gfx942, "rt") as f:
        text = f.read()
    body = text.split(HEADLINE + ":", 1)[1].split(".Lfunc_end", 1)[0]
    loops = body.split("This Inner Loop Header: Depth=2")[1:]
    v_loops = [chunk.split("Loop Header")[0].count("ds_read_u16 ") for chunk in loops]
    assert sorted(n for n in v_loops if n) == [1, 1, 1, 1, 16, 16, 16, 16], v_loops

    # Refused: the softmax loop's v_exp_f32 gone (the loop is no longer one the model knows).
    with tempfile.TemporaryDirectory() as d:
        broken = os.path.join(d, "broken.s")
        with open(broken, "w") as f:
            f.write(text.replace("v_exp_f32", "v_rcp_f32"))
        r = run(script, f"gfx942={broken}")
        assert r.returncode == 3 and "holds none of" in r.stderr, (r.returncode, r.stderr)
        # A p.V loop fewer than the accumulators (its V reads turned into b32 reads): refused.
        first = body.split("ds_read_u16 ", 1)
        with open(broken, "w") as f:
            f.write(text.replace(body, first[0] + "ds_read_b32 " + first[1].replace("ds_read_u16 ", "ds_read_b32 ", 0)))
        r = run(script, f"gfx942={broken}")
        assert r.returncode == 3, (r.returncode, r.stderr)
        # The compiler's stated occupancy differing from the model's VGPR constants: refused. The
        # headline's 108 VGPRs round to 112; 512 / 112 = 4 waves a SIMD, as the fixture states.
        assert "; Occupancy: 4\n" in text, "the fixture's headline occupancy"
        with open(broken, "w") as f:
            f.write(text.replace("; Occupancy: 4\n", "; Occupancy: 5\n", 1))
        r = run(script, f"gfx942={broken}")
        assert r.returncode == 3 and "device constants" in r.stderr, (r.returncode, r.stderr)


def main():
    script, fixture_dir = sys.argv[1], sys.argv[2]
    assert run(script).returncode == 2
    assert run(script, "gfx90a=x.s").returncode == 2
    # An assembly file that cannot be read: exit 2 naming the argument, no traceback.
    r = run(script, "gfx942=/nonexistent/x.s")
    assert r.returncode == 2 and "gfx942=/nonexistent/x.s" in r.stderr and "Traceback" not in r.stderr, r.stderr
    with tempfile.TemporaryDirectory() as d:
        synthetic(script, d)
    fixtures(script, fixture_dir)
    print("amd-kernel-model: synthetic and fixture checks passed")


if __name__ == "__main__":
    main()
