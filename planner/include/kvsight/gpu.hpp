#pragma once
// GpuSpec and the built-in GPU catalog (planner/data/gpus.json).
#include <cstdint>
#include <string>
#include <vector>

namespace kvsight {

struct GpuSpec {
  std::string id;      // "h200", "rx7900xt"
  std::string name;    // "NVIDIA H200 (SXM, 141 GB HBM3e)"
  std::string vendor;  // "nvidia" | "amd"
  std::string arch;    // "sm_90", "gfx1100"
  std::string family;  // vLLM gate family: "cuda", "gfx9", "gfx11", "gfx12", "gfx10"
  std::uint64_t memory_bytes = 0;  // total as the runtime reports it (torch.cuda.mem_get_info()[1])
  double bandwidth_gbps = 0.0;     // peak DRAM bandwidth, GB/s (10^9)
  std::uint32_t multiprocessors = 0;          // SMs (NVIDIA) or CUs (AMD)
  std::uint32_t runtime_multiprocessors = 0;  // what the runtime/torch reports (RDNA: WGPs = CUs/2)
  std::uint64_t l2_bytes = 0;                 // L2
  std::uint64_t last_level_cache_bytes = 0;   // L2, or Infinity Cache / MALL where larger
  double fp16_tflops = 0.0;                   // dense fp16/bf16 tensor peak
  // One memory pool shared with the CPU (GB10 / DGX Spark): the runtime's total and free figures
  // count what the OS and the page cache hold (docs/reference/gpu-names.md).
  bool unified_memory = false;
  std::string source;                         // where the figures come from
  std::string notes;
  // Other names users type for it (issue #22 item 6): short forms ("h100") and the names
  // nvidia-smi / rocm-smi print ("NVIDIA H100 80GB HBM3"); docs/reference/gpu-names.md.
  std::vector<std::string> aliases;
};

const std::vector<GpuSpec>& gpu_catalog();
// Throws InputError("--gpu", ...) listing the known ids.
const GpuSpec& find_gpu(const std::string& id);
// Comma list and "all".
std::vector<std::string> expand_gpu_list(const std::string& arg);

}  // namespace kvsight
