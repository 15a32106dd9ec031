#!/usr/bin/env bash
# cpu-sink.sh [ACTORS]: cartpole-sink through rlctl start on this machine, its defaults as a user gets
# them (count: auto policy workers and sinks, threads: auto), ACTORS actors (default 14) of 64 CartPoles for 20 s;
# prints the resolved plan and the env steps/s of the last metrics lines. Runs from a bundle (make
# bundle-cpu, or make bundle-gpu) on a machine without Go, or with bin/rlctl where Go is.
set -u
cd "$(dirname "$0")/.."
for g in bin/device/lib/*.gz; do [[ -e $g ]] && gunzip -f "$g"; done
run=(); [[ -x bin/device/run ]] && run=(bin/device/run)
# A GPU bundle (make bundle-gpu) has rlctl-cuda only, which runs CPU workers too.
if [[ -x bin/device/run && ! -e bin/device/rlctl && ! -e bin/device/rlctl.gz ]]; then ln -s rlctl-cuda bin/device/rlctl; fi
rlctl=rlctl; [[ -x bin/device/run ]] || rlctl=bin/rlctl
work=$(mktemp -d)
actors=${1:-14}
scripts/cpu-line.sh "${run[@]}" $rlctl
"${run[@]}" $rlctl start cartpole-sink s1 --workdir "$work" --set workers.actor.count="$actors" \
  --set workers.actor.config.ring_size=64 --set stop.env_steps=0 --set stop.wall_time=20s --set metrics_interval=1s | tail -4
for g in policy sink; do echo "$g $(grep -A8 "^  $g:" "$work/cartpole-sink/s1/config.yaml" | grep -m1 "count")"; done
echo "metrics lines: $(grep -c . "$work/cartpole-sink/s1/metrics.jsonl"); env steps/s of the last 10:"
tail -10 "$work/cartpole-sink/s1/metrics.jsonl" |
  awk 'match($0, /"steps_per_s":[0-9.e+]+/) {printf "%.0f ", substr($0, RSTART+14, RLENGTH-14)} END {print ""}'
grep -h "threads" "$work"/cartpole-sink/s1/logs/*.log | grep -m1 "worker=policy/0"
