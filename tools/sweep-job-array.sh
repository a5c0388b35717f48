#!/usr/bin/env bash
# A sweep split over a Slurm job array: each array task runs one shard, the last step merges.
#
#   sbatch --array=0-15 tools/sweep-job-array.sh topologies/dgx-h100-superpod.json workloads/llama3-70b.json 512
#   # (from the checkout, or with TRAINSIM=/path/to/trainsim; shards go to ./sweep-shards/)
#   # once every task has finished:
#   build/trainsim sweep merge sweep-shards/shard-*-of-16.json > sweep.txt
#
# The shards split the space by candidate index (I mod N), so their merged answer is byte for
# byte what one unsharded sweep prints (tests/scheduler/slurm_sweep.sh checks it on a real Slurm).
# Without Slurm, GNU parallel does the same on one machine or over ssh
# (tests/scheduler/parallel_sweep.sh):
#
#   parallel -j 4 build/trainsim sweep -t T.json -w W.json --shard {}/16 --format json --quiet \
#     '>' sweep-shards/shard-{}-of-16.json ::: $(seq 0 15)
#
#SBATCH --job-name=trainsim-sweep
#SBATCH --cpus-per-task=4
#SBATCH --time=00:30:00
#SBATCH --output=sweep-shards/slurm-%A_%a.log
set -euo pipefail
topology=${1:?usage: sweep-job-array.sh TOPOLOGY.json WORKLOAD.json GPUS [TOP]}
workload=${2:?usage: sweep-job-array.sh TOPOLOGY.json WORKLOAD.json GPUS [TOP]}
gpus=${3:?usage: sweep-job-array.sh TOPOLOGY.json WORKLOAD.json GPUS [TOP]}
top=${4:-10}
index=${SLURM_ARRAY_TASK_ID:?run under sbatch --array=0-(N-1)}
count=${SLURM_ARRAY_TASK_COUNT:?run under sbatch --array=0-(N-1)}
# sbatch runs a copy of this script from its spool: the binary is found from where the job was
# submitted (the checkout), or $TRAINSIM
trainsim=${TRAINSIM:-${SLURM_SUBMIT_DIR:-.}/build/trainsim}
mkdir -p sweep-shards
"$trainsim" sweep -t "$topology" -w "$workload" --gpus "$gpus" --top "$top" \
  --threads "${SLURM_CPUS_PER_TASK:-1}" --shard "$index/$count" --format json --quiet \
  >"sweep-shards/shard-$index-of-$count.json"
