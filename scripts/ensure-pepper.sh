#!/usr/bin/env bash
# Makes pepper (salt-api's official CLI and Python library, Debian's salt-pepper) ready for the e2e test that
# drives it against brine-api, idempotently: installs it with apt-get when /usr/bin/salt-pepper is missing, then
# prints its version. Never installs it any other way (no pip). Run as root on Debian/Ubuntu.
set -euo pipefail

# Debian names the command salt-pepper (upstream calls it pepper).
BIN=/usr/bin/salt-pepper
say() { echo "ensure-pepper: $*" >&2; }
die() { say "$*"; exit 1; }

if [ ! -x "$BIN" ]; then
  [ "$(id -u)" = 0 ] || die "no salt-pepper at $BIN; run this script as root (it installs Debian's salt-pepper with apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  say "installing salt-pepper with apt-get"
  # apt-get update only when the package lists cannot provide it (fresh images ship without lists).
  if ! apt-get install -y -q --no-install-recommends salt-pepper >/dev/null; then
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends salt-pepper >/dev/null
  fi
  [ -x "$BIN" ] || die "apt-get installed salt-pepper but $BIN is not there"
fi
echo "pepper ready: $("$BIN" --version 2>/dev/null || echo "$BIN")"
