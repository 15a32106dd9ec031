#!/usr/bin/env bash
# The main job until the experiment runner lands: a name server, three echo
# workers as processes, and a tour of rlctl against them.
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
