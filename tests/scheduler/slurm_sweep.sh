#!/usr/bin/env bash
# A sweep sharded over a real Slurm job array equals the single-process sweep, byte for byte.
#   tests/scheduler/slurm_sweep.sh TRAINSIM SOURCE_DIR
# Starts a one-machine Slurm cluster from Debian's packages (munged, slurmctld, slurmd) configured
# in a temporary folder with this machine's hostname, submits tools/sweep-job-array.sh as an array
# of 3 tasks, waits for it (bounded), merges the shards and compares. Everything it started is
# stopped on exit, whatever happens. Where Slurm or munge is missing or cannot start, it says why
# and exits 77 (ctest: skipped).
set -uo pipefail
SECONDS=0
trainsim=$(realpath "$1")
source_dir=$(realpath "$2")
skip() { echo "SKIPPED: $*" >&2; exit 77; }
for tool in munged mungekey slurmctld slurmd sbatch sinfo scontrol; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || skip "$tool not installed (apt-get install slurm-wlm munge)"
done
PATH=$PATH:/usr/sbin

work=$(mktemp -d /tmp/trainsim-slurm-XXXXXX)
chmod 700 "$work"
pids=()
cleanup() {
  [ -n "${SLURM_CONF:-}" ] && scancel --quiet --user "$(id -un)" 2>/dev/null
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# munge: its own key, socket and files
mkdir -p "$work/munge"
chmod 700 "$work/munge"
mungekey --create --keyfile "$work/munge/munge.key" >/dev/null 2>&1 || skip "mungekey cannot create a key"
socket="$work/munge/munge.socket"
munged --foreground --force --socket "$socket" --key-file "$work/munge/munge.key" \
  --pid-file "$work/munge/munged.pid" --log-file "$work/munge/munged.log" --seed-file "$work/munge/munged.seed" \
  >"$work/munge/stdout.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || skip "munged did not start: $(tail -3 "$work/munge/munged.log" "$work/munge/stdout.log" 2>/dev/null)"

# Slurm: one node (this machine), ports of our own
host=$(hostname -s)
cpus=$(nproc)
port=$((20000 + RANDOM % 20000))
mkdir -p "$work/state" "$work/spool" "$work/logs"
export SLURM_CONF="$work/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=trainsim-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/logs/slurmctld.log
SlurmdLogFile=$work/logs/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
slurmctld -D -i -f "$SLURM_CONF" >"$work/logs/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/logs/slurmd.out" 2>&1 &
pids+=($!)
ready=0
for _ in $(seq 100); do
  if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then ready=1; break; fi
  sleep 0.2
done
[ "$ready" = 1 ] || skip "Slurm did not start: $(tail -3 "$work/logs/slurmctld.log" "$work/logs/slurmd.log" \
  "$work/logs/slurmctld.out" "$work/logs/slurmd.out" 2>/dev/null)"

# the sweep as a job array of 3 shards, then merged
topology="$source_dir/topologies/dgx-h100-superpod.json"
workload="$source_dir/workloads/llama3-8b.json"
cd "$work"
export TRAINSIM="$trainsim"
started=$SECONDS
timeout 300 sbatch --wait --array=0-2 --cpus-per-task=1 --output="$work/logs/job-%A_%a.log" \
  "$source_dir/tools/sweep-job-array.sh" "$topology" "$workload" 64 5 >"$work/logs/sbatch.out" 2>&1
status=$?
finished=$SECONDS
if [ "$status" != 0 ]; then
  echo "FAILED: the job array did not finish cleanly (sbatch exit $status)" >&2
  cat "$work/logs/sbatch.out" "$work"/logs/job-*.log >&2 2>/dev/null
  exit 1
fi
ls sweep-shards/shard-*-of-3.json >/dev/null || { echo "FAILED: no shard results" >&2; exit 1; }
"$trainsim" sweep merge sweep-shards/shard-*-of-3.json --format json >merged.json || exit 1
"$trainsim" sweep -t "$topology" -w "$workload" --gpus 64 --top 5 --quiet --format json >whole.json || exit 1
if ! cmp -s merged.json whole.json; then
  echo "FAILED: the merged job array differs from the single-process sweep" >&2
  diff merged.json whole.json | head -20 >&2
  exit 1
fi
echo "slurm: cluster up in $((started)) s; 3 array tasks on $host in $((finished - started)) s (submitted to done), merged = single-process sweep ($(wc -c <whole.json) bytes)"
