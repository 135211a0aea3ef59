import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { BRINE_VERSION } from '../src/io.js'
import { compileCacheDir, importWithoutNativeMsgpack } from '../src/compile-cache.js'
import { COMMANDS, memoryIO, modulesLoadedBy } from './helpers.js'

const cliDir = fileURLToPath(new URL('..', import.meta.url))
const repoRoot = fileURLToPath(new URL('../../..', import.meta.url))
const manifest = JSON.parse(readFileSync(`${cliDir}package.json`, 'utf8')) as { bin: Record<string, string>; files: string[] }
const lock = JSON.parse(readFileSync(`${repoRoot}package-lock.json`, 'utf8')) as { packages: Record<string, { bin?: Record<string, string> }> }

/**
 * Node's builtin modules the built brine-minion had loaded when it exited, run with the arguments `argsIn` gives for a
 * scratch directory (also its HOME and cache, removed after).
 */
function minionBuiltins(argsIn: (root: string) => string[]): string[] {
  const root = mkdtempSync(join(tmpdir(), 'brine-builtins-'))
  try {
    const hook = join(root, 'hook.cjs')
    const list = join(root, 'builtins.json')
    writeFileSync(hook, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(list)}, JSON.stringify(process.moduleLoadList)))\n`)
    const args = ['--require', hook, `${cliDir}bin/brine-minion.js`, ...argsIn(root)]
    const result = spawnSync(process.execPath, args, { encoding: 'utf8', env: { ...process.env, HOME: root, XDG_CACHE_HOME: root } })
    expect(result.status, result.stderr).toBe(0)
    return JSON.parse(readFileSync(list, 'utf8')) as string[]
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

describe('bins that npm can link at install time', () => {
  it('point at committed launchers (npm ci links a bin only if its file exists before the build), in package.json and the lock', () => {
    const committed = execFileSync('git', ['ls-files', 'bin'], { cwd: cliDir, encoding: 'utf8' }).trim().split('\n')
    expect(Object.keys(manifest.bin).sort()).toEqual([
      'brine',
      'brine-api',
      'brine-call',
      'brine-key',
      'brine-master',
      'brine-minion',
      'brine-run',
      'brine-syndic',
    ])
    for (const [name, path] of Object.entries(manifest.bin)) {
      expect(path).toBe(`./bin/${name}.js`)
      expect(committed).toContain(`bin/${name}.js`)
      expect(readFileSync(`${cliDir}${path}`, 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/)
      expect(statSync(`${cliDir}${path}`).mode & 0o111).not.toBe(0)
      // npm ci links what the lock says, not package.json.
      expect(lock.packages['packages/cli']!.bin![name]).toBe(path.slice(2))
    }
    expect(manifest.files).toEqual(expect.arrayContaining(['dist', 'bin']))
  })
})

describe.each(COMMANDS)('%s --versions-report', (_name, command) => {
  it("prints Salt's versions report and exits 0, needing no other argument", async () => {
    const io = memoryIO()
    expect(await command(['--versions-report'], io)).toBe(0)
    expect(io.out()).toMatch(new RegExp(`^Brine Version:\\n +Brine: ${BRINE_VERSION.replaceAll('.', '\\.')}\\n`))
    expect(io.out()).toMatch(/\n +commander: \d+\.\d+\.\d+\n/)
    expect(io.out()).toMatch(/\n +msgpackr: \d+\.\d+\.\d+\n/)
    expect(io.out()).not.toMatch(/libzmq|zeromq/)
    expect(io.out()).toContain('System Versions:\n')
    expect(io.err()).toBe('')
  })
})

describe('the Node a bin runs on', () => {
  it('accepts Node 24 and later and 22.12 and later 22.x, refuses the rest (package.json engines)', async () => {
    const { isSupportedNode, SUPPORTED_NODE } = (await import(`${cliDir}bin/node-version.js`)) as {
      isSupportedNode: (version: string) => boolean
      SUPPORTED_NODE: string
    }
    expect(['24.0.0', '24.21.0', '26.12.1', '22.12.0', '22.23.3'].map(isSupportedNode)).toEqual([true, true, true, true, true])
    expect(['20.20.2', '22.11.0', '23.11.0', '18.20.8'].map(isSupportedNode)).toEqual([false, false, false, false])
    expect(manifest).toMatchObject({ engines: { node: '^22.12.0 || >=24.0.0' } })
    expect(SUPPORTED_NODE).toMatch(/Node 24 LTS.*22\.12/)
  })

  it("runs on the project's Node 22 and refuses the machine's older Node with a sentence naming the versions", async () => {
    const { isSupportedNode } = (await import(`${cliDir}bin/node-version.js`)) as { isSupportedNode: (version: string) => boolean }
    const node22 = execFileSync('bash', [`${repoRoot}scripts/runtime.sh`, '22'], { encoding: 'utf8' }).trim()
    const onNode22 = execFileSync(`${node22}/node`, [`${cliDir}bin/brine.js`, '--version'], { encoding: 'utf8' })
    expect(onNode22.trim()).toMatch(/^\d+\.\d+\.\d+$/)
    // The machines this project is tested on keep Node 20 as their system Node (DEVELOPERS: a fresh machine has
    // only Node 20 and npm); a run there proves the refusal on a real old Node.
    const systemNode = '/usr/bin/node'
    const systemVersion = execFileSync(systemNode, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim()
    const run = spawnSync(systemNode, [`${cliDir}bin/brine.js`, '--version'], { encoding: 'utf8' })
    if (isSupportedNode(systemVersion)) {
      expect(run.status).toBe(0)
    } else {
      expect(run.status).toBe(1)
      expect(run.stderr).toBe(
        `brine: Node ${systemVersion} is not supported; Brine needs Node 24 LTS (Brine is built and shipped on it) or Node 22.12 and later 22.x\n`,
      )
    }
  })
})

describe("Node's compile cache for the commands", () => {
  it("lives under the user's cache ($XDG_CACHE_HOME, else ~/.cache), or where NODE_COMPILE_CACHE says", () => {
    const home = (): string => '/home/ann'
    expect(compileCacheDir({}, home)).toBe('/home/ann/.cache/brine/compile-cache')
    expect(compileCacheDir({ XDG_CACHE_HOME: '/var/cache/ann' }, home)).toBe('/var/cache/ann/brine/compile-cache')
    // The XDG spec ignores a relative path.
    expect(compileCacheDir({ XDG_CACHE_HOME: 'cache' }, home)).toBe('/home/ann/.cache/brine/compile-cache')
    expect(compileCacheDir({ NODE_COMPILE_CACHE: '/tmp/cc', XDG_CACHE_HOME: '/var/cache/ann' }, home)).toBe('/tmp/cc')
    expect(compileCacheDir({}, () => '')).toBeUndefined()
    expect(
      compileCacheDir({}, () => {
        throw new Error('no home')
      }),
    ).toBeUndefined()
  })

  // The command's modules (BRINE_DISABLE_BUNDLE) leave one entry each; its one-file build, one.
  it.each([
    ['modules', { BRINE_DISABLE_BUNDLE: '1' }, 3, /cache for (?:ESM )?\S*\/packages\/cli\/dist\/\S* was accepted/],
    ['one-file build', {}, 0, /cache for (?:CommonJS )?\S*\/packages\/cli\/dist\/bundle\/brine\.cjs was accepted/],
  ])('is filled by a run of a built command (its %s) and reused by the next; NODE_DISABLE_COMPILE_CACHE turns it off', (_, build, atLeast, accepted) => {
    const root = mkdtempSync(join(tmpdir(), 'brine-cc-'))
    try {
      const env = { ...process.env, XDG_CACHE_HOME: root, NODE_COMPILE_CACHE: '', ...build }
      const off = spawnSync(process.execPath, [`${cliDir}bin/brine.js`, '--version'], { encoding: 'utf8', env: { ...env, NODE_DISABLE_COMPILE_CACHE: '1' } })
      expect(off.status).toBe(0)
      expect(readdirSync(root)).toEqual([])
      const first = spawnSync(process.execPath, [`${cliDir}bin/brine.js`, '--version'], { encoding: 'utf8', env })
      expect(first.status).toBe(0)
      const cacheDir = join(root, 'brine', 'compile-cache')
      // Node keeps one directory per Node version and V8 flags, holding one entry per module compiled.
      const entries = readdirSync(cacheDir).flatMap((version) => readdirSync(join(cacheDir, version)))
      expect(entries.length).toBeGreaterThan(atLeast)
      const second = spawnSync(process.execPath, [`${cliDir}bin/brine.js`, '--version'], {
        encoding: 'utf8',
        env: { ...env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' },
      })
      expect(second.status).toBe(0)
      expect(second.stdout.trim()).toBe(first.stdout.trim())
      // Node 24 says "code cache for ESM <path> was accepted", Node 22 "cache for <url> was accepted".
      expect(second.stderr).toMatch(accepted)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})

/** The environment that runs a command's modules rather than its one-file build (bin/bundle.js; test/bundle.test.ts tests that). */
const MODULES_ENV = { ...process.env, BRINE_DISABLE_BUNDLE: '1' }

describe('what the brine command loads at start (its modules)', () => {
  it("loads msgpackr without its native extractor, setting msgpackr's switch only while it loads and never over the user's", async () => {
    const env: NodeJS.ProcessEnv = {}
    const seen = await importWithoutNativeMsgpack(async () => env.MSGPACKR_NATIVE_ACCELERATION_DISABLED, env)
    expect(seen).toBe('true')
    expect(env).toEqual({})
    const failing = importWithoutNativeMsgpack(async () => Promise.reject(new Error('no module')), env)
    await expect(failing).rejects.toThrow('no module')
    expect(env).toEqual({})
    const users: NodeJS.ProcessEnv = { MSGPACKR_NATIVE_ACCELERATION_DISABLED: 'false' }
    expect(await importWithoutNativeMsgpack(async () => users.MSGPACKR_NATIVE_ACCELERATION_DISABLED, users)).toBe('false')
    expect(users).toEqual({ MSGPACKR_NATIVE_ACCELERATION_DISABLED: 'false' })
  })

  it('loads yaml from the bundle of the package that uses it, and no native addon, as the built command runs', () => {
    const loaded = modulesLoadedBy(['--version'], 'brine', { env: MODULES_ENV })
    expect(loaded.some((url) => url.includes('/packages/config/dist/'))).toBe(true)
    expect(loaded.filter((url) => /\/node_modules\/(yaml|msgpackr-extract|node-gyp-build-optional-packages)\//.test(url) || url.endsWith('.node'))).toEqual([])
  })

  it("reads the root key without loading the crypt package's cryptography (Node's crypto module, tweetnacl)", () => {
    // Every module the command imports statically is loaded before its arguments are read.
    const loaded = modulesLoadedBy(['--version'], 'brine', { env: MODULES_ENV })
    expect(loaded.some((url) => url.endsWith('/packages/crypt/dist/root-key-file.js'))).toBe(true)
    expect(loaded.filter((url) => url === 'node:crypto' || url.endsWith('/packages/crypt/dist/index.js') || /\/node_modules\/tweetnacl\//.test(url))).toEqual(
      [],
    )
  })
})

describe("the brine command's config (its modules)", () => {
  it('is read from its parse cache while the file is unchanged, without loading the YAML parser; BRINE_DISABLE_CONFIG_CACHE turns it off', () => {
    const root = mkdtempSync(join(tmpdir(), 'brine-config-cache-'))
    try {
      const configDir = join(root, 'etc')
      mkdirSync(configDir)
      writeFileSync(join(configDir, 'master'), `root_dir: ${join(root, 'master')}\ntransport: tcp\n`)
      // No master has run here, so the command stops at the root key: after its config is read.
      const run = {
        env: { ...MODULES_ENV, HOME: root, XDG_CACHE_HOME: join(root, 'cache'), NODE_COMPILE_CACHE: '' },
        status: 1,
        stderr: /root key .*does not exist/,
      }
      const yamlLoaded = (loaded: string[]): boolean => loaded.some((url) => url.endsWith('/packages/config/dist/yaml-bundle.cjs'))
      const first = modulesLoadedBy(['-c', configDir, '*', 'test.ping'], 'brine', run)
      expect(yamlLoaded(first)).toBe(true)
      // yaml's 72 modules come as the one file built from them.
      expect(first.filter((url) => url.includes('/node_modules/yaml/'))).toEqual([])
      expect(readdirSync(join(root, 'cache', 'brine', 'config'))).toHaveLength(1)
      expect(yamlLoaded(modulesLoadedBy(['-c', configDir, '*', 'test.ping'], 'brine', run))).toBe(false)
      const off = { ...run, env: { ...run.env, BRINE_DISABLE_CONFIG_CACHE: '1' } }
      expect(yamlLoaded(modulesLoadedBy(['-c', configDir, '*', 'test.ping'], 'brine', off))).toBe(true)
      // A changed file is parsed again.
      writeFileSync(join(configDir, 'master'), `root_dir: ${join(root, 'master')}\ntransport: zeromq\n`)
      expect(yamlLoaded(modulesLoadedBy(['-c', configDir, '*', 'test.ping'], 'brine', run))).toBe(true)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})

describe('what brine-minion loads at start', () => {
  it('loads msgpackr without its native extractor, as the commands do (its modules)', () => {
    const loaded = modulesLoadedBy(['--version'], 'brine-minion', { env: MODULES_ENV })
    expect(loaded.some((url) => /\/node_modules\/msgpackr\//.test(url))).toBe(true)
    expect(loaded.filter((url) => /\/node_modules\/(msgpackr-extract|node-gyp-build-optional-packages)\//.test(url) || url.endsWith('.node'))).toEqual([])
  })

  it('runs from its one-file build: the launcher, then that file alone, with no native addon', () => {
    const loaded = modulesLoadedBy(['--version'], 'brine-minion').filter((url) => !url.startsWith('node:'))
    expect(loaded.some((url) => url.endsWith('/packages/cli/dist/bundle/brine-minion.cjs'))).toBe(true)
    expect(loaded.filter((url) => !/\/packages\/cli\/(bin|dist)\/[^/]+\.js$/.test(url) && !url.endsWith('/dist/bundle/brine-minion.cjs'))).toEqual([])
  })

  it("loads neither Node's worker_threads nor its zlib at start: only a regex target or a served request needs them", () => {
    const builtins = minionBuiltins(() => ['--version'])
    // What the bundle loads as it is read: the transport and the crypto it always needs.
    expect(builtins).toContain('NativeModule net')
    expect(builtins.filter((name) => /^NativeModule (worker_threads|zlib)$/.test(name))).toEqual([])
  })

  it("reads its usual flags without commander, and loads Node's child_process and dgram only to run a command or send UDP", () => {
    // --check-config reads the flags and the config as a start does, then exits: an empty directory is a clean config.
    const builtins = minionBuiltins((root) => ['-c', root, '-l', 'warning', '--id', 'm1', '--check-config'])
    expect(builtins).toContain('NativeModule net')
    // commander requires child_process as it loads: its absence says commander was not loaded either.
    expect(builtins.filter((name) => /^NativeModule (child_process|dgram)$/.test(name))).toEqual([])
  })

  it("has none of the other daemons', the API's or the client's code in its one-file build", () => {
    const manifest = JSON.parse(readFileSync(`${cliDir}dist/bundle/brine-minion.json`, 'utf8')) as { files: Record<string, number> }
    const inlined = Object.keys(manifest.files)
    expect(inlined.some((file) => file.startsWith('../minion/dist/'))).toBe(true)
    expect(inlined.filter((file) => /^\.\.\/(master|syndic|api|client|console)\//.test(file))).toEqual([])
  })
})

describe('what brine-run loads at start', () => {
  it("parses its arguments with the config package's helpers, without loading the minion package and its cryptography", () => {
    const loaded = modulesLoadedBy(['--version'], 'brine-run', { env: MODULES_ENV })
    expect(loaded.some((url) => url.includes('/packages/config/dist/'))).toBe(true)
    expect(loaded.filter((url) => /\/packages\/(minion|link)\/dist\//.test(url) || url === 'node:crypto' || /\/node_modules\/tweetnacl\//.test(url))).toEqual(
      [],
    )
  })
})

describe('what brine-api loads at start', () => {
  it('loads the API server (fastify, its plugins, the console) only once it starts one: not for --version', () => {
    const loaded = modulesLoadedBy(['--version'], 'brine-api')
    expect(loaded.some((url) => url.includes('/packages/config/dist/'))).toBe(true)
    expect(loaded.filter((url) => /\/packages\/(api|console)\/dist\//.test(url) || /\/node_modules\/(fastify|@fastify|ws)\//.test(url))).toEqual([])
  })
})

describe('the built bundles a minion and the brine command load', () => {
  it('are ASCII, so V8 holds each module source as a one-byte string (a single other character doubles it)', () => {
    const packages = ['transport', 'transport-tcp', 'transport-zeromq', 'transport-nats', 'crypt', 'common', 'minion', 'client', 'cli']
    const offenders: string[] = []
    for (const name of packages) {
      const dist = `${repoRoot}packages/${name}/dist/`
      const files = readdirSync(dist, { recursive: true, encoding: 'utf8' }).filter((file) => /\.c?js$/.test(file))
      expect(files.length, name).toBeGreaterThan(0)
      for (const file of files) {
        const lines = readFileSync(`${dist}${file}`, 'utf8').split('\n')
        lines.forEach((line, index) => {
          // eslint-disable-next-line no-control-regex
          if (/[^\x00-\x7f]/.test(line)) offenders.push(`packages/${name}/dist/${file}:${index + 1}: ${line.trim().slice(0, 100)}`)
        })
      }
    }
    expect(offenders).toEqual([])
  })
})

describe('a command whose reader is slow', () => {
  it('exits only once the reader has taken all of its output, however long the reader pauses', async () => {
    const { spawn } = await import('node:child_process')
    const dir = mkdtempSync(join(tmpdir(), 'brine-slow-reader-'))
    try {
      // 4 MB of JSON: far more than a socket's buffer, so most of it is still queued when the command returns.
      const child = spawn(
        process.execPath,
        [`${cliDir}bin/brine-call.js`, '-c', dir, '--local', '--out', 'json', 'cmd.run', 'head -c 3000000 /dev/zero | base64 -w0'],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      const chunks: Buffer[] = []
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
      child.stdout.once('data', (chunk: Buffer) => {
        chunks.push(chunk)
        child.stdout.pause()
        // The reader stops for longer than the 2 s the runner once gave its output before exiting, then reads the rest.
        setTimeout(() => child.stdout.on('data', (more: Buffer) => chunks.push(more)).resume(), 3500)
      })
      expect(await exited).toBe(0)
      const output = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { local: string }
      expect(output.local).toHaveLength(4_000_000)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
