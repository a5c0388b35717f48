#!/usr/bin/env bash
# A sweep sharded by GNU parallel on one machine equals the single-process sweep, byte for byte.
#   tests/scheduler/parallel_sweep.sh TRAINSIM SOURCE_DIR
# Exits 77 (ctest: skipped) where GNU parallel is not installed.
set -uo pipefail
trainsim=$(realpath "$1")
source_dir=$(realpath "$2")
command -v parallel >/dev/null 2>&1 || { echo "SKIPPED: GNU parallel not installed (apt-get install parallel)" >&2; exit 77; }
parallel --version 2>/dev/null | grep -q "GNU parallel" || { echo "SKIPPED: parallel is not GNU parallel" >&2; exit 77; }
work=$(mktemp -d /tmp/trainsim-parallel-XXXXXX)
trap 'rm -rf "$work"' EXIT
topology="$source_dir/topologies/dgx-h100-superpod.json"
workload="$source_dir/workloads/llama3-8b.json"
mkdir -p "$work/sweep-shards"
# the line tools/sweep-job-array.sh documents, 4 shards, 2 at a time
timeout 300 parallel --will-cite --halt now,fail=1 -j 2 "$trainsim" sweep -t "$topology" -w "$workload" --gpus 64 \
  --top 5 --shard {}/4 --format json --quiet '>' "$work/sweep-shards/shard-{}-of-4.json" ::: 0 1 2 3 || {
  echo "FAILED: a shard failed" >&2
  exit 1
}
"$trainsim" sweep merge "$work"/sweep-shards/shard-*-of-4.json --format json >"$work/merged.json" || exit 1
"$trainsim" sweep -t "$topology" -w "$workload" --gpus 64 --top 5 --quiet --format json >"$work/whole.json" || exit 1
if ! cmp -s "$work/merged.json" "$work/whole.json"; then
  echo "FAILED: the merged shards differ from the single-process sweep" >&2
  diff "$work/merged.json" "$work/whole.json" | head -20 >&2
  exit 1
fi
echo "gnu parallel: 4 shards, merged = single-process sweep ($(wc -c <"$work/whole.json") bytes)"
