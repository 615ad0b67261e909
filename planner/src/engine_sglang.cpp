// Placeholder while the sglang budget is written.
#include <memory>

#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
std::unique_ptr<Engine> make_sglang_engine() { throw InputError("--engine", "sglang budget not implemented yet"); }
}  // namespace kvsight
