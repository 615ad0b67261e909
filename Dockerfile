# The kvsight images the fleet Jobs run (scripts/cluster/preflight-job.yaml), built from this
# repository's own CMake build (the one scripts/setup.sh + scripts/test.sh drive; issue #23 item 6):
#
#   docker build --target cuda -t kvsight:0.1.0-cuda .    # NVIDIA: the Job kvsight-preflight-nvidia
#   docker build --target rocm -t kvsight:0.1.0-rocm .    # AMD:    the Job kvsight-preflight-amd
#
# Each target is two stages: a build stage with the vendor's compiler (nvcc / hipcc), CMake, Ninja,
# CLI11 and nlohmann-json (the tests are not built: -DKVSIGHT_BUILD_TESTS=OFF; CI tests the same
# sources), and a runtime stage that receives only the binary (and, for ROCm, the HIP probe module
# libkvsight_hip.so, which kvsight dlopens from its own directory: probes/src/registry.cpp).
#
# The images run as root: the GPU device nodes (/dev/kfd and /dev/dri/renderD* belong to the render
# and video groups) and a ReadWriteMany claim (NFS ignores fsGroup) are then usable without
# per-cluster group ids; the container does nothing but run kvsight.
#
# Driver requirement, NVIDIA: the binary links the CUDA 13 runtime statically, so the node's driver
# must run CUDA 13 programs: R580 or newer (CUDA 13.0 GA needs >= 580.65.06 on Linux; docs/reference/
# fleet.md "Image"). With an older driver `kvsight probe info` shows the cuda backend as "no device:
# CUDA driver version is insufficient for CUDA runtime version" and preflight falls back to the cpu.
# libcuda.so.1 and nvidia-smi come from the node: the NVIDIA Container Toolkit mounts them into the
# container (NVIDIA_DRIVER_CAPABILITIES=compute,utility, set by the nvidia/cuda base images).
# AMD: the ROCm runtime of the image (below) must be supported by the node's amdgpu kernel driver.
#
# Lint: hadolint (tests/test_fleet_lint.py, ctest fleet_lint; rules skipped are in .hadolint.yaml).

ARG CUDA_VERSION=13.0.1
ARG UBUNTU=ubuntu24.04
ARG ROCM_IMAGE=rocm/dev-ubuntu-24.04:6.4.1

# ---- NVIDIA: build with nvcc from the CUDA devel image.
FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build-cuda
# CUDA architectures of the probe kernels (probes/CMakeLists.txt KVSIGHT_CUDA_ARCHS: SASS for each,
# PTX of the newest for later GPUs).
ARG CUDA_ARCHS="80;90"
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      cmake ninja-build g++ libcli11-dev nlohmann-json3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# KVSIGHT_CUDA=ON: a missing nvcc is an error, never a silent cpu-only image. No -Werror here: CI
# builds the same sources with -Werror on g++ 12; the image's newer g++ may warn differently.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKVSIGHT_BUILD_TESTS=OFF -DKVSIGHT_CUDA=ON -DKVSIGHT_HIP=OFF "-DKVSIGHT_CUDA_ARCHS=${CUDA_ARCHS}" \
 && cmake --build /build --target kvsight \
 && /build/kvsight probe info

# ---- NVIDIA runtime: the CUDA base image (no toolkit; the static cudart is in the binary).
FROM nvidia/cuda:${CUDA_VERSION}-base-${UBUNTU} AS cuda
COPY --from=build-cuda /build/kvsight /usr/local/bin/kvsight
ENTRYPOINT ["/usr/local/bin/kvsight"]
CMD ["probe", "info"]

# ---- AMD: build with hipcc from a ROCm development image.
FROM ${ROCM_IMAGE} AS build-rocm
# HIP offload architectures (probes/CMakeLists.txt KVSIGHT_HIP_ARCHS): MI200, MI300, RDNA2, RDNA3.
ARG HIP_ARCHS="gfx90a;gfx942;gfx1030;gfx1100"
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      cmake ninja-build g++ libcli11-dev nlohmann-json3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKVSIGHT_BUILD_TESTS=OFF -DKVSIGHT_CUDA=OFF -DKVSIGHT_HIP=ON "-DKVSIGHT_HIP_ARCHS=${HIP_ARCHS}" \
 && cmake --build /build --target kvsight \
 && /build/kvsight probe info

# ---- AMD runtime: the same ROCm image (it holds libamdhip64, which the HIP module links).
FROM ${ROCM_IMAGE} AS rocm
COPY --from=build-rocm /build/kvsight /build/libkvsight_hip.so /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/kvsight"]
CMD ["probe", "info"]
