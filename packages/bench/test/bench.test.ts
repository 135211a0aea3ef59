import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { benchMatrix, cpuMsPerReturn, restartWindowMs, stats, type BenchResult } from '../src/bench.js'
import { LocalClient } from '@brine/client'
import { pidAlive } from '@brine/testkit'
import { Fleet } from '@brine/harness'
import { fleetBus, startSwarm } from '../src/fleet-swarm.js'
import { markdownReport, svgChart } from '../src/report.js'

const BIN = fileURLToPath(new URL('../dist/bin/brine-bench.js', import.meta.url))

describe('stats and matrix', () => {
  it('computes nearest-rank min / median / p95 / max', () => {
    const values = Array.from({ length: 100 }, (_, index) => 100 - index)
    expect(stats(values)).toEqual({ count: 100, min: 1, median: 50, p95: 95, max: 100 })
    expect(stats([])).toEqual({ count: 0, min: 0, median: 0, p95: 0, max: 0 })
  })

  it("gives the master's CPU per return to 0.0001 ms, and none without returns", () => {
    // 4,410 ms of CPU over 20,000 returns: 0.2205 ms, which 0.01 ms steps would have read as 0.22.
    expect(cpuMsPerReturn(4410, 20_000)).toBe(0.2205)
    expect(cpuMsPerReturn(13_270, 50_000)).toBe(0.2654)
    expect(cpuMsPerReturn(10, 0)).toBeNull()
  })

  it("gives a restart round the connect phase's window, or twice the latency phase's p95 ping when that is longer", () => {
    expect(restartWindowMs(10, 40)).toBe(505)
    expect(restartWindowMs(1000, 300)).toBe(1000)
    // N=5,000 whose pings took up to 6.6 s to come back in the latency phase: a round waits 13.2 s, not 2 s.
    expect(restartWindowMs(5000, 6599.4)).toBe(13_199)
  })

  it('runs the three transports and both at N ∈ {1, 10} when quick, and 1,000 swarm minions in the full matrix', () => {
    expect(benchMatrix(true).map((c) => `${c.transport}:${c.n}:${c.mode}`)).toEqual([
      'zeromq:1:procs',
      'zeromq:10:procs',
      'tcp:1:procs',
      'tcp:10:procs',
      'nats:1:procs',
      'nats:10:procs',
      'both:10:procs',
    ])
    expect(
      benchMatrix(false)
        .filter((c) => c.mode === 'swarm')
        .map((c) => `${c.transport}:${c.n}`),
    ).toEqual(['zeromq:1000', 'tcp:1000', 'nats:1000', 'both:1000'])
  })
})

function requireBuilt(): void {
  if (!existsSync(BIN)) throw new Error(`${BIN} does not exist: run \`npm run build\` first (the root \`npm test\` does)`)
}

