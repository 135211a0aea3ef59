import { readFileSync, realpathSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { HarnessSetupError } from '@brine/testkit'
import { binPath, packageDir } from '../src/index.js'

const here = dirname(new URL(import.meta.url).pathname)

describe('binPath: the CLI resolved as a package', () => {
  it("names, for each command of @brine/cli's bin map, the file that map names in the @brine/cli module resolution finds", () => {
    const manifestPath = createRequire(import.meta.url).resolve('@brine/cli/package.json')
    const bins = (JSON.parse(readFileSync(manifestPath, 'utf8')) as { bin: Record<string, string> }).bin
    expect(Object.keys(bins)).toContain('brine-master')
    for (const [name, file] of Object.entries(bins)) {
      const resolved = binPath(name)
      expect(realpathSync(resolved)).toBe(realpathSync(join(dirname(manifestPath), file)))
    }
    // The repository's copy is the workspace package, not a path computed from where the harness sits.
    expect(realpathSync(dirname(manifestPath))).toBe(realpathSync(join(here, '../../cli')))
  })

  it('refuses a command the CLI does not have, naming it and the ones it has', () => {
    let thrown: unknown
    try {
      binPath('brine-nonesuch')
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(HarnessSetupError)
    expect((thrown as Error).message).toMatch(/@brine\/cli has no command brine-nonesuch \(its bins: .*brine-master/)
  })
})

describe('packageDir', () => {
  it('finds the directory of the named package above a module of it', () => {
    expect(realpathSync(packageDir('@brine/harness', import.meta.url))).toBe(realpathSync(join(here, '..')))
  })

  it('throws HarnessSetupError naming the package when no package.json above has that name', () => {
    expect(() => packageDir('@brine/nonesuch', import.meta.url)).toThrow(HarnessSetupError)
    expect(() => packageDir('@brine/nonesuch', import.meta.url)).toThrow(/cannot find @brine\/nonesuch's package\.json/)
  })
})
