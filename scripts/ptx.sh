#!/usr/bin/env bash
# ptx.sh [OUT]: compile the CUDA kernels to PTX (default: the committed nn/cuda/kernels.ptx, and then
# the host emulator's hash of their sources, scripts/emu-sources.sh).
# compute_70 (PTX ISA 7.8 with nvcc 11.8) runs on Volta and every GPU since: the driver JIT-compiles it
# for the GPU at hand (sm_90 on an H100). `make ptx` runs this; nn/cuda's TestPTXUpToDate compares.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc -ptx -arch=compute_70 -o "${1:-$root/nn/cuda/kernels.ptx}" "$root/nn/cuda/kernels.cu"
if [[ $# -eq 0 ]]; then "$root/scripts/emu-sources.sh"; fi
