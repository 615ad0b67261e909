#pragma once
// Runtime value -> compile-time constant, as flashinfer's DISPATCH_HEAD_DIM
// (include/flashinfer/utils.cuh): a switch over the supported set, and an error
// listing that set for anything else. Host code only.
#include <stdexcept>
#include <string>

#include "paged_decode_params.hpp"

// The cases below are the list of kHeadDims and kCompiledBlockSize (paged_decode_params.hpp).
static_assert(sizeof(::kvsight::kernels::kHeadDims) / sizeof(int) == 3 && ::kvsight::kernels::kHeadDims[0] == 64 &&
                  ::kvsight::kernels::kHeadDims[1] == 128 && ::kvsight::kernels::kHeadDims[2] == 256,
              "KVS_DISPATCH_HEAD_DIM's cases are kHeadDims");
static_assert(::kvsight::kernels::kCompiledBlockSize == 16, "KVS_DISPATCH_BLOCK_SIZE's case is kCompiledBlockSize");

#define KVS_DISPATCH_HEAD_DIM(value, NAME, ...)                            \
  switch (value) {                                                         \
    case 64: {                                                             \
      constexpr int NAME = 64;                                             \
      __VA_ARGS__;                                                         \
      break;                                                               \
    }                                                                      \
    case 128: {                                                            \
      constexpr int NAME = 128;                                            \
      __VA_ARGS__;                                                         \
      break;                                                               \
    }                                                                      \
    case 256: {                                                            \
      constexpr int NAME = 256;                                            \
      __VA_ARGS__;                                                         \
      break;                                                               \
    }                                                                      \
    default:                                                               \
      throw std::invalid_argument("head_dim " + std::to_string(value) +    \
                                  " not compiled; allowed: " +            \
                                  ::kvsight::kernels::head_dims_text());  \
  }

// Block size 16 (vLLM's default block size, vllm/config/cache.py, and the one its
// ROCm custom kernel requires on RDNA, docs/reference/gates.md) gets its own instance;
// every other size 1..4096 (8, 32, 784 of hybrid models: docs/reference/cliff.md) runs
// the runtime instance (BLOCK_SIZE 0), which divides by a FastDivider
// (kernels/fast_divider.hpp) once per tile row.
#define KVS_DISPATCH_BLOCK_SIZE(value, NAME, ...)                              \
  switch (value) {                                                             \
    case 16: {                                                                 \
      constexpr int NAME = 16;                                                 \
      __VA_ARGS__;                                                             \
      break;                                                                   \
    }                                                                          \
    default: {                                                                 \
      if ((value) < 1) throw std::invalid_argument("block_size must be >= 1"); \
      constexpr int NAME = 0;                                                  \
      __VA_ARGS__;                                                             \
      break;                                                                   \
    }                                                                          \
  }

// GQA group (query heads per KV head, 1..kMaxGqa) -> the smallest compiled group
// that holds it (1, 2, 4, 8, 16), so that accumulators and shared memory are sized
// to the group, not to kMaxGqa (FlashInfer dispatches GROUP_SIZE the same way,
// include/flashinfer/utils.cuh DISPATCH_GQA_GROUP_SIZE).
#define KVS_DISPATCH_GROUP_CASE(LIMIT, NAME, ...) \
  if ((value_group) <= LIMIT) {                   \
    constexpr int NAME = LIMIT;                   \
    __VA_ARGS__;                                  \
    break;                                        \
  }
#define KVS_DISPATCH_GROUP(value, NAME, ...)                                   \
  do {                                                                         \
    const int value_group = (value);                                           \
    if (value_group < 1 || value_group > 16)                                   \
      throw std::invalid_argument("GQA group " + std::to_string(value_group) + \
                                  " not compiled; allowed: 1..16");            \
    KVS_DISPATCH_GROUP_CASE(1, NAME, __VA_ARGS__)                              \
    KVS_DISPATCH_GROUP_CASE(2, NAME, __VA_ARGS__)                              \
    KVS_DISPATCH_GROUP_CASE(4, NAME, __VA_ARGS__)                              \
    KVS_DISPATCH_GROUP_CASE(8, NAME, __VA_ARGS__)                              \
    KVS_DISPATCH_GROUP_CASE(16, NAME, __VA_ARGS__)                             \
  } while (false)

#define KVS_DISPATCH_DTYPE(value, TYPE, ...)                                  \
  switch (value) {                                                            \
    case ::kvsight::kernels::ElementType::fp16: {                             \
      using TYPE = kvs_half;                                                  \
      __VA_ARGS__;                                                            \
      break;                                                                  \
    }                                                                         \
    case ::kvsight::kernels::ElementType::bf16: {                             \
      using TYPE = kvs_bf16;                                                  \
      __VA_ARGS__;                                                            \
      break;                                                                  \
    }                                                                         \
    default:                                                                  \
      throw std::invalid_argument("dtype not compiled; allowed: fp16, bf16"); \
  }

// K/V storage: the q type (TYPE) or fp8 E4M3 bytes (kvs_fp8_e4m3, portability.cuh).
#define KVS_DISPATCH_KV_TYPE(value, TYPE, KV_TYPE, ...)                                   \
  switch (value) {                                                                        \
    case ::kvsight::kernels::KvType::same_as_q: {                                         \
      using KV_TYPE = TYPE;                                                               \
      __VA_ARGS__;                                                                        \
      break;                                                                              \
    }                                                                                     \
    case ::kvsight::kernels::KvType::fp8_e4m3: {                                          \
      using KV_TYPE = kvs_fp8_e4m3;                                                       \
      __VA_ARGS__;                                                                        \
      break;                                                                              \
    }                                                                                     \
    default:                                                                              \
      throw std::invalid_argument("K/V type not compiled; allowed: same as q, fp8_e4m3"); \
  }
