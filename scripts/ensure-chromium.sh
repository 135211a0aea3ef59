#!/usr/bin/env bash
# Makes the Chromium the console's browser tests drive ready, idempotently: installs Debian's chromium
# with apt-get when /usr/bin/chromium is missing, then prints its version. Never downloads a browser any
# other way (playwright-core only drives the system one). Run as root on Debian/Ubuntu.
set -euo pipefail

BIN="${BRINE_CHROMIUM:-/usr/bin/chromium}"
say() { echo "ensure-chromium: $*" >&2; }
die() { say "$*"; exit 1; }

if [ ! -x "$BIN" ]; then
  [ "$BIN" = /usr/bin/chromium ] || die "BRINE_CHROMIUM=$BIN is not an executable; this script only installs /usr/bin/chromium"
  [ "$(id -u)" = 0 ] || die "no chromium at $BIN; run this script as root (it installs Debian's chromium with apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  say "installing chromium with apt-get"
  # apt-get update only when the package lists cannot provide it (fresh images ship without lists).
  if ! apt-get install -y -q --no-install-recommends chromium >/dev/null; then
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends chromium >/dev/null
  fi
  [ -x "$BIN" ] || die "apt-get installed chromium but $BIN is not there"
fi
echo "chromium ready: $("$BIN" --version 2>/dev/null || echo "$BIN")"
