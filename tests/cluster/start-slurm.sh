#!/usr/bin/env bash
# A single-node SLURM on this host for tests/test_slurm.py: munged, slurmctld and slurmd, one partition `debug`.
#   bash tests/cluster/start-slurm.sh      (as root, once `apt-get install slurm-wlm munge` is done: .ci/slurm.sh)
# It installs nothing. Running it again is harmless: a daemon already running is left alone, and it returns once
# `sinfo` shows the node idle. Accounting is off, so `sacct` sees no jobs: profiles/slurm-ci polls `squeue`.
set -euo pipefail

fail() { echo "start-slurm.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (it writes /etc/slurm and starts daemons)"
for cmd in munged mungekey slurmctld slurmd sinfo scontrol; do
    command -v "$cmd" >/dev/null || fail "$cmd not found: apt-get install -y slurm-wlm munge"
done

HOST=$(hostname -s)
CPUS=$(nproc)
# A GiB under the host's memory, so that slurmd never finds less than the config claims (it would drain the node).
MEM_MB=$(( $(awk '/^MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
CONF=/etc/slurm/slurm.conf

# --- munge: SLURM's authentication; its key, directories and daemon (as user munge) ---
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
[ -s /etc/munge/munge.key ] || mungekey -c -k /etc/munge/munge.key
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
chmod 0600 /etc/munge/munge.key
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
alive /run/munge/munged.pid || runuser -u munge -- munged
munge -n | unmunge >/dev/null || fail "munge does not round-trip a credential (see /var/log/munge/munged.log)"

# --- slurm.conf: the smallest config that runs jobs on this host with accounting off ---
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
chown slurm:slurm /var/spool/slurmctld /var/log/slurm
cat > "$CONF.new" <<CONF
# Written by tests/cluster/start-slurm.sh: one node ($HOST), partition debug, no accounting.
ClusterName=compile-study-ci
SlurmctldHost=$HOST
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
MpiDefault=none
# No cgroups in containers or CI runners: track processes through /proc, bind no tasks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Cores and memory are consumable, so jobs asking for all cores never share them.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# A node that was down (e.g. the daemons were restarted) comes back by itself.
ReturnToService=2
# A cancelled job's processes get 5 s after SIGTERM, not 30.
KillWait=5
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
if cmp -s "$CONF.new" "$CONF"; then
    rm "$CONF.new"
else
    mv "$CONF.new" "$CONF"
    if alive /run/slurmctld.pid; then
        echo "start-slurm.sh: $CONF changed while SLURM runs; reloading it" >&2
        scontrol reconfigure
    fi
fi

# --- the daemons (each forks into the background) ---
alive /run/slurmctld.pid || slurmctld
alive /run/slurmd.pid || slurmd

# The node registers within a few seconds; a node left down by an earlier run is resumed.
for _ in $(seq 60); do
    state=$(sinfo -h -N -n "$HOST" -o %T 2>/dev/null || true)
    case "$state" in
        idle*|mixed*|allocated*) sinfo; exit 0 ;;
        down*|drain*) scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true ;;
    esac
    sleep 1
done
sinfo -N -l || true
fail "node $HOST not idle after 60 s (see /var/log/slurm/slurmctld.log and slurmd.log)"
