#!/usr/bin/env bash
# A real multi-node SLURM cluster on one machine, for tests and by hand.
#
#   scripts/slurmcluster.sh up      # install packages if missing, start a cluster, print its env
#   scripts/slurmcluster.sh env     # print `export SLURM_CONF=...` and the cluster's addresses
#   scripts/slurmcluster.sh check   # exit 0 when every node is idle or busy
#   scripts/slurmcluster.sh down    # stop and remove exactly what `up` created
#
# Each node is a Linux network namespace with its own IPv4 address on a
# bridge the script creates (host side 10.77.ID.1, node K at 10.77.ID.(10+K)),
# running its own `slurmd -N nodeK` entered with nsenter (`ip netns exec`
# remounts /sys and slurmd then dies looking for cgroups). slurmctld and a
# private munged run on the host side of the bridge. Jobs run inside their
# node's namespace and see its address. No systemd, no cgroups, no
# accounting daemon. Needs root, iproute2 and nsenter.
#
# Environment: DISTRL_SLURM_ID (1-250, default 1) picks the subnet, names and
# ports, so several clusters can run at once; DISTRL_SLURM_NODES (default 3);
# DISTRL_SLURM_STATE (default /run/distrl-slurm/ID) holds the configuration,
# logs, pids and the names of every link and namespace created, which is all
# `down` touches. `up` exits 3 when the ID is in use by a live cluster.
set -euo pipefail

ID=${DISTRL_SLURM_ID:-1}
NODES=${DISTRL_SLURM_NODES:-3}
STATE=${DISTRL_SLURM_STATE:-/run/distrl-slurm/$ID}
PACKAGES="slurmctld slurmd slurm-client munge iproute2 util-linux"
NET=10.77.$ID
BRIDGE=drl${ID}br
CTLD_PORT=$((16800 + 2 * ID))
SLURMD_PORT=6818 # each slurmd has its own namespace

die() { echo "slurmcluster: $*" >&2; exit 1; }
[[ $ID =~ ^[0-9]+$ ]] && ((ID >= 1 && ID <= 250)) || die "DISTRL_SLURM_ID=$ID: want 1-250"
[[ $NODES =~ ^[0-9]+$ ]] && ((NODES >= 1 && NODES <= 200)) || die "DISTRL_SLURM_NODES=$NODES: want 1-200"

node_ns() { echo "drl${ID}node$1"; }
node_addr() { echo "$NET.$((10 + $1))"; }

# install the Debian packages that are missing (retry once after apt-get update)
install_packages() {
  local missing="" p
  for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  echo "slurmcluster: installing$missing" >&2
  local apt="env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -q"
  # shellcheck disable=SC2086
  $apt install $missing >&2 || { $apt update >&2 && $apt install $missing >&2; } || die "apt-get install$missing failed"
}

# why this machine cannot run a cluster, or nothing
unsupported() {
  [ "$(id -u)" = 0 ] || { echo "not root"; return; }
  command -v nsenter >/dev/null || { echo "no nsenter"; return; }
  command -v ip >/dev/null || { echo "no ip (iproute2)"; return; }
  [ -d /proc/self/ns ] || { echo "no network namespaces"; return; }
  # a container without CAP_SYS_ADMIN / CAP_NET_ADMIN is root but cannot
  local probe=drlprobe$$ err
  if ! err=$(ip netns add "$probe" 2>&1); then echo "cannot create a network namespace: $err"; return; fi
  ip netns delete "$probe" 2>/dev/null || true
  if ! err=$(ip link add "$probe" type bridge 2>&1); then echo "cannot create a bridge: $err"; return; fi
  ip link delete "$probe" 2>/dev/null || true
}

record() { echo "$1 $2" >>"$STATE/created"; } # kind name

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

cluster_alive() { [ -f "$STATE/slurmctld.pid" ] && pid_alive "$(cat "$STATE/slurmctld.pid")"; }

