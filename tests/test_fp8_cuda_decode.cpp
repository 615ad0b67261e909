// The sm_89+ fp8 decode of the warp-split walk (kernels/warp_walker.cuh: cvt.rn.f16x2.e4m3x2
// through cuda_fp8.h's __nv_cvt_fp8x2_to_halfraw2, then fp16 -> fp32) against the kernels' own
// decode (kernels/fp8_e4m3.hpp), for every pair of bytes: the same fp32 bits for every finite
// value, NaN for NaN, and the low byte of the pair in the low half. Run through the intrinsic's
// host path, which cuda_fp8.hpp defines as the instruction's conversion; the GPU runs the
// instruction itself (scripts/device-check.sh's fp8 checks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <cuda_fp8.h>

#include "../kernels/fp8_e4m3.hpp"

namespace {

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

TEST(Fp8CudaDecode, EveryPairOfBytesDecodesAsTheKernelsDecode) {
  int mismatches = 0;
  for (unsigned pair = 0; pair < 65536; ++pair) {
    const __half2_raw halves = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
    const float2 values = __half22float2(__half2(halves));
    const float low = kvsight::kernels::fp8_e4m3_to_float(pair & 0xffu);
    const float high = kvsight::kernels::fp8_e4m3_to_float(pair >> 8);
    if (!same(values.x, low) || !same(values.y, high)) {
      if (++mismatches <= 5)
        ADD_FAILURE() << "bytes 0x" << std::hex << pair << ": " << values.x << ", " << values.y << " against "
                      << low << ", " << high;
    }
  }
  EXPECT_EQ(mismatches, 0);
  // The largest finite value and a subnormal, by hand: 0x7E = 2^8 x 1.75 = 448; 0x01 = 2^-9.
  const float2 edge = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(0x017e, __NV_E4M3)));
  EXPECT_EQ(edge.x, 448.0f);
  EXPECT_EQ(edge.y, std::ldexp(1.0f, -9));
}

}  // namespace
