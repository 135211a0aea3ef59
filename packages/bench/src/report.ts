import type { BenchResult, BenchTransport, CaseResult, ProcessCpu } from './bench.js'
import { secondsFromMs } from '@brine/config'

const MiB = 1024 * 1024
/** Bytes as MiB with one decimal, the unit every report prints. */
export const mebibytes = (bytes: number): string => (bytes / MiB).toFixed(1)
const mib = (bytes: number | null): string => (bytes === null || bytes === 0 ? '–' : mebibytes(bytes))
const ms = (value: number): string => (value >= 100 ? value.toFixed(0) : value.toFixed(1))
const int = (value: number): string => Math.round(value).toLocaleString('en-US')

/** One target checked against a result. */
export interface TargetCheck {
  what: string
  target: string
  measured: string
  met: boolean
}

/** A target over some cases: the worst case's figure (the lowest with `atLeast`) against `limit`. */
interface Target {
  what: string
  target: string
  cases: CaseResult[]
  pick: (c: CaseResult) => number
  limit: number
  format: (v: number) => string
  atLeast?: boolean
}

const msText = (v: number): string => `${ms(v)} ms`
const mibText = (v: number): string => `${mib(v)} MiB`
const secondsText = (v: number): string => `${secondsFromMs(v).toFixed(1)} s`

function checkTarget(t: Target): TargetCheck | undefined {
  if (t.cases.length === 0) return undefined
  const values = t.cases.map(t.pick)
  const value = t.atLeast === true ? Math.min(...values) : Math.max(...values)
  return { what: t.what, target: t.target, measured: t.format(value), met: t.atLeast === true ? value >= t.limit : value <= t.limit }
}

/** The socket transports, which issue 33's latency and throughput targets name (NATS has its own, against TCP). */
const socketCases = (cases: CaseResult[]): CaseResult[] => cases.filter((c) => c.transport === 'zeromq' || c.transport === 'tcp')

/** The single-master targets (issue 33), by N: latency, throughput, memory, the command, launch and restart. */
function masterTargets(at: (n: number, mode?: string) => CaseResult[], procs: CaseResult[]): Target[] {
  const median = (c: CaseResult): number => c.latency.ms.median
  const withApi = at(1).filter((c) => c.api !== undefined)
  return [
    { what: 'test.ping median, N=1 (zeromq, tcp)', target: '≤ 1.5 ms', cases: socketCases(at(1)), pick: median, limit: 1.5, format: msText },
    { what: 'test.ping median, N=10 (zeromq, tcp)', target: '≤ 5 ms', cases: socketCases(at(10)), pick: median, limit: 5, format: msText },
    {
      what: 'test.ping median, N=1,000 swarm (zeromq, tcp)',
      target: '≤ 60 ms',
      cases: socketCases(at(1000, 'swarm')),
      pick: median,
      limit: 60,
      format: msText,
    },
    {
      what: 'returns/s, N=1,000 swarm, 5 in flight (zeromq, tcp)',
      target: '≥ 20,000',
      cases: socketCases(at(1000, 'swarm')).filter((c) => c.throughput.window === 5),
      pick: (c) => c.throughput.returnsPerSec,
      limit: 20_000,
      format: int,
      atLeast: true,
    },
    { what: 'the `brine` command, test.ping to one minion', target: '≤ 120 ms', cases: withApi, pick: (c) => c.api!.cliMs.median, limit: 120, format: msText },
    {
      what: 'one idle minion process RSS',
      target: '≤ 45 MiB',
      cases: procs,
      pick: (c) => c.memory.minionProcessIdleBytes ?? 0,
      limit: 45 * MiB,
      format: mibText,
    },
    // With the minions connected, before load: after load the in-memory job cache holds every return (keep_jobs).
    {
      what: 'master RSS with 1,000 minions',
      target: '≤ 150 MiB',
      cases: at(1000),
      pick: (c) => c.memory.masterWithMinionsBytes,
      limit: 150 * MiB,
      format: mibText,
    },
    {
      what: 'master RSS after the load, N=1,000',
      target: '≤ 200 MiB',
      cases: at(1000),
      pick: (c) => c.memory.masterAfterLoadBytes,
      limit: 200 * MiB,
      format: mibText,
    },
    {
      what: 'master RSS peak in the overload burst, N=1,000',
      target: '≤ 300 MiB',
      cases: at(1000).filter((c) => c.overload.jobs > 0),
      pick: (c) => c.overload.masterPeakRssBytes,
      limit: 300 * MiB,
      format: mibText,
    },
    {
      what: `1,000 answering after launch${at(1000).some((c) => (c.connect.keysMadeMs ?? null) !== null) ? ' (swarm keys made before)' : ''}`,
      target: '≤ 4 s',
      cases: at(1000),
      pick: (c) => c.connect.allAnsweringMs,
      limit: 4000,
      format: secondsText,
    },
    {
      what: '1,000 answering after a master restart',
      target: '≤ 1.5 s',
      cases: at(1000),
      pick: (c) => c.restart.allAnsweringMs,
      limit: 1500,
      format: secondsText,
    },
  ]
}

