import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
// @ts-expect-error: a plain-JavaScript launcher module (bin/ is not compiled), exercised as the bins run it
import { DAEMON_RUNTIME, daemonStartOptions, MASTER_SEMI_SPACE_MB, runtimeExec, runtimeV8Flags } from '../bin/daemon-runtime.js'

const moduleUrl = pathToFileURL(fileURLToPath(new URL('../bin/daemon-runtime.js', import.meta.url))).href

interface Runtime {
  flags: string[]
  env: Record<string, string>
  v8Flags?: string[]
}
const exec = runtimeExec as (
  runtime: Runtime,
  argv: string[],
  execArgv: string[],
  env: NodeJS.ProcessEnv,
) => { argv: string[]; env: NodeJS.ProcessEnv } | undefined
const v8FlagsOf = runtimeV8Flags as (runtime: Runtime, execArgv: string[], env: NodeJS.ProcessEnv) => string[]
const runtimes = DAEMON_RUNTIME as Record<string, Runtime>
const semiSpace = (megabytes: number): Runtime => ({ flags: megabytes > 0 ? [`--max-semi-space-size=${megabytes}`] : [], env: {} })
/** The argv a process re-executes with to bound its semi-spaces at `megabytes`, or undefined when it need not. */
const bounded = (argv: string[], execArgv: string[], nodeOptions: string | undefined, megabytes: number): string[] | undefined =>
  exec(semiSpace(megabytes), argv, execArgv, { NODE_OPTIONS: nodeOptions })?.argv

/** Runs `script` (ESM) in a fresh Node with `env` added; its stdout lines, parsed as JSON. */
function runNode(script: string, env: Record<string, string> = {}, nodeArgs: string[] = []): unknown[] {
  const dir = mkdtempSync(join(tmpdir(), 'brine-young-'))
  try {
    const file = join(dir, 'probe.mjs')
    writeFileSync(file, script)
    const run = spawnSync(process.execPath, [...nodeArgs, file], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '', ...env }, timeout: 60_000 })
    expect(run.status, run.stderr).toBe(0)
    return run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as unknown)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

// Each run reports its pid and flags synchronously (an execve discards what stdout has not written yet),
// then the young generation's size after churning through short-lived objects.
const probe = (megabytes: number): string => `
import { writeSync } from 'node:fs'
import v8 from 'node:v8'
import { enterRuntime } from ${JSON.stringify(moduleUrl)}
writeSync(1, JSON.stringify({ pid: process.pid, execArgv: process.execArgv }) + '\\n')
enterRuntime({ flags: ['--max-semi-space-size=${megabytes}'], env: {} })
const kept = []
for (let round = 0; round < 80; round++) {
  kept.push(Array.from({ length: 20000 }, (_, i) => ({ i, s: 'x' + i })))
  if (kept.length > 8) kept.shift()
}
const young = v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')
writeSync(1, JSON.stringify({ pid: process.pid, youngBytes: young.space_size }) + '\\n')
`

/** The young generation's size seen, over the semi-space bound given: two semi-spaces, and room for a scavenge in progress. */
const YOUNG_LIMIT_FACTOR = 4

