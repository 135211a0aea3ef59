#!/usr/bin/env bash
# Runs the unit and compliance tests of every package (the bench's smoke test aside: the bench is a Node 24 tool)
# and the e2e job-flow tests again on the project's Node 22 (scripts/runtime.sh 22), the other supported runtime.
# The daemons those tests start run on the same Node (they are spawned with the test process's own node).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin="$(bash scripts/runtime.sh 22)"
projects=()
for dir in packages/*/; do
  name="$(basename "$dir")"
  [ "$name" = bench ] || projects+=(--project "$name")
done
export PATH="$bin:$PATH"
echo "test-node22: $(node --version) at $(command -v node)" >&2
# One run (the filters keep every package file and, of the e2e files, job-flow alone), so job-flow shares the two
# workers with the package files instead of waiting for them and paying a second start-up.
# npm test runs this beside the Node 24 run (scripts/test.sh): vitest's caches of its own, so that the two runs never
# write one file at once (the file order then comes from scripts/test-durations.json).
node node_modules/vitest/vitest.mjs run "${projects[@]}" --project e2e packages/ test-e2e/job-flow.test.ts \
  --no-cache --fsModuleCachePath node_modules/.vitest-cache-node22
