#!/usr/bin/env bash
# npm run lint: the layers and the package files (scripts/lint-packages.mjs), the formatting (oxfmt), the size of every
# function (oxlint), and the installed tree against package.json (npm ls). One step alone: `bash scripts/lint.sh
# <layers|format|size|deps>` (npm run format:check and lint:size are two of them). The tools are called directly, not
# through a nested `npm run` each: npm test runs this beside the tests, and each npm process costs about 0.35 s of CPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=node_modules/.bin

step() {
  case "$1" in
    layers) node scripts/lint-packages.mjs ;;
    format) "$bin/oxfmt" --check . ;;
    size) "$bin/oxlint" -c .oxlintrc.json --deny-warnings packages/*/src packages/console/app ;;
    deps) npm ls --silent >/dev/null ;;
    *)
      echo "lint.sh: unknown step '$1' (layers, format, size, deps)" >&2
      exit 2
      ;;
  esac
}

if [ $# -gt 0 ]; then
  for name in "$@"; do step "$name"; done
else
  for name in layers format size deps; do step "$name"; done
fi
