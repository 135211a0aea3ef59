import { cpus, totalmem, type as osType, release } from 'node:os'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { currentUser, LocalClient, MasterEvent, RunnerClient, unwrapLookup } from '@brine/client'
import { secondsFromMs } from '@brine/config'
import { JOB_TAG_PREFIX, parseJobReturnTag } from '@brine/protocol'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ApiProbe, apiMasterConfig, type ApiFigures } from './api-bench.js'
import { cpuTimeMs, deadline, pidAlive, rssBytes } from '@brine/testkit'
import { Fleet, type SwarmProcess, type TransportName } from '@brine/harness'
import { fleetBus, makeSwarmKeysUnder, startSwarm } from './fleet-swarm.js'
import { makeRoomForMinions, natsServerRss } from './nats-broker.js'

/** A transport of the matrix: one of the three, or `both` (one master serving half the minions on zeromq, half on tcp). */
export type BenchTransport = TransportName | 'both'
export type MinionMode = 'procs' | 'swarm'

export interface BenchCase {
  transport: BenchTransport
  n: number
  mode: MinionMode
  /**
   * K > 0: a tree instead of one master — a top master (`order_masters`, no minion of its own) and K
   * syndic nodes (a master and a brine-syndic each) with N/K minions under each; jobs go to the top.
   */
  syndics?: number
}

export interface BenchSettings {
  /** Timed test.ping calls after warm-up (≥ 50; ≥ 20 at large N). */
  latencyCalls: number
  warmupCalls: number
  /** Jobs of the throughput phase and how many may be in flight. */
  throughputJobs: number
  window: number
  /** Jobs of the overload burst (no window). */
  overloadJobs: number
  /** Minion instances per brine-swarm process. */
  swarmSize: number
  /**
   * nats-servers of a NATS case (default 1): more make a cluster routed on loopback, the master on the first and the
   * minions spread over all, so no server holds more connections than its open-file limit allows.
   */
  natsServers?: number
  /**
   * Swarm minions make their key pairs as they start, inside the timed launch: a fleet's very first start. By default
   * (false) they are made before the launch ({@link CaseResult.connect}'s `keysMadeMs`), as a fleet whose minions have
   * started before has them: a swarm would otherwise time one process making a thousand machines' keys in turn.
   */
  keysAtLaunch?: boolean
  /**
   * The minions' `recon_default`, ms as Salt has it (default: Salt's 1000): how soon a minion tries again to reach a master that
   * went away. An operator's choice for a fleet tuned to come back fast after a master restart; the report says when set.
   */
  reconDefault?: number
  /**
   * The swarm processes' nice value (0–19; default 0): a swarm of tens of thousands stands in for machines of their own,
   * and at nice 0 on the master's cores it takes most of the CPU the master needs. The report says when set.
   */
  swarmNice?: number
  /** Bound on each wait for returns, ms. */
  jobTimeoutMs: number
  /** Bound on connecting (launch → all answering), and on answering again after a restart, ms. */
  connectTimeoutMs: number
  /** Overload: stop waiting when no return came for this long, ms… */
  overloadQuietMs: number
  /** …or after this long (at most; 2 ms per expected return, at least 60 s). */
  overloadMaxMs: number
  /** The N (process minions) at which brine-api is measured too: POST / and CLI pings, events to SSE readers. */
  apiSizes: number[]
  /** Timed `POST /` pings, and `brine` process pings to compare. */
  apiCalls: number
  cliCalls: number
  /** `/events` readers during the throughput phase. */
  sseReaders: number
}

export interface Stats {
  count: number
  min: number
  median: number
  p95: number
  max: number
}

/**
 * Returns of a set of jobs. `lost` counts returns the master never stored (its job cache is the
 * record); `eventsMissed` counts return events the bench's bus reader did not see, which the bus may
 * drop for a slow reader by design and which are not lost returns.
 */
export interface ReturnCounts {
  /** jobs × N. */
  expected: number
  /** Distinct (jid, id) returns in the master's job cache (`jobs.lookup_jid`). */
  stored: number
  /** expected − stored. */
  lost: number
  /** Distinct (jid, id) return events the bench's reader saw on the bus. */
  eventsSeen: number
  /** expected − eventsSeen. */
  eventsMissed: number
  /** Return events seen more than once for one (jid, id); the cache holds at most one per (jid, id) by construction. */
  duplicates: number
}

/** One test.ping round of waiting for every minion to answer; ms from the wait's start (a restart: the relaunch). */
export interface PingRound {
  startMs: number
  /** When the master answered the publish (null: it did not answer; the round then waited 100 ms and the next began). */
  publishedMs: number | null
  /** Minions heard from before this round, and by its end. */
  heardBefore: number
  heard: number
}

/** CPU time (ms, user + system, every thread) of a case's master and of its swarm processes together. */
export interface ProcessCpu {
  master: number
  swarms: number
}

/** The swarm processes' CPU time together, ms. */
const swarmsCpuMs = (fleet: Fleet): number => fleet.swarms.reduce((sum, swarm) => sum + cpuTimeMs(swarm.process.pid), 0)

export interface CaseResult extends BenchCase {
  /** Minions per transport (`both` splits them). */
  split: Partial<Record<TransportName, number>>
  connect: {
    /**
     * Before the launch, not in its figures: making the swarm minions' key pairs (their brine-swarm processes in
     * parallel), ms; null when the minions made them as they started (`keysAtLaunch`, or minion processes).
     */
    keysMadeMs: number | null
    /** Launch → every transport's start-up line and the event bus connected. */
    masterReadyMs: number
    /** Launch → every minion's start event (key accepted, authenticated). */
    allAcceptedMs: number
    /** Launch → every minion answered one test.ping. */
    allAnsweringMs: number
    /** CPU time (ms, every thread) the master and the swarm processes had used once all answered: the launch's cost, whatever the machine's load. */
    cpuMs?: ProcessCpu
  }
  latency: ReturnCounts & { calls: number; ms: Stats }
  throughput: ReturnCounts & { jobs: number; window: number; durationMs: number; jobsPerSec: number; returnsPerSec: number; jobMs: Stats }
  memory: {
    masterIdleBytes: number
    /** With the N minions connected, once the master settled after their connecting (see {@link settledRss}). */
    masterWithMinionsBytes: number
    /** The same read the moment the last minion answered: the connecting storm's garbage and young generation still held. */
    masterAtConnectBytes?: number
    masterAfterLoadBytes: number
    /**
     * One real `brine-minion` process (procs mode), idle: read once it has collected what its start left (see
     * {@link settledMinionRss}), as it is for the rest of an idle minion's life.
     */
    minionProcessIdleBytes: number | null
    /** Each swarm process's RSS (swarm mode), and that divided by its minion count. */
    swarmProcessBytes: number[] | null
    swarmBytesPerMinion: number | null
    /** The NATS cases' nats-server (the bench's own; a cluster's summed): its RSS idle, with the N minions connected, and after the load phases. */
    natsServer: { idleBytes: number; withMinionsBytes: number; afterLoadBytes: number } | null
  }
  /**
   * `rounds`: the test.ping rounds it took (times from the relaunch), which is what the figure is made of.
   * `allPresentMs`: relaunch → every minion in the master's `manage.present` (checked in with both links back),
   * which the first round waits for on the socket transports; null when not waited for (NATS: no link went
   * away) or not reached within {@link PRESENCE_WAIT_MS}.
   */
  restart: {
    masterReadyMs: number
    allPresentMs: number | null
    allAnsweringMs: number
    rounds: PingRound[]
    /** Each round's window (ms): {@link restartWindowMs}. */
    windowMs?: number
    /** CPU time (ms) of the relaunched master, and the swarm processes' from the stop, once all answered again. */
    cpuMs?: ProcessCpu
  }
  overload: ReturnCounts & {
    jobs: number
    durationMs: number
    returnsPerSec: number
    masterPeakRssBytes: number
    masterHwmBytes: number
    /** Events the master's event bus dropped for slow subscribers, as it logged them (every 1,000th): a lower bound. */
    busDroppedEvents: number
  }
  /**
   * The scale curve: how the master's costs grow with N. `masterCpuMsPerReturn` is its CPU time (every thread)
   * over the throughput phase divided by the returns it stored; `masterBytesPerMinion` is its RSS with the N
   * minions connected less its idle RSS, divided by N. null when not measured.
   */
  scale: { masterCpuMsPerReturn: number | null; masterBytesPerMinion: number | null }
  /** A tree case (`syndics` > 0): each master's RSS with the N minions connected, the top first. */
  tree?: { syndics: number; masters: { name: string; rssBytes: number; minions: number }[] }
  /** Every process the case started, each verified gone after the stop. */
  pids: number[]
  /** The REST API's figures, at the sizes of `apiSizes`. */
  api?: ApiFigures
  /** Set when the case failed; the other figures are then partial (zeros). */
  error?: string
  /** The daemons' warnings and errors (distinct lines, at most 20), to explain a loss. */
  warnings?: string[]
}

