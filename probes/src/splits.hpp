#pragma once
// The split-KV geometry of the probe kernels (splits.cpp): how many splits a session
// allocates partials for, and the tokens per split at a context. --splits fixes the
// count; 0 asks the planner's one split heuristic (kvsight::plan_splits,
// kvsight/split_plan.hpp) with the kernel's occupancy, as the decode model does.
#include <cstdint>

#include "kvsight/split_plan.hpp"

namespace kvsight::probes::detail {

// The most splits any context of a session can get: --splits, else one wave of slots
// at its longest context (widest = plan_splits at that context), 1..kMaxSplits.
std::uint32_t session_max_splits(std::uint32_t requested, const SplitPlan& widest);

// Tokens per split at input.context: ceil(context / min(--splits, context, max_splits)),
// else the plan's, never more splits than max_splits.
std::uint64_t tokens_per_split(std::uint32_t requested, const SplitPlanInput& input,
                               std::uint64_t max_splits);

}  // namespace kvsight::probes::detail
