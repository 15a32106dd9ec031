#!/usr/bin/env bash
# The main job until the experiment runner lands: a name server, echo
# workers and a tour of rlctl against them; then the data plane: two actors
# (rings of 8 CartPoles), a batching policy worker and a sample sink, each a
# process, stepping environments for DURATION seconds (default 10).
set -euo pipefail
RLCTL=$(realpath "${1:-bin/rlctl}")
work=$(mktemp -d -t distrl-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "logs kept in $work"
}
trap cleanup EXIT
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

"$RLCTL" nameserver --listen 127.0.0.1:0 --data-dir "$work/etcd" >"$work/nameserver.out" 2>"$work/nameserver.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/nameserver.out" 2>/dev/null && break; sleep 0.1; done
endpoint=$(sed -n 's/^nameserver listening on \([^ ]*\).*/\1/p' "$work/nameserver.out")
[ -n "$endpoint" ] || { echo "nameserver did not start:"; cat "$work/nameserver.log"; exit 1; }
export RLCTL_NAMERESOLVE=$endpoint RLCTL_EXPERIMENT=demo RLCTL_TRIAL=t1
echo "nameserver (embedded etcd) at $endpoint; experiment demo, trial t1"

for i in 0 1 2; do
  "$RLCTL" worker --type echo --index "$i" --host 127.0.0.1 2>"$work/echo-$i.log" &
  pids+=($!)
done
for _ in $(seq 100); do [ "$("$RLCTL" ls 2>/dev/null | grep -c READY)" -eq 3 ] && break; sleep 0.1; done

step rlctl ls;                                      "$RLCTL" ls
step rlctl request echo/0 ping;                     "$RLCTL" request echo/0 ping
step rlctl request echo/1 echo msg=hello n=3;       "$RLCTL" request echo/1 echo msg=hello n=3
step "rlctl request 'echo/*' configure";            "$RLCTL" request 'echo/*' configure >/dev/null && echo configured
step "rlctl request 'echo/*' start";                "$RLCTL" request 'echo/*' start >/dev/null && echo started
step rlctl request echo/2 stats;                    "$RLCTL" request echo/2 stats
step "rlctl request echo/0 fly   # unknown command: a typed error, the worker goes on"
"$RLCTL" request echo/0 fly || echo "(exit code $?)"
step rlctl ls;                                      "$RLCTL" ls
step "rlctl request 'echo/*' exit";                 "$RLCTL" request 'echo/*' exit >/dev/null && echo "exit sent"
sleep 0.5
step rlctl ls;                                      "$RLCTL" ls

echo
echo "=== data plane: actor/0, actor/1 -> policy/0 (batched inference) -> samples -> sink/0"
for w in sink/0 policy/0 actor/0 actor/1; do
  "$RLCTL" worker --type "${w%/*}" --index "${w#*/}" --host 127.0.0.1 2>"$work/${w/\//-}.log" &
  pids+=($!)
done
for _ in $(seq 100); do [ "$("$RLCTL" ls 2>/dev/null | grep -c READY)" -eq 4 ] && break; sleep 0.1; done
step "rlctl request sink/0 configure"; "$RLCTL" request sink/0 configure >/dev/null && echo ok
step "rlctl request policy/0 configure env=CartPole-v1 max_batch=512"
"$RLCTL" request policy/0 configure env=CartPole-v1 max_batch=512 >/dev/null && echo ok
step "rlctl request 'actor/*' configure env=CartPole-v1 ring_size=8"
"$RLCTL" request 'actor/*' configure env=CartPole-v1 ring_size=8 >/dev/null && echo ok
step "rlctl request 'sink/*' start; ... 'policy/*' start; ... 'actor/*' start"
for w in 'sink/*' 'policy/*' 'actor/*'; do "$RLCTL" request "$w" start >/dev/null; done
echo started
duration=${DURATION:-10}
printf '\n%8s %12s %10s %12s %10s %12s\n' elapsed env_steps steps/s episodes batch_mean sink_batches
begin=$(date +%s.%N); prev=0; prev_t=$begin
while :; do
  sleep 1
  read -r steps eps < <("$RLCTL" request 'actor/*' stats | python3 -c 'import json,sys; d=json.load(sys.stdin).values(); d=list(d); print(sum(v["env_steps"] for v in d), sum(v["episodes"] for v in d))' 2>/dev/null || echo "0 0")
  now=$(date +%s.%N)
  mb=$("$RLCTL" request policy/0 stats | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["mean_batch"],1))' 2>/dev/null || echo -)
  sb=$("$RLCTL" request sink/0 summary | python3 -c 'import json,sys; print(json.load(sys.stdin)["batches"])' 2>/dev/null || echo -)
  # The rate is over the time that really passed: the requests above take time too.
  read -r el rate < <(python3 -c "print(f'{$now-$begin:.1f}', int(($steps-$prev)/($now-$prev_t)))")
  printf '%7ss %12s %10s %12s %10s %12s\n' "$el" "$steps" "$rate" "$eps" "$mb" "$sb"
  prev=$steps; prev_t=$now
  python3 -c "import sys; sys.exit(0 if $now-$begin >= $duration else 1)" && break
done
step rlctl ls; "$RLCTL" ls
step "rlctl request '*' exit"; "$RLCTL" request '*' exit >/dev/null && echo "exit sent"
