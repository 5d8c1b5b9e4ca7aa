#!/usr/bin/env bash
# Starts a private Slurm 22.05 (Debian's packages) on loopback: one slurmctld
# and NODES slurmd (`slurmd -N gpuNNNN`, one per fake node, each on its own
# port), 8 GPUs per node backed by symlinks to /dev/null, no slurmdbd.
#
#   bench/peers/slurm/start.sh [NODES]          (default 256)
#
# Settings (environment):
#   SLURM_PEER_DIR   private directory (default ${TMPDIR:-/tmp}/tidal-slurm-peer);
#                    everything Slurm writes goes there, results/ is kept
#                    across restarts, everything else is wiped at start
#   AUTH             munge (default: a private munged) or none (auth/none +
#                    cred/none, no munged)
#   GPUS             GPUs per node (default 8)
#   SCHED_PARAMS     SchedulerParameters (default: the backfill settings below)
#   CRED_EXPIRE      seconds (default 30; Slurm's default is 120)
#   CTLD_PORT        slurmctld's port (default 26817)
#   SLURMD_PORT_BASE node N listens on SLURMD_PORT_BASE+N (default 27000)
#   INSTALL          1 (default): apt-get install the packages if missing
#
# Every PID it starts is written to $SLURM_PEER_DIR/pids/; stop.sh stops
# exactly those. Writes $SLURM_PEER_DIR/env.sh (SLURM_CONF and friends) and
# $SLURM_PEER_DIR/startup.json (seconds from starting the daemons until every
# node is idle).
set -euo pipefail

NODES="${1:-256}"
DIR="${SLURM_PEER_DIR:-${TMPDIR:-/tmp}/tidal-slurm-peer}"
AUTH="${AUTH:-munge}"
GPUS="${GPUS:-8}"
SCHED_PARAMS="${SCHED_PARAMS-bf_interval=2,bf_continue,bf_resolution=60,bf_window=1440,bf_max_job_test=2000,default_queue_depth=1000}"
CRED_EXPIRE="${CRED_EXPIRE:-30}"
CTLD_PORT="${CTLD_PORT:-26817}"
SLURMD_PORT_BASE="${SLURMD_PORT_BASE:-27000}"
INSTALL="${INSTALL:-1}"
IDLE_TIMEOUT_S="${IDLE_TIMEOUT_S:-300}"

die() {
  echo "start.sh: $*" >&2
  exit 1
}

