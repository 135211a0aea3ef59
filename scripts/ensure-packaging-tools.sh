#!/usr/bin/env bash
# Makes the tools the .deb tests need present, idempotently: dpkg-deb (builds the package) and systemd-analyze
# (verifies its units). Installs Debian's dpkg and systemd packages with apt when a tool is missing.
# Run as root on Debian/Ubuntu.
set -euo pipefail
say() { echo "ensure-packaging-tools: $*" >&2; }

missing=()
command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if [ "${#missing[@]}" -eq 0 ]; then
  echo "packaging tools ready: $(command -v dpkg-deb), $(command -v systemd-analyze)"
  exit 0
fi
[ "$(id -u)" = 0 ] || { say "missing ${missing[*]}; run this script as root (it installs them with apt-get)"; exit 1; }
export DEBIAN_FRONTEND=noninteractive
say "installing ${missing[*]} with apt-get"
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v dpkg-deb >/dev/null && command -v systemd-analyze >/dev/null || { say "dpkg-deb or systemd-analyze still missing after the install"; exit 1; }
echo "packaging tools ready: $(command -v dpkg-deb), $(command -v systemd-analyze)"