/** Issue 33's scale curve: the master's CPU per return at N=5,000 within 1.5× of N=100, per transport, at one window. */
function scaleRatioChecks(at: (n: number) => CaseResult[]): TargetCheck[] {
  const checks: TargetCheck[] = []
  for (const large of at(5000)) {
    const small = at(100).find((c) => c.transport === large.transport && c.throughput.window === large.throughput.window)
    const [a, b] = [small?.scale.masterCpuMsPerReturn ?? null, large.scale.masterCpuMsPerReturn]
    if (a === null || b === null || a <= 0) continue
    checks.push({
      what: `${large.transport}: master CPU per return, N=5,000 against N=100 (window ${large.throughput.window})`,
      target: '≤ 1.5×',
      measured: `${(b / a).toFixed(2)}× (${b.toFixed(3)} / ${a.toFixed(3)} ms)`,
      met: b / a <= 1.5,
    })
  }
  return checks
}

/** The syndic tree's targets (issue 11): 10,000 minions under 4 syndics, all answering, median ≤ 2 s. */
function treeTargets(result: BenchResult): Target[] {
  const tree = result.cases.filter((c) => c.tree !== undefined && c.error === undefined && c.n >= 10_000)
  const answering = (v: number): string => (v === 1 ? 'yes' : 'no')
  return [
    { what: 'tree of 4 syndics, N=10,000: test.ping median', target: '≤ 2 s', cases: tree, pick: (c) => c.latency.ms.median, limit: 2000, format: msText },
    {
      what: 'tree, N=10,000: all answering after launch',
      target: 'yes',
      cases: tree,
      pick: (c) => (c.connect.allAnsweringMs > 0 ? 1 : 0),
      limit: 1,
      format: answering,
      atLeast: true,
    },
  ]
}

/** The NATS targets (issue 28): within 1.5× of TCP's ping median at N=1 and N=1,000. */
function natsRatioChecks(at: (n: number) => CaseResult[]): TargetCheck[] {
  const checks: TargetCheck[] = []
  for (const size of [1, 1000]) {
    const median = (transport: string): number | undefined => at(size).find((c) => c.transport === transport)?.latency.ms.median
    const [nats, tcp] = [median('nats'), median('tcp')]
    if (nats === undefined || tcp === undefined || tcp <= 0) continue
    checks.push({
      what: `NATS test.ping median against TCP's, N=${int(size)}`,
      target: '≤ 1.5×',
      measured: `${(nats / tcp).toFixed(2)}× (${ms(nats)} / ${ms(tcp)} ms)`,
      met: nats / tcp <= 1.5,
    })
  }
  return checks
}

/** The issue's targets, checked against a result: what, target, measured, met. */
export function targetChecks(result: BenchResult): TargetCheck[] {
  const flat = result.cases.filter((c) => c.tree === undefined)
  const at = (n: number, mode?: string): CaseResult[] => flat.filter((c) => c.n === n && (mode === undefined || c.mode === mode) && c.error === undefined)
  const procs = flat.filter((c) => c.memory.minionProcessIdleBytes !== null)
  const ok = result.cases.filter((c) => c.error === undefined)
  const checked = (targets: Target[]): TargetCheck[] => targets.map(checkTarget).filter((c): c is TargetCheck => c !== undefined)
  const nats20k = at(20_000, 'swarm').filter((c) => c.transport === 'nats')
  return [
    ...checked([...masterTargets(at, procs), ...treeTargets(result)]),
    ...natsRatioChecks(at),
    ...scaleRatioChecks(at),
    ...checked([
      { what: 'NATS, N=20,000 swarm: test.ping median', target: '≤ 3 s', cases: nats20k, pick: (c) => c.latency.ms.median, limit: 3000, format: msText },
      { what: 'lost returns, every phase', target: '0', cases: ok, pick: (c) => c.latency.lost + c.throughput.lost + c.overload.lost, limit: 0, format: int },
      {
        what: 'duplicate returns, every phase',
        target: '0',
        cases: ok,
        pick: (c) => c.latency.duplicates + c.throughput.duplicates + c.overload.duplicates,
        limit: 0,
        format: int,
      },
    ]),
  ]
}

