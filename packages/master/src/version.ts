import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

let cached: string | undefined

/**
 * The master's Brine version, from `@brine/master`'s package.json found by walking up from this
 * file (works from `src/` in tests and from the bundled `dist/`); manage.versions compares minions to it.
 */
export function masterVersion(): string {
  if (cached !== undefined) return cached
  let directory = dirname(fileURLToPath(import.meta.url))
  for (let depth = 0; depth < 5; depth++) {
    try {
      const manifest = JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown }
      if (manifest.name === '@brine/master' && typeof manifest.version === 'string') return (cached = manifest.version)
    } catch {
      // No package.json at this level; keep walking up.
    }
    directory = dirname(directory)
  }
  return (cached = '0.0.0')
}