export interface BenchResult {
  version: 1
  startedAt: string
  finishedAt: string
  command: string[]
  machine: { cpus: number; cpuModel: string; totalmemBytes: number; node: string; os: string }
  quick: boolean
  settings: BenchSettings
  cases: CaseResult[]
  /** Pids still alive after the run (must be empty). */
  leftoverPids: number[]
}

export type Phase = 'connect' | 'latency' | 'throughput' | 'api' | 'restart' | 'overload' | 'stop'
export const PHASES: readonly Phase[] = ['connect', 'latency', 'throughput', 'api', 'restart', 'overload', 'stop']

export interface BenchHooks {
  /** Called as each phase of a case begins. */
  onPhase?: (benchCase: BenchCase, phase: Phase) => void
  /** Called with each fleet as it starts and stops, so an interrupt can stop it. */
  onFleet?: (fleet: Fleet, live: boolean) => void
  logLevel?: string
  /** Node options for the daemons (see FleetOptions.nodeArgs). */
  nodeArgs?: string[]
}

export const QUICK_SETTINGS: BenchSettings = {
  latencyCalls: 20,
  warmupCalls: 3,
  throughputJobs: 50,
  window: 5,
  overloadJobs: 50,
  swarmSize: 500,
  jobTimeoutMs: 15_000,
  connectTimeoutMs: 60_000,
  overloadQuietMs: 30_000,
  overloadMaxMs: 300_000,
  apiSizes: [1, 50],
  apiCalls: 20,
  cliCalls: 5,
  sseReaders: 10,
}

export const FULL_SETTINGS: BenchSettings = {
  ...QUICK_SETTINGS,
  latencyCalls: 50,
  // Freshly started processes run their code interpreted at first; a running fleet's is compiled.
  warmupCalls: 30,
  throughputJobs: 200,
  overloadJobs: 200,
  jobTimeoutMs: 30_000,
  connectTimeoutMs: 120_000,
  apiCalls: 50,
  cliCalls: 10,
}

/** The matrix: quick = zeromq/tcp/nats/both × {1, 10} processes; full adds 50 processes and 1,000 swarm minions. */
export function benchMatrix(quick: boolean, transports: readonly BenchTransport[] = ['zeromq', 'tcp', 'nats', 'both']): BenchCase[] {
  const sizes: { n: number; mode: MinionMode }[] = quick
    ? [
        { n: 1, mode: 'procs' },
        { n: 10, mode: 'procs' },
      ]
    : [
        { n: 1, mode: 'procs' },
        { n: 10, mode: 'procs' },
        { n: 50, mode: 'procs' },
        { n: 1000, mode: 'swarm' },
      ]
  return transports.flatMap((transport) => sizes.filter((size) => transport !== 'both' || size.n >= 2).map((size) => ({ transport, ...size })))
}

