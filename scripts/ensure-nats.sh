#!/usr/bin/env bash
# Makes the nats-server binary the @brine/transport-nats tests and NATS fleets use available,
# idempotently: installs Debian's nats-server with apt-get when no binary is on PATH (running
# apt-get update only when the install needs it) and prints its version. Tests start their own
# nats-server processes on free loopback ports, so this script starts none. Run as root on Debian.
set -euo pipefail

say() { echo "ensure-nats: $*" >&2; }
die() { say "$*"; exit 1; }

if command -v nats-server >/dev/null 2>&1; then
  echo "nats-server ready: $(nats-server --version 2>&1 | head -n 1)"
  exit 0
fi
[ "$(id -u)" = 0 ] || die "no nats-server on PATH; run this script as root (it installs Debian's nats-server)"

export DEBIAN_FRONTEND=noninteractive
say "installing nats-server with apt-get"
# apt-get update only when the package lists cannot provide it (fresh images ship without lists).
if ! apt-get install -y -q nats-server >/dev/null 2>&1; then
  apt-get update -q >/dev/null
  apt-get install -y -q nats-server >/dev/null
fi
command -v nats-server >/dev/null 2>&1 || die "nats-server installed but not found on PATH"
echo "nats-server ready: $(nats-server --version 2>&1 | head -n 1)"