/** The result as Markdown: machine and command, then latency/throughput, memory/restart/overload, the scale curve and the targets. */
export function markdownReport(result: BenchResult): string {
  const m = result.machine
  const lines = [
    `# Brine bench ${result.startedAt}`,
    '',
    `\`${result.command.join(' ')}\` — ${m.cpus} × ${m.cpuModel}, ${(m.totalmemBytes / 1024 ** 3).toFixed(0)} GiB, Node ${m.node}, ${m.os}${result.quick ? ' (quick)' : ''}`,
    ...jobsSection(result.cases, result.settings),
    ...launchSection(result.cases, result.settings.swarmNice),
    ...memorySection(result.cases),
    ...scaleSection(result.cases),
    ...restartSection(result.cases, result.settings.reconDefault),
    ...apiSection(result.cases),
    ...treeSection(result.cases),
    ...errorsSection(result.cases),
    ...targetsSection(result),
  ]
  lines.push(`\nLeft-over processes after the run: ${result.leftoverPids.length === 0 ? 'none' : result.leftoverPids.join(', ')}.\n`)
  return lines.join('\n')
}

function jobsSection(cases: readonly CaseResult[], settings: BenchResult['settings']): string[] {
  const lines = [
    '',
    '## Connect, latency and throughput',
    '',
    `Ping: ${settings.latencyCalls} timed test.pings to every minion, one at a time, after ${settings.warmupCalls} untimed ones.`,
    '',
    '| transport | N | minions | master ready ms | all answering ms | ping median / p95 / max ms | jobs/s | returns/s | job median / p95 ms | lost | events missed | dup |',
    '| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const c of cases) {
    const l = c.latency.ms
    const t = c.throughput
    lines.push(
      `| ${c.transport} | ${int(c.n)} | ${c.mode} | ${ms(c.connect.masterReadyMs)} | ${ms(c.connect.allAnsweringMs)} | ${ms(l.median)} / ${ms(l.p95)} / ${ms(l.max)} | ${t.jobsPerSec.toFixed(1)} | ${int(t.returnsPerSec)} | ${ms(t.jobMs.median)} / ${ms(t.jobMs.p95)} | ${c.latency.lost + t.lost} | ${c.latency.eventsMissed + t.eventsMissed} | ${c.latency.duplicates + t.duplicates} |`,
    )
  }
  return lines
}

/** `master / swarms` CPU ms, or – when not measured (results written before the field). */
const cpuText = (cpu: ProcessCpu | undefined): string => (cpu === undefined ? '–' : `${int(cpu.master)} / ${int(cpu.swarms)}`)

/** The launch of each swarm case: what was made before it, and its steps, ms from the launch. */
function launchSection(cases: readonly CaseResult[], swarmNice: number | undefined): string[] {
  const swarms = cases.filter((c) => c.mode === 'swarm' && c.tree === undefined)
  if (swarms.length === 0) return []
  const lines = [
    '',
    '## Launch',
    '',
    "Times in ms from the launch (the master's start). Unless the run says `--keys-at-launch`, the swarm minions' key pairs",
    'are made before it (each swarm in its own process, all at once) and not timed in it, as a fleet whose minions started',
    'once before has its keys; "keys made before" is how long that took. The master accepts every key in the timed part',
    "(`auto_accept`). Each swarm process reads its config once and computes the host's grains once for its minions.",
    '',
    'CPU: what the master and the swarm processes had used (ms, every thread) once all answered.',
    ...(swarmNice === undefined
      ? []
      : [
          `The swarm processes ran at nice ${swarmNice} (\`--swarm-nice\`): they stand in for machines of their own, and the master took the CPU`,
          'it needed before them; what the fleet waited on is the master and the broker, not the swarms it shares its cores with.',
        ]),
    '',
    '| transport | N | keys made before ms | master ready ms | all started (accepted) ms | all answering ms | CPU ms master / swarms |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const c of swarms) {
    // Results written before the field existed have none.
    const keys = c.connect.keysMadeMs ?? null
    lines.push(
      `| ${c.transport} | ${int(c.n)} | ${keys === null ? 'made at launch' : ms(keys)} | ${ms(c.connect.masterReadyMs)} | ${ms(c.connect.allAcceptedMs)} | ${ms(c.connect.allAnsweringMs)} | ${cpuText(c.connect.cpuMs)} |`,
    )
  }
  return lines
}

