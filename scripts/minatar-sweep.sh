#!/usr/bin/env bash
# minatar-sweep.sh SPEC...: train MinAtar variants side by side on a many-core machine, each pinned
# to cores of its own, to pick a built-in's settings in one sitting (the device tool's 16-core
# machine has no Go: build the bundle with `make bundle-sweep`, carry bin/device, run it there).
#
#   SPEC  EXPERIMENT.VARIANT:CORES[:KEY=VALUE[,KEY=VALUE...]]   e.g.
#         minatar-asterix-ppo.lr1e3:2:workers.trainer.config.ppo.lr=1e-3
#
# Each variant is `rlctl start EXPERIMENT` with those --set overrides, on its own CORES cores
# (taskset; worker threads follow the affinity mask), until FRAMES env steps (default 5000000) or
# WALL (default 400s). Its metrics.jsonl, config and log land in $OUT/NAME.* (else bin/device/out);
# where Go is, the MinAtar benchmark tabulates and plots them next to the paper, training nothing:
#
#   MINATAR_BENCH=1 MINATAR_REPLOT=1 MINATAR_OUT=$OUT MINATAR_EXPERIMENTS=NAME,NAME... make bench-minatar
set -u
cd "$(dirname "$0")/.."
out=${OUT:-bin/device/out}; mkdir -p "$out"
frames=${FRAMES:-5000000}; wall=${WALL:-400s}
for g in bin/device/lib/*.gz; do [[ -e $g ]] && gunzip -f "$g"; done
run=(); rlctl=bin/rlctl
# bin/device/run unpacks the bundle on first use: once, here, not by every variant at once ("text
# file busy").
if [[ -x bin/device/run ]]; then run=(bin/device/run); rlctl=rlctl; "${run[@]}" true; fi
work=$(mktemp -d)
scripts/cpu-line.sh "${run[@]}" $rlctl
echo "frames $frames, wall $wall"
next=0
for spec in "$@"; do
  IFS=: read -r name cores sets <<<"$spec"
  exp=${name%%.*}
  if ((next + cores > $(nproc))); then echo "$name: not enough cores left (have $(nproc))" >&2; exit 2; fi
  cpus="$next-$((next + cores - 1))"; next=$((next + cores))
  args=(--workdir "$work/$name" --set stop.env_steps="$frames" --set stop.wall_time="$wall")
  IFS=, read -ra kvs <<<"$sets"
  for kv in "${kvs[@]}"; do args+=(--set "$kv"); done
  echo "$name on cpus $cpus: $exp ${sets:-(as built in)}"
  (taskset -c "$cpus" "${run[@]}" $rlctl start "$exp" t1 "${args[@]}" >"$out/$name.log" 2>&1
   cp "$work/$name/$exp/t1/metrics.jsonl" "$out/$name.metrics.jsonl"
   cp "$work/$name/$exp/t1/config.yaml" "$out/$name.config.yaml"
   echo "$name: $(grep -m1 '^  ran ' "$out/$name.log")") &
done
wait
