"""The dynamic shared memory of each decode walk, in bytes: sizeof of its Shared struct, one definition
for scripts/kernel-report.sh (CUDA occupancy) and scripts/amd-kernel-model.py (HIP occupancy).
tests/test_kernel_emulation.cpp checks both walks against sizeof for the instances it runs."""

TILE = 32  # kTileTokens
ROW_PAD_BYTES = 16  # kRowPadBytes


def tile_shared(head_dim, group, kv_bytes, stages):
    """DecodeShared (kernels/paged_decode.cuh, the shared-tile walk): `stages` K and V stages of 32 rows
    of head_dim x kv_bytes + 16 bytes (KVS_KV_STAGES: 2 on CUDA, 1 on HIP), q in fp32, two tiles of row
    offsets (8 B each), scores, and per head the running max, sum and rescale."""
    return (stages * 2 * TILE * (head_dim * kv_bytes + ROW_PAD_BYTES) + group * head_dim * 4 + 2 * TILE * 8
            + group * TILE * 4 + 3 * group * 4)


def warp_walk_fits(group, kv_bytes):
    """warp_walk_fits<KV, GROUP>() (kernels/warp_walker.cuh): the group's q and accumulators in registers."""
    return group * (16 // kv_bytes) <= 64


def warp_shared(head_dim, group, kv_bytes):
    """WarpShared (kernels/warp_walker.cuh): per warp two stages of K and V chunks of
    8 x 512 / (head_dim x kv_bytes) rows and two chunks' row offsets (8 B each), the warps' merged outputs
    sharing those bytes (a union), then per warp and head the max and sum, per head the program's max and
    sum."""
    rows = 8 * 512 // (head_dim * kv_bytes)
    stages = 4 * (2 * 2 * rows * head_dim * kv_bytes + 2 * rows * 8)
    return max(stages, 4 * group * head_dim * 4) + 2 * 4 * group * 4 + 2 * group * 4


def cuda_decode_shared(head_dim, group, kv_bytes):
    """The CUDA instance's walk (DecodeWalker, kernels/paged_decode.cuh) and its Shared."""
    if warp_walk_fits(group, kv_bytes):
        return warp_shared(head_dim, group, kv_bytes)
    return tile_shared(head_dim, group, kv_bytes, stages=2)