describe('the master bounds its V8 young generation', () => {
  it('re-executes itself with --max-semi-space-size unless the user chose one', () => {
    const argv = ['/usr/bin/node', '/usr/bin/brine-master', '-c', '/etc/brine']
    expect(bounded(argv, [], undefined, 8)).toEqual(['/usr/bin/node', '--max-semi-space-size=8', '/usr/bin/brine-master', '-c', '/etc/brine'])
    // Node's own options stay, after the bound (a user's later flag would win).
    expect(bounded(argv, ['--cpu-prof'], '', 8)).toEqual([
      '/usr/bin/node',
      '--max-semi-space-size=8',
      '--cpu-prof',
      '/usr/bin/brine-master',
      '-c',
      '/etc/brine',
    ])
    expect(bounded(argv, ['--max-semi-space-size=32'], undefined, 8)).toBeUndefined()
    expect(bounded(argv, ['--max-semi-space-size', '32'], undefined, 8)).toBeUndefined()
    expect(bounded(argv, [], '--enable-source-maps --max-semi-space-size=32', 8)).toBeUndefined()
    expect(bounded(argv, [], undefined, 0)).toBeUndefined()
    expect(MASTER_SEMI_SPACE_MB).toBeGreaterThan(0)
  })

  it('keeps its pid, gains the flag, and V8 holds the young generation to it', () => {
    const [before, after, result] = runNode(probe(4)) as [
      { pid: number; execArgv: string[] },
      { pid: number; execArgv: string[] },
      { pid: number; youngBytes: number },
    ]
    expect(before.execArgv).not.toContain('--max-semi-space-size=4')
    expect(after).toEqual({ pid: before.pid, execArgv: ['--max-semi-space-size=4'] })
    expect(result.pid).toBe(before.pid)
    // Two semi-spaces of 4 MiB, which V8 may briefly overshoot while it scavenges (a loaded machine showed 2.6 times
    // the bound); unbounded, V8 grows it to 32 MiB and more under this churn on any machine.
    expect(result.youngBytes).toBeLessThan(YOUNG_LIMIT_FACTOR * 4 * 1024 * 1024)
  })

  it('leaves a process alone whose NODE_OPTIONS chose the size', () => {
    const lines = runNode(probe(4), { NODE_OPTIONS: '--max-semi-space-size=2' }) as { pid: number; execArgv?: string[]; youngBytes?: number }[]
    expect(lines).toHaveLength(2)
    expect(lines[0]!.execArgv).toEqual([])
    expect(lines[1]!.youngBytes).toBeLessThan(YOUNG_LIMIT_FACTOR * 2 * 1024 * 1024)
  })
})

// The minion's probe: a hot function, then what V8 made of it (%GetOptimizationStatus: bit 16 optimised by Maglev or
// Turbofan, bit 64 by Turbofan), and whether WebAssembly (Node's fetch) is there.
const daemonProbe = (name: string): string => `
import { writeSync } from 'node:fs'
import { enterDaemonRuntime } from ${JSON.stringify(moduleUrl)}
writeSync(1, JSON.stringify({ pid: process.pid }) + '\\n')
enterDaemonRuntime(${JSON.stringify(name)})
const double = new Function('x', 'return x * 2 + 1')
let sum = 0
for (let i = 0; i < 2e6; i++) sum += double(i)
const status = new Function('f', 'return %GetOptimizationStatus(f)')(double)
writeSync(1, JSON.stringify({ pid: process.pid, execArgv: process.execArgv, arenas: process.env.MALLOC_ARENA_MAX ?? null, status, sum, wasm: typeof WebAssembly }) + '\\n')
`

interface DaemonReport {
  pid: number
  execArgv: string[]
  arenas: string | null
  status: number
  wasm: string
}

