#!/usr/bin/env bash
# npm test: everything the project checks, shaped for two cores (docs/development.md, Tests).
#   1. what the tests stand on: the build (skipped when every dist/ is newer than its sources) and the services;
#   2. vitest on Node 24 (every project) and, beside it, the Node 22 run (scripts/test-node22.sh), the lint and the
#      typecheck (both read the sources only): the e2e files spend part of their time waiting for processes, timers
#      and disks, and the steps beside them fill it.
# Each step's output is kept in a log under .tmp/test/ and printed when the step ends, so the runs never
# interleave their lines; the exit code is the first failure's. The steps call their scripts and tools directly, not
# through `npm run` or npx (each npm process costs about 0.35 s of CPU; the package.json scripts name the same ones).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
logs=.tmp/test
rm -rf "$logs" && mkdir -p "$logs"

pids=()
names=()
# Starts `name command...` in the background, its output to $logs/name.log.
start() {
  local name=$1
  shift
  "$@" >"$logs/$name.log" 2>&1 &
  pids+=($!)
  names+=("$name")
}

# Waits for every started step, prints each one's log, and exits with the first failure's code.
finish() {
  local failed=0
  for index in "${!pids[@]}"; do
    local code=0
    wait "${pids[$index]}" || code=$?
    echo "== ${names[$index]} (exit $code)"
    cat "$logs/${names[$index]}.log"
    if [ "$code" != 0 ] && [ "$failed" = 0 ]; then failed=$code; fi
  done
  pids=()
  names=()
  [ "$failed" = 0 ] || exit "$failed"
}

start services bash scripts/services.sh
start build node scripts/quiet-build.mjs
finish

# Node 24 in the foreground; the Node 22 run, the lint and the typecheck beside it, their logs printed at the end.
start node22 bash scripts/test-node22.sh
start lint bash scripts/lint.sh
start typecheck node_modules/.bin/tsc -p tsconfig.json
code=0
node_modules/.bin/vitest run || code=$?
finish
exit "$code"
