// The backends this build holds. A backend whose compiler was absent at build
// time has a stub here that says so; compiled ones come from their own files.
#include "backend.hpp"
#include "kvsight/error.hpp"

namespace kvsight::probes::detail {
namespace {
[[maybe_unused]] BackendInfo not_compiled(const std::string& name) {
  BackendInfo out;
  out.name = name;
  out.compiled = false;
  out.status = "not compiled in this build";
  return out;
}
[[noreturn, maybe_unused]] void throw_not_compiled(const std::string& name) {
  throw DeviceError(name +
                    " backend not compiled in this build (its compiler was not found at configure time)");
}
}  // namespace

#if !KVSIGHT_PROBES_HAVE_CUDA
BackendInfo cuda_discover() { return not_compiled("cuda"); }
std::unique_ptr<Backend> cuda_open(int) { throw_not_compiled("cuda"); }
#endif
#if !KVSIGHT_PROBES_HAVE_HIP
BackendInfo hip_discover() { return not_compiled("hip"); }
std::unique_ptr<Backend> hip_open(int) { throw_not_compiled("hip"); }
#endif

}  // namespace kvsight::probes::detail

namespace kvsight::probes {
std::vector<BackendInfo> list_backends() {
  return {detail::cuda_discover(), detail::hip_discover(), detail::cpu_discover()};
}
}  // namespace kvsight::probes
