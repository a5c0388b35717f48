#!/usr/bin/env bash
# A sweep split over a Slurm job array: each array task runs one shard, the last step merges.
#
#   sbatch --array=0-15 tools/sweep-job-array.sh topologies/dgx-h100-superpod.json workloads/llama3-70b.json 512
#   # once every task has finished:
#   build/trainsim sweep merge sweep-shards/shard-*-of-16.json > sweep.txt
#
# The shards split the space by candidate index (I mod N), so their merged answer is byte for
# byte what one unsharded sweep prints. Without Slurm, GNU parallel does the same on one machine
# or over ssh:
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
mkdir -p sweep-shards
"$(dirname "$0")/../build/trainsim" sweep -t "$topology" -w "$workload" --gpus "$gpus" --top "$top" \
  --threads "${SLURM_CPUS_PER_TASK:-1}" --shard "$index/$count" --format json --quiet \
  >"sweep-shards/shard-$index-of-$count.json"
