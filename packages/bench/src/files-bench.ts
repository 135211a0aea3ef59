import { mebibytes } from './report.js'
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { LocalClient, MasterEvent, RunnerClient, unwrapLookup } from '@brine/client'
import { rssBytes } from '@brine/testkit'
import { Fleet, type TransportName } from '@brine/harness'
import { LOOPBACK_FLEET, ReturnCounter, machineInfo, waitGone, type BenchResult } from './bench.js'
import { fleetBus, startSwarm } from './fleet-swarm.js'
import { secondsFromMs } from '@brine/config'

/** The file every minion copies: `salt://bench/1mb.bin` under the master's file_roots. */
export const BENCH_FILE_URL = 'salt://bench/1mb.bin'

export interface FilesSettings {
  /** Swarm minions copying the file at once. */
  minions: number
  transport: TransportName
  /** Size of the file, bytes (1 MiB). */
  fileBytes: number
  /** Bound on each run's wait for every return, ms. */
  timeoutMs: number
}

export const FILES_SETTINGS: FilesSettings = { minions: 100, transport: 'tcp', fileBytes: 1024 * 1024, timeoutMs: 120_000 }

/** The master's file server counters (`fileserver.stats`). */
export interface FileServerCounters {
  hashes: number
  files_served: number
  chunks_served: number
  bytes_served: number
}

/** One run: every minion runs `cp.get_file salt://bench/1mb.bin <its dest>` at once. */
export interface FilesRun {
  /** Jobs published (one per minion, each naming its own dest), and the returns stored. */
  jobs: number
  returned: number
  /** Copies whose bytes hash to the master file's sha256. */
  intact: number
  /** Copies missing, or of another hash, or a job that did not return the dest path. */
  lostOrCorrupt: number
  /** First publish → last return, ms. */
  durationMs: number
  filesPerSec: number
  mibPerSec: number
  /** What the file server did during the run (its counters' difference). */
  served: FileServerCounters
  /** The master's RSS, sampled every 100 ms during the run: peak, and after it. */
  masterPeakRssBytes: number
  masterAfterRssBytes: number
}

export interface FilesResult {
  version: 1
  scenario: 'files'
  startedAt: string
  finishedAt: string
  command: string[]
  machine: BenchResult['machine']
  /** The machine's load average (1, 5, 15 min) as the scenario began: other work on a shared machine shows here. */
  loadAverage: number[]
  settings: FilesSettings
  sha256: string
  /** The master's RSS with the minions connected, before the first run. */
  masterIdleRssBytes: number
  /** First run: every copy transferred. Second run: the same, each dest already holding the file (cache hits). */
  first: FilesRun
  second: FilesRun
  /** Copies of the second run that the file server sent no byte for (served.files_served = 0 → all). */
  secondCacheHits: number
  pids: number[]
  leftoverPids: number[]
  error?: string
}

const round = (value: number): number => Math.round(value * 10) / 10

async function counters(runner: RunnerClient): Promise<FileServerCounters> {
  const stats = (await runner.cmd('fileserver.stats')) as Partial<FileServerCounters>
  return { hashes: stats.hashes ?? 0, files_served: stats.files_served ?? 0, chunks_served: stats.chunks_served ?? 0, bytes_served: stats.bytes_served ?? 0 }
}

const emptyRun = (): FilesRun => ({
  jobs: 0,
  returned: 0,
  intact: 0,
  lostOrCorrupt: 0,
  durationMs: 0,
  filesPerSec: 0,
  mibPerSec: 0,
  served: { hashes: 0, files_served: 0, chunks_served: 0, bytes_served: 0 },
  masterPeakRssBytes: 0,
  masterAfterRssBytes: 0,
})

/** What one copy run needs: the fleet's clients and return counter, the swarm's ids, where the copies go and the file's hash. */
interface CopyRun {
  fleet: Fleet
  client: LocalClient
  runner: RunnerClient
  counter: ReturnCounter
  ids: readonly string[]
  dests: string
  sha256: string
  settings: FilesSettings
}

