#pragma once
// Runtime value -> compile-time constant, as flashinfer's DISPATCH_HEAD_DIM
// (include/flashinfer/utils.cuh): a switch over the supported set, and an error
// listing that set for anything else. Host code only.
#include <stdexcept>
#include <string>

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
                                  " not compiled; allowed: 64, 128, 256"); \
  }

// 8, 16, 32 get their own instances (vLLM CUDA paged_attention's block sizes,
// csrc/attention/paged_attention_v1.cu); any other size runs the runtime path
// (BLOCK_SIZE 0), e.g. 784 of hybrid models (docs/reference/cliff.md).
#define KVS_DISPATCH_BLOCK_SIZE(value, NAME, ...)                              \
  switch (value) {                                                             \
    case 8: {                                                                  \
      constexpr int NAME = 8;                                                  \
      __VA_ARGS__;                                                             \
      break;                                                                   \
    }                                                                          \
    case 16: {                                                                 \
      constexpr int NAME = 16;                                                 \
      __VA_ARGS__;                                                             \
      break;                                                                   \
    }                                                                          \
    case 32: {                                                                 \
      constexpr int NAME = 32;                                                 \
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
