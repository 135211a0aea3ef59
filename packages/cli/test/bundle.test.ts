import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { modulesLoadedBy } from './helpers.js'

const cliDir = fileURLToPath(new URL('..', import.meta.url))
type BundleTarget = (name: string, env?: NodeJS.ProcessEnv, root?: string) => string | undefined
const { bundleTarget } = (await import(`${cliDir}bin/bundle.js`)) as { bundleTarget: BundleTarget }

const scratch: string[] = []
afterEach(() => {
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/**
 * A copy of the layout the launcher looks at: `<top>/packages/cli` with a built bundle of `brine` whose manifest names
 * one file of a sibling package, `../client/dist/index.js`, of the size it has; `checkout` puts a lerna.json at `<top>`.
 */
function layout(options: { checkout: boolean; builtAt?: number }): { root: string; client: string } {
  const top = mkdtempSync(join(tmpdir(), 'brine-bundle-'))
  scratch.push(top)
  const root = join(top, 'packages', 'cli')
  const client = join(top, 'packages', 'client', 'dist', 'index.js')
  mkdirSync(join(root, 'dist', 'bundle'), { recursive: true })
  mkdirSync(join(top, 'packages', 'client', 'dist'), { recursive: true })
  writeFileSync(client, 'export const client = 1\n')
  writeFileSync(join(root, 'dist', 'bundle', 'brine.cjs'), 'exports.main = async () => {}\n')
  const manifest = { builtAt: options.builtAt ?? Date.now() + 60_000, files: { '../client/dist/index.js': 24 } }
  writeFileSync(join(root, 'dist', 'bundle', 'brine.json'), JSON.stringify(manifest))
  if (options.checkout) writeFileSync(join(top, 'lerna.json'), '{}\n')
  return { root, client }
}

describe('which build of a command the launcher runs (bin/bundle.js)', () => {
  it('runs the one-file build when the files it inlined are there, as they were when it was built', () => {
    for (const checkout of [true, false]) {
      const { root } = layout({ checkout })
      expect(bundleTarget('brine', {}, root)).toBe(join(root, 'dist', 'bundle', 'brine.cjs'))
    }
  })

  it('runs the modules when the build is missing, its manifest is unreadable, or BRINE_DISABLE_BUNDLE is set', () => {
    const { root } = layout({ checkout: true })
    expect(bundleTarget('brine', { BRINE_DISABLE_BUNDLE: '1' }, root)).toBeUndefined()
    // A command with no build of its own in this layout.
    expect(bundleTarget('brine-key', {}, root)).toBeUndefined()
    writeFileSync(join(root, 'dist', 'bundle', 'brine.json'), '{"builtAt": ')
    expect(bundleTarget('brine', {}, root)).toBeUndefined()
    const { root: noBundle } = layout({ checkout: true })
    rmSync(join(noBundle, 'dist', 'bundle', 'brine.cjs'))
    expect(bundleTarget('brine', {}, noBundle)).toBeUndefined()
  })

  it('runs the modules when a file it inlined is gone or has another size', () => {
    const gone = layout({ checkout: false })
    rmSync(gone.client)
    expect(bundleTarget('brine', {}, gone.root)).toBeUndefined()
    const changed = layout({ checkout: false })
    writeFileSync(changed.client, 'export const client = 22\n')
    expect(bundleTarget('brine', {}, changed.root)).toBeUndefined()
  })

  it('in a checkout, runs the modules once a package it inlined was rebuilt after it; an installed copy compares sizes only', () => {
    const builtAt = Date.now() - 60_000
    for (const checkout of [true, false]) {
      const { root, client } = layout({ checkout, builtAt })
      // Written after the build, at the same size: a rebuild in a checkout; an unpacking anywhere else.
      const later = new Date(builtAt + 30_000)
      utimesSync(client, later, later)
      expect(bundleTarget('brine', {}, root)).toBe(checkout ? undefined : join(root, 'dist', 'bundle', 'brine.cjs'))
    }
  })
})

describe('the built brine command', () => {
  it('runs its one-file build: one module of its own, none of the packages it inlines, no cryptography, no YAML parser', () => {
    expect(bundleTarget('brine')).toBe(`${cliDir}dist/bundle/brine.cjs`)
    const loaded = modulesLoadedBy(['--version'])
    expect(loaded).toContain(`file://${cliDir}dist/bundle/brine.cjs`)
    expect(loaded.filter((url) => /\/packages\/[^/]+\/dist\/(index|root-key-file)\.js$|\/dist\/bin\//.test(url))).toEqual([])
    expect(loaded.filter((url) => url === 'node:crypto' || /\/(yaml|tweetnacl|msgpackr|commander)\//.test(url) || url.endsWith('yaml-bundle.cjs'))).toEqual([])
  })

  it('prints and exits as its modules do, for what needs no master: --version, --versions-report, a usage error, a missing root key', () => {
    const root = mkdtempSync(join(tmpdir(), 'brine-bundle-run-'))
    scratch.push(root)
    const configDir = join(root, 'etc')
    mkdirSync(configDir)
    writeFileSync(join(configDir, 'master'), `root_dir: ${join(root, 'master')}\ntransport: tcp\n`)
    const env = { ...process.env, HOME: root, XDG_CACHE_HOME: join(root, 'cache'), NODE_COMPILE_CACHE: '' }
    for (const args of [
      ['--version'],
      ['--versions-report'],
      ['*'],
      ['-c', configDir, '*', 'test.ping'],
      ['-c', configDir, '*', 'test.ping', '--out', 'xml'],
    ]) {
      const run = (extra: NodeJS.ProcessEnv) => {
        const result = spawnSync(process.execPath, [`${cliDir}bin/brine.js`, ...args], { encoding: 'utf8', env: { ...env, ...extra } })
        return { args, status: result.status, stdout: result.stdout, stderr: result.stderr }
      }
      const bundled = run({})
      expect(bundled.stdout + bundled.stderr).not.toBe('')
      expect(bundled).toEqual(run({ BRINE_DISABLE_BUNDLE: '1' }))
    }
  })

  it('copies the YAML parser beside it and loads it to parse a changed config, as the modules load theirs', () => {
    expect(readFileSync(`${cliDir}dist/bundle/yaml-bundle.cjs`, 'utf8')).toBe(readFileSync(`${cliDir}../config/dist/yaml-bundle.cjs`, 'utf8'))
    const root = mkdtempSync(join(tmpdir(), 'brine-bundle-yaml-'))
    scratch.push(root)
    writeFileSync(join(root, 'master'), `root_dir: ${join(root, 'master')}\ntransport: tcp\n`)
    const env = { ...process.env, HOME: root, XDG_CACHE_HOME: join(root, 'cache'), NODE_COMPILE_CACHE: '' }
    const args = ['-c', root, '*', 'test.ping']
    const yaml = (loaded: string[]): string[] => loaded.filter((url) => /yaml/.test(url))
    expect(yaml(modulesLoadedBy(args, 'brine', { env, status: 1 }))).toEqual([`file://${cliDir}dist/bundle/yaml-bundle.cjs`])
    expect(yaml(modulesLoadedBy(args, 'brine', { env, status: 1 }))).toEqual([])
  })
})

describe.each(['brine-run', 'brine-key'])('the built %s command', (bin) => {
  it('runs its one-file build and prints and exits as its modules do: --version, --versions-report, a usage error, a missing config', () => {
    expect(bundleTarget(bin)).toBe(`${cliDir}dist/bundle/${bin}.cjs`)
    const loaded = modulesLoadedBy(['--version'], bin)
    expect(loaded).toContain(`file://${cliDir}dist/bundle/${bin}.cjs`)
    expect(loaded.filter((url) => /\/packages\/[^/]+\/dist\/(index|root-key-file)\.js$|\/dist\/bin\//.test(url))).toEqual([])
    const root = mkdtempSync(join(tmpdir(), 'brine-bundle-run-'))
    scratch.push(root)
    const env = { ...process.env, HOME: root, XDG_CACHE_HOME: join(root, 'cache'), NODE_COMPILE_CACHE: '' }
    for (const args of [['--version'], ['--versions-report'], ['--no-such-flag'], ['-c', join(root, 'missing'), '-L']]) {
      const run = (extra: NodeJS.ProcessEnv) => {
        const result = spawnSync(process.execPath, [`${cliDir}bin/${bin}.js`, ...args], { encoding: 'utf8', env: { ...env, ...extra } })
        return { args, status: result.status, stdout: result.stdout, stderr: result.stderr }
      }
      const bundled = run({})
      expect(bundled.stdout + bundled.stderr).not.toBe('')
      expect(bundled).toEqual(run({ BRINE_DISABLE_BUNDLE: '1' }))
    }
  })
})