/** min / median / p95 / max (nearest-rank) of `values`; zeros when empty. */
export function stats(values: readonly number[]): Stats {
  if (values.length === 0) return { count: 0, min: 0, median: 0, p95: 0, max: 0 }
  const sorted = [...values].sort((a, b) => a - b)
  const rank = (p: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!
  const round = (value: number): number => Math.round(value * 100) / 100
  return { count: sorted.length, min: round(sorted[0]!), median: round(rank(0.5)), p95: round(rank(0.95)), max: round(sorted[sorted.length - 1]!) }
}

export function machineInfo(): BenchResult['machine'] {
  const list = cpus()
  return { cpus: list.length, cpuModel: list[0]?.model.trim() ?? 'unknown', totalmemBytes: totalmem(), node: process.version, os: `${osType()} ${release()}` }
}

/**
 * Counts job return events on the master's event bus by (jid, id): each `salt/job/<jid>/ret/<id>`
 * should arrive once, so a second one is a duplicate. What was lost is the job cache's to say
 * ({@link storedReturns}): the bus may drop events for a reader that falls behind.
 */
export class ReturnCounter {
  private readonly seen = new Map<string, Set<string>>()
  private readonly duplicatesOf = new Map<string, number>()
  private readonly watchers = new Set<() => void>()
  private readonly controller = new AbortController()
  lastReturnAt = 0

  constructor(bus: MasterEvent) {
    void (async () => {
      for await (const event of bus.iter({ match: JOB_TAG_PREFIX, hwm: 10_000_000, signal: this.controller.signal })) {
        const parsed = parseJobReturnTag(event.tag)
        if (parsed === undefined) continue
        const ids = this.seen.get(parsed.jid) ?? new Set<string>()
        this.seen.set(parsed.jid, ids)
        if (ids.has(parsed.id)) this.duplicatesOf.set(parsed.jid, (this.duplicatesOf.get(parsed.jid) ?? 0) + 1)
        ids.add(parsed.id)
        this.lastReturnAt = performance.now()
        for (const watcher of this.watchers) watcher()
      }
    })().catch(() => {})
  }

  received(jid: string): number {
    return this.seen.get(jid)?.size ?? 0
  }

  /** The counts of `jids`, `stored` being the job cache's distinct returns per jid. */
  counts(jids: readonly string[], perJob: number, stored: ReadonlyMap<string, number>, expected = jids.length * perJob): ReturnCounts {
    const eventsSeen = jids.reduce((sum, jid) => sum + Math.min(perJob, this.received(jid)), 0)
    const storedCount = jids.reduce((sum, jid) => sum + Math.min(perJob, stored.get(jid) ?? 0), 0)
    const duplicates = jids.reduce((sum, jid) => sum + (this.duplicatesOf.get(jid) ?? 0), 0)
    return { expected, stored: storedCount, lost: expected - storedCount, eventsSeen, eventsMissed: expected - eventsSeen, duplicates }
  }

  /** Resolves when every jid has `perJob` returns, or when none arrived for `quietMs` (bounded by `maxMs`). */
  waitFor(jids: readonly string[], perJob: number, quietMs: number, maxMs: number): Promise<void> {
    const started = performance.now()
    return new Promise((resolve) => {
      const done = (): boolean => jids.every((jid) => this.received(jid) >= perJob)
      const finish = (): void => {
        clearInterval(timer)
        this.watchers.delete(check)
        resolve()
      }
      const check = (): void => {
        if (done()) finish()
      }
      const timer = setInterval(() => {
        const now = performance.now()
        if (now - started > maxMs || now - Math.max(started, this.lastReturnAt) > quietMs) finish()
      }, 100)
      this.watchers.add(check)
      check()
    })
  }

  close(): void {
    this.controller.abort()
  }
}

/**
 * Distinct returns the master's job cache holds per jid: one `jobs.lookup_jid` per jid, in turn
 * (each bounded by the runner request timeout). A failed lookup throws: the phase then has no figures.
 */
export async function storedReturns(runner: RunnerClient, jids: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>()
  for (const jid of jids) out.set(jid, Object.keys(unwrapLookup(await runner.cmd('jobs.lookup_jid', [jid])).returns).length)
  return out
}

/** Publishes test.ping to all and waits for the returns; ms from publish to the last return, and who answered. */
async function pingAll(client: LocalClient, timeoutMs: number, gatherMs = 1000): Promise<{ jid: string; ms: number; ids: Set<string>; endedAt: number }> {
  const started = performance.now()
  // The reader opens before the publish, as `brine` does: no job-cache lookup in the measured path.
  await using job = await client.runJob('*', 'test.ping', [], { timeout: timeoutMs, listen: true })
  const ids = new Set<string>()
  let endedAt = performance.now()
  for await (const item of job.returns({ timeout: timeoutMs, gatherJobTimeout: gatherMs })) {
    if (item.status !== 'returned') continue
    ids.add(item.id)
    endedAt = performance.now()
  }
  return { jid: job.jid, ms: endedAt - started, ids, endedAt }
}

/** The most minions {@link untilAllAnswer} pings by a list target; more still unheard are pinged with `*`. */
const LIST_PING_MAX = 500

/** The minions whose return to `jid` the master stored (jobs.lookup_jid over the client's own channel); none when it cannot say. */
async function storedIds(client: LocalClient, jid: string): Promise<string[]> {
  try {
    const reply = (await client.request({ cmd: 'runner', fun: 'jobs.lookup_jid', arg: [jid], kwarg: {}, user: currentUser() }, { tries: 1 })) as {
      return?: unknown
    }
    return Object.keys(unwrapLookup(reply.return).returns)
  } catch {
    return []
  }
}

/**
 * Pings until every one of the `n` minions has answered test.ping since the phase began; resolves
 * with the moment the last of them did (performance.now(), the figure's end). The first ping goes
 * to all and tells who the master expects; each next one, sent when the previous one is done, goes
 * only to those not heard from yet (to all again while more than LIST_PING_MAX are). One at a time: overlapping pings (tried: a new one every 250 ms)
 * loaded a master busy re-authenticating a thousand minions so much that the figure doubled.
 * Before each next ping, the returns the master stored for the earlier ones count too: at tens of thousands a
 * ping outlasts its window, and a minion that answered it late has answered all the same (pinging it again
 * would only add its work to the fleet's). Throws naming how many answered at `deadline`.
 */
async function untilAllAnswer(
  client: () => LocalClient,
  n: number,
  deadline: number,
  options: { windowMs?: number; rounds?: PingRound[]; from?: number } = {},
): Promise<number> {
  const heard = new Set<string>()
  let expected: string[] | undefined
  // Each ping's window is a few times the ping's p95 at N, and short: a minion back just after a
  // publish is seen by the next ping, so the window bounds how finely the figure is measured.
  const window = options.windowMs ?? Math.min(2000, 500 + n / 2)
  const from = options.from ?? performance.now()
  const pinged: string[] = []
  for (;;) {
    for (const jid of pinged) for (const id of await storedIds(client(), jid)) heard.add(id)
    if (heard.size >= n) return performance.now()
    const unheard = expected?.filter((id) => !heard.has(id))
    // A list target is one message per minion, each carrying the whole list: past a few hundred minions, pinging all costs less.
    const missing = unheard !== undefined && unheard.length <= LIST_PING_MAX ? unheard : undefined
    const pingRound: PingRound = { startMs: round(performance.now() - from), publishedMs: null, heardBefore: heard.size, heard: heard.size }
    options.rounds?.push(pingRound)
    try {
      await using job = await client().runJob(missing ?? '*', 'test.ping', [], {
        tgtType: missing === undefined ? 'glob' : 'list',
        timeout: window,
        listen: true,
      })
      pingRound.publishedMs = round(performance.now() - from)
      pinged.push(job.jid)
      if (expected === undefined && missing === undefined && job.minions.length >= n) expected = [...job.minions]
      for await (const item of job.returns({ timeout: window, gatherJobTimeout: 250 })) {
        if (item.status !== 'returned') continue
        heard.add(item.id)
        pingRound.heard = heard.size
        if (heard.size >= n) return performance.now()
      }
    } catch (error) {
      if (performance.now() > deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    if (performance.now() > deadline) throw new Error(`not every minion answered test.ping in time: ${heard.size} of ${n}`)
  }
}

/**
 * Every bench minion connects from 127.0.0.1, so a master's per-address cap (by default a quarter of its
 * connection cap, meant for a real fleet's many addresses) would refuse the 2,188th of 2,500 swarm minions
 * under one master; the total cap, from the open-file limit, still holds.
 */
export const LOOPBACK_FLEET = { max_connections_per_address: 10_000_000 }

const zeroCounts = (): ReturnCounts => ({ expected: 0, stored: 0, lost: 0, eventsSeen: 0, eventsMissed: 0, duplicates: 0 })

/** A case with every figure zero or unmeasured, filled in as its phases run. */
export function emptyCase(benchCase: BenchCase): CaseResult {
  return {
    ...benchCase,
    split: {},
    connect: { keysMadeMs: null, masterReadyMs: 0, allAcceptedMs: 0, allAnsweringMs: 0 },
    latency: { ...zeroCounts(), calls: 0, ms: stats([]) },
    throughput: { ...zeroCounts(), jobs: 0, window: 0, durationMs: 0, jobsPerSec: 0, returnsPerSec: 0, jobMs: stats([]) },
    memory: {
      masterIdleBytes: 0,
      masterWithMinionsBytes: 0,
      masterAfterLoadBytes: 0,
      minionProcessIdleBytes: null,
      swarmProcessBytes: null,
      swarmBytesPerMinion: null,
      natsServer: null,
    },
    restart: { masterReadyMs: 0, allPresentMs: null, allAnsweringMs: 0, rounds: [] },
    overload: { ...zeroCounts(), jobs: 0, durationMs: 0, returnsPerSec: 0, masterPeakRssBytes: 0, masterHwmBytes: 0, busDroppedEvents: 0 },
    scale: { masterCpuMsPerReturn: null, masterBytesPerMinion: null },
    pids: [],
  }
}

/** Minions per transport: `both` gives zeromq the odd one. */
export function splitMinions(transport: BenchTransport, n: number): Partial<Record<TransportName, number>> {
  if (transport !== 'both') return { [transport]: n }
  return { zeromq: Math.ceil(n / 2), tcp: Math.floor(n / 2) }
}

const round = (ms: number): number => Math.round(ms * 100) / 100

/**
 * The scale curve's figure: CPU ms per return, to 0.0001 ms. A return costs the master a few tenths of a ms, so
 * {@link round}'s 0.01 ms would move it by up to 2.5 % and hide the differences between N the curve is read for;
 * the CPU itself is in 10 ms ticks, under 0.3 % of a phase of 20,000 returns.
 */
export function cpuMsPerReturn(cpuMs: number, returns: number): number | null {
  return returns > 0 ? Math.round((cpuMs / returns) * 10_000) / 10_000 : null
}

/** The short name in minion ids (`zmq-0`, `tcp-s1-42`, `nats-3`). */
export const ID_PREFIX: Record<TransportName, string> = { zeromq: 'zmq', tcp: 'tcp', nats: 'nats' }

/** Every pid a fleet started: its daemons and swarms, and its own nats-servers. */
const fleetPids = (fleet: Fleet): number[] => [...fleet.spawnedPids, ...fleet.natsServers.map((server) => server.pid).filter((pid) => pid > 0)]

/** The brine-swarm processes of `count` minions: `swarmSize` each, ids `<prefix>s<part>-<index>`. */
export function swarmParts(count: number, swarmSize: number, prefix: string): { part: number; count: number; prefix: string }[] {
  const parts: { part: number; count: number; prefix: string }[] = []
  for (let first = 0, part = 0; first < count; first += swarmSize, part++)
    parts.push({ part, count: Math.min(swarmSize, count - first), prefix: `${prefix}s${part}-` })
  return parts
}

/**
 * Starts `count` minions of `transport` on `fleet`: one process each (ids `<prefix><index>`), or brine-swarm
 * processes of `swarmSize` (ids `<prefix>s<part>-<index>`), all at once as a fleet's machines start. Their ids, once
 * every process has started.
 */
async function startMinions(
  fleet: Fleet,
  options: { transport: TransportName; count: number; mode: MinionMode; swarmSize: number; prefix: string; config: Record<string, unknown>; nice?: number },
): Promise<string[]> {
  const { transport, count, prefix } = options
  const ids: string[] = []
  if (options.mode === 'procs') {
    for (let index = 0; index < count; index++) {
      ids.push(`${prefix}${index}`)
      await fleet.startMinion({ id: `${prefix}${index}`, transport, config: { ...options.config, ...natsServerOf(fleet, transport, index) } })
    }
    return ids
  }
  const swarms = await Promise.all(
    swarmParts(count, options.swarmSize, prefix).map(({ part, count: size, prefix: partPrefix }) =>
      startSwarm(fleet, {
        count: size,
        transport,
        prefix: partPrefix,
        config: { ...options.config, ...natsServerOf(fleet, transport, part) },
        nice: options.nice,
      }),
    ),
  )
  return swarms.flatMap((swarm) => swarm.ids)
}

/**
 * The bench's minions re-authenticate for a changed master key as a Salt fleet does by default: within
 * `random_reauth_delay` 10 s (the test kit's fleets shorten it for tests). On NATS a master restart is
 * such a change (the minions' broker connections outlive the master): the restart phase measures it.
 */
const BENCH_MINION_CONFIG = { random_reauth_delay: 10 }

/** Every bench minion's config keys under `settings`. */
const minionConfigOf = (settings: BenchSettings): Record<string, unknown> => ({
  ...BENCH_MINION_CONFIG,
  ...(settings.reconDefault === undefined ? {} : { recon_default: settings.reconDefault }),
})

/** A NATS minion (or swarm) `index`'s server when the fleet runs a cluster of its own: round robin over its servers. */
function natsServerOf(fleet: Fleet, transport: TransportName, index: number): Record<string, unknown> | undefined {
  if (transport !== 'nats' || fleet.natsServers.length < 2) return undefined
  return { nats_servers: [fleet.natsServers[index % fleet.natsServers.length]!.url] }
}

/**
 * A NATS fleet's nats-server: its idle RSS into `memory`, and room in its open-file limit for `minions` NATS
 * minions in groups of `group`. Nothing when the fleet has no broker.
 */
async function prepareNatsServer(fleet: Fleet, memory: CaseResult['memory'], minions: number, group: number): Promise<void> {
  if (fleet.natsServer === undefined) return
  memory.natsServer = { idleBytes: natsServerRss(fleet), withMinionsBytes: 0, afterLoadBytes: 0 }
  await makeRoomForMinions(fleet, minions, group)
}

/**
 * The figures with every minion connected: the master's RSS (as the last minion answered, and settled) and what it
 * grew by per minion (the scale curve), the nats-server's, one minion process's and each swarm process's of `fleet`
 * (a tree's top has none of these).
 */
async function measureConnected(fleet: Fleet, result: CaseResult, n: number): Promise<void> {
  const memory = result.memory
  memory.masterAtConnectBytes = rssBytes(fleet.master.pid)
  memory.masterWithMinionsBytes = await settledRss(fleet.master.pid, memory.masterIdleBytes)
  result.scale.masterBytesPerMinion = Math.round(Math.max(0, memory.masterWithMinionsBytes - memory.masterIdleBytes) / Math.max(1, n))
  if (memory.natsServer !== null) memory.natsServer.withMinionsBytes = natsServerRss(fleet)
  const firstMinion = [...fleet.minions.values()][0]
  if (firstMinion !== undefined) memory.minionProcessIdleBytes = await settledMinionRss(firstMinion.pid)
  recordSwarmMemory(memory, fleet.swarms)
}

/** The swarm processes' RSS, and their sum per swarm minion, into `memory`. */
function recordSwarmMemory(memory: CaseResult['memory'], swarms: readonly SwarmProcess[]): void {
  if (swarms.length === 0) return
  memory.swarmProcessBytes = swarms.map((swarm) => rssBytes(swarm.process.pid))
  const total = memory.swarmProcessBytes.reduce((sum, bytes) => sum + bytes, 0)
  memory.swarmBytesPerMinion = Math.round(total / swarms.reduce((sum, swarm) => sum + swarm.ids.length, 0))
}

/**
 * brine-master gives back what a load left (a memory-reducing collection) once its event loop has been idle 2 s
 * after its resident size grew 48 MiB: a master that grew that much since `baselineBytes` is read once it has given
 * back half of that growth, or after {@link SETTLE_MAX_MS}. What the master holds for as long as it runs, not the
 * garbage of the phase just ended.
 */
const SETTLE_MAX_MS = 10_000
const SETTLE_GROWTH_BYTES = 48 * 1024 * 1024

/** `pid`'s RSS, read once it has settled after growing from `baselineBytes` (see {@link SETTLE_MAX_MS}). */
async function settledRss(pid: number, baselineBytes: number): Promise<number> {
  const grown = rssBytes(pid)
  if (grown - baselineBytes < SETTLE_GROWTH_BYTES) return grown
  const given = grown - (grown - baselineBytes) / 2
  for (const until = performance.now() + SETTLE_MAX_MS; performance.now() < until && rssBytes(pid) > given;) {
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return rssBytes(pid)
}

/**
 * brine-minion collects what its start left once its event loop has been idle 2 s (checking once a second): a minion
 * just connected is read once its RSS fell by {@link MINION_SETTLE_DROP_BYTES} from the first reading, or after
 * {@link MINION_SETTLE_MAX_MS} (one that had already collected, or an older build that does not).
 */
const MINION_SETTLE_MAX_MS = 6000
const MINION_SETTLE_DROP_BYTES = 1024 * 1024

/** `pid`'s RSS once it has given back its start's leftovers (see {@link MINION_SETTLE_MAX_MS}). */
async function settledMinionRss(pid: number): Promise<number> {
  const first = rssBytes(pid)
  for (const until = performance.now() + MINION_SETTLE_MAX_MS; performance.now() < until && rssBytes(pid) > first - MINION_SETTLE_DROP_BYTES;) {
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return rssBytes(pid)
}

/** The master's and the nats-server's RSS once the load phases are done and the master settled. */
async function measureAfterLoad(fleet: Fleet, memory: CaseResult['memory']): Promise<void> {
  memory.masterAfterLoadBytes = await settledRss(fleet.master.pid, memory.masterWithMinionsBytes)
  if (memory.natsServer !== null) memory.natsServer.afterLoadBytes = natsServerRss(fleet)
}

/** What runs between the phases of {@link measureJobs}. */
interface MeasureSteps {
  /**
   * Once the throughput phase's returns are all in: the REST API is measured here, with load of its own, so
   * nothing of it (the API process, its bus reader, the SSE streams) runs during the throughput phase.
   */
  afterThroughput?: () => Promise<void>
  /** The master's CPU time so far, ms: read around the throughput phase for the scale curve's CPU per return. */
  masterCpuMs?: () => number
}

/** `jobs` test.pings to every minion, `window` of them in flight: their jids, each one's time and the whole duration. */
async function pingWindow(
  client: LocalClient,
  window: number,
  jobs: number,
  timeoutMs: number,
): Promise<{ jids: string[]; jobMs: number[]; durationMs: number }> {
  const jobMs: number[] = []
  const jids: string[] = []
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: window }, async () => {
      while (next < jobs) {
        next++
        const { jid, ms } = await pingAll(client, timeoutMs)
        jobMs.push(ms)
        jids.push(jid)
      }
    }),
  )
  return { jids, jobMs, durationMs: performance.now() - started }
}

/**
 * The latency phase (warm-up, then timed test.pings one at a time) and the throughput phase (`window` jobs in
 * flight), with their lost, missed and duplicate counts, into `result`. `quietMs`: how long the counter waits
 * for a straggling return after the last one.
 */
async function measureJobs(
  client: LocalClient,
  counter: ReturnCounter,
  n: number,
  settings: BenchSettings,
  stored: (jids: readonly string[]) => Promise<Map<string, number>>,
  result: CaseResult,
  phase: (name: Phase) => void,
  quietMs: number,
  steps: MeasureSteps = {},
): Promise<void> {
  phase('latency')
  for (let index = 0; index < settings.warmupCalls; index++) await pingAll(client, settings.jobTimeoutMs)
  const latencies: number[] = []
  const latencyJids: string[] = []
  for (let index = 0; index < settings.latencyCalls; index++) {
    const { jid, ms } = await pingAll(client, settings.jobTimeoutMs)
    latencies.push(ms)
    latencyJids.push(jid)
  }
  await counter.waitFor(latencyJids, n, quietMs, settings.jobTimeoutMs)
  result.latency = { ...counter.counts(latencyJids, n, await stored(latencyJids)), calls: latencies.length, ms: stats(latencies) }

  phase('throughput')
  const cpuBefore = steps.masterCpuMs?.()
  const { jids: throughputJids, jobMs, durationMs } = await pingWindow(client, settings.window, settings.throughputJobs, settings.jobTimeoutMs)
  await counter.waitFor(throughputJids, n, quietMs, settings.jobTimeoutMs)
  const cpuAfter = steps.masterCpuMs?.()
  await steps.afterThroughput?.()
  const counts = counter.counts(throughputJids, n, await stored(throughputJids))
  result.throughput = {
    ...counts,
    jobs: throughputJids.length,
    window: settings.window,
    durationMs: round(durationMs),
    jobsPerSec: round(throughputJids.length / secondsFromMs(durationMs)),
    returnsPerSec: round(counts.stored / secondsFromMs(durationMs)),
    jobMs: stats(jobMs),
  }
  if (cpuBefore !== undefined && cpuAfter !== undefined) result.scale.masterCpuMsPerReturn = cpuMsPerReturn(cpuAfter - cpuBefore, counts.stored)
}

/** The job cache's count of `jids`' returns, through a runner client of the master in `configDir()` (its root key changes on restart). */
function storedIn(configDir: () => string, settings: BenchSettings): (jids: readonly string[]) => Promise<Map<string, number>> {
  return async (jids) => {
    const runner = new RunnerClient({ configDir: configDir(), requestTimeout: settings.jobTimeoutMs })
    try {
      return await storedReturns(runner, jids)
    } finally {
      await runner.close()
    }
  }
}

/** The REST API's phase: `POST /` and `brine` process pings, then the throughput load again with SSE readers attached. */
async function measureApi(fleet: Fleet, client: LocalClient, counter: ReturnCounter, n: number, settings: BenchSettings, result: CaseResult): Promise<void> {
  const probe = new ApiProbe(fleet)
  try {
    await probe.start()
    await probe.postLatency(settings.warmupCalls, n, settings.jobTimeoutMs)
    const postMs = await probe.postLatency(settings.apiCalls, n, settings.jobTimeoutMs)
    const cliMs = await probe.cliLatency(settings.cliCalls, n)
    await probe.openReaders(settings.sseReaders)
    const { jids } = await pingWindow(client, settings.window, settings.throughputJobs, settings.jobTimeoutMs)
    // Each reader is owed each job's new event and each minion's return event.
    const sse = await probe.closeReaders(settings.throughputJobs * (1 + n))
    await counter.waitFor(jids, n, 2000, settings.jobTimeoutMs)
    result.api = { postMs, cliMs, sse, apiRssBytes: rssBytes(probe.pid) }
  } finally {
    // Gone before the restart and overload phases, which are measured without it.
    await probe.stop()
  }
}

/**
 * The restart phase: the master stopped and launched again, then test.ping rounds until all N answer, bounded
 * by `connectTimeoutMs` from the relaunch; the new client, once `counterBus` (the return counter's) is back too.
 */
async function measureRestart(
  fleet: Fleet,
  newClient: () => LocalClient,
  n: number,
  connectTimeoutMs: number,
  result: CaseResult,
  counterBus: MasterEvent,
): Promise<LocalClient> {
  // The counter's bus connection goes with the master and comes back on its own backoff, after the fleet's reader (which
  // launchMaster waits for) and possibly after the last round: a burst sent before it is back reaches no counter, and
  // the overload phase would wait out its quiet window for returns it never hears, and time the burst by an older one.
  const counterBack = counterBus.nextConnection()
  const swarmsBefore = swarmsCpuMs(fleet)
  await fleet.master.stop('SIGTERM')
  const relaunched = performance.now()
  await fleet.launchMaster()
  result.restart.masterReadyMs = round(performance.now() - relaunched)
  // On the socket transports every minion reconnects both links, then checks in: a ping published before a minion's
  // publish link is back never reaches it, and it would be heard only a whole round later. The first round goes
  // out once the master lists them all present (the clock keeps running from the relaunch). On NATS no link went away.
  if (result.transport !== 'nats') {
    const present = await untilPresent(fleet.masterConfigDir, n, Math.min(relaunched + connectTimeoutMs, performance.now() + PRESENCE_WAIT_MS))
    result.restart.allPresentMs = present === null ? null : round(present - relaunched)
  }
  // The restarted master wrote a new root key: a new client reads it.
  const client = newClient()
  const windowMs = restartWindowMs(n, result.latency.ms.p95)
  result.restart.windowMs = windowMs
  result.restart.allAnsweringMs = round(
    (await untilAllAnswer(() => client, n, relaunched + connectTimeoutMs, { rounds: result.restart.rounds, from: relaunched, windowMs })) - relaunched,
  )
  result.restart.cpuMs = { master: cpuTimeMs(fleet.master.pid), swarms: swarmsCpuMs(fleet) - swarmsBefore }
  await deadline(counterBack, connectTimeoutMs, "the return counter's bus connection back after the master's restart").catch(async (error: unknown) => {
    await client.close()
    throw error
  })
  return client
}

/**
 * A restart round's window: the connect phase's (a few times a small fleet's ping), or twice the latency phase's p95
 * ping when that is longer. A round whose ping to all N takes longer than its window to come back ends in a find_job
 * to all and then another ping to all, two more returns per minion for a master still taking in the last round's:
 * such rounds measure the bench's own load (at N=5,000 on a loaded two-core machine the window was a third of a
 * ping's p95, and the relaunched master stored some twenty returns per minion before every minion was heard).
 */
export function restartWindowMs(n: number, latencyP95Ms: number): number {
  const connectWindow = Math.min(2000, 500 + n / 2)
  return Math.max(connectWindow, Math.round(2 * latencyP95Ms))
}

/** How long a restart's first round waits at most for every minion to be present before it goes out anyway. */
export const PRESENCE_WAIT_MS = 10_000
/** How often the master is asked for its present minions meanwhile. */
const PRESENCE_POLL_MS = 50

/**
 * Asks the master of `configDir` for `manage.present` until it lists `n` minions or `deadline` passes (a master
 * that does not answer yet is asked again); when it did (performance.now()), or null.
 */
async function untilPresent(configDir: string, n: number, deadline: number): Promise<number | null> {
  const runner = new RunnerClient({ configDir, requestTimeout: 2000 })
  try {
    while (performance.now() < deadline) {
      const present = await runner.cmd('manage.present').catch(() => undefined)
      if (Array.isArray(present) && present.length >= n) return performance.now()
      await sleep(PRESENCE_POLL_MS)
    }
    return null
  } finally {
    await runner.close()
  }
}

/** The overload phase: `overloadJobs` publishes at once, no window; returns counted, the master's peak RSS sampled. */
async function measureOverload(
  fleet: Fleet,
  client: LocalClient,
  counter: ReturnCounter,
  n: number,
  settings: BenchSettings,
  stored: (jids: readonly string[]) => Promise<Map<string, number>>,
  result: CaseResult,
): Promise<void> {
  const masterPid = fleet.master.pid
  let peak = rssBytes(masterPid)
  const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(masterPid))), 100)
  const burstStart = performance.now()
  const burst = await Promise.allSettled(
    Array.from({ length: settings.overloadJobs }, () => client.cmdAsync('*', 'test.ping', [], { timeout: settings.jobTimeoutMs })),
  )
  const burstJids = burst.flatMap((outcome) => (outcome.status === 'fulfilled' && outcome.value !== '' ? [outcome.value] : []))
  // An overloaded master may take a long while to answer the first return, and minions retry
  // (return_retry_timer) and spool what times out: wait while returns keep coming, bounded.
  const expectedReturns = settings.overloadJobs * n
  const maxMs = Math.max(60_000, Math.min(settings.overloadMaxMs, expectedReturns * 2))
  await counter.waitFor(burstJids, n, settings.overloadQuietMs, maxMs)
  const settled = await untilStoredSettles(burstJids, expectedReturns, stored, settings.overloadQuietMs, maxMs - (performance.now() - burstStart))
  const lastReturn = Math.max(counter.lastReturnAt, settled.grewAt)
  clearInterval(sampler)
  peak = Math.max(peak, rssBytes(masterPid))
  // A publish the master refused counts as all of its returns lost.
  const counts = counter.counts(burstJids, n, settled.stored, settings.overloadJobs * n)
  const burstMs = Math.max(1, lastReturn - burstStart)
  result.overload = {
    ...counts,
    jobs: settings.overloadJobs,
    durationMs: round(burstMs),
    returnsPerSec: round(counts.stored / secondsFromMs(burstMs)),
    masterPeakRssBytes: peak,
    masterHwmBytes: rssBytes(masterPid, 'VmHWM'),
    busDroppedEvents: Math.max(0, ...[...fleet.master.stderr.matchAll(/(\d+) event\(s\) dropped so far/g)].map((match) => Number(match[1]))),
  }
  const refused = burst.find((outcome) => outcome.status === 'rejected')
  if (refused !== undefined)
    result.error = `overload: ${burst.length - burstJids.length} publishes failed: ${String((refused as PromiseRejectedResult).reason)}`
}

