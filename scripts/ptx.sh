#!/usr/bin/env bash
# ptx.sh [OUT]: compile the CUDA kernels to PTX (default: the committed nn/cuda/kernels.ptx).
# compute_70 (PTX ISA 7.8 with nvcc 11.8) runs on Volta and every GPU since: the driver JIT-compiles it
# for the GPU at hand (sm_90 on an H100). `make ptx` runs this; nn/cuda's TestPTXUpToDate compares.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec nvcc -ptx -arch=compute_70 -o "${1:-$root/nn/cuda/kernels.ptx}" "$root/nn/cuda/kernels.cu"