// The real thing: `brine-bench --quick` as a process against the built daemons (`npm run build` first). Every
// transport of the quick matrix and `both`, at N = 1 and 2 minions instead of 1 and 10, each phase with fewer jobs
// than a CI run measures with: what is asserted is the shape of every figure and that each job got every return once,
// which two minions (the fewest `both` splits over two transports) yield as well as ten; the minions' processes and
// the phases' jobs are most of the file's CPU. The api phase's pings likewise: two `brine` processes give a median and
// a p95 as five do, and each is a process start. The quick matrix's own sizes are the unit test's above.
const SMOKE_ARGS = ['--quick', '--n', '1,2', '--calls', '5', '--jobs', '10', '--window', '3', '--burst', '10', '--api-calls', '5', '--cli-calls', '2']
describe('brine-bench --quick', () => {
  let outDir: string
  let code: number | null = null
  let stderr = ''
  let result: BenchResult

  beforeAll(async () => {
    requireBuilt()
    outDir = await mkdtemp(join(tmpdir(), 'brine-bench-test-'))
    const child = spawn(process.execPath, [BIN, ...SMOKE_ARGS, '--out-dir', outDir], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.stdout.resume()
    code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGINT') // the bench stops its fleets on SIGINT
        reject(new Error(`brine-bench --quick did not finish within 300 s:\n${stderr}`))
      }, 300_000)
      child.once('exit', (exitCode) => {
        clearTimeout(timer)
        resolve(exitCode)
      })
    })
    const files = await readdir(outDir)
    const json = files.find((file) => file.endsWith('.json'))
    if (json === undefined) throw new Error(`no result file in ${outDir} (${files.join(', ')}):\n${stderr}`)
    result = JSON.parse(await readFile(join(outDir, json), 'utf8')) as BenchResult
  }, 320_000)

  afterAll(async () => {
    if (outDir !== undefined) await rm(outDir, { recursive: true, force: true })
  })

  it('exits 0 and writes the JSON, Markdown and SVG side by side', async () => {
    expect(code, stderr).toBe(0)
    const files = (await readdir(outDir)).sort()
    const base = files[0]!.replace(/\.[a-z]+$/, '')
    expect(files).toEqual([`${base}.json`, `${base}.md`, `${base}.svg`])
    expect(await readFile(join(outDir, `${base}.svg`), 'utf8')).toMatch(/^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"[\s\S]*<\/svg>$/)
    expect(await readFile(join(outDir, `${base}.md`), 'utf8')).toContain('| both | 2 | procs |')
  })

  it('records the machine, the command and every case of the quick matrix at the sizes asked for', () => {
    expect(result.version).toBe(1)
    expect(result.quick).toBe(true)
    expect(result.command).toEqual(['brine-bench', ...SMOKE_ARGS, '--out-dir', outDir])
    expect(result.machine.cpus).toBeGreaterThan(0)
    expect(typeof result.machine.node).toBe('string')
    expect(result.cases.map((c) => `${c.transport}:${c.n}`)).toEqual(['zeromq:1', 'zeromq:2', 'tcp:1', 'tcp:2', 'nats:1', 'nats:2', 'both:2'])
    expect(result.cases.find((c) => c.transport === 'both')?.split).toEqual({ zeromq: 1, tcp: 1 })
    expect({ api: result.settings.apiCalls, cli: result.settings.cliCalls }).toEqual({ api: 5, cli: 2 })
  })

  it('has every figure, and every job got all of its returns exactly once', () => {
    for (const c of result.cases) {
      const where = `${c.transport} N=${c.n}`
      expect(c.error, where).toBeUndefined()
      for (const phase of [c.latency, c.throughput, c.overload]) {
        expect(phase.expected, where).toBeGreaterThan(0)
        // Lost means never stored by the master; bus events the reader missed are reported, not failed.
        expect({ where, lost: phase.lost, duplicates: phase.duplicates, stored: phase.stored }).toEqual({
          where,
          lost: 0,
          duplicates: 0,
          stored: phase.expected,
        })
        expect(phase.eventsSeen + phase.eventsMissed, where).toBe(phase.expected)
        expect(phase.eventsSeen, where).toBeLessThanOrEqual(phase.stored)
      }
      expect(c.latency.calls).toBe(result.settings.latencyCalls)
      expect(c.latency.expected).toBe(c.latency.calls * c.n)
      expect(c.throughput.jobs).toBe(result.settings.throughputJobs)
      // --window 3: the throughput phase kept three jobs in flight, not the default five.
      expect([c.throughput.window, result.settings.window]).toEqual([3, 3])
      expect(c.overload.expected).toBe(result.settings.overloadJobs * c.n)
      for (const distribution of [c.latency.ms, c.throughput.jobMs]) {
        expect(distribution.min).toBeLessThanOrEqual(distribution.median)
        expect(distribution.median).toBeLessThanOrEqual(distribution.p95)
        expect(distribution.p95).toBeLessThanOrEqual(distribution.max)
      }
      expect(c.connect.allAnsweringMs).toBeGreaterThanOrEqual(c.connect.masterReadyMs)
      expect(c.restart.allAnsweringMs).toBeGreaterThan(0)
      expect(c.restart.windowMs).toBe(restartWindowMs(c.n, c.latency.ms.p95))
      // The figure is the end of its last ping round, the one that heard the last minion.
      const rounds = c.restart.rounds
      expect(rounds.length).toBeGreaterThan(0)
      expect(rounds.at(-1)!.heard).toBe(c.n)
      for (const [index, r] of rounds.entries()) {
        expect(r.heard).toBeGreaterThanOrEqual(r.heardBefore)
        if (index > 0) expect(r.heardBefore).toBe(rounds[index - 1]!.heard)
        if (r.publishedMs !== null) expect(r.publishedMs).toBeGreaterThanOrEqual(r.startMs)
      }
      expect(c.restart.allAnsweringMs).toBeGreaterThanOrEqual(rounds.at(-1)!.startMs)
      // On the socket transports the first round waited for every minion to be present again; on NATS no link went away.
      if (c.transport === 'nats') {
        expect(c.restart.allPresentMs, where).toBeNull()
      } else {
        expect(c.restart.allPresentMs, where).not.toBeNull()
        expect(c.restart.allPresentMs!, where).toBeGreaterThanOrEqual(c.restart.masterReadyMs)
        expect(c.restart.allPresentMs!, where).toBeLessThanOrEqual(rounds[0]!.startMs)
      }
      // The burst goes out once the return counter's bus connection is back from the restart, so it hears the burst's
      // returns (the bus drops events only for a reader far behind, which ten or twenty returns never put it).
      expect(c.overload.eventsSeen, where).toBeGreaterThan(0)
      expect(c.memory.masterIdleBytes).toBeGreaterThan(0)
      // With N: read as the last minion answered, and again once the master settled (never after more than it let go of).
      expect(c.memory.masterAtConnectBytes, where).toBeGreaterThan(0)
      expect(c.memory.masterWithMinionsBytes, where).toBeGreaterThan(0)
      expect(c.memory.minionProcessIdleBytes).toBeGreaterThan(0)
      expect(c.overload.masterPeakRssBytes).toBeGreaterThan(0)
      // The scale curve: CPU per return is a share of the throughput phase's master CPU (10 ms ticks, so it may read 0 at small N).
      expect(c.scale.masterCpuMsPerReturn, where).toBeGreaterThanOrEqual(0)
      expect(c.scale.masterCpuMsPerReturn, where).toBeLessThan(1000)
      expect(c.scale.masterBytesPerMinion, where).toBe(Math.round(Math.max(0, c.memory.masterWithMinionsBytes - c.memory.masterIdleBytes) / c.n))
      // The NATS cases' own nats-server, measured beside the master; the socket transports have none.
      if (c.transport === 'nats') {
        expect(c.memory.natsServer, where).not.toBeNull()
        for (const bytes of Object.values(c.memory.natsServer!)) expect(bytes, where).toBeGreaterThan(0)
      } else {
        expect(c.memory.natsServer, where).toBeNull()
      }
    }
  })

  it('measures brine-api at N = 1: POST / and brine pings, and job events delivered to 10 event-stream readers', () => {
    const measured = result.cases.filter((c) => c.api !== undefined)
    expect(measured.map((c) => `${c.transport}:${c.n}`)).toEqual(['zeromq:1', 'tcp:1', 'nats:1'])
    for (const c of measured) {
      const api = c.api!
      expect(api.postMs.count).toBe(result.settings.apiCalls)
      expect(api.cliMs.count).toBe(result.settings.cliCalls)
      expect(api.postMs.median).toBeLessThanOrEqual(api.postMs.p95)
      expect(api.sse.readers).toBe(10)
      // Every reader saw at least each throughput job's new event and return (N = 1).
      expect(api.sse.events).toBeGreaterThanOrEqual(10 * 2 * result.settings.throughputJobs)
      expect(api.apiRssBytes).toBeGreaterThan(0)
    }
  })

  it('leaves no process behind: every pid it reports is gone', () => {
    expect(result.leftoverPids).toEqual([])
    const pids = result.cases.flatMap((c) => c.pids)
    // A master, N minions and the restarted master per case, brine-api where the API was measured, and a NATS case's nats-server.
    expect(pids.length).toBe(result.cases.reduce((sum, c) => sum + c.n + 2 + (c.api === undefined ? 0 : 1) + (c.transport === 'nats' ? 1 : 0), 0))
    expect(pids.filter(pidAlive)).toEqual([])
  })

  it('renders the same result as Markdown and SVG in process', () => {
    expect(markdownReport(result)).toContain('## Targets')
    expect(markdownReport(result)).toContain('## Restart, round by round')
    expect(markdownReport(result)).toContain('| nats | 2 | procs |')
    expect(markdownReport(result)).toContain('## Scale curve')
    expect(markdownReport(result)).toMatch(/\| tcp \| 2 \| procs \| \d+\.\d{3} \| \d+\.\d \|/)
    // The scale curve has a row for every case of the quick matrix, NATS's included, with the figures the JSON holds.
    const scaleCurve = markdownReport(result).split('## Scale curve')[1]!.split('\n## ')[0]!
    for (const c of result.cases) {
      expect(scaleCurve).toContain(
        `| ${c.transport} | ${c.n} | ${c.mode} | ${c.scale.masterCpuMsPerReturn!.toFixed(3)} | ${(c.scale.masterBytesPerMinion! / 1024).toFixed(1)} |`,
      )
    }
    expect(svgChart(result)).toContain('test.ping median latency')
  })
})

