#!/usr/bin/env bash
# The Node 22 run (scripts/runtime.sh 22, the other supported runtime): what could differ on it, not every test again
# (docs/development.md, "What the Node 22 run proves"):
#   - the native addons load and work: zeromq's (transport-zeromq) and msgpackr's extractor (core);
#   - the wire on every transport: the compliance suite and each transport package's own tests, the runtime under them
#     (transport) and the keys, boxes and signatures on it (crypt);
#   - the dependencies that stand on Node's sockets outside the transports: fastify and ws (api), pg (returners);
#   - the daemons and the CLI as shipped: the e2e job-flow tests start the built brine-master, brine-minion, brine-key
#     and brine on Node 22 (spawned with the test process's own node) over every transport, with worker threads.
# The other packages' unit tests exercise the same JavaScript on either runtime: the sources are held to ES2022
# (tsconfig.base.json's lib) and built for node22 (tsup.base.ts), so they run on Node 24 alone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin="$(bash scripts/runtime.sh 22)"
packages=()
for name in core transport transport-compliance transport-zeromq transport-tcp transport-nats crypt api returners; do
  packages+=("packages/$name/")
done
export PATH="$bin:$PATH"
echo "test-node22: $(node --version) at $(command -v node)" >&2
# One run (the filters keep every file of those packages and, of the e2e files, job-flow alone), so job-flow shares the
# two workers with the package files instead of waiting for them and paying a second start-up. A filter is a part of
# the file's path: packages/transport/ is that package's alone, not transport-tcp's.
# npm test runs this beside the Node 24 run (scripts/test.sh): vitest's caches of its own, so that the two runs never
# write one file at once (the file order then comes from scripts/test-durations.json).
# Two workers: it runs beside the Node 24 run's four, and finishes long before it even so.
node node_modules/vitest/vitest.mjs run "${packages[@]}" test-e2e/job-flow.test.ts \
  --maxWorkers 2 --no-cache --fsModuleCachePath node_modules/.vitest-cache-node22
