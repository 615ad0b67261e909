#pragma once
// Runner-side guard around any Backend: counts live device bytes (faults.hpp)
// and injects the testing faults of KVSIGHT_INJECT_FAULT / --inject-fault. It
// wraps the backend open_backend returns, so cpu, cuda and hip all honour it.
#include <cstdint>
#include <memory>
#include <string>

#include "backend.hpp"

namespace kvsight::probes::detail {

enum class FaultKind { none, alloc, kernel, verify };

struct FaultSpec {
  FaultKind kind = FaultKind::none;
  std::uint64_t nth = 1;  // fail on this occurrence (1-based)
  std::string source;     // "KVSIGHT_INJECT_FAULT" or "--inject-fault"
  std::string text;       // as given, e.g. "kernel:3"
};

// Parses "alloc|kernel|verify[:N]" or "none"/""; InputError naming `source`.
FaultSpec parse_fault(const std::string& text, const std::string& source);

// One run's fault plan: the override of set_injected_fault, else the
// environment variable; occurrence counters start at zero.
class FaultPlan {
 public:
  FaultPlan();
  // Counts one occurrence of `kind`; true exactly on the Nth of the injected kind.
  bool hit(FaultKind kind);
  // " (injected fault KVSIGHT_INJECT_FAULT=kernel:3)"
  std::string note() const;

 private:
  FaultSpec spec_;
  std::uint64_t seen_ = 0;
};

// Wraps `inner`: counted buffers, and injected alloc / kernel faults.
std::unique_ptr<Backend> guard_backend(std::unique_ptr<Backend> inner, FaultPlan& plan);

}  // namespace kvsight::probes::detail