if ! [[ "$NODES" =~ ^[0-9]+$ ]] || ((NODES < 1 || NODES > 9999)); then die "NODES must be 1..9999, got '$NODES'"; fi
if ! [[ "$GPUS" =~ ^[0-9]+$ ]] || ((GPUS < 1 || GPUS > 64)); then die "GPUS must be 1..64"; fi
[[ "$AUTH" == munge || "$AUTH" == none ]] || die "AUTH must be munge or none"
[[ "$DIR" == /* && "$DIR" != / && "$DIR" != *[[:space:],]* ]] ||
  die "SLURM_PEER_DIR must be an absolute path without spaces or commas: '$DIR'"
((SLURMD_PORT_BASE + NODES < 65536)) || die "SLURMD_PORT_BASE + NODES exceeds 65535"

# --- packages ---------------------------------------------------------------
SBIN=/usr/sbin
need=()
for f in "$SBIN/slurmctld-wlm" "$SBIN/slurmd-wlm" "$SBIN/slurmstepd-wlm"; do
  [[ -x "$f" ]] || need=(slurmctld slurmd)
done
command -v sbatch >/dev/null 2>&1 || need+=(slurm-client)
if [[ "$AUTH" == munge ]] && ! command -v munged >/dev/null 2>&1 && [[ ! -x "$SBIN/munged" ]]; then
  need+=(munge)
fi
if ((${#need[@]})); then
  ((INSTALL)) || die "missing packages: ${need[*]} (INSTALL=0)"
  echo "start.sh: installing ${need[*]}" >&2
  if [[ "$(id -u)" == 0 ]]; then SUDO=(); else SUDO=(sudo); fi
  # Debian's maintainer scripts would start the system-wide daemons; a
  # container's policy-rc.d refuses that, and we never use them.
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${need[@]}" >&2 ||
    { "${SUDO[@]}" apt-get update >&2 &&
      DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${need[@]}" >&2; }
fi
MUNGED="$(command -v munged || echo "$SBIN/munged")"
[[ "$(id -u)" == 0 ]] || die "run as root (SlurmUser=root, and jobs run as the submitting user)"

# --- loopback only ----------------------------------------------------------
HOST="$(hostname)"
ADDR="$(getent ahostsv4 "$HOST" | awk 'NR == 1 { print $1 }')"
# NoInAddrAny makes the daemons bind to the host name's address: refuse to
# run unless that is loopback.
[[ "$ADDR" == 127.* ]] || die "host name '$HOST' resolves to '${ADDR:-nothing}', not 127.x: refusing (loopback only)"

# PID's command line, or nothing once it has gone (no error on the race).
cmdline() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null || true; }

# --- a previous run still up? -----------------------------------------------
if compgen -G "$DIR/pids/*" >/dev/null; then
  for f in "$DIR"/pids/*; do
    pid="$(cat "$f")"
    if [[ "$(cmdline "$pid")" == *"$DIR"* ]]; then
      die "PID $pid from a previous start is still running ($f): run bench/peers/slurm/stop.sh first"
    fi
  done
fi

# --- private directory --------------------------------------------------------
mkdir -p "$DIR"
chmod 0700 "$DIR"
for d in bin etc state spool log run pids dev work tmp munge; do
  rm -rf "${DIR:?}/$d"
  mkdir -p "$DIR/$d"
done
mkdir -p "$DIR/results"
rm -f "$DIR/env.sh" "$DIR/startup.json"

# Slurm decides behaviour from its program name: run as `slurmctld-wlm` it
# silently drops every node's Gres=. Run the *-wlm binaries (not the
# /usr/sbin alternatives, which slurm-wlm-emulator would take over) through
# links with the plain names.
ln -s "$SBIN/slurmctld-wlm" "$DIR/bin/slurmctld"
ln -s "$SBIN/slurmd-wlm" "$DIR/bin/slurmd"
ln -s "$SBIN/slurmstepd-wlm" "$DIR/bin/slurmstepd"

# GRES gpu needs device files that stat as char devices: symlinks to /dev/null.
for ((g = 0; g < GPUS; g++)); do
  ln -s /dev/null "$DIR/dev/nvidia$g"
done

last="$(printf 'gpu%04d' "$NODES")"
if ((NODES == 1)); then
  nodelist="$last"
  portlist="$((SLURMD_PORT_BASE + 1))"
else
  nodelist="gpu[0001-$(printf '%04d' "$NODES")]"
  portlist="[$((SLURMD_PORT_BASE + 1))-$((SLURMD_PORT_BASE + NODES))]"
fi
if ((GPUS == 1)); then gpufiles="$DIR/dev/nvidia0"; else gpufiles="$DIR/dev/nvidia[0-$((GPUS - 1))]"; fi

if [[ "$AUTH" == munge ]]; then
  authconf="AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=$CRED_EXPIRE"
else
  authconf="AuthType=auth/none
CredType=cred/none
AuthInfo=cred_expire=$CRED_EXPIRE"
fi

cat >"$DIR/etc/slurm.conf" <<EOF
# Written by bench/peers/slurm/start.sh: a private, loopback-only Slurm.
ClusterName=tidalpeer
SlurmctldHost=$HOST($ADDR)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT_BASE
SlurmUser=root
SlurmdUser=root
$authconf
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
LogTimeFormat=iso8601_ms
TmpFS=$DIR/tmp
MailProg=/bin/true
# No cgroups here.
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmctldTimeout=300
SlurmdTimeout=300
InactiveLimit=0
KillWait=5
# Fake nodes: each slurmd reports the configured CPUs and memory, not the host's.
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=$SCHED_PARAMS
PriorityType=priority/multifactor
PriorityWeightJobSize=1000
PriorityWeightPartition=10000
# No slurmdbd: preemption by partition priority (an infer job requeues train jobs).
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=$nodelist NodeHostname=$HOST NodeAddr=$ADDR Port=$portlist CPUs=64 Boards=1 SocketsPerBoard=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=1000000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=train Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
PartitionName=infer Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
EOF

cat >"$DIR/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$nodelist Name=gpu File=$gpufiles
EOF

export SLURM_CONF="$DIR/etc/slurm.conf"

# Starts a daemon in the foreground of its own session, detached from this
# shell, and records its PID. setsid execs (no fork) because a background
# child of a script is not a process-group leader, so $! is the daemon.
launch() {
  local name="$1"
  shift
  setsid "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 &
  echo "$!" >"$DIR/pids/$name"
}

now() { date +%s.%N; }
t0="$(now)"

if [[ "$AUTH" == munge ]]; then
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$DIR/munge/munge.key"
  chmod 0700 "$DIR/munge"
  launch munged "$MUNGED" --foreground --force --socket="$DIR/munge/munge.socket" \
    --key-file="$DIR/munge/munge.key" --pid-file="$DIR/run/munged.pid" \
    --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
  for _ in $(seq 100); do
    [[ -S "$DIR/munge/munge.socket" ]] && break
    sleep 0.05
  done
  [[ -S "$DIR/munge/munge.socket" ]] || { tail -n 20 "$DIR/log/munged.out" "$DIR/log/munged.log" >&2 || true; die "munged did not start"; }
fi

launch slurmctld "$DIR/bin/slurmctld" -D -f "$SLURM_CONF"
up=0
for _ in $(seq 300); do
  if [[ "$(scontrol ping 2>/dev/null || true)" == *"is UP"* ]]; then
    up=1
    break
  fi
  sleep 0.1
done
((up)) || { tail -n 30 "$DIR/log/slurmctld.log" >&2 || true; die "slurmctld did not answer scontrol ping"; }

for ((n = 1; n <= NODES; n++)); do
  node="$(printf 'gpu%04d' "$n")"
  launch "slurmd-$node" "$DIR/bin/slurmd" -D -N "$node" -f "$SLURM_CONF" -d "$DIR/bin/slurmstepd"
done

idle=0
deadline=$((SECONDS + IDLE_TIMEOUT_S))
while ((SECONDS < deadline)); do
  idle="$(sinfo -h -p train -o '%D %t' 2>/dev/null | awk '$2 == "idle" { s += $1 } END { print s + 0 }')"
  ((idle >= NODES)) && break
  sleep 0.2
done
t1="$(now)"
if ((idle < NODES)); then
  sinfo -p train >&2 || true
  die "only $idle of $NODES nodes idle after ${IDLE_TIMEOUT_S} s (logs in $DIR/log)"
fi
startup_s="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"

# The PIDs recorded must be the daemons themselves (setsid did not fork).
for f in "$DIR"/pids/*; do
  pid="$(cat "$f")"
  if [[ "$(cmdline "$pid")" != *"$DIR"* ]]; then
    die "recorded PID $pid ($f) is not running or does not mention $DIR"
  fi
done

cat >"$DIR/env.sh" <<EOF
export SLURM_CONF='$SLURM_CONF'
export SLURM_PEER_DIR='$DIR'
export SLURM_PEER_NODES='$NODES'
export SLURM_PEER_GPUS='$GPUS'
export SLURM_PEER_AUTH='$AUTH'
EOF
printf '{"nodes": %d, "gpus_per_node": %d, "auth": "%s", "startup_s": %s, "sched_params": "%s", "slurm_version": "%s"}\n' \
  "$NODES" "$GPUS" "$AUTH" "$startup_s" "$SCHED_PARAMS" "$(sinfo -V | awk '{ print $2 }')" >"$DIR/startup.json"
echo "start.sh: $NODES nodes x $GPUS GPUs idle ${startup_s} s after the daemons started (AUTH=$AUTH); source $DIR/env.sh"
