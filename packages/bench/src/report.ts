import type { BenchResult, BenchTransport, CaseResult } from './bench.js'
import { secondsFromMs } from '@brine/common'

const MiB = 1024 * 1024
/** Bytes as MiB with one decimal, the unit every report prints. */
export const mebibytes = (bytes: number): string => (bytes / MiB).toFixed(1)
const mib = (bytes: number | null): string => (bytes === null || bytes === 0 ? '–' : mebibytes(bytes))
const ms = (value: number): string => (value >= 100 ? value.toFixed(0) : value.toFixed(1))
const int = (value: number): string => Math.round(value).toLocaleString('en-US')

/** The issue's targets, checked against a result: [what, target, measured, met]. */
export function targetChecks(result: BenchResult): { what: string; target: string; measured: string; met: boolean }[] {
  const checks: { what: string; target: string; measured: string; met: boolean }[] = []
  const worst = (cases: CaseResult[], pick: (c: CaseResult) => number): number => Math.max(...cases.map(pick))
  const add = (what: string, target: string, cases: CaseResult[], pick: (c: CaseResult) => number, limit: number, format: (v: number) => string, atLeast = false): void => {
    if (cases.length === 0) return
    const value = atLeast ? Math.min(...cases.map(pick)) : worst(cases, pick)
    checks.push({ what, target, measured: format(value), met: atLeast ? value >= limit : value <= limit })
  }
  const flat = result.cases.filter((c) => c.tree === undefined)
  const at = (n: number, mode?: string): CaseResult[] => flat.filter((c) => c.n === n && (mode === undefined || c.mode === mode) && c.error === undefined)
  add('test.ping median, N=1', '≤ 5 ms', at(1), (c) => c.latency.ms.median, 5, (v) => `${ms(v)} ms`)
  add('test.ping median, N=50', '≤ 50 ms', at(50), (c) => c.latency.ms.median, 50, (v) => `${ms(v)} ms`)
  add('test.ping median, N=1,000 swarm', '≤ 500 ms', at(1000, 'swarm'), (c) => c.latency.ms.median, 500, (v) => `${ms(v)} ms`)
  add('returns/s, N=1,000 swarm, 5 in flight', '≥ 10,000', at(1000, 'swarm'), (c) => c.throughput.returnsPerSec, 10_000, int, true)
  const procs = flat.filter((c) => c.memory.minionProcessIdleBytes !== null)
  add('one idle minion process RSS', '≤ 60 MiB', procs, (c) => c.memory.minionProcessIdleBytes ?? 0, 60 * MiB, (v) => `${mib(v)} MiB`)
  // With the minions connected, before load: after load the in-memory job cache holds every return (keep_jobs).
  add('master RSS with 1,000 minions', '≤ 250 MiB', at(1000), (c) => c.memory.masterWithMinionsBytes, 250 * MiB, (v) => `${mib(v)} MiB`)
  add('1,000 connected and answering after launch', '≤ 15 s', at(1000), (c) => c.connect.allAnsweringMs, 15_000, (v) => `${secondsFromMs(v).toFixed(1)} s`)
  add('1,000 answering after a master restart', '≤ 5 s', at(1000), (c) => c.restart.allAnsweringMs, 5000, (v) => `${secondsFromMs(v).toFixed(1)} s`)
  // The syndic tree's targets (issue 11): 10,000 minions under 4 syndics, all answering, median ≤ 2 s.
  const tree = result.cases.filter((c) => c.tree !== undefined && c.error === undefined && c.n >= 10_000)
  add('tree of 4 syndics, N=10,000: test.ping median', '≤ 2 s', tree, (c) => c.latency.ms.median, 2000, (v) => `${ms(v)} ms`)
  add('tree, N=10,000: all answering after launch', 'yes', tree, (c) => (c.connect.allAnsweringMs > 0 ? 1 : 0), 1, (v) => (v === 1 ? 'yes' : 'no'), true)
  // The NATS targets (issue 28): within 1.5× of TCP's ping median at N=1 and N=1,000, and 20,000 swarm minions.
  for (const size of [1, 1000]) {
    const median = (transport: string): number | undefined => at(size).find((c) => c.transport === transport)?.latency.ms.median
    const [nats, tcp] = [median('nats'), median('tcp')]
    if (nats === undefined || tcp === undefined || tcp <= 0) continue
    checks.push({ what: `NATS test.ping median against TCP's, N=${int(size)}`, target: '≤ 1.5×', measured: `${(nats / tcp).toFixed(2)}× (${ms(nats)} / ${ms(tcp)} ms)`, met: nats / tcp <= 1.5 })
  }
  add('NATS, N=20,000 swarm: test.ping median', '≤ 3 s', at(20_000, 'swarm').filter((c) => c.transport === 'nats'), (c) => c.latency.ms.median, 3000, (v) => `${ms(v)} ms`)
  const ok = result.cases.filter((c) => c.error === undefined)
  add('lost returns, every phase', '0', ok, (c) => c.latency.lost + c.throughput.lost + c.overload.lost, 0, int)
  add('duplicate returns, every phase', '0', ok, (c) => c.latency.duplicates + c.throughput.duplicates + c.overload.duplicates, 0, int)
  return checks
}

