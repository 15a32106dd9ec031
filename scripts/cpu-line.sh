#!/usr/bin/env bash
# cpu-line.sh [RLCTL...]: one line naming this machine's CPU for the figures measured on it: cores, model,
# family and model numbers, its widest vectors (AVX-512, or AVX2 only) and the OpenBLAS kernels distrl's
# networks run on there (the last core OpenBLAS reports, after distrl replaces a Prescott fallback: nn's
# openblas_core.c). RLCTL is how to run rlctl (default bin/rlctl; bin/device/run rlctl on a device machine).
set -u
(($#)) || set -- bin/rlctl
flags=$(grep -m1 '^flags' /proc/cpuinfo)
vec="no AVX2"
if [[ $flags == *" avx512f "* ]]; then vec=AVX-512; elif [[ $flags == *" avx2 "* ]]; then vec="AVX2 only"; fi
core=$(OPENBLAS_VERBOSE=2 "$@" --help 2>&1 | sed -n 's/^Core: //p' | tail -1)
echo "cpu: $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
  "(family $(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' '));" \
  "$vec; OpenBLAS kernels ${core:-unknown}${OPENBLAS_CORETYPE:+ (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)}"
