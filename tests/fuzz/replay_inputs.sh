#!/usr/bin/env bash
# Runs a libFuzzer target once on every file under the directories given (libFuzzer treats a
# directory argument as a corpus to fuzz, a file argument as one input to run).
#   tests/fuzz/replay_inputs.sh FUZZER DIR...
set -euo pipefail
fuzzer=$1
shift
mapfile -t files < <(find "$@" -type f 2>/dev/null | sort)
[ ${#files[@]} -gt 0 ] || { echo "no inputs under $*"; exit 1; }
"$fuzzer" "${files[@]}" >/dev/null 2>&1 || { "$fuzzer" "${files[@]}" 2>&1 | tail -30; exit 1; }
echo "${#files[@]} inputs replayed"
