#!/usr/bin/env bash
# cpu-scale.sh [scale] [learn] [kernels] [policy] [ppo]: issue 24's CPU figures on a many-core machine
# without Go (the device tool's 16-core machine). Build the bundle where Go is (`make bundle-cpu`), carry
# bin/device there, run
#
#   scripts/cpu-scale.sh        # all five parts, about 5 minutes on 16 cores
#
# and bring back $OUT (else bin/device/out): cpu-bench.txt holds every benchmark's output, and
# `go run ./cmd/benchtab < OUT/cpu-bench.txt` prints their table where Go is.
#   scale    e2e.BenchmarkPipelineScale (1-14 actors x 64 CartPoles, 1, 2 or 4 policy workers) and the single loop
#   learn    e2e.BenchmarkLearnCartPole (median of 5 seeds) and rlctl start cartpole-ppo, median of 5
#   kernels  nn: forward and forward+backward rows/s on one core, native kernels against gonum's
#   policy   policyworker: a policy worker's rows/s, threads 1, 2 and 4
#   ppo      algo/ppo: PPO update samples/s, threads 1, 2 and 4
set -u
cd "$(dirname "$0")/.."
out=${OUT:-bin/device/out}; mkdir -p "$out"
R=bin/device/run
for g in bin/device/lib/*.gz; do [[ -e $g ]] && gunzip -f "$g"; done # make bundle-cpu packs large libraries
(($#)) || set -- scale learn kernels policy ppo
scripts/cpu-line.sh $R rlctl | tee "$out/cpu.txt"
bench=$out/cpu-bench.txt
status=0
# run PKG TIMEOUT ARGS...: one test binary's benchmarks, appended to $bench (with their pkg: lines).
run() {
  local pkg=$1 t=$2; shift 2
  (cd "$pkg" && timeout "$t" "$OLDPWD/$R" "${pkg//\//_}.test" -test.run '^$' -test.timeout "$((t - 10))s" "$@") 2>&1 |
    tee -a "$bench" | grep -E '^Benchmark|FAIL|panic|seed [0-9]|run [0-9]' || status=1
}
for part in "$@"; do
  echo "== $part $(date +%T)"
  case $part in
  scale) run e2e 240 -test.bench 'BenchmarkPipelineScale|BenchmarkSingleLoopLimit/ring=64$' -test.v ;;
  learn) run e2e 120 -test.bench 'BenchmarkLearnCartPole' -test.benchtime 1x -test.v
         run e2e 120 -test.bench 'BenchmarkStartCartPole/experiment=cartpole-ppo' -test.benchtime 5x -test.v ;;
  kernels) run nn 150 -test.bench 'Kernels' -test.benchtime 0.3s ;;
  policy) run policyworker 120 -test.bench 'BenchmarkPolicy(Worker|Infer)/(batch=512|threads)' -test.benchtime 1s ;;
  ppo) run algo/ppo 90 -test.bench 'BenchmarkPPOUpdate' -test.benchtime 1s ;;
  *) echo "unknown part $part (scale, learn, kernels, policy, ppo)"; exit 2 ;;
  esac
done
echo "== done $(date +%T)"
exit $status