/** The memory, restart and overload table: one row per case. */
function memorySection(cases: readonly CaseResult[]): string[] {
  const lines = [
    '',
    '## Memory, restart and overload',
    '',
    '| transport | N | master MiB idle / with N (as the last answered) / after load | nats-server MiB idle / with N / after load | minion proc MiB | swarm MiB per minion | restart: all answering ms | overload returns/s | overload lost / events missed / dup | master peak MiB |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const c of cases) {
    const mem = c.memory
    // Results written before the NATS transport have no nats-server figures.
    const broker = mem.natsServer ?? null
    const natsServer = broker === null ? '–' : `${mib(broker.idleBytes)} / ${mib(broker.withMinionsBytes)} / ${mib(broker.afterLoadBytes)}`
    lines.push(
      `| ${c.transport} | ${int(c.n)} | ${mib(mem.masterIdleBytes)} / ${mib(mem.masterWithMinionsBytes)}${mem.masterAtConnectBytes === undefined ? '' : ` (${mib(mem.masterAtConnectBytes)})`} / ${mib(mem.masterAfterLoadBytes)} | ${natsServer} | ${mib(mem.minionProcessIdleBytes)} | ${mem.swarmBytesPerMinion === null ? '–' : mib(mem.swarmBytesPerMinion)} | ${ms(c.restart.allAnsweringMs)} | ${int(c.overload.returnsPerSec)} | ${c.overload.lost} / ${c.overload.eventsMissed} / ${c.overload.duplicates} | ${mib(c.overload.masterPeakRssBytes)} |`,
    )
  }
  return lines
}

/** The scale curve: per transport, ordered by N, the master's CPU per return and RSS per minion. */
function scaleSection(cases: readonly CaseResult[]): string[] {
  const measured = cases.filter((c) => c.tree === undefined && (c.scale.masterCpuMsPerReturn !== null || c.scale.masterBytesPerMinion !== null))
  if (measured.length === 0) return []
  const lines = [
    '',
    '## Scale curve',
    '',
    "The master's CPU time (every thread) over the throughput phase per return it stored, and its RSS with the N minions",
    'connected less its idle RSS, per minion (10 ms CPU resolution: small N read coarse).',
    '',
    '| transport | N | minions | master CPU ms per return | master KiB per minion |',
    '| --- | ---: | --- | ---: | ---: |',
  ]
  const sorted = [...measured].sort((a, b) => a.transport.localeCompare(b.transport) || a.n - b.n)
  for (const c of sorted) {
    const cpu = c.scale.masterCpuMsPerReturn === null ? '–' : c.scale.masterCpuMsPerReturn.toFixed(3)
    const kib = c.scale.masterBytesPerMinion === null ? '–' : (c.scale.masterBytesPerMinion / 1024).toFixed(1)
    lines.push(`| ${c.transport} | ${int(c.n)} | ${c.mode} | ${cpu} | ${kib} |`)
  }
  return lines
}