/** One run: every minion copies the file at once; the job cache's record of each return and each copy's bytes on disk are checked. */
async function copyToAll(run: CopyRun): Promise<FilesRun> {
  const { client, runner, counter, dests, settings } = run
  const masterPid = run.fleet.master.pid
  const before = await counters(runner)
  let peak = rssBytes(masterPid)
  const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(masterPid))), 100)
  const started = performance.now()
  const published = await Promise.all(
    run.ids.map(async (id) => ({
      id,
      jid: await client.cmdAsync([id], 'cp.get_file', [BENCH_FILE_URL, join(dests, id, '1mb.bin')], { tgtType: 'list', kwarg: { makedirs: true } }),
    })),
  )
  await counter.waitFor(
    published.map((item) => item.jid),
    1,
    settings.timeoutMs,
    settings.timeoutMs,
  )
  const durationMs = Math.max(1, counter.lastReturnAt - started)
  clearInterval(sampler)
  peak = Math.max(peak, rssBytes(masterPid))
  const after = await counters(runner)
  let returned = 0
  let intact = 0
  for (const { id, jid } of published) {
    const returns = unwrapLookup(await runner.cmd('jobs.lookup_jid', [jid])).returns
    const dest = join(dests, id, '1mb.bin')
    if (returns[id] !== undefined) returned++
    const bytes = await readFile(dest).catch(() => undefined)
    if (returns[id] === dest && bytes !== undefined && createHash('sha256').update(bytes).digest('hex') === run.sha256) intact++
  }
  const jobs = published.length
  return {
    jobs,
    returned,
    intact,
    lostOrCorrupt: jobs - intact,
    durationMs: round(durationMs),
    filesPerSec: round(intact / secondsFromMs(durationMs)),
    mibPerSec: round((intact * settings.fileBytes) / (1024 * 1024) / secondsFromMs(durationMs)),
    served: {
      hashes: after.hashes - before.hashes,
      files_served: after.files_served - before.files_served,
      chunks_served: after.chunks_served - before.chunks_served,
      bytes_served: after.bytes_served - before.bytes_served,
    },
    masterPeakRssBytes: peak,
    masterAfterRssBytes: rssBytes(masterPid),
  }
}

/** A result with no figures yet. */
function emptyFilesResult(settings: FilesSettings, sha256: string): FilesResult {
  const startedAt = new Date().toISOString()
  return {
    version: 1,
    scenario: 'files',
    startedAt,
    finishedAt: startedAt,
    command: [],
    machine: machineInfo(),
    loadAverage: loadavg().map((value) => Math.round(value * 100) / 100),
    settings,
    sha256,
    masterIdleRssBytes: 0,
    first: emptyRun(),
    second: emptyRun(),
    secondCacheHits: 0,
    pids: [],
    leftoverPids: [],
  }
}

/**
 * The file-server scenario (issue 29): a master with a 1 MiB file under its file_roots and `minions` swarm
 * minions; each runs `cp.get_file salt://bench/1mb.bin <dest>/<id>/1mb.bin makedirs=True` at once (one
 * publish per minion, so each names its own dest, all published together), twice. Every copy is hashed on
 * disk against the master's file; the second run must transfer nothing (each dest already has the hash).
 */
