// CPU discovery for the cpu backend (cpu_discovery.hpp): /proc/cpuinfo and
// /proc/meminfo, uname, the address-space limit, and sysfs's cache levels.
#include "cpu_discovery.hpp"

#include <sys/resource.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

namespace kvsight::probes::detail {
namespace {

std::string read_first(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::uint64_t parse_cache_size(const std::string& text) {
  if (text.empty()) return 0;
  std::uint64_t value = std::strtoull(text.c_str(), nullptr, 10);
  if (text.back() == 'K') value *= 1024;
  if (text.back() == 'M') value *= 1024 * 1024;
  return value;
}

}  // namespace

DeviceInfo describe_cpu(std::uint32_t threads) {
  DeviceInfo info;
  info.backend = "cpu";
  info.name = "cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && info.name == "cpu") info.name = value;
    if (key == "cpu MHz" && info.clock_mhz == 0) info.clock_mhz = std::atof(value.c_str());
  }
  struct utsname machine {};
  info.arch = uname(&machine) == 0 ? machine.machine : "unknown";
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::uint64_t kib = 0;
    std::string unit;
    meminfo >> kib >> unit;
    if (key == "MemTotal:") info.memory_total = kib * 1024;
    if (key == "MemAvailable:") info.memory_free = kib * 1024;
  }
  // Under an address-space limit (ulimit -v) only what is left of it can be
  // allocated: the probes' budget (a fraction of memory_free) then refuses a
  // shape up front with --max-mem named, instead of a failed allocation
  // mid-run (issue #14 item 6). Left: the limit less this process's mappings
  // (VmSize) less one default stack per thread still to start.
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    std::uint64_t mapped = 0;
    std::ifstream status("/proc/self/status");
    for (std::string key; status >> key;) {
      std::uint64_t kib = 0;
      if (key == "VmSize:" && status >> kib) mapped = kib * 1024;
      status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    rlimit stack{};
    const std::uint64_t stack_bytes =
        getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY ? stack.rlim_cur : (8u << 20);
    const std::uint64_t reserved = mapped + static_cast<std::uint64_t>(threads) * stack_bytes;
    const std::uint64_t limit = address_space.rlim_cur;
    info.memory_free = std::min<std::uint64_t>(info.memory_free, limit > reserved ? limit - reserved : 0);
  }
  // Largest cache level that sysfs lists for cpu0.
  int best_level = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_first(base + "level");
    if (level.empty()) continue;
    const int level_number = std::atoi(level.c_str());
    if (level_number >= best_level) {
      best_level = level_number;
      info.last_level_cache = parse_cache_size(read_first(base + "size"));
    }
  }
  info.multiprocessors = threads;
  info.wave_size = 1;
  return info;
}

}  // namespace kvsight::probes::detail
