// A stand-in for librocm_smi64.so (tests/test_preflight_stopping.cpp): the ROCm SMI
// entry points preflight uses, with rocm_smi.h's signatures (docs/reference/preflight.md),
// describing one RX 7900 XT with 1 GiB of VRAM in use.
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {

int rsmi_init(std::uint64_t) { return 0; }
int rsmi_shut_down() { return 0; }
int rsmi_num_monitor_devices(std::uint32_t* count) {
  *count = 1;
  return 0;
}
int rsmi_dev_name_get(std::uint32_t, char* name, std::size_t length) {
  std::strncpy(name, "AMD Radeon RX 7900 XT", length);
  return 0;
}
int rsmi_dev_memory_total_get(std::uint32_t, int type, std::uint64_t* total) {
  if (type != 0) return 2;  // only RSMI_MEM_TYPE_VRAM
  *total = 21458059264ull;
  return 0;
}
int rsmi_dev_memory_usage_get(std::uint32_t, int type, std::uint64_t* used) {
  if (type != 0) return 2;
  *used = 1ull << 30;
  return 0;
}
int rsmi_version_str_get(int component, char* text, std::uint32_t length) {
  if (component != 0) return 2;  // RSMI_SW_COMP_DRIVER
  std::strncpy(text, "6.8.5", length);
  return 0;
}
}