export async function runFilesScenario(
  settings: FilesSettings,
  hooks: { logLevel?: string; onFleet?: (fleet: Fleet, live: boolean) => void; onPhase?: (phase: string) => void } = {},
): Promise<FilesResult> {
  const work = await mkdtemp(join(tmpdir(), 'brine-bench-files-'))
  const roots = join(work, 'roots')
  await mkdir(join(roots, 'bench'), { recursive: true })
  const content = randomBytes(settings.fileBytes)
  await writeFile(join(roots, 'bench/1mb.bin'), content)
  const result = emptyFilesResult(settings, createHash('sha256').update(content).digest('hex'))
  let fleet: Fleet | undefined
  let client: LocalClient | undefined
  let runner: RunnerClient | undefined
  let bus: MasterEvent | undefined
  let counter: ReturnCounter | undefined
  try {
    hooks.onPhase?.('connect')
    fleet = await Fleet.start({
      bus: fleetBus,
      minions: [],
      transports: [settings.transport],
      logLevel: hooks.logLevel ?? 'warning',
      readyTimeoutMs: settings.timeoutMs,
      masterConfig: { ...LOOPBACK_FLEET, file_roots: { base: [roots] }, timeout: Math.ceil(secondsFromMs(settings.timeoutMs)), gather_job_timeout: 10 },
    })
    hooks.onFleet?.(fleet, true)
    const from = fleet.startEventCount
    const short = settings.transport === 'zeromq' ? 'zmq' : 'tcp'
    const swarm = await startSwarm(fleet, { count: settings.minions, transport: settings.transport, prefix: `${short}-f-` })
    await Promise.all(swarm.ids.map((id) => fleet!.waitForMinionStart(id, from)))
    client = new LocalClient({ configDir: fleet.masterConfigDir, requestTimeout: settings.timeoutMs })
    runner = new RunnerClient({ configDir: fleet.masterConfigDir, requestTimeout: settings.timeoutMs })
    const answered = await client.cmd('*', 'test.ping', [], { timeout: settings.timeoutMs })
    if (Object.keys(answered).length !== settings.minions)
      throw new Error(`only ${Object.keys(answered).length} of ${settings.minions} minions answered test.ping`)
    bus = new MasterEvent({ sockDir: fleet.sockDir, reconnect: { initial: 50, max: 500 } })
    await bus.connect()
    counter = new ReturnCounter(bus)
    result.masterIdleRssBytes = rssBytes(fleet.master.pid)
    const run: CopyRun = { fleet, client, runner, counter, ids: swarm.ids, dests: join(work, 'dest'), sha256: result.sha256, settings }
    hooks.onPhase?.('copy')
    result.first = await copyToAll(run)
    hooks.onPhase?.('copy again (cache hits)')
    result.second = await copyToAll(run)
    // A copy the file server sent no file for is a cache hit: the dest already had the master's hash.
    result.secondCacheHits = Math.max(0, result.second.intact - result.second.served.files_served)
  } catch (error) {
    result.error = (error as Error).message.slice(0, 2000)
  } finally {
    hooks.onPhase?.('stop')
    counter?.close()
    await bus?.close().catch(() => {})
    await client?.close().catch(() => {})
    await runner?.close().catch(() => {})
    if (fleet !== undefined) {
      result.pids = [...fleet.spawnedPids]
      await fleet.stop()
      hooks.onFleet?.(fleet, false)
      result.leftoverPids = await waitGone(result.pids, 10_000)
    }
    await rm(work, { recursive: true, force: true })
    result.finishedAt = new Date().toISOString()
  }
  return result
}

/** The file-server scenario's report as Markdown. */
export function filesMarkdown(result: FilesResult): string {
  const m = result.machine
  const mib = mebibytes
  const row = (name: string, run: FilesRun): string =>
    `| ${name} | ${run.jobs} | ${run.returned} | ${run.intact} | ${run.lostOrCorrupt} | ${run.durationMs.toFixed(0)} | ${run.filesPerSec} | ${run.mibPerSec} | ${run.served.files_served} / ${mib(run.served.bytes_served)} MiB | ${mib(run.masterPeakRssBytes)} | ${mib(run.masterAfterRssBytes)} |`
  return [
    `# Brine bench: cp.get_file to ${result.settings.minions} swarm minions, ${result.startedAt}`,
    '',
    `\`${result.command.join(' ')}\` — ${m.cpus} × ${m.cpuModel}, ${(m.totalmemBytes / 1024 ** 3).toFixed(0)} GiB, Node ${m.node}, ${m.os}; load average ${result.loadAverage.join(' / ')} (1 / 5 / 15 min) at the start`,
    '',
    `Each of ${result.settings.minions} ${result.settings.transport} swarm minions runs \`cp.get_file ${BENCH_FILE_URL} <dest>/<id>/1mb.bin makedirs=True\` (${mib(result.settings.fileBytes)} MiB, sha256 ${result.sha256.slice(0, 16)}…), all published at once; every copy is hashed on disk. The second run repeats it with every dest already holding the file.`,
    '',
    '| run | jobs | returned | intact (sha256) | lost or corrupt | first publish → last return ms | files/s | MiB/s | file server sent (files / bytes) | master peak RSS MiB | master RSS after MiB |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    row('first', result.first),
    row('second (cached)', result.second),
    '',
    `Master RSS with the minions connected, before the first run: ${mib(result.masterIdleRssBytes)} MiB. Second run: ${result.secondCacheHits} of ${result.second.jobs} copies were cache hits (the file server sent ${result.second.served.files_served} files, ${result.second.served.bytes_served} bytes; it answered ${result.second.served.hashes} hash requests).`,
    '',
    result.error === undefined
      ? `Processes started: ${result.pids.length}; still alive after the stop: ${result.leftoverPids.length}.`
      : `**Failed:** ${result.error}`,
    '',
  ].join('\n')
}
