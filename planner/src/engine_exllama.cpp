// Placeholder while the exllama budget is written.
#include <memory>

#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
std::unique_ptr<Engine> make_exllama_engine(int) { throw InputError("--engine", "exllama budget not implemented yet"); }
}  // namespace kvsight