/** How often {@link untilStoredSettles} reads the job cache (each read looks up every burst job). */
const STORED_POLL_MS = 5000

/**
 * The bus drops events for a reader that falls behind (by design), so under the burst the counter can hear
 * nothing for its whole quiet window while the master still stores returns that minions retry. The job cache
 * has the last word: read it until it holds every return, or stopped growing for `quietMs`, or `maxMs` passed.
 * Returns the last reading and when it last grew (performance.now(); 0 if it never did).
 */
async function untilStoredSettles(
  jids: readonly string[],
  expected: number,
  stored: (jids: readonly string[]) => Promise<Map<string, number>>,
  quietMs: number,
  maxMs: number,
): Promise<{ stored: Map<string, number>; grewAt: number }> {
  const started = performance.now()
  let reading = await stored(jids)
  let total = sumOf(reading)
  let grewAt = 0
  let quietSince = performance.now()
  while (total < expected && performance.now() - quietSince < quietMs && performance.now() - started < maxMs) {
    await sleep(STORED_POLL_MS)
    reading = await stored(jids)
    const next = sumOf(reading)
    if (next > total) grewAt = quietSince = performance.now()
    total = next
  }
  return { stored: reading, grewAt }
}

const sumOf = (counts: ReadonlyMap<string, number>): number => [...counts.values()].reduce((sum, count) => sum + count, 0)

