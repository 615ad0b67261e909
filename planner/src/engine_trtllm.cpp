// Placeholder while the trtllm budget is written.
#include <memory>

#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
std::unique_ptr<Engine> make_trtllm_engine() { throw InputError("--engine", "trtllm budget not implemented yet"); }
}  // namespace kvsight
