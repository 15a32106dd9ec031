#!/usr/bin/env bash
# gpu-check.sh [test] [bench] [e2e] [e2ebench]: every GPU test and benchmark of the CUDA policy path,
# on a machine with an NVIDIA GPU and no Go. Build the bundle where Go is (`make bundle-gpu`, which runs
# ../shared/tools/device-bundle -tags cuda ./policy/cuda ./e2e), carry bin/device to the GPU machine, run
#
#   scripts/gpu-check.sh            # all four parts, about 4 minutes on an H100 with 16 cores
#
# and bring back the logs (in $OUT, else bin/device/out). Benchmark outputs are cuda-bench.txt and
# e2e-bench.txt: `cat OUT/*-bench.txt | go run ./cmd/benchtab` prints their table where Go is.
#   test      policy/cuda: CPU/GPU equivalence (batch 1 to 8192), sampling, bad devices
#   bench     policy/cuda: rows/s of the GPU and CPU backends, the GPU's copy/kernel split
#   e2e       e2e.TestCUDATrial: cartpole-ppo-cuda through rlctl start, and a device that is not there
#   e2ebench  e2e.BenchmarkPipelineCUDA: 14 actors x 64 CartPoles, policy on cuda:0 vs the CPU
set -u
cd "$(dirname "$0")/.."
out=${OUT:-bin/device/out}; mkdir -p "$out"
R=bin/device/run
for g in bin/device/lib/*.gz; do [[ -e $g ]] && gunzip -f "$g"; done # make bundle-gpu packs large libraries
(($#)) || set -- test bench e2e e2ebench
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
status=0
for part in "$@"; do
  echo "== $part $(date +%T)"
  case $part in
  test) set -o pipefail; timeout 150 $R policy_cuda.test -test.v -test.timeout 140s 2>&1 | tee "$out/cuda-test.log" |
          grep -E -- '^--- |^ok|^PASS|^FAIL|actions differ|cuda:|panic|cuda_test' | tail -40 || status=1 ;;
  bench) timeout 150 $R policy_cuda.test -test.run '^$' -test.bench . -test.benchtime 1s -test.timeout 140s 2>&1 |
          tee "$out/cuda-bench.txt" | grep -E 'Benchmark|FAIL|panic' || status=1 ;;
  e2e) timeout 120 $R e2e.test -test.run TestCUDATrial -test.v -test.timeout 110s 2>&1 | tee "$out/e2e-test.log" |
          grep -E -- '--- |gpu_integration|^PASS|^FAIL|^ok|panic' | tail -30 || status=1 ;;
  e2ebench) timeout 200 $R e2e.test -test.run '^$' -test.bench BenchmarkPipelineCUDA -test.timeout 190s 2>&1 |
          tee "$out/e2e-bench.txt" | grep -E 'Benchmark|FAIL|panic|skip' || status=1 ;;
  *) echo "unknown part $part (test, bench, e2e, e2ebench)"; exit 2 ;;
  esac
done
echo "== done $(date +%T)"
exit $status
