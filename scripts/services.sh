#!/usr/bin/env bash
# npm run services: what the tests stand on, each installed and started by its ensure script when it is missing:
# PostgreSQL, the packaging tools (dpkg-deb), Chromium, salt-pepper and nats-server. npm test (scripts/test.sh) runs
# this directly, without an npm process around it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
for name in postgres packaging-tools chromium pepper nats; do
  bash "scripts/ensure-$name.sh"
done
