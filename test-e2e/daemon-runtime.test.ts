import { readFileSync } from 'node:fs'
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { json } from './helpers/output.js'
import { TRANSPORTS, useSharedFleets } from './helpers/fleets.js'

const startFleet = useSharedFleets()
const MINION_VERSION = (JSON.parse(readFileSync(new URL('../packages/minion/package.json', import.meta.url), 'utf8')) as { version: string }).version

/** A process's argv and environment, as the kernel has them after any execve. */
function processOf(pid: number): { argv: string[]; env: string[] } {
  const read = (what: string): string[] =>
    readFileSync(`/proc/${pid}/${what}`, 'utf8')
      .split('\0')
      .filter((item) => item !== '')
  return { argv: read('cmdline'), env: read('environ') }
}

let server: Server
let base: string
let dir: string
/** A module every daemon of the fleets here imports first, which logs its process's pid at each start of Node. */
let startHook: string
let startLog: string
let savedNodeOptions: string | undefined

beforeAll(async () => {
  server = createServer((request, response) => response.end(`served ${request.url}`))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  dir = await mkdtemp(join(tmpdir(), 'brine-runtime-'))
  startLog = join(dir, 'starts.log')
  startHook = join(dir, 'start-hook.mjs')
  // Worker threads run the --import modules too; only a process's main thread is a start of Node.
  await writeFile(
    startHook,
    `import { appendFileSync } from 'node:fs'\nimport { isMainThread } from 'node:worker_threads'\n` +
      `if (isMainThread) appendFileSync(${JSON.stringify(startLog)}, process.pid + '\\n')\n`,
  )
  // Through NODE_OPTIONS, so the daemons' command lines stay as the harness gives them.
  savedNodeOptions = process.env.NODE_OPTIONS
  process.env.NODE_OPTIONS = `${savedNodeOptions ?? ''} --import ${startHook}`.trim()
})

/** How many times Node started in the process `pid` (an execve starts it again under the same pid). */
async function nodeStarts(pid: number): Promise<number> {
  return (await readFile(startLog, 'utf8')).split('\n').filter((line) => line === String(pid)).length
}

afterAll(async () => {
  if (savedNodeOptions === undefined) delete process.env.NODE_OPTIONS
  else process.env.NODE_OPTIONS = savedNodeOptions
  await new Promise<void>((resolve) => server.close(() => resolve()))
  await rm(dir, { recursive: true, force: true })
})

describe.each(TRANSPORTS)('the daemons in their runtime over %s', (transport) => {
  it('the harness started the master with its flags (one start of Node), the minion set its own as it ran; the minion still fetches over HTTP', async () => {
    const fleet = await startFleet({ minions: [{ id: 'rt1', transport }] })
    // The harness passed the master's runtime as it started it, so the master's launcher had nothing to re-execute into.
    expect(await nodeStarts(fleet.master.pid)).toBe(1)
    expect(await nodeStarts(fleet.minions.get('rt1')!.pid)).toBe(1)
    const master = processOf(fleet.master.pid)
    expect(master.argv.slice(1, 2)).toEqual(['--max-semi-space-size=8'])
    expect(master.argv[2]).toMatch(/brine-master\.js$/)
    expect(master.env).toContain('MALLOC_ARENA_MAX=2')
    const minion = processOf(fleet.minions.get('rt1')!.pid)
    // Not re-executed: its compiler flag is set in the running process (packages/cli/test/daemon-runtime.test.ts).
    expect(minion.argv[1]).toMatch(/brine-minion\.js$/)

    // Node's fetch needs WebAssembly (its HTTP parser), which --jitless would have taken away.
    const dest = join(dir, `${transport}.txt`)
    const got = await fleet.run('brine', ['rt1', 'cp.get_url', `${base}/${transport}.txt`, dest, '--out', 'json', '--static'])
    expect(json(got.stdout)).toEqual({ rt1: dest })
    expect(await readFile(dest, 'utf8')).toBe(`served /${transport}.txt`)

    // The minion runs from its one-file build inside @brine/cli, and finds Brine's version from there.
    const version = await fleet.run('brine', ['rt1', 'test.version', '--out', 'json', '--static'])
    expect(json(version.stdout)).toEqual({ rt1: MINION_VERSION })
  })
})

/** Every file under `dir`, each with what a new write of it would change: its inode (Node renames a new file into place), size and time. */
async function filesUnder(dir: string): Promise<Map<string, string>> {
  const files = new Map<string, string>()
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const path = join(entry.parentPath, entry.name)
    const { ino, size, mtimeMs } = await stat(path)
    files.set(path, `${ino} ${size} ${mtimeMs}`)
  }
  return files
}

describe('the compile cache of a master that gives up root', () => {
  const startFleets = useSharedFleets()

  it('is written before it switches to its user, so its next start takes its modules from it', async () => {
    const cache = await mkdtemp(join(tmpdir(), 'brine-cc-'))
    const saved = { XDG_CACHE_HOME: process.env.XDG_CACHE_HOME, NODE_DEBUG_NATIVE: process.env.NODE_DEBUG_NATIVE }
    // Root's own cache directory, as root's ~/.cache: mode 0700, which the user cannot write into.
    Object.assign(process.env, { XDG_CACHE_HOME: cache, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' })
    try {
      const startMaster = async (): Promise<string> => {
        const fleet = await startFleets({ minions: [], transports: ['tcp'], masterConfig: { user: 'nobody' }, rootMode: 0o755 })
        await fleet.master.waitForOutput(/running as user nobody/, 30_000)
        expect(await fleet.master.stop('SIGTERM')).toEqual({ code: 0, signal: null })
        return fleet.master.stderr
      }
      const first = await startMaster()
      expect(first.split('\n').filter((line) => line.startsWith('[compile cache]') && line.includes('permission denied'))).toEqual([])
      // What the first start wrote as root, before it became nobody (who cannot write here: without the flush, nothing).
      // Only the compile cache's own directory: the config parse cache beside it (brine/config) gets an entry per start,
      // each fleet's config being a file of its own.
      const compileCache = join(cache, 'brine', 'compile-cache')
      const written = await filesUnder(compileCache)
      expect(written.size).toBeGreaterThan(0)
      await startMaster()
      // Node leaves a module's cache file as it is when V8 took the code in it, and writes it anew (a new file renamed
      // into place) when it compiled the module afresh: the cache was not found, not readable, or refused. So the
      // second start took every module it loaded before it switched user from the cache. Read from the files, not from
      // NODE_DEBUG_NATIVE's lines: Node writes those straight to the master's stderr, a non-blocking socket to this
      // process, and while this process reads it late (a loaded machine) the socket fills and Node's writes fail with
      // EAGAIN and are lost: which fits the two loaded runs in which the line saying the master's module came from the
      // cache was not found.
      expect(await filesUnder(compileCache)).toEqual(written)
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
      await rm(cache, { recursive: true, force: true })
    }
  })
})