/**
 * Stops `fleets` (in that order) after noting their daemons' warnings and pids (their own nats-servers'
 * included) into `result`, then checks each pid is gone.
 */
async function stopFleets(fleets: readonly Fleet[], result: CaseResult, hooks: BenchHooks): Promise<void> {
  const daemons = fleets.flatMap((fleet) => [
    fleet.master,
    ...(fleet.syndic === undefined ? [] : [fleet.syndic]),
    ...fleet.minions.values(),
    ...fleet.swarms.map((swarm) => swarm.process),
  ])
  const warnings = collectWarnings(daemons.filter((daemon) => daemon !== undefined).map((daemon) => daemon.stderr))
  if (warnings.length > 0) result.warnings = warnings
  result.pids = fleets.flatMap(fleetPids)
  for (const fleet of fleets) {
    await fleet.stop()
    hooks.onFleet?.(fleet, false)
  }
  const alive = await waitGone(result.pids, 10_000)
  if (alive.length > 0) result.error = `${result.error ?? ''} processes still alive after stop: ${alive.join(', ')}`.trim()
}

/** What one case reads its master through, closed in its `finally`. */
interface CaseReaders {
  client?: LocalClient
  counter?: ReturnCounter
  counterBus?: MasterEvent
}

/**
 * Opens the case's own connection to the bus (so no other reader in this process can slow it) and its return
 * counter. It asks the master for return events only, all it counts: a `brine` command reads no other events
 * either, so the timed pings are not measured with a reader of every job's other events beside them.
 */
