#!/usr/bin/env bash
# cpu-sink.sh [ACTORS]: cartpole-sink through rlctl start on this machine, its defaults as a user gets
# them (count: auto policy workers and sinks, threads: auto), ACTORS actors (default 14) of 64 CartPoles for 20 s;
# prints the resolved plan and the env steps/s of the last metrics lines. Runs from a bundle (make
# bundle-cpu) on a machine without Go, or with bin/rlctl where Go is.
set -u
cd "$(dirname "$0")/.."
for g in bin/device/lib/*.gz; do [[ -e $g ]] && gunzip -f "$g"; done
run=(); [[ -x bin/device/run ]] && run=(bin/device/run)
rlctl=rlctl; [[ -x bin/device/run ]] || rlctl=bin/rlctl
work=$(mktemp -d)
actors=${1:-14}
echo "cores: $(nproc)"
"${run[@]}" $rlctl start cartpole-sink s1 --workdir "$work" --set workers.actor.count="$actors" \
  --set workers.actor.config.ring_size=64 --set stop.env_steps=0 --set stop.wall_time=20s --set metrics_interval=1s | tail -4
for g in policy sink; do echo "$g $(grep -A8 "^  $g:" "$work/cartpole-sink/s1/config.yaml" | grep -m1 "count")"; done
grep -c . "$work/cartpole-sink/s1/metrics.jsonl"
grep -h "threads" "$work"/cartpole-sink/s1/logs/policy-0.log | head -1