describe('each daemon enters its runtime', () => {
  const argv = ['/usr/bin/node', '/usr/bin/brine-minion', '-c', '/etc/brine']

  it('adds what the user did not choose: flags in either form, variables not set', () => {
    const master = runtimes['brine-master']!
    expect(exec(master, argv, [], {})).toEqual({
      argv: ['/usr/bin/node', `--max-semi-space-size=${MASTER_SEMI_SPACE_MB}`, ...argv.slice(1)],
      env: { MALLOC_ARENA_MAX: '2' },
    })
    expect(exec(master, argv, ['--max_semi_space_size=64'], { MALLOC_ARENA_MAX: '8' })).toBeUndefined()
    expect(exec(master, argv, [], { NODE_OPTIONS: '--max-semi-space-size=64' })).toEqual({
      argv,
      env: { NODE_OPTIONS: '--max-semi-space-size=64', MALLOC_ARENA_MAX: '2' },
    })
    // The minion's compiler and young-generation flags are set as it runs: no second start of Node for them.
    const minion = runtimes['brine-minion']!
    expect(exec(minion, argv, [], {})).toBeUndefined()
    expect(v8FlagsOf(minion, [], {})).toEqual(['--no-turbofan', '--semi-space-growth-factor=1'])
    expect(v8FlagsOf(minion, ['--turbofan'], {})).toEqual(['--semi-space-growth-factor=1'])
    expect(v8FlagsOf(minion, ['--no_turbofan', '--semi_space_growth_factor=2'], {})).toEqual([])
    expect(v8FlagsOf(master, [], {})).toEqual([])
    // A user who names a compiler keeps it, and the others stay off.
    const compilersOff: Runtime = { flags: ['--no-opt', '--no-maglev', '--no-sparkplug'], env: {} }
    expect(exec(compilersOff, argv, ['--opt'], {})?.argv).toEqual(['/usr/bin/node', '--no-maglev', '--no-sparkplug', '--opt', ...argv.slice(1)])
    expect(exec(compilersOff, argv, ['--opt', '--maglev', '--sparkplug'], {})).toBeUndefined()
    expect(runtimes['brine']).toBeUndefined()
    expect(runtimes['brine-key']).toBeUndefined()
  })

  it('tells a program that starts a daemon with Node what to start it with so it need not re-execute', () => {
    const startOf = daemonStartOptions as (name: string, execArgv: string[], env: NodeJS.ProcessEnv) => { nodeArgs: string[]; vars: Record<string, string> }
    expect(startOf('brine-master', [], {})).toEqual({ nodeArgs: [`--max-semi-space-size=${MASTER_SEMI_SPACE_MB}`], vars: { MALLOC_ARENA_MAX: '2' } })
    // What the starter passes anyway, or its environment chose, is left to it.
    expect(startOf('brine-master', ['--max_semi_space_size=32'], { MALLOC_ARENA_MAX: '4' })).toEqual({ nodeArgs: [], vars: {} })
    expect(startOf('brine-master', [], { NODE_OPTIONS: '--max-semi-space-size=16' })).toEqual({ nodeArgs: [], vars: { MALLOC_ARENA_MAX: '2' } })
    // Started so, the master's launcher finds nothing to re-execute into.
    const started = startOf('brine-master', ['--cpu-prof'], {})
    expect(exec(runtimes['brine-master']!, argv, [...started.nodeArgs, '--cpu-prof'], started.vars)).toBeUndefined()
    // The minion sets its flags as it runs; the commands have no runtime.
    expect(startOf('brine-minion', [], {})).toEqual({ nodeArgs: [], vars: {} })
    expect(startOf('brine', [], {})).toEqual({ nodeArgs: [], vars: {} })
  })

  it('a minion runs without Turbofan, not re-executed (its first line once), WebAssembly still there', () => {
    const lines = runNode(daemonProbe('brine-minion'), {}, ['--allow-natives-syntax']) as [{ pid: number }, DaemonReport]
    expect(lines).toHaveLength(2)
    const [before, after] = lines
    expect(after.pid).toBe(before.pid)
    expect(after.execArgv).toEqual(['--allow-natives-syntax'])
    // Optimised (by Maglev), never by Turbofan.
    expect(after.status & 16).toBe(16)
    expect(after.status & 64).toBe(0)
    expect(after.wasm).toBe('object')
  })

  it('a minion started with --turbofan keeps it', () => {
    // Turbofan compiles on a background thread: on a loaded machine its code may not be installed by the loop's end, so
    // it compiles on the main thread here, and the loop's end finds it installed.
    const [, after] = runNode(daemonProbe('brine-minion'), {}, ['--allow-natives-syntax', '--turbofan', '--no-concurrent-recompilation']) as [
      { pid: number },
      DaemonReport,
    ]
    expect(after.status & 64).toBe(64)
  })

  it('a master keeps its pid and gains its young-generation bound and malloc arenas', () => {
    const [before, , after] = runNode(daemonProbe('brine-master'), {}, ['--allow-natives-syntax']) as [{ pid: number }, { pid: number }, DaemonReport]
    expect(after).toMatchObject({
      pid: before.pid,
      execArgv: [`--max-semi-space-size=${MASTER_SEMI_SPACE_MB}`, '--allow-natives-syntax'],
      arenas: '2',
    })
  })

  it('other bins run as they were started', () => {
    const lines = runNode(daemonProbe('brine'), {}, ['--allow-natives-syntax']) as [{ pid: number }, DaemonReport]
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatchObject({ pid: lines[0].pid, execArgv: ['--allow-natives-syntax'], arenas: null })
  })
})