write_conf() {
  local host nodes="" k
  host=$(hostname -s)
  for ((k = 1; k <= NODES; k++)); do
    echo "NodeName=node$k NodeAddr=$(node_addr "$k") NodeHostname=$host CPUs=96 RealMemory=64000 State=UNKNOWN"
    nodes="$nodes${nodes:+,}node$k"
  done >"$STATE/nodes.conf"
  cat >"$STATE/slurm.conf" <<EOF
# written by scripts/slurmcluster.sh: cluster $ID, $NODES nodes in network namespaces
ClusterName=distrl$ID
SlurmctldHost=$host($NET.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE/munge.socket
StateSaveLocation=$STATE/ctld
SlurmctldPidFile=$STATE/slurmctld.pidfile
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdSpoolDir=$STATE/slurmd-%n
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmdLogFile=$STATE/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU,CR_LLN
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
ReturnToService=2
KillWait=5
MinJobAge=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
MaxArraySize=10001
Include $STATE/nodes.conf
PartitionName=debug Nodes=$nodes Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
  (umask 077 && dd if=/dev/urandom of="$STATE/munge.key" bs=1024 count=1 status=none)
  munged -F --force --socket="$STATE/munge.socket" --key-file="$STATE/munge.key" \
    --pid-file="$STATE/munged.pidfile" --log-file="$STATE/munged.log" --seed-file="$STATE/munged.seed" \
    >>"$STATE/munged.out" 2>&1 &
  echo $! >"$STATE/munged.pid"
  local _
  for _ in $(seq 100); do [ -S "$STATE/munge.socket" ] && return 0; sleep 0.05; done
  cat "$STATE/munged.log" "$STATE/munged.out" >&2 2>/dev/null || true
  die "munged did not start"
}

make_net() {
  ip link add "$BRIDGE" type bridge && record link "$BRIDGE"
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local k ns veth
  for ((k = 1; k <= NODES; k++)); do
    ns=$(node_ns "$k") veth=drl${ID}v$k
    ip netns add "$ns" && record netns "$ns"
    ip link add "$veth" type veth peer name "${veth}p" && record link "$veth"
    ip link set "${veth}p" netns "$ns"
    ip link set "$veth" master "$BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "${veth}p" name eth0
    ip -n "$ns" addr add "$(node_addr "$k")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$NET.1"
  done
}

start_slurm() {
  export SLURM_CONF=$STATE/slurm.conf
  mkdir -p "$STATE/ctld"
  slurmctld -D -i -f "$SLURM_CONF" >>"$STATE/slurmctld.out" 2>&1 &
  echo $! >"$STATE/slurmctld.pid"
  local k
  for ((k = 1; k <= NODES; k++)); do
    mkdir -p "$STATE/slurmd-node$k"
    nsenter --net="/run/netns/$(node_ns "$k")" slurmd -D -N "node$k" -f "$SLURM_CONF" >>"$STATE/slurmd-node$k.out" 2>&1 &
    echo $! >"$STATE/slurmd-node$k.pid"
  done
}

# wait until every node is idle (or busy: a job may already run)
wait_idle() {
  local _ states
  for _ in $(seq 300); do
    states=$(SLURM_CONF=$STATE/slurm.conf sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')
    if [ -n "$states" ] && [ -z "$(echo "$states" | tr ' ' '\n' | grep -Ev '^(idle|mixed|allocated)?$' || true)" ] &&
      [ "$(SLURM_CONF=$STATE/slurm.conf sinfo -h -N -o '%N' | wc -l)" = "$NODES" ]; then
      return 0
    fi
    cluster_alive || break
    sleep 0.1
  done
  echo "node states: ${states:-none}" >&2
  tail -n 20 "$STATE"/slurmctld.log "$STATE"/slurmd-node1.log 2>/dev/null >&2 || true
  return 1
}

print_env() {
  echo "export SLURM_CONF=$STATE/slurm.conf"
  echo "# host side of the bridge (name server address): $NET.1"
  local k
  for ((k = 1; k <= NODES; k++)); do echo "# node$k: $(node_addr "$k") (netns $(node_ns "$k"))"; done
}

up() {
  local why
  why=$(unsupported)
  [ -z "$why" ] || { echo "slurmcluster: cannot run a cluster here: $why" >&2; exit 4; }
  install_packages
  mkdir -p "$(dirname "$STATE")"
  if ! mkdir "$STATE" 2>/dev/null; then
    if cluster_alive; then echo "slurmcluster: cluster $ID is running ($STATE)" >&2; exit 3; fi
    down # a dead cluster's leftovers
    mkdir "$STATE"
  fi
  chmod 700 "$STATE"
  trap 'echo "slurmcluster: up failed; tearing down" >&2; down' ERR
  write_conf
  start_munge
  make_net
  start_slurm
  wait_idle || { down; die "nodes did not come up (logs were in $STATE)"; }
  trap - ERR
  print_env
}

# stop the pids recorded in the files given: TERM, then KILL after 5 s
stop_pids() {
  local f pid pids="" left _
  for f in "$@"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    pid_alive "$pid" || continue
    kill -TERM "$pid" 2>/dev/null || true
    pids="$pids $pid"
  done
  for _ in $(seq 50); do
    left=""
    for pid in $pids; do pid_alive "$pid" && left="$left $pid"; done
    pids=$left
    [ -z "$pids" ] && return 0
    sleep 0.1
  done
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
}

down() {
  [ -d "$STATE" ] || return 0
  if [ -f "$STATE/slurm.conf" ] && cluster_alive; then
    # cancel every job of this cluster, so job processes do not outlive it
    local jobs
    jobs=$(SLURM_CONF=$STATE/slurm.conf squeue -h -o '%A' 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$jobs" ] || SLURM_CONF=$STATE/slurm.conf scancel $jobs 2>/dev/null || true
  fi
  # all at once: each daemon takes a second or two to stop
  stop_pids "$STATE"/slurmd-node*.pid "$STATE/slurmctld.pid"
  stop_pids "$STATE/munged.pid"
  if [ -f "$STATE/created" ]; then
    local kind name pid
    # namespaces first: whatever still runs in them (job steps) is ours
    while read -r kind name; do
      [ "$kind" = netns ] || continue
      for pid in $(ip netns pids "$name" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    done <"$STATE/created"
    tac "$STATE/created" | while read -r kind name; do
      case $kind in
        netns) ip netns delete "$name" 2>/dev/null || true ;;
        link) ip link delete "$name" 2>/dev/null || true ;;
      esac
    done
  fi
  rm -rf "$STATE"
}

check() {
  [ -f "$STATE/slurm.conf" ] && cluster_alive || { echo "slurmcluster: cluster $ID is not running" >&2; exit 1; }
  wait_idle
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) [ -f "$STATE/slurm.conf" ] || die "cluster $ID is not running"; print_env ;;
  check) check ;;
  supported) why=$(unsupported); [ -z "$why" ] || { echo "$why"; exit 4; } ;;
  *) echo "usage: $0 up|down|env|check|supported  (DISTRL_SLURM_ID, DISTRL_SLURM_NODES, DISTRL_SLURM_STATE)" >&2; exit 2 ;;
esac
