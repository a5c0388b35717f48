#!/usr/bin/env bash
# Runs the bad-input catalogue: each case directory holds `args` (one line, paths relative to the
# repository root), `exit` (the expected exit code) and `stderr` (the exact expected error text).
set -u
bin=$1
cases=$2
failed=0
count=0
for dir in "$cases"/*/; do
  name=$(basename "$dir")
  count=$((count + 1))
  expected_exit=$(cat "$dir/exit")
  mapfile -t args < <(tr ' ' '\n' < "$dir/args" | grep -av '^$')
  actual_err=$("$bin" "${args[@]}" 2>&1 >/dev/null)
  actual_exit=$?
  if [ "$actual_exit" != "$expected_exit" ]; then
    echo "FAIL $name: exit $actual_exit, expected $expected_exit"
    echo "$actual_err" | sed 's/^/    /'
    failed=$((failed + 1))
    continue
  fi
  if [ "$actual_err" != "$(cat "$dir/stderr")" ]; then
    echo "FAIL $name: stderr differs"
    diff <(echo "$actual_err") "$dir/stderr" | sed 's/^/    /'
    failed=$((failed + 1))
    continue
  fi
done
echo "$((count - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