function restartSection(cases: readonly CaseResult[], reconDefault: number | undefined): string[] {
  const restarted = cases.filter((c) => c.restart.rounds.length > 0)
  if (restarted.length === 0) return []
  const lines = [
    '',
    '## Restart, round by round',
    '',
    'After the master is relaunched, one test.ping goes to every minion not heard from yet, each when the previous one is done',
    '(its window, then find_job): the figure is the end of the last round. On ZeroMQ and TCP the first round waits until the',
    "master's `manage.present` lists every minion (each checks in once both its links are back); on NATS no link went away.",
    "Times in ms from the relaunch. CPU: the relaunched master's, and the swarm processes' since the stop, once all answered (ms).",
    "Each round's window is the connect phase's, or twice the latency phase's p95 ping when that is longer (it leads the rounds' cell).",
    ...(reconDefault === undefined
      ? []
      : [`The minions' \`recon_default\` is ${reconDefault} ms here (\`--recon-default\`, an operator's choice; Salt's default is 1000 ms).`]),
    '',
    "| transport | N | master ready ms | all present ms | rounds: published at ms → minions heard by the round's end | all answering ms | CPU ms master / swarms |",
    '| --- | ---: | ---: | ---: | --- | ---: | ---: |',
  ]
  for (const c of restarted) {
    const window = c.restart.windowMs === undefined ? '' : `window ${ms(c.restart.windowMs)}: `
    const rounds = window + c.restart.rounds.map((r) => `${r.publishedMs === null ? 'no answer' : ms(r.publishedMs)} → ${int(r.heard)}`).join('; ')
    // Results written before the field existed have none.
    const present = c.restart.allPresentMs ?? null
    lines.push(
      `| ${c.transport} | ${int(c.n)} | ${ms(c.restart.masterReadyMs)} | ${present === null ? '–' : ms(present)} | ${rounds} | ${ms(c.restart.allAnsweringMs)} | ${cpuText(c.restart.cpuMs)} |`,
    )
  }
  return lines
}

function apiSection(cases: readonly CaseResult[]): string[] {
  const withApi = cases.filter((c) => c.api !== undefined)
  if (withApi.length === 0) return []
  const lines = [
    '',
    '## REST API (brine-api)',
    '',
    '| transport | N | POST / test.ping median / p95 ms | LocalClient ping median ms | `brine` process median / p95 ms | SSE readers | job events delivered/s (all readers) | per reader/s | dropped | API MiB |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const c of withApi) {
    const a = c.api!
    lines.push(
      `| ${c.transport} | ${int(c.n)} | ${ms(a.postMs.median)} / ${ms(a.postMs.p95)} | ${ms(c.latency.ms.median)} | ${ms(a.cliMs.median)} / ${ms(a.cliMs.p95)} | ${a.sse.readers} | ${int(a.sse.eventsPerSec)} | ${int(a.sse.perReaderEventsPerSec)} | ${a.sse.dropped} | ${mib(a.apiRssBytes)} |`,
    )
  }
  return lines
}

