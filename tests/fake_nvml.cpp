// A stand-in for libnvidia-ml.so.1 (tests/test_preflight_stopping.cpp loads it with
// dlopen through SurveyOptions::nvml_library): the few NVML entry points preflight
// uses, with the signatures and struct layouts of nvml.h (docs/reference/preflight.md),
// describing two H200s; device 1 has two compute processes, one of them the caller.
#include <unistd.h>

#include <cstring>

extern "C" {

struct FakeMemory {
  unsigned long long total, free, used;
};
struct FakeProcess {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  *device = reinterpret_cast<void*>(static_cast<unsigned long>(index) + 1);
  return 0;
}
static unsigned long index_of(void* device) { return reinterpret_cast<unsigned long>(device) - 1; }
int nvmlDeviceGetName(void*, char* name, unsigned int length) {
  std::strncpy(name, "NVIDIA H200", length);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* memory) {
  memory->total = 150754820096ull;
  memory->used = index_of(device) == 1 ? 3ull << 30 : 0;
  memory->free = memory->total - memory->used;
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(void*, int* major, int* minor) {
  *major = 9;
  *minor = 0;
  return 0;
}
int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::strncpy(version, "580.65.06", length);
  return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count, FakeProcess* infos) {
  if (index_of(device) == 0) {
    *count = 0;
    return 0;
  }
  if (*count < 2) {
    *count = 2;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  *count = 2;
  infos[0] = {4242u, 2ull << 30, 0, 0};
  infos[1] = {static_cast<unsigned int>(getpid()), 1ull << 30, 0, 0};  // the caller: not "another"
  return 0;
}
const char* nvmlErrorString(int) { return "fake"; }
}
