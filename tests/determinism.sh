#!/usr/bin/env bash
# Determinism: the same inputs give the same bytes of output. Runs `run` (report, timeline, HTML
# page), `sweep`, `replay` and `goodput` with binary A and again with binary B (by default A again), sweeping with
# one thread under A and two under B, and compares the outputs byte for byte.
#   tests/determinism.sh A [B]      e.g. build/trainsim build-asan/trainsim (two build types)
set -u
a=$1
b=${2:-$1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
check() {  # name, then the command line (after the binary); "@OUT" is replaced by a file path
  local name=$1
  shift
  local args_a=("${@//@OUT/$work/$name.a.out}") args_b=("${@//@OUT/$work/$name.b.out}")
  "$a" "${args_a[@]}" >"$work/$name.a" 2>/dev/null
  local rc_a=$?
  "$b" "${args_b[@]//--threads=1/--threads=2}" >"$work/$name.b" 2>/dev/null
  local rc_b=$?
  # a written file's own path may appear in the output
  sed -i "s#$work/$name.a.out#OUT#g" "$work/$name.a"
  sed -i "s#$work/$name.b.out#OUT#g" "$work/$name.b"
  if [ "$rc_a" != "$rc_b" ] || ! cmp -s "$work/$name.a" "$work/$name.b"; then
    echo "FAIL $name: outputs differ (exit $rc_a vs $rc_b)"
    failed=$((failed + 1))
  elif [ -f "$work/$name.a.out" ] && ! cmp -s "$work/$name.a.out" "$work/$name.b.out"; then
    echo "FAIL $name: written files differ"
    failed=$((failed + 1))
  else
    echo "same $name ($(wc -c <"$work/$name.a") bytes)"
  fi
}
T=topologies/dgx-a100-superpod.json
H=topologies/dgx-h100-superpod.json
R=tests/reference/traces/hta
check run-gpt3 run -t $T -w workloads/gpt3-175b.json -s tp=8,pp=8,dp=16,sp=on,recompute=selective,schedule=interleaved,vpp=3 --format json
check run-timeline run -t $T -w workloads/megatron2021-7.5b.json -s tp=4,pp=2,gpus=64,schedule=zb-h1 --timeline @OUT --format csv
check run-moe run -t $H -w workloads/mixtral-8x7b.json -s tp=2,ep=8,pp=2,gpus=64,zero=1,ep_overlap=on --format json
check sweep-threads sweep -t $T -w workloads/megatron2021-7.5b.json --gpus 64 --top 10 --format json --threads=1
check replay-one replay --trace $R/trace_diff_control_control.json.gz --compute-scale 1.5 --format json
check replay-two replay --trace $R/trace_filter_sampled_rank-0.json.gz --trace $R/trace_filter_sampled_rank-1.json.gz --format json
check replay-topology replay --trace $R/nccl_parser_config_nccl_data.json.gz -t $T --format csv
check calibrate calibrate --trace $R/trace_diff_control_control.json.gz -t $T -o @OUT
check run-html run -t $T -w workloads/megatron2021-7.5b.json -s tp=4,pp=2,gpus=64,schedule=zb-h1 --html @OUT
check goodput-html goodput -t $T -w workloads/gpt3-175b.json -s tp=8,pp=8,dp=16 --tokens 3e11 --samples 50 --format json --html @OUT
check collective-sweep collective -t $H --op all_reduce --sweep 1KiB:1GiB --group 0-15 --format json
[ "$failed" -eq 0 ] && echo "deterministic: $a${2:+ and $b}"
[ "$failed" -eq 0 ]
