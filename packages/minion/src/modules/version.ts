import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

let cached: string | undefined

/**
 * Brine's version, read from `@brine/minion`'s package.json by walking up from this file, which
 * finds it both from `src/modules/` (tests) and from the bundled `dist/`.
 */
export function brineVersion(): string {
  if (cached !== undefined) return cached
  let directory = dirname(fileURLToPath(import.meta.url))
  for (let depth = 0; depth < 5; depth++) {
    try {
      const manifest = JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown }
      if (manifest.name === '@brine/minion' && typeof manifest.version === 'string') {
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
