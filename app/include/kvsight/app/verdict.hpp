#pragma once
// What every use case's result means for the exit code, the same in every command
// (README "Exit codes"): 0 fits / a kernel is selected, 1 the engine would refuse to
// start or the requested concurrency or length does not fit, 2 bad input (thrown as
// InputError), 3 device error (DeviceError).
namespace kvsight::app {

enum class Verdict {
  ok = 0,
  check_failed = 1,
};

inline int exit_code(Verdict verdict) { return static_cast<int>(verdict); }
inline Verdict worst(Verdict a, Verdict b) { return a == Verdict::check_failed ? a : b; }

}  // namespace kvsight::app