function treeSection(cases: readonly CaseResult[]): string[] {
  const trees = cases.filter((c) => c.tree !== undefined)
  if (trees.length === 0) return []
  const lines = [
    '',
    '## Syndic trees',
    '',
    'A top master (`order_masters`) and K syndic nodes, N/K minions under each; lost is counted in the top’s job cache, dup on its bus.',
    '',
    '| transport | N | syndics | ping median / p95 ms | returns/s (5 in flight) | lost / dup | master RSS MiB: top, then each syndic node’s |',
    '| --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ]
  for (const c of trees) {
    const masters = c.tree!.masters
    lines.push(
      `| ${c.transport} | ${int(c.n)} | ${c.tree!.syndics} | ${ms(c.latency.ms.median)} / ${ms(c.latency.ms.p95)} | ${int(c.throughput.returnsPerSec)} | ${c.latency.lost + c.throughput.lost} / ${c.latency.duplicates + c.throughput.duplicates} | ${masters.map((m) => mib(m.rssBytes)).join(', ')} |`,
    )
  }
  return lines
}

function errorsSection(cases: readonly CaseResult[]): string[] {
  const failed = cases.filter((c) => c.error !== undefined)
  if (failed.length === 0) return []
  return [
    '',
    '## Errors',
    '',
    ...failed.map((c) => `- ${c.transport} N=${c.n}${c.syndics === undefined ? '' : ` (${c.syndics} syndics)`}: ${c.error!.split('\n')[0]}`),
  ]
}

function targetsSection(result: BenchResult): string[] {
  const checks = targetChecks(result)
  if (checks.length === 0) return []
  return [
    '',
    '## Targets',
    '',
    '| figure | target | measured | met |',
    '| --- | --- | --- | --- |',
    ...checks.map((check) => `| ${check.what} | ${check.target} | ${check.measured} | ${check.met ? 'yes' : '**no**'} |`),
  ]
}

const COLOURS: Record<BenchTransport, string> = { zeromq: '#1f77b4', tcp: '#ff7f0e', nats: '#9467bd', both: '#2ca02c' }
const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;')

/**
 * Two grouped bar charts side by side (log scale): test.ping median latency and throughput
 * returns/s, one group per N, one bar per transport. Hand-built SVG, no chart library.
 */
export function svgChart(result: BenchResult): string {
  const transports = (['zeromq', 'tcp', 'nats', 'both'] as const).filter((t) => result.cases.some((c) => c.transport === t))
  const sizes = [...new Set(result.cases.map((c) => c.n))].sort((a, b) => a - b)
  const panelW = 420
  const panelH = 300
  const margin = { left: 60, top: 40, bottom: 50 }
  const width = margin.left + panelW * 2 + 80
  const height = margin.top + panelH + margin.bottom + 30
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
  ]
  const panel = (x0: number, title: string, unit: string, pick: (c: CaseResult) => number): void => {
    const values = result.cases.map(pick).filter((v) => v > 0)
    const lo = Math.floor(Math.log10(Math.max(Math.min(...values, 1), 1e-3)))
    const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...values, 10))))
    const plotW = panelW - 40
    const y = (v: number): number => margin.top + panelH - ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo)) * panelH
    parts.push(`<text x="${x0 + plotW / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${escape(title)}</text>`)
    for (let e = lo; e <= hi; e++) {
      const yy = y(10 ** e)
      parts.push(`<line x1="${x0}" x2="${x0 + plotW}" y1="${yy}" y2="${yy}" stroke="#ddd"/>`)
      parts.push(`<text x="${x0 - 6}" y="${yy + 4}" text-anchor="end">${10 ** e >= 1 ? int(10 ** e) : (10 ** e).toString()}</text>`)
    }
    parts.push(
      `<text x="${x0 - 45}" y="${margin.top + panelH / 2}" transform="rotate(-90 ${x0 - 45} ${margin.top + panelH / 2})" text-anchor="middle">${escape(unit)} (log)</text>`,
    )
    parts.push(`<line x1="${x0}" x2="${x0 + plotW}" y1="${margin.top + panelH}" y2="${margin.top + panelH}" stroke="#333"/>`)
    const groupW = plotW / Math.max(1, sizes.length)
    const barW = Math.min(28, (groupW * 0.8) / Math.max(1, transports.length))
    sizes.forEach((n, g) => {
      const gx = x0 + g * groupW + (groupW - barW * transports.length) / 2
      transports.forEach((t, i) => {
        const c = result.cases.find((item) => item.n === n && item.transport === t)
        if (c === undefined) return
        const v = pick(c)
        const top = y(v)
        const bottom = margin.top + panelH
        parts.push(
          `<rect x="${gx + i * barW}" y="${top}" width="${barW - 2}" height="${Math.max(0, bottom - top)}" fill="${COLOURS[t]}"><title>${t} N=${n}: ${v.toFixed(2)} ${escape(unit)}</title></rect>`,
        )
        parts.push(
          `<text x="${gx + i * barW + (barW - 2) / 2}" y="${top - 3}" text-anchor="middle" font-size="9">${v >= 1000 ? `${(v / 1000).toFixed(1)}k` : v >= 100 ? int(v) : v.toFixed(1)}</text>`,
        )
      })
      parts.push(
        `<text x="${x0 + g * groupW + groupW / 2}" y="${margin.top + panelH + 16}" text-anchor="middle">N=${int(n)}${n >= 1000 ? ' (swarm)' : ''}</text>`,
      )
    })
  }
  panel(margin.left, 'test.ping median latency', 'ms', (c) => c.latency.ms.median)
  panel(margin.left + panelW + 40, 'throughput (5 jobs in flight)', 'returns/s', (c) => c.throughput.returnsPerSec)
  transports.forEach((t, i) => {
    const lx = margin.left + i * 110
    const ly = height - 14
    parts.push(`<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${COLOURS[t]}"/><text x="${lx + 16}" y="${ly}">${t}</text>`)
  })
  parts.push(
    `<text x="${width - 10}" y="${height - 4}" text-anchor="end" font-size="10" fill="#666">${escape(`${result.startedAt} · ${result.machine.cpus} cores · Node ${result.machine.node}`)}</text>`,
  )
  parts.push('</svg>')
  return parts.join('\n')
}
