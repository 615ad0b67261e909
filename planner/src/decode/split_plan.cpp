// The split-KV planner (rule and sources in kvsight/split_plan.hpp).
#include "kvsight/split_plan.hpp"

#include <algorithm>

#include "kvsight/checked.hpp"

namespace kvsight {

SplitPlan plan_splits(const SplitPlanInput& input) {
  SplitPlan plan;
  const std::uint64_t multiprocessors = std::max<std::uint32_t>(1, input.multiprocessors);
  const std::uint64_t ctas = std::max<std::uint32_t>(1, input.ctas_per_multiprocessor);
  plan.programs = checked_mul(std::max<std::uint64_t>(1, input.batch),
                              std::max<std::uint32_t>(1, input.kv_heads), "split plan programs");
  plan.slots = multiprocessors * ctas;  // both below 2^32: no overflow
  const std::uint64_t context = input.context;
  plan.tokens_per_split = std::max<std::uint64_t>(1, context);
  if (plan.programs >= plan.slots || context <= kSplitMinTokens) return plan;
  const std::uint64_t target = std::min<std::uint64_t>(plan.slots / plan.programs, kSplitMaxSplits);
  std::uint64_t tokens = ceil_div(context, target);
  tokens = ceil_div(tokens, kSplitTileTokens) * kSplitTileTokens;
  tokens = std::max(tokens, kSplitMinTokens);
  plan.tokens_per_split = tokens;
  plan.splits = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, ceil_div(context, tokens)));
  if (plan.splits == 1) plan.tokens_per_split = context;
  return plan;
}

}  // namespace kvsight