async function openCounter(readers: CaseReaders, sockDir: string): Promise<ReturnCounter> {
  readers.counterBus = new MasterEvent({ sockDir, reconnect: { initial: 50, max: 500 }, tags: ['salt/job/*/ret/'] })
  await readers.counterBus.connect()
  readers.counter = new ReturnCounter(readers.counterBus)
  return readers.counter
}

/** Makes the key pairs of every swarm minion of a case under the fleet root `root`, each swarm's in its own process, all at once; ms it took. */
async function makeCaseKeys(root: string, split: Partial<Record<TransportName, number>>, swarmSize: number): Promise<number> {
  const started = performance.now()
  const parts = (['zeromq', 'tcp', 'nats'] as const).flatMap((transport) => swarmParts(split[transport] ?? 0, swarmSize, `${ID_PREFIX[transport]}-`))
  await Promise.all(parts.map((part) => makeSwarmKeysUnder(root, part)))
  return performance.now() - started
}

/** Starts each transport's share of a case's minions (processes or swarms) and waits until every one has started. */
async function startCaseMinions(fleet: Fleet, split: Partial<Record<TransportName, number>>, mode: BenchCase['mode'], settings: BenchSettings): Promise<void> {
  const { swarmSize } = settings
  const from = fleet.startEventCount
  const ids: string[] = []
  for (const transport of ['zeromq', 'tcp', 'nats'] as const) {
    ids.push(
      ...(await startMinions(fleet, {
        transport,
        count: split[transport] ?? 0,
        mode,
        swarmSize,
        prefix: `${ID_PREFIX[transport]}-`,
        config: minionConfigOf(settings),
        nice: settings.swarmNice,
      })),
    )
  }
  await Promise.all(ids.map((id) => fleet.waitForMinionStart(id, from)))
}

