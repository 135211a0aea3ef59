import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

let cached: string | undefined

/**
 * The packages whose package.json gives Brine's version (one version for all, lerna's fixed mode): `@brine/minion`'s
 * own, and `@brine/cli`'s, where `brine-minion`'s one-file build (`dist/bundle/brine-minion.cjs`) inlines this module.
 */
const VERSIONED_PACKAGES = new Set(['@brine/minion', '@brine/cli'])

/**
 * Brine's version, read from the package.json of the package this file is in by walking up from it, which
 * finds it from `src/modules/` (tests), from the package's `dist/` and from the CLI's one-file build.
 */
export function brineVersion(): string {
  if (cached !== undefined) return cached
  let directory = dirname(fileURLToPath(import.meta.url))
  for (let depth = 0; depth < 5; depth++) {
    try {
      const manifest = JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown }
      if (typeof manifest.name === 'string' && VERSIONED_PACKAGES.has(manifest.name) && typeof manifest.version === 'string') {
        cached = manifest.version
        return cached
      }
    } catch {
      // No package.json at this level; keep walking up.
    }
    directory = dirname(directory)
  }
  cached = '0.0.0'
  return cached
}

/** Salt's `saltversioninfo`: the version as a list of integers. */
export function brineVersionInfo(): number[] {
  return brineVersion()
    .split(/[.+-]/)
    .slice(0, 3)
    .map((part) => Number.parseInt(part, 10))
    .filter((part) => Number.isFinite(part))
}
