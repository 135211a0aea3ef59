#!/usr/bin/env bash
# Usage: scripts/runtime.sh [MAJOR]   (default 24)
# Prints the bin directory of the project's own Node MAJOR, installing it into .runtime/ first if needed.
# The binary comes from the npm registry (the official builds, published as node-linux-<arch>) through the
# machine's own npm, and is used only if its tarball's sha512 is the one pinned in scripts/runtimes.txt.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
major="${1:-24}"
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "runtime.sh: no Node runtime pinned for $(uname -s) $(uname -m); pinned: linux x64, linux arm64" >&2; exit 2 ;;
esac
if [ "$(uname -s)" != Linux ]; then
  echo "runtime.sh: the project's own runtime is pinned for Linux only; on $(uname -s) install Node 24 yourself" >&2
  exit 2
fi
pin="$(grep -E "^$major [0-9.]+ $arch " "$root/scripts/runtimes.txt" || true)"
if [ -z "$pin" ]; then
  echo "runtime.sh: no Node $major pinned for $arch in scripts/runtimes.txt (pinned majors: $(grep -Eo '^[0-9]+' "$root/scripts/runtimes.txt" | sort -u | tr '\n' ' '))" >&2
  exit 2
fi
read -r _ version _ integrity <<<"$pin"
dir="$root/.runtime/node-v$version-linux-$arch"
if [ ! -x "$dir/bin/node" ]; then
  command -v npm >/dev/null || { echo "runtime.sh: npm is needed to fetch Node $version from the npm registry" >&2; exit 2; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  echo "runtime.sh: fetching Node $version (node-linux-$arch) from the npm registry" >&2
  (cd "$work" && npm pack --silent "node-linux-$arch@$version" >/dev/null)
  tarball="$work/node-linux-$arch-$version.tgz"
  actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
  if [ "$actual" != "$integrity" ]; then
    echo "runtime.sh: node-linux-$arch@$version has sha512 $actual, pinned $integrity; refusing it" >&2
    exit 1
  fi
  mkdir -p "$work/unpacked"
  tar xzf "$tarball" -C "$work/unpacked" --strip-components=1
  mkdir -p "$root/.runtime"
  rm -rf "$dir"
  mv "$work/unpacked" "$dir"
fi
"$dir/bin/node" -e 'process.exit(0)' || { echo "runtime.sh: $dir/bin/node does not run on this machine" >&2; exit 1; }
echo "$dir/bin"