/**
 * Runs one case: a master and N minions in a temp root, the six phases, then stops everything it
 * started and checks each pid is gone. A failing phase is recorded in `error`, never thrown.
 */
export async function runCase(benchCase: BenchCase, settings: BenchSettings, hooks: BenchHooks = {}): Promise<CaseResult> {
  if ((benchCase.syndics ?? 0) > 0) return runTreeCase(benchCase, settings, hooks)
  const result = emptyCase(benchCase)
  const { n } = benchCase
  const phase = (name: Phase): void => hooks.onPhase?.(benchCase, name)
  const split = splitMinions(benchCase.transport, n)
  result.split = split
  const transports = (Object.keys(split) as TransportName[]).filter((name) => (split[name] ?? 0) > 0 || benchCase.transport === 'both')
  let fleet: Fleet | undefined
  const readers: CaseReaders = {}
  const withApi = benchCase.mode === 'procs' && settings.apiSizes.includes(n)
  const apiDir = withApi ? await mkdtemp(join(tmpdir(), 'brine-bench-api-')) : undefined
  // Tens of thousands of swarm minions take longer to start and authenticate than the bound made for 1,000.
  const connectTimeoutMs = Math.max(settings.connectTimeoutMs, n * 40)
  const newClient = (): LocalClient => new LocalClient({ configDir: fleet!.masterConfigDir, requestTimeout: settings.jobTimeoutMs })
  const stored = storedIn(() => fleet!.masterConfigDir, settings)
  try {
    phase('connect')
    let launched = performance.now()
    fleet = await Fleet.start({
      ...((settings.natsServers ?? 1) > 1 ? { natsCluster: settings.natsServers } : {}),
      // The launch is timed from here: the swarm minions' keys are made before it (see BenchSettings.keysAtLaunch).
      beforeLaunch: async (root) => {
        if (benchCase.mode === 'swarm' && settings.keysAtLaunch !== true) result.connect.keysMadeMs = round(await makeCaseKeys(root, split, settings.swarmSize))
        launched = performance.now()
      },
      bus: fleetBus,
      minions: [],
      transports,
      logLevel: hooks.logLevel ?? 'warning',
      nodeArgs: hooks.nodeArgs,
      readyTimeoutMs: connectTimeoutMs,
      // The bench measures the transport, not find_job rounds: give slow large-N returns time.
      masterConfig: {
        ...LOOPBACK_FLEET,
        timeout: Math.ceil(secondsFromMs(settings.jobTimeoutMs)),
        gather_job_timeout: 10,
        ...(apiDir === undefined ? {} : await apiMasterConfig(apiDir)),
      },
    })
    hooks.onFleet?.(fleet, true)
    result.connect.masterReadyMs = round(performance.now() - launched)
    result.memory.masterIdleBytes = rssBytes(fleet.master.pid)
    await prepareNatsServer(fleet, result.memory, split.nats ?? 0, benchCase.mode === 'swarm' ? settings.swarmSize : 1)
    await startCaseMinions(fleet, split, benchCase.mode, settings)
    result.connect.allAcceptedMs = round(performance.now() - launched)
    const client = (readers.client = newClient())
    result.connect.allAnsweringMs = round((await untilAllAnswer(() => client, n, launched + connectTimeoutMs)) - launched)
    result.connect.cpuMs = { master: cpuTimeMs(fleet.master.pid), swarms: swarmsCpuMs(fleet) }
    await measureConnected(fleet, result, n)
    const counter = await openCounter(readers, fleet.sockDir)
    const masterPid = fleet.master.pid
    await measureJobs(client, counter, n, settings, stored, result, phase, 2000, {
      masterCpuMs: () => cpuTimeMs(masterPid),
      afterThroughput: async () => {
        if (!withApi) return
        phase('api')
        await measureApi(fleet!, client, counter, n, settings, result)
      },
    })
    await measureAfterLoad(fleet, result.memory)

    phase('restart')
    await client.close()
    readers.client = await measureRestart(fleet, newClient, n, connectTimeoutMs, result, readers.counterBus!)

    phase('overload')
    await measureOverload(fleet, readers.client, counter, n, settings, stored, result)
  } catch (error) {
    result.error = (error as Error).message.slice(0, 2000)
  } finally {
    phase('stop')
    await closeReaders(readers.counter, readers.counterBus, readers.client)
    if (fleet !== undefined) await stopFleets([fleet], result, hooks)
    if (apiDir !== undefined) await rm(apiDir, { recursive: true, force: true })
  }
  return result
}