describe('brine-bench interrupted', () => {
  it('stops every process it started on SIGINT and exits 130', async () => {
    requireBuilt()
    const outDir = await mkdtemp(join(tmpdir(), 'brine-bench-int-'))
    const child = spawn(process.execPath, [BIN, '--transports', 'tcp', '--n', '3', '--calls', '500', '--out-dir', outDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stdout.resume()
    const exited = new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)))
    try {
      // Interrupt in the middle of the latency phase, with a master and 3 minions running.
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`brine-bench never reached the latency phase:\n${stderr}`)), 60_000)
        child.stderr.on('data', (chunk: Buffer) => {
          stderr += chunk.toString()
          if (stderr.includes('latency')) {
            clearTimeout(timer)
            resolve()
          }
        })
      })
      child.kill('SIGINT')
      const code = await Promise.race([exited, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 20_000))])
      expect(code, stderr).toBe(130)
      const match = /stopped pids ([\d,]+); none left/.exec(stderr)
      expect(match, stderr).not.toBeNull()
      const pids = match![1]!.split(',').map(Number)
      expect(pids).toHaveLength(4) // the master and 3 minions
      expect(pids.filter(pidAlive)).toEqual([])
      expect(await readdir(outDir)).toEqual([]) // an interrupted run writes no result
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL')
      await rm(outDir, { recursive: true, force: true })
    }
  }, 90_000)
})

