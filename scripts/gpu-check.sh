#!/usr/bin/env bash
# gpu-check.sh [PART...]: every GPU test and benchmark, on a machine with an NVIDIA GPU and no Go. Build the
# bundle where Go is (`make bundle-gpu`: ../shared/tools/device-bundle -tags cuda ./policy/cuda ./algo/ppo
# ./algo/dqn ./e2e ./trainerworker ./nn), carry bin/device to the GPU machine, run
#
#   scripts/gpu-check.sh            # every part, about 10 minutes on an H100 with 16 cores
#
# and bring back the logs (in $OUT, else bin/device/out). Benchmark outputs are *-bench.txt:
# `cat OUT/*-bench.txt | go run ./cmd/benchtab` prints their table where Go is.
#   simd       nn: the vector paths of the C kernels (tanh, Adam, the elementwise loops, im2col, dense.c) on
#              this machine's CPU, every path it runs against Go's loops and the GEMM: the AVX-512 paths
#              where a development machine had AVX2 only (seconds)
#   test       policy/cuda: CPU/GPU equivalence of the policy (MLPs and conv nets, batch 1 to 8192), sampling
#   train      algo/ppo, algo/dqn: the PPO and DQN losses' gradients on the GPU against the CPU (batch 1 to
#              8192, MinAtar's network and a 512x512 MLP), 20 Adam steps, checkpoints GPU -> CPU -> GPU; the
#              updates whole on the device (TestCUDAWholeSteps, TestCUDAWholeUpdates) and one pass at a time;
#              trainerworker: a GPU trainer's checkpoint resumed on the CPU and back (TestCUDATrainsOnAnEngine)
#   bench      policy/cuda: rows/s of the GPU and CPU backends, the GPU's copy/kernel split
#   trainbench algo/ppo, algo/dqn: a MinAtar update's samples/s on the CPU learner and on the GPU, whole
#              (device=cuda) and one pass at a time with the loss on the host (device=cuda-stepwise)
#   intake     trainerworker: a PPO and a DQN trainer's intake on this machine's cores (learning aside),
#              in turn and overlapping: what a GPU trainer's process does on its CPU (about 40 s)
#   sink       scripts/cpu-sink.sh: cartpole-sink with 14 actors of 64 CartPoles on this machine's cores, its
#              policy workers colocated and a sink per 4 actors (issue 39's 16-core figure; about 40 s)
#   minatar    e2e.BenchmarkMinAtarCUDA: minatar-breakout-ppo-cuda (75 s; 45 s with the trainer in turn, 45 s with
#              it on the CPU), minatar-breakout-apex-cuda (45 s; 45 s in turn) and minatar-breakout-apex (45 s)
#   e2e        e2e.TestCUDATrial: cartpole-ppo-cuda through rlctl start, and a device that is not there
#   e2ebench   e2e.BenchmarkPipelineCUDA: 14 actors x 64 CartPoles, policy on cuda:0 vs the CPU
set -u
cd "$(dirname "$0")/.."
out=${OUT:-bin/device/out}; mkdir -p "$out"
R=bin/device/run
for g in bin/device/lib/*.gz; do [[ -e $g ]] && gunzip -f "$g"; done # make bundle-gpu packs large libraries
for g in bin/device/*.gz; do [[ -e $g ]] && gunzip -f "$g" && chmod +x "${g%.gz}"; done
[[ -e bin/device/rlctl ]] || ln -s rlctl-cuda bin/device/rlctl # make bundle-gpu leaves rlctl out for room
(($#)) || set -- simd test train bench trainbench intake sink minatar e2e e2ebench
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
scripts/cpu-line.sh $R rlctl | tee "$out/cpu.txt"
status=0
for part in "$@"; do
  echo "== $part $(date +%T)"
  case $part in
  simd) timeout 60 $R nn.test -test.run 'SIMD|Dense|Elementwise|Im2col|Tanh|Adam' -test.v -test.timeout 50s 2>&1 |
          tee "$out/nn-simd-test.log" | grep -E -- '^--- |^ok|^PASS|^FAIL|panic' | tail -20 || status=1 ;;
  test) set -o pipefail; timeout 150 $R policy_cuda.test -test.v -test.timeout 140s 2>&1 | tee "$out/cuda-test.log" |
          grep -E -- '^--- |^ok|^PASS|^FAIL|actions differ|cuda:|panic|cuda_test' | tail -40 || status=1 ;;
  train) for p in algo_ppo algo_dqn trainerworker; do
          timeout 240 $R $p.test -test.run CUDA -test.v -test.timeout 230s 2>&1 | tee "$out/$p-cuda-test.log" |
            grep -E -- '^(--- |    --- FAIL|ok|PASS|FAIL)|off by|panic' | tail -30 || status=1
        done ;;
  trainbench) for p in algo_ppo algo_dqn; do
          timeout 120 $R $p.test -test.run '^$' -test.bench UpdateMinAtar -test.timeout 110s 2>&1 |
            tee "$out/$p-bench.txt" | grep -E 'Benchmark|FAIL|panic' || status=1
        done ;;
  intake) timeout 120 $R trainerworker.test -test.run '^$' -test.bench 'Intake' -test.benchtime 2s -test.timeout 110s 2>&1 |
          tee "$out/intake-bench.txt" | grep -E 'Benchmark|FAIL|panic' || status=1 ;;
  sink) timeout 90 scripts/cpu-sink.sh 14 2>&1 | tee "$out/cpu-sink.txt" || status=1 ;;
  minatar) timeout 480 $R e2e.test -test.run '^$' -test.bench BenchmarkMinAtarCUDA -test.benchtime 1x -test.timeout 470s 2>&1 |
          tee "$out/minatar-bench.txt" | grep -E 'Benchmark|FAIL|panic|skip|exited' || status=1 ;;
  bench) timeout 150 $R policy_cuda.test -test.run '^$' -test.bench "${BENCH:-.}" -test.benchtime 0.5s -test.timeout 140s 2>&1 |
          tee "$out/cuda-bench.txt" | grep -E 'Benchmark|FAIL|panic' || status=1 ;;
  e2e) timeout 120 $R e2e.test -test.run '^TestCUDATrial$' -test.v -test.timeout 110s 2>&1 | tee "$out/e2e-test.log" |
          grep -E -- '--- |gpu_integration|^PASS|^FAIL|^ok|panic' | tail -30 || status=1 ;;
  e2ebench) timeout 200 $R e2e.test -test.run '^$' -test.bench BenchmarkPipelineCUDA -test.timeout 190s 2>&1 |
          tee "$out/e2e-bench.txt" | grep -E 'Benchmark|FAIL|panic|skip' || status=1 ;;
  *) echo "unknown part $part (test, train, bench, trainbench, intake, sink, minatar, e2e, e2ebench)"; exit 2 ;;
  esac
done
echo "== done $(date +%T)"
exit $status