/** The fleet options every master of a tree shares. */
interface TreeCommon {
  bus: typeof fleetBus
  transports: TransportName[]
  logLevel: string
  nodeArgs: string[] | undefined
  readyTimeoutMs: number
}

/** One syndic node of a tree under `top`: its master, its brine-syndic and `share` minions (ids `<short>-k<index+1>-…`), all started. */
async function startSyndicNode(
  top: Fleet,
  index: number,
  share: number,
  node: { transport: TransportName; mode: MinionMode; swarmSize: number; minionConfig: Record<string, unknown>; nice?: number; common: TreeCommon },
  fleets: Fleet[],
  hooks: BenchHooks,
): Promise<Fleet> {
  const { transport } = node
  const fleet = await Fleet.start({ ...node.common, minions: [], masterConfig: LOOPBACK_FLEET, syndic: { id: `syndic${index + 1}`, upper: top, transport } })
  fleets.push(fleet)
  hooks.onFleet?.(fleet, true)
  const from = fleet.startEventCount
  const ids = await startMinions(fleet, {
    transport,
    count: share,
    mode: node.mode,
    swarmSize: node.swarmSize,
    config: node.minionConfig,
    nice: node.nice,
    prefix: `${ID_PREFIX[transport]}-k${index + 1}-`,
  })
  await Promise.all(ids.map((id) => fleet.waitForMinionStart(id, from)))
  return fleet
}

/**
 * A tree case: a top master with `order_masters` and K syndic nodes (a master and a brine-syndic each, on
 * `benchCase.transport`), N/K minions under each (swarms or processes), every job published at the top.
 * Phases connect, latency, throughput and the masters' memory; restart and overload are one master's
 * figures and are not run here. Lost is counted in the top's job cache, duplicates on the top's bus.
 */
export async function runTreeCase(benchCase: BenchCase, settings: BenchSettings, hooks: BenchHooks = {}): Promise<CaseResult> {
  const result = emptyCase(benchCase)
  const { n } = benchCase
  const k = benchCase.syndics ?? 0
  const phase = (name: Phase): void => hooks.onPhase?.(benchCase, name)
  if (benchCase.transport === 'both') {
    result.error = 'a syndic tree runs on one transport (zeromq, tcp or nats), not both'
    return result
  }
  const transport = benchCase.transport
  result.split = { [transport]: n }
  const fleets: Fleet[] = []
  let top: Fleet | undefined
  const readers: CaseReaders = {}
  const stored = storedIn(() => top!.masterConfigDir, settings)
  // Thousands of minions authenticating with several masters on two cores take longer than one master's 1,000.
  const connectTimeoutMs = Math.max(settings.connectTimeoutMs, n * 40)
  const common: TreeCommon = {
    bus: fleetBus,
    transports: [transport],
    logLevel: hooks.logLevel ?? 'warning',
    nodeArgs: hooks.nodeArgs,
    readyTimeoutMs: connectTimeoutMs,
  }
  try {
    phase('connect')
    const launched = performance.now()
    top = await Fleet.start({
      ...common,
      minions: [],
      masterConfig: { ...LOOPBACK_FLEET, order_masters: true, timeout: Math.ceil(secondsFromMs(settings.jobTimeoutMs)), gather_job_timeout: 10 },
    })
    fleets.push(top)
    hooks.onFleet?.(top, true)
    result.connect.masterReadyMs = round(performance.now() - launched)
    result.memory.masterIdleBytes = rssBytes(top.master.pid)
    // One broker for the whole tree: the syndic nodes' masters and syndics, and every minion.
    await prepareNatsServer(top, result.memory, n + 2 * k, 1)
    const shares = Array.from({ length: k }, (_, index) => Math.floor(n / k) + (index < n % k ? 1 : 0))
    const node = { transport, mode: benchCase.mode, swarmSize: settings.swarmSize, minionConfig: minionConfigOf(settings), nice: settings.swarmNice, common }
    const nodes = await Promise.all(shares.map((share, index) => startSyndicNode(top!, index, share, node, fleets, hooks)))
    result.connect.allAcceptedMs = round(performance.now() - launched)
    const client = (readers.client = new LocalClient({ configDir: top.masterConfigDir, requestTimeout: settings.jobTimeoutMs }))
    // Behind syndics a ping of thousands takes seconds: a window shorter than that would never hear them all at once.
    result.connect.allAnsweringMs = round((await untilAllAnswer(() => client, n, launched + connectTimeoutMs, { windowMs: Math.max(2000, n * 2) })) - launched)
    await measureConnected(top, result, n)
    result.tree = {
      syndics: k,
      masters: [
        { name: 'top', rssBytes: result.memory.masterWithMinionsBytes, minions: 0 },
        ...nodes.map((fleet, index) => ({ name: `syndic${index + 1}`, rssBytes: rssBytes(fleet.master.pid), minions: shares[index]! })),
      ],
    }
    recordSwarmMemory(
      result.memory,
      nodes.flatMap((fleet) => fleet.swarms),
    )
    const counter = await openCounter(readers, top.sockDir)
    // A return a saturated lower master did not acknowledge is spooled by its minion and sent again after
    // return_retry_timer (up to return_retry_timer_max, 10 s): wait past that before counting it lost.
    const topPid = top.master.pid
    await measureJobs(client, counter, n, settings, stored, result, phase, 15_000, { masterCpuMs: () => cpuTimeMs(topPid) })
    await measureAfterLoad(top, result.memory)
    phase('restart')
    phase('overload')
  } catch (error) {
    result.error = (error as Error).message.slice(0, 2000)
  } finally {
    phase('stop')
    await closeReaders(readers.counter, readers.counterBus, readers.client)
    // The syndic nodes first, then the top (its syndics would otherwise spool what they could not send).
    await stopFleets([...fleets].reverse(), result, hooks)
  }
  return result
}

/** Closes what a case read its master through: the return counter, its bus connection and the client. */
async function closeReaders(counter: ReturnCounter | undefined, counterBus: MasterEvent | undefined, client: LocalClient | undefined): Promise<void> {
  counter?.close()
  await counterBus?.close().catch(() => {})
  await client?.close().catch(() => {})
}

/** Waits (bounded) until none of `pids` is running; the ones still running. */
export async function waitGone(pids: readonly number[], ms: number): Promise<number[]> {
  const deadline = performance.now() + ms
  for (;;) {
    const alive = pids.filter(pidAlive)
    if (alive.length === 0 || performance.now() > deadline) return alive
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Distinct WARNING/ERROR lines of the daemons' stderr (numbers masked so repeats collapse), at most 20. */
function collectWarnings(outputs: readonly string[]): string[] {
  const seen = new Map<string, string>()
  for (const output of outputs) {
    for (const line of output.split('\n')) {
      if (!/\[(WARNING|ERROR|CRITICAL)/.test(line)) continue
      const key = line.replace(/^\S+ /, '').replace(/[0-9a-f]{6,}|\d+/g, '#')
      // The latest of a repeated line: "… 3000 event(s) dropped so far" says more than "… 1 …".
      if (seen.has(key) || seen.size < 20) seen.set(key, line.slice(0, 300))
    }
  }
  return [...seen.values()]
}
