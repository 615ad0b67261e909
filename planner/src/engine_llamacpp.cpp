// Placeholder while the llamacpp budget is written.
#include <memory>

#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
std::unique_ptr<Engine> make_llamacpp_engine() { throw InputError("--engine", "llamacpp budget not implemented yet"); }
}  // namespace kvsight
