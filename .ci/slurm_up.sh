#!/usr/bin/env bash
# A single-node SLURM on this machine (Debian/Ubuntu, as root, no systemd needed), for tests/executors/test_slurm.py.
#
# Installs slurm-wlm and munge when missing, writes a minimal slurm.conf (one node "localhost" with this
# machine's CPUs and memory, one partition "debug", no cgroups, no accounting) and starts munged, slurmctld
# and slurmd by hand. Idempotent: does nothing when a SLURM already answers (for the one it made: when its
# node and daemons are up), and starts only what is missing. Logs: /var/log/slurm/.
# Stop it with:  .ci/slurm_up.sh --down
set -euo pipefail

conf_dir=/etc/slurm
log_dir=/var/log/slurm

if [[ "${1:-}" == "--down" ]]; then
    for pidfile in /run/slurm/slurmd.pid /run/slurm/slurmctld.pid /run/munge/munged.pid; do
        if [[ -s "$pidfile" ]]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
    done
    exit 0
fi

node_up() { sinfo -h -n localhost -o %t 2>/dev/null | grep -q -E '^(idle|mix|alloc)'; }
running() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

ours() { grep -q "Written by .ci/slurm_up.sh" "$conf_dir/slurm.conf" 2>/dev/null; }
# A SLURM that answers is left alone; ours also needs its node and both daemons alive (slurmctld notices a
# dead slurmd only minutes later).
if command -v sinfo >/dev/null && timeout 10 sinfo -h >/dev/null 2>&1 \
        && { ! ours || { node_up && running /run/slurm/slurmctld.pid && running /run/slurm/slurmd.pid; }; }; then
    echo "slurm_up: SLURM already answers:"; sinfo
    exit 0
fi

if [[ "$(id -u)" != 0 ]]; then
    echo "slurm_up: run as root (it installs packages and starts munged, slurmctld and slurmd)" >&2
    exit 1
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

if [[ -f "$conf_dir/slurm.conf" ]] && ! ours; then
    echo "slurm_up: $conf_dir/slurm.conf was not written by this script (a real cluster's?); leaving it alone" >&2
    exit 1
fi

# munge: the key the package made (or a fresh one), and the daemon as the user that owns it.
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [[ ! -s /etc/munge/munge.key ]]; then
    if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key
    else dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none; fi
fi
chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
if ! munge -n >/dev/null 2>&1 </dev/null; then
    runuser -u munge -- munged
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 </dev/null && break; sleep 0.1; done
fi

# The node as slurmd sees it: CPUs from `slurmd -C` (what it will check against), memory with a margin.
cpus=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' | head -1)
real_mb=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -1)
memory_mb=$(( real_mb * 9 / 10 ))

install -d "$conf_dir" "$log_dir" /run/slurm /var/spool/slurmctld /var/spool/slurmd
cat >"$conf_dir/slurm.conf" <<EOF
# Written by .ci/slurm_up.sh: a single-node cluster on localhost for tests.
ClusterName=gptlab
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
MailProg=/bin/true
# No cgroups: processes tracked by their parent pids, tasks neither bound nor confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$(( memory_mb / cpus ))
ReturnToService=2
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=$log_dir/slurmctld.log
SlurmdLogFile=$log_dir/slurmd.log
# A cancelled job's processes get SIGKILL 5 s after SIGTERM (default 30 s).
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
# Only what is not running yet (a half-started cluster, e.g. slurmd died, is completed).
running /run/slurm/slurmctld.pid || slurmctld -c   # -c: a clean start, no jobs from an earlier cluster
running /run/slurm/slurmd.pid || slurmd -N localhost
for _ in $(seq 60); do
    if node_up; then
        echo "slurm_up: single-node SLURM is up:"; sinfo
        exit 0
    fi
    sleep 0.5
done
echo "slurm_up: the node did not come up; see $log_dir/slurmctld.log and $log_dir/slurmd.log" >&2
sinfo >&2 || true
exit 1