/** The result as Markdown: machine and command, then latency/throughput, memory/restart/overload, the scale curve and the targets. */
export function markdownReport(result: BenchResult): string {
  const m = result.machine
  const lines = [
    `# Brine bench ${result.startedAt}`,
    '',
    `\`${result.command.join(' ')}\` — ${m.cpus} × ${m.cpuModel}, ${(m.totalmemBytes / 1024 ** 3).toFixed(0)} GiB, Node ${m.node}, ${m.os}${result.quick ? ' (quick)' : ''}`,
    ...jobsSection(result.cases),
    ...memorySection(result.cases),
    ...scaleSection(result.cases),
    ...restartSection(result.cases),
    ...apiSection(result.cases),
    ...treeSection(result.cases),
    ...errorsSection(result.cases),
    ...targetsSection(result),
  ]
  lines.push(`\nLeft-over processes after the run: ${result.leftoverPids.length === 0 ? 'none' : result.leftoverPids.join(', ')}.\n`)
  return lines.join('\n')
}

function jobsSection(cases: readonly CaseResult[]): string[] {
  const lines = [
    '',
    '## Connect, latency and throughput',
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

/** The memory, restart and overload table: one row per case. */
function memorySection(cases: readonly CaseResult[]): string[] {
  const lines = [
    '',
    '## Memory, restart and overload',
    '',
    '| transport | N | master MiB idle / with N / after load | nats-server MiB idle / with N / after load | minion proc MiB | swarm MiB per minion | restart: all answering ms | overload returns/s | overload lost / events missed / dup | master peak MiB |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const c of cases) {
    const mem = c.memory
    // Results written before the NATS transport have no nats-server figures.
    const broker = mem.natsServer ?? null
    const natsServer = broker === null ? '–' : `${mib(broker.idleBytes)} / ${mib(broker.withMinionsBytes)} / ${mib(broker.afterLoadBytes)}`
    lines.push(
      `| ${c.transport} | ${int(c.n)} | ${mib(mem.masterIdleBytes)} / ${mib(mem.masterWithMinionsBytes)} / ${mib(mem.masterAfterLoadBytes)} | ${natsServer} | ${mib(mem.minionProcessIdleBytes)} | ${mem.swarmBytesPerMinion === null ? '–' : mib(mem.swarmBytesPerMinion)} | ${ms(c.restart.allAnsweringMs)} | ${int(c.overload.returnsPerSec)} | ${c.overload.lost} / ${c.overload.eventsMissed} / ${c.overload.duplicates} | ${mib(c.overload.masterPeakRssBytes)} |`,
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

function restartSection(cases: readonly CaseResult[]): string[] {
  const restarted = cases.filter((c) => c.restart.rounds.length > 0)
  if (restarted.length === 0) return []
  const lines = [
    '',
    '## Restart, round by round',
    '',
    'After the master is relaunched, one test.ping goes to every minion not heard from yet, each when the previous one is done',
    '(its window, then find_job): the figure is the end of the last round. Times in ms from the relaunch.',
    '',
    "| transport | N | master ready ms | rounds: published at ms → minions heard by the round's end | all answering ms |",
    '| --- | ---: | ---: | --- | ---: |',
  ]
  for (const c of restarted) {
    const rounds = c.restart.rounds.map((r) => `${r.publishedMs === null ? 'no answer' : ms(r.publishedMs)} → ${int(r.heard)}`).join('; ')
    lines.push(`| ${c.transport} | ${int(c.n)} | ${ms(c.restart.masterReadyMs)} | ${rounds} | ${ms(c.restart.allAnsweringMs)} |`)
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
  return ['', '## Errors', '', ...failed.map((c) => `- ${c.transport} N=${c.n}${c.syndics === undefined ? '' : ` (${c.syndics} syndics)`}: ${c.error!.split('\n')[0]}`)]
}

function targetsSection(result: BenchResult): string[] {
  const checks = targetChecks(result)
  if (checks.length === 0) return []
  return ['', '## Targets', '', '| figure | target | measured | met |', '| --- | --- | --- | --- |', ...checks.map((check) => `| ${check.what} | ${check.target} | ${check.measured} | ${check.met ? 'yes' : '**no**'} |`)]
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
    parts.push(`<text x="${x0 - 45}" y="${margin.top + panelH / 2}" transform="rotate(-90 ${x0 - 45} ${margin.top + panelH / 2})" text-anchor="middle">${escape(unit)} (log)</text>`)
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
        parts.push(`<rect x="${gx + i * barW}" y="${top}" width="${barW - 2}" height="${Math.max(0, bottom - top)}" fill="${COLOURS[t]}"><title>${t} N=${n}: ${v.toFixed(2)} ${escape(unit)}</title></rect>`)
        parts.push(`<text x="${gx + i * barW + (barW - 2) / 2}" y="${top - 3}" text-anchor="middle" font-size="9">${v >= 1000 ? `${(v / 1000).toFixed(1)}k` : v >= 100 ? int(v) : v.toFixed(1)}</text>`)
      })
      parts.push(`<text x="${x0 + g * groupW + groupW / 2}" y="${margin.top + panelH + 16}" text-anchor="middle">N=${int(n)}${n >= 1000 ? ' (swarm)' : ''}</text>`)
    })
  }
  panel(margin.left, 'test.ping median latency', 'ms', (c) => c.latency.ms.median)
  panel(margin.left + panelW + 40, 'throughput (5 jobs in flight)', 'returns/s', (c) => c.throughput.returnsPerSec)
  transports.forEach((t, i) => {
    const lx = margin.left + i * 110
    const ly = height - 14
    parts.push(`<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${COLOURS[t]}"/><text x="${lx + 16}" y="${ly}">${t}</text>`)
  })
  parts.push(`<text x="${width - 10}" y="${height - 4}" text-anchor="end" font-size="10" fill="#666">${escape(`${result.startedAt} · ${result.machine.cpus} cores · Node ${result.machine.node}`)}</text>`)
  parts.push('</svg>')
  return parts.join('\n')
}
