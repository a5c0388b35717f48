#!/usr/bin/env bash
# Every command's --help ends with a worked example, and the examples that need only shipped
# files run (exit 0 or 1: a plan that does not fit is still an answer).
set -u
bin=$1
failed=0
for cmd in "" run collective sweep "sweep merge" "trace" "trace summary" replay calibrate regress tunables goodput; do
  # shellcheck disable=SC2086
  example=$("$bin" $cmd --help | grep '^Example: ' | head -1 | sed 's/^Example: trainsim //')
  if [ -z "$example" ]; then
    echo "FAIL trainsim $cmd --help shows no example"
    failed=$((failed + 1))
    continue
  fi
  case "$example" in
    *rank0.json*|*shard-0.json*) continue ;;  # examples over the user's own files
  esac
  # shellcheck disable=SC2086
  "$bin" $example > /dev/null 2>&1
  rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "FAIL trainsim $example: exit $rc"
    failed=$((failed + 1))
  fi
done
echo "$failed failed"
[ "$failed" -eq 0 ]