describe.each(['tcp', 'nats'] as const)('startSwarm over %s', (transport) => {
  it('runs real minions in one process, each with its own id and keys, and stops them all', async () => {
    requireBuilt()
    const fleet = await Fleet.start({ bus: fleetBus, minions: [], transports: [transport] })
    try {
      const swarm = await startSwarm(fleet, { count: 4, transport, prefix: 'sw-' })
      expect(swarm.ids).toEqual(['sw-0', 'sw-1', 'sw-2', 'sw-3'])
      await Promise.all(swarm.ids.map((id) => fleet.waitForMinionStart(id)))
      const client = new LocalClient({ configDir: fleet.masterConfigDir })
      try {
        expect(await client.cmd('*', 'test.ping', [], { timeout: 10_000 })).toEqual({ 'sw-0': true, 'sw-1': true, 'sw-2': true, 'sw-3': true })
      } finally {
        await client.close()
      }
      // Separate key pairs: four distinct public keys, accepted under four names.
      const keys = await Promise.all(swarm.ids.map((id) => readFile(join(fleet.minionConfigDir(id), 'etc/brine/pki/minion/minion.pub'), 'utf8')))
      expect(new Set(keys).size).toBe(4)
    } finally {
      await fleet.stop()
    }
    expect(fleet.spawnedPids.filter(pidAlive)).toEqual([])
    // One publish cache for the whole swarm: of the four minions opening the ping, three took the first one's load.
    const summary = /brine-swarm: 4 minions stopped; shared publish cache: (\d+) publishes reused/.exec(fleet.swarms[0]?.process.stderr ?? '')
    expect(Number(summary?.[1])).toBeGreaterThanOrEqual(3)
  }, 60_000)
})
