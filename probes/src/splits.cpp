// The probe kernels' split-KV geometry (splits.hpp).
#include "splits.hpp"

#include <algorithm>

#include "../../kernels/paged_decode_params.hpp"
#include "kvsight/checked.hpp"

namespace kvsight::probes::detail {

std::uint32_t session_max_splits(std::uint32_t requested, const SplitPlan& widest) {
  if (requested > 0) return requested;
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(widest.slots / widest.programs, 1, kernels::kMaxSplits));
}

std::uint64_t tokens_per_split(std::uint32_t requested, const SplitPlanInput& input,
                               std::uint64_t max_splits) {
  const std::uint64_t context = input.context;
  if (requested > 0) {
    const std::uint64_t splits = std::min<std::uint64_t>({requested, context, max_splits});
    return ceil_div(context, splits);
  }
  return std::max(plan_splits(input).tokens_per_split, ceil_div(context, max_splits));
}

}  // namespace kvsight::probes::detail
