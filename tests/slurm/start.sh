#!/usr/bin/env bash
# A single-node Slurm cluster on this host (Debian's slurm-wlm; no
# accounting), for tests/slurm.rs: the recipe of REAL-INFRA.md. Idempotent:
# installs slurm-wlm when missing, writes /etc/slurm/slurm.conf when it is
# not this one, starts munged, slurmctld and slurmd when they are not
# running, and waits until the node is idle. Needs root.
set -euo pipefail
t0=$(date +%s)
if ! command -v slurmctld >/dev/null || ! command -v srun >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq slurm-wlm
fi

H=$(hostname)
conf=$(mktemp)
cat > "$conf" <<CONF
# Written by gadfly's tests/slurm/start.sh: one node, one partition.
ClusterName=local
SlurmctldHost=$H
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmUser=root
ReturnToService=2
NodeName=$H CPUs=$(nproc) RealMemory=$(( $(free -m | awk '/Mem:/{print $2}') - 1024 )) State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP
CONF
restart=0
if ! cmp -s "$conf" /etc/slurm/slurm.conf; then
  install -m 0644 "$conf" /etc/slurm/slurm.conf
  restart=1
fi
rm -f "$conf"
mkdir -p /var/spool/slurmctld /var/spool/slurmd /run/munge
chown munge:munge /run/munge

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
running /run/munge/munged.pid || runuser -u munge -- /usr/sbin/munged
if [ "$restart" = 1 ]; then
  for p in /run/slurmd.pid /run/slurmctld.pid; do
    if running "$p"; then kill "$(cat "$p")"; while running "$p"; do sleep 0.2; done; fi
  done
fi
running /run/slurmctld.pid || /usr/sbin/slurmctld
running /run/slurmd.pid || /usr/sbin/slurmd

for _ in $(seq 1 150); do
  state=$(sinfo -h -N -o '%t' 2>/dev/null | head -1 || true)
  case "$state" in
    idle|mix|alloc) break ;;
    drain*|down*) scontrol update NodeName="$H" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 0.2
done
sinfo
srun -N1 -n1 true
echo "slurm/start.sh: single-node Slurm up in $(($(date +%s) - t0)) s"
