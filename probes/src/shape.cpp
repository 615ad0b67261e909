// What a probe shape is and costs: its validation (messages name the flag), the bytes
// one decode call moves, and the bound the float64 reference check holds it to.
#include <cmath>

#include "../../kernels/paged_decode_params.hpp"
#include "inputs.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"
#include "kvsight/probes/probes.hpp"
#include "run_setup.hpp"

namespace kvsight::probes {

std::string supported_head_dims_text() { return kernels::head_dims_text(); }
std::string supported_block_sizes_text() { return kernels::block_sizes_text(); }
std::string stored_kv_dtype(const AttentionShape& shape) {
  return shape.kv_dtype == "auto" ? shape.dtype : shape.kv_dtype;
}

void validate_shape(const AttentionShape& shape) {
  if (!kernels::is_compiled_head_dim(shape.head_dim)) {
    throw InputError("--head-dim", std::to_string(shape.head_dim) +
                                       " not supported; allowed: " + kernels::head_dims_text());
  }
  if (shape.block_size < 1 || shape.block_size > detail::kMaxBlockSize) {
    throw InputError("--block-size", std::to_string(shape.block_size) +
                                         " not supported; allowed: " + kernels::block_sizes_text());
  }
  if (shape.kv_heads < 1 || shape.kv_heads > 1024) {
    throw InputError("--kv-heads", std::to_string(shape.kv_heads) + " out of range; allowed: 1..1024");
  }
  if (shape.q_heads < shape.kv_heads || shape.q_heads % shape.kv_heads != 0 ||
      shape.q_heads / shape.kv_heads > static_cast<std::uint32_t>(kernels::kMaxGqa)) {
    throw InputError("--q-heads",
                     std::to_string(shape.q_heads) + " with " + std::to_string(shape.kv_heads) +
                         " KV heads; allowed: a multiple of --kv-heads with q_heads / kv_heads in 1..16");
  }
  if (shape.batch < 1 || shape.batch > 4096) {
    throw InputError("--batch", std::to_string(shape.batch) + " out of range; allowed: 1..4096");
  }
  if (shape.context < 1 || shape.context > detail::kMaxContext) {
    throw InputError("--context", std::to_string(shape.context) + " out of range; allowed: 1..16777216");
  }
  if (shape.dtype != "bf16" && shape.dtype != "fp16") {
    throw InputError("--dtype", "'" + shape.dtype + "' not supported; allowed: bf16, fp16");
  }
  if (shape.kv_dtype != "auto" && shape.kv_dtype != "fp8_e4m3") {
    throw InputError("--kv-dtype", "'" + shape.kv_dtype +
                                       "' not supported; allowed: auto (the --dtype), fp8_e4m3 (fp8 K/V "
                                       "with per-tensor scales, q in --dtype)");
  }
}

void validate_kernel(const std::string& kernel) {
  if (kernel != "nosplit" && kernel != "splitkv") {
    throw InputError("--kernel", "'" + kernel + "' unknown; allowed: nosplit, splitkv");
  }
}

std::uint64_t attention_bytes(const AttentionShape& shape) {
  const std::uint64_t elem = detail::element_bytes(shape.dtype);
  // K and V at their own element size: 1 byte for fp8 (the per-tensor scales are
  // two kernel arguments, not memory traffic).
  const std::uint64_t kv = checked_mul(
      checked_mul(
          checked_mul(checked_mul(shape.context, shape.kv_heads, "K/V bytes"), shape.head_dim, "K/V bytes"),
          2 * detail::kv_element_bytes(shape), "K/V bytes"),
      shape.batch, "K/V bytes");
  const std::uint64_t tables =
      checked_mul(shape.batch, ceil_div(shape.context, shape.block_size) * 4, "tables");
  const std::uint64_t lengths = 4ull * shape.batch;
  const std::uint64_t q =
      checked_mul(static_cast<std::uint64_t>(shape.batch) * shape.q_heads, shape.head_dim * elem, "q");
  const std::uint64_t out =
      checked_mul(static_cast<std::uint64_t>(shape.batch) * shape.q_heads, shape.head_dim * 4ull, "out");
  return checked_add(checked_add(checked_add(kv, tables, "bytes"), lengths + q, "bytes"), out, "bytes");
}

// Relative error bound of the float64 check, from the fp32 accumulation
// (docs/reference/kernels.md "Check bound"). Inputs are exact in both dtypes (the
// reference reads the same 16-bit values), so the error is that of fp32
// arithmetic: the output is a softmax-weighted sum over `context` tokens whose
// rounding errors add as a random walk, about u x sqrt(n) relative (u = 2^-24),
// n = context + 128 (the head_dim-long dot products and the online-softmax
// rescales); x 16 for the exp and rescale roundings and headroom. At 32K tokens
// that is 16 x 2^-24 x sqrt(32896) = 1.7e-4; a dropped or repeated 32-token tile
// moves the output by about 1.4 / sqrt(context) relative (7.7e-3 at 32K), far
// above it up to about 1.5M tokens.
// fp8 K/V (--kv-dtype fp8_e4m3) changes none of this: the reference reads the same
// bytes, each decoded exactly (a 4-bit significand) and times the same float scale
// (a 4-bit by 24-bit product, exact in double), so both sides still start from
// identical inputs. The kernels fold the scales (q x (scale x k_scale), acc x
// v_scale): two fp32 roundings more per output, u each, far below the bound's
// 16 x u x sqrt(129) = 182 u at its smallest. The decoded values span [-1, 1]
// (K) and [-0.5, 0.5] (V), as the 16-bit inputs, so the dropped-tile argument holds.
double error_bound(const std::string& dtype, std::uint64_t context) {
  (void)dtype;
  return 16.0 * 0x1p-24 * std::sqrt(static_cast<double>(context) + 128.0);
}

}  // namespace kvsight::probes
