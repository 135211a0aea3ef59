import { mebibytes } from './report.js'
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import type { BrowserContext, Page } from 'playwright-core'
import { LocalClient } from '@brine/client'
import { rssBytes } from '@brine/testkit'
import { Fleet, type TransportName } from '@brine/harness'
import { apiMasterConfig } from './api-bench.js'
import { LOOPBACK_FLEET, machineInfo, waitGone, type BenchResult } from './bench.js'
import { fleetBus, startSwarm } from './fleet-swarm.js'

export interface ConsoleSettings {
  /** Swarm minions test.ping runs on. */
  minions: number
  transport: TransportName
  /** Minions per brine-swarm process. */
  swarmSize: number
  /** Bound on every wait (connect, the page, all returns), ms. */
  timeoutMs: number
  /** Debian's Chromium (scripts/ensure-chromium.sh); `BRINE_CHROMIUM` overrides. */
  chromium: string
}

export const CONSOLE_SETTINGS: ConsoleSettings = {
  minions: 1000,
  transport: 'tcp',
  swarmSize: 500,
  timeoutMs: 120_000,
  chromium: process.env['BRINE_CHROMIUM'] ?? '/usr/bin/chromium',
}

export interface ConsoleResult {
  version: 1
  scenario: 'console'
  startedAt: string
  finishedAt: string
  command: string[]
  machine: BenchResult['machine']
  /** The machine's load average (1, 5, 15 min) as the scenario began: other work on a shared machine shows here. */
  loadAverage: number[]
  settings: ConsoleSettings
  chromiumVersion: string
  /** From the click on Run (the page's own clock, performance.now()): the first returned row in the DOM, and the counts line reading all N returned. */
  firstReturnRenderedMs: number
  allReturnedRenderedMs: number
  /** From the click: the console's `POST /` (`local_async`, the publish) answered with the jid. */
  publishAnsweredMs: number
  /** From the click: the counts line first reading ≥ 1 returned (the first return the page took, wherever its row is in the 200-row pages). */
  firstReturnCountedMs: number
  /** Rows walked page by page (200 a page) after the job: how many were `returned`, and distinct minion ids among them. */
  rowsReturned: number
  distinctIds: number
  /** The counts line at the end ("1000 returned · 0 failed · 0 waiting · 0 did not return"). */
  countsText: string
  /** Main-thread tasks over 50 ms while the returns arrived (PerformanceObserver 'longtask'): count, longest, sum. */
  longTasks: { count: number; maxMs: number; totalMs: number }
  /** Log in → the Minions page (where the console opens) showing its first row, ms (node's clock). */
  minionsPageLoadMs: number
  /** A click on the Minions page after the job: ms until its first row is shown, and the rows shown. */
  minionsPageClickMs: number
  minionsPageRows: number
  /** The page's JS heap (CDP Performance.getMetrics): used at the end, the peak sampled every 250 ms while returns arrived, and total. */
  jsHeapUsedBytes: number
  jsHeapPeakUsedBytes: number
  jsHeapTotalBytes: number
  /** DOM nodes of the page at the end (CDP Nodes). */
  domNodes: number
  /** RSS of Chromium's browser process, and of all its processes (renderers, GPU, zygotes) together. */
  browserRssBytes: number
  /** Sum of RSS over all its processes (shared pages counted in each), and of PSS (shared pages divided among them). */
  browserTreeRssBytes: number
  browserTreePssBytes: number
  browserProcesses: number
  /** brine-api's and the master's RSS at the end. */
  apiRssBytes: number
  masterRssBytes: number
  pids: number[]
  leftoverPids: number[]
  error?: string
}

const USER = 'bench'
const PASSWORD = 'bench-password'

/** Pids descending from `root` (from /proc's ppid fields). */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      const list = children.get(ppid) ?? []
      list.push(Number(name))
      children.set(ppid, list)
    } catch {
      // Gone meanwhile.
    }
  }
  const out: number[] = []
  const walk = (pid: number): void => {
    for (const child of children.get(pid) ?? []) {
      out.push(child)
      walk(child)
    }
  }
  walk(root)
  return out
}

/** A process's proportional set size (shared pages divided among their sharers), bytes; 0 when gone. */
function pssBytes(pid: number): number {
  try {
    const match = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))
    return match === null ? 0 : Number(match[1]) * 1024
  } catch {
    return 0
  }
}

const commOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return ''
  }
}

/** Chromium's processes under this one: the browser (a direct child) and everything it started. */
function chromiumProcesses(): { browser: number | undefined; all: number[] } {
  const all = descendants(process.pid).filter((pid) => /chrom/i.test(commOf(pid)))
  const browser = all.find((pid) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid
  })
  return { browser, all }
}

/** The little of the page's globals a predicate reads (this package has no DOM types). */
interface PageGlobals {
  document: { querySelector(selector: string): { getAttribute(name: string): string | null } | null }
}

/** What the page records itself, installed before the click (read back with page.evaluate). */
interface PageProbe {
  clickAt?: number
  firstAt?: number
  countedAt?: number
  allAt?: number
  longTasks: number[]
}

/**
 * Run in the page before the click (as source: this package has no DOM types): the page's own clock records
 * the click on Run (captured before the app sees it), the first returned row in the DOM, the counts line
 * reading `total` returned, and main-thread tasks over 50 ms in between.
 */
function pageProbeScript(total: number): string {
  return `(() => {
    const total = ${total}
    const probe = { longTasks: [] }
    window.__brineBench = probe
    document.addEventListener('click', (event) => {
      const button = event.target && event.target.closest ? event.target.closest('button') : null
      if (probe.clickAt === undefined && button && button.textContent.trim() === 'Run') probe.clickAt = performance.now()
    }, true)
    const observer = new MutationObserver(() => {
      if (probe.clickAt === undefined) return
      if (probe.firstAt === undefined && document.querySelector('table.returns tr[data-state=returned]') !== null) probe.firstAt = performance.now()
      const counts = document.querySelector('[data-testid=counts]')
      const match = /^(\\d+) returned/.exec(counts ? counts.textContent : '')
      if (probe.countedAt === undefined && match && Number(match[1]) >= 1) probe.countedAt = performance.now()
      if (probe.allAt === undefined && match && Number(match[1]) >= total) {
        probe.allAt = performance.now()
        observer.disconnect()
      }
    })
    observer.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['data-state'] })
    try {
      new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) if (probe.clickAt !== undefined && probe.allAt === undefined) probe.longTasks.push(entry.duration)
      }).observe({ type: 'longtask', buffered: false })
    } catch {}
  })()`
}

/** A result with no figures yet. */
function emptyConsoleResult(settings: ConsoleSettings): ConsoleResult {
  const startedAt = new Date().toISOString()
  return {
    version: 1,
    scenario: 'console',
    startedAt,
    finishedAt: startedAt,
    command: [],
    machine: machineInfo(),
    loadAverage: loadavg().map((value) => Math.round(value * 100) / 100),
    settings,
    chromiumVersion: '',
    firstReturnRenderedMs: 0,
    allReturnedRenderedMs: 0,
    firstReturnCountedMs: 0,
    publishAnsweredMs: 0,
    rowsReturned: 0,
    distinctIds: 0,
    countsText: '',
    longTasks: { count: 0, maxMs: 0, totalMs: 0 },
    minionsPageLoadMs: 0,
    minionsPageClickMs: 0,
    minionsPageRows: 0,
    jsHeapUsedBytes: 0,
    jsHeapPeakUsedBytes: 0,
    jsHeapTotalBytes: 0,
    domNodes: 0,
    browserRssBytes: 0,
    browserTreeRssBytes: 0,
    browserTreePssBytes: 0,
    browserProcesses: 0,
    apiRssBytes: 0,
    masterRssBytes: 0,
    pids: [],
    leftoverPids: [],
  }
}

/** Starts the swarm minions of `fleet` and waits until every one has answered a test.ping once (bounded rounds). */
async function startConsoleMinions(fleet: Fleet, settings: ConsoleSettings): Promise<void> {
  const n = settings.minions
  const from = fleet.startEventCount
  const short = settings.transport === 'zeromq' ? 'zmq' : 'tcp'
  const ids: string[] = []
  for (let first = 0, part = 0; first < n; first += settings.swarmSize, part++) {
    ids.push(...(await startSwarm(fleet, { count: Math.min(settings.swarmSize, n - first), transport: settings.transport, prefix: `${short}-c${part}-` })).ids)
  }
  await Promise.all(ids.map((id) => fleet.waitForMinionStart(id, from)))
  const client = new LocalClient({ configDir: fleet.masterConfigDir, requestTimeout: settings.timeoutMs })
  try {
    const deadline = performance.now() + settings.timeoutMs
    for (;;) {
      const answered = Object.keys(await client.cmd('*', 'test.ping', [], { timeout: 10_000 })).length
      if (answered >= n) break
      if (performance.now() > deadline) throw new Error(`only ${answered} of ${n} minions answered test.ping before the browser's run`)
    }
  } finally {
    await client.close()
  }
}

/** Headless Chromium with a profile under `work`. */
async function launchChromium(settings: ConsoleSettings, work: string): Promise<BrowserContext> {
  const { chromium } = await import('playwright-core')
  return chromium.launchPersistentContext(join(work, 'chromium-profile'), {
    executablePath: settings.chromium,
    headless: true,
    viewport: { width: 1280, height: 760 },
    timeout: settings.timeoutMs,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
}

/** Logs into the console, waits for the Minions page it opens on, and fills the Run page's form with test.ping on `*`. */
async function logInAndFillRun(page: Page, url: string, settings: ConsoleSettings, result: ConsoleResult): Promise<void> {
  await page.goto(`${url}/app/`)
  await page.locator('input[name=username]').fill(USER)
  await page.locator('input[name=password]').fill(PASSWORD)
  await page.locator('input[name=eauth]').fill('file')
  const loggingIn = performance.now()
  await page.getByRole('button', { name: 'Log in' }).click()
  await page.getByRole('button', { name: 'Log out' }).waitFor()
  // The console opens on Minions, which runs manage.status and grains.item on every minion: its rows show
  // when both are done. Waiting for them keeps those 2 x N returns out of the measured job.
  await page.locator('table.minions tbody tr').first().waitFor({ timeout: settings.timeoutMs })
  result.minionsPageLoadMs = Math.round(performance.now() - loggingIn)
  await page.locator('header a[data-page=run]').click()
  await page.locator('input[name=tgt]').fill('*')
  await page.locator('input[name=fun]').fill('test.ping')
  await page.locator('input[name=args]').fill('')
}

/**
 * Clicks Run and waits for all N returned; the page's own clock times the click, the first row, all N and
 * its long tasks, and CDP's metrics give its heap (sampled for the peak meanwhile) and DOM at the end.
 */
async function runAndTime(context: BrowserContext, page: Page, settings: ConsoleSettings, result: ConsoleResult): Promise<void> {
  await page.evaluate(pageProbeScript(settings.minions))
  const cdp = await context.newCDPSession(page)
  await cdp.send('Performance.enable')
  const metrics = async (): Promise<Record<string, number>> =>
    Object.fromEntries(
      ((await cdp.send('Performance.getMetrics')).metrics as Array<{ name: string; value: number }>).map((metric) => [metric.name, metric.value]),
    )
  let peakHeap = 0
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      peakHeap = Math.max(peakHeap, (await metrics().catch(() => ({}) as Record<string, number>))['JSHeapUsedSize'] ?? 0)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  })()
  const published = page.waitForResponse(
    (response) => response.request().method() === 'POST' && (response.request().postData() ?? '').includes('local_async'),
    { timeout: settings.timeoutMs },
  )
  await page.getByRole('button', { name: 'Run', exact: true }).click()
  try {
    // A function, not a string: the console's CSP (no 'unsafe-eval') refuses a string predicate.
    await page.waitForFunction(() => (globalThis as unknown as { __brineBench: PageProbe }).__brineBench.allAt !== undefined, undefined, {
      timeout: settings.timeoutMs,
      polling: 500,
    })
  } finally {
    sampling = false
    await sampler
  }
  const probe = (await page.evaluate('window.__brineBench')) as PageProbe
  // The publish's answer on the page's clock: the request's start (epoch ms) + its response end, less the click.
  const timing = (await published).request().timing()
  const timeOrigin = (await page.evaluate('performance.timeOrigin')) as number
  result.publishAnsweredMs = Math.round(timing.startTime + timing.responseEnd - (timeOrigin + (probe.clickAt ?? 0)))
  const end = await metrics()
  result.firstReturnRenderedMs = Math.round((probe.firstAt ?? 0) - (probe.clickAt ?? 0))
  result.allReturnedRenderedMs = Math.round((probe.allAt ?? 0) - (probe.clickAt ?? 0))
  result.firstReturnCountedMs = Math.round((probe.countedAt ?? 0) - (probe.clickAt ?? 0))
  result.longTasks = {
    count: probe.longTasks.length,
    maxMs: Math.round(Math.max(0, ...probe.longTasks)),
    totalMs: Math.round(probe.longTasks.reduce((sum, ms) => sum + ms, 0)),
  }
  result.jsHeapUsedBytes = end['JSHeapUsedSize'] ?? 0
  result.jsHeapTotalBytes = end['JSHeapTotalSize'] ?? 0
  result.jsHeapPeakUsedBytes = Math.max(peakHeap, result.jsHeapUsedBytes)
  result.domNodes = end['Nodes'] ?? 0
}

/** Chromium's memory now; its processes. */
function readBrowserMemory(result: ConsoleResult): number[] {
  const processes = chromiumProcesses()
  result.browserRssBytes = processes.browser === undefined ? 0 : rssBytes(processes.browser)
  result.browserTreeRssBytes = processes.all.reduce((sum, pid) => sum + rssBytes(pid), 0)
  result.browserTreePssBytes = processes.all.reduce((sum, pid) => sum + pssBytes(pid), 0)
  result.browserProcesses = processes.all.length
  return processes.all
}

/** Every row, page by page: each must be `returned`, one per minion. */
async function checkRows(page: Page, settings: ConsoleSettings, result: ConsoleResult): Promise<void> {
  const seen = new Set<string>()
  for (let pageIndex = 0; pageIndex < Math.ceil(settings.minions / 200) + 1; pageIndex++) {
    const rows = await page
      .locator('table.returns tr[data-state=returned]')
      .evaluateAll((elements) => elements.map((element) => element.getAttribute('data-minion') ?? ''))
    for (const id of rows) seen.add(id)
    result.rowsReturned += rows.length
    const next = page.locator('nav.pager button', { hasText: 'Next' })
    if ((await next.count()) === 0 || (await next.isDisabled())) break
    const firstBefore = rows[0]
    await next.click()
    await page.waitForFunction(
      (before) => (globalThis as unknown as PageGlobals).document.querySelector('table.returns tr')?.getAttribute('data-minion') !== before,
      firstBefore ?? '',
      { timeout: settings.timeoutMs },
    )
  }
  result.distinctIds = seen.size
}

/** Responsive: a click on another page answers. */
async function clickMinionsPage(page: Page, settings: ConsoleSettings, result: ConsoleResult): Promise<void> {
  const clicked = performance.now()
  await page.locator('header a[data-page=minions]').click()
  await page.locator('table.minions tbody tr').first().waitFor({ timeout: settings.timeoutMs })
  result.minionsPageClickMs = Math.round(performance.now() - clicked)
  result.minionsPageRows = await page.locator('table.minions tbody tr').count()
}

/** Closes the browser and stops the fleet, then kills by pid any of the browser's processes still running, and records what is left. */
async function stopConsoleRun(
  context: BrowserContext | undefined,
  fleet: Fleet | undefined,
  browserPids: number[],
  result: ConsoleResult,
  hooks: { onFleet?: (fleet: Fleet, live: boolean) => void },
): Promise<void> {
  let pids = browserPids
  if (context !== undefined) {
    pids = [...new Set([...pids, ...chromiumProcesses().all])]
    await context.close().catch(() => {})
  }
  if (fleet !== undefined) {
    result.pids = [...fleet.spawnedPids]
    await fleet.stop()
    hooks.onFleet?.(fleet, false)
  }
  for (const pid of await waitGone(pids, 5000)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
  }
  result.pids.push(...pids)
  result.leftoverPids = await waitGone(result.pids, 10_000)
}

/**
 * The console scenario (issue 31): a master, `minions` swarm minions and brine-api; Chromium (playwright-core)
 * logs into the console, runs test.ping on `*` from the Run page, and the page's own clock times, from the
 * click, the first returned row in the DOM and the counts line reading all N returned. Then every row is
 * checked page by page, the Minions page is clicked (it must answer), and the page's JS heap, its DOM and
 * the browser's RSS are read.
 */
export async function runConsoleScenario(
  settings: ConsoleSettings,
  hooks: { logLevel?: string; onFleet?: (fleet: Fleet, live: boolean) => void; onPhase?: (phase: string) => void } = {},
): Promise<ConsoleResult> {
  const result = emptyConsoleResult(settings)
  if (!existsSync(settings.chromium)) {
    result.error = `Chromium is not installed at ${settings.chromium}: run \`bash scripts/ensure-chromium.sh\` first`
    return result
  }
  result.chromiumVersion = execFileSync(settings.chromium, ['--version'], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  const work = await mkdtemp(join(tmpdir(), 'brine-bench-console-'))
  let fleet: Fleet | undefined
  let context: BrowserContext | undefined
  let browserPids: number[] = []
  try {
    hooks.onPhase?.('connect')
    fleet = await Fleet.start({
      bus: fleetBus,
      minions: [],
      transports: [settings.transport],
      logLevel: hooks.logLevel ?? 'warning',
      readyTimeoutMs: settings.timeoutMs,
      masterConfig: { ...LOOPBACK_FLEET, ...(await apiMasterConfig(work)), timeout: 30, gather_job_timeout: 10 },
    })
    hooks.onFleet?.(fleet, true)
    await startConsoleMinions(fleet, settings)
    const { url, process: api } = await fleet.startApi()

    hooks.onPhase?.('browser')
    context = await launchChromium(settings, work)
    browserPids = chromiumProcesses().all
    const page: Page = context.pages()[0] ?? (await context.newPage())
    page.setDefaultTimeout(settings.timeoutMs)
    await logInAndFillRun(page, url, settings, result)

    hooks.onPhase?.('run test.ping')
    await runAndTime(context, page, settings, result)
    browserPids = [...new Set([...browserPids, ...readBrowserMemory(result)])]
    result.countsText = (await page.getByTestId('counts').innerText()).replace(/\s*raw JSON\s*$/, '').trim()

    hooks.onPhase?.('check rows')
    await checkRows(page, settings, result)
    await clickMinionsPage(page, settings, result)
    result.apiRssBytes = rssBytes(api.pid)
    result.masterRssBytes = rssBytes(fleet.master.pid)
  } catch (error) {
    result.error = (error as Error).message.slice(0, 2000)
  } finally {
    hooks.onPhase?.('stop')
    await stopConsoleRun(context, fleet, browserPids, result, hooks)
    await rm(work, { recursive: true, force: true })
    result.finishedAt = new Date().toISOString()
  }
  return result
}

/** The console scenario's report as Markdown. */
export function consoleMarkdown(result: ConsoleResult): string {
  const m = result.machine
  const mib = mebibytes
  const n = result.settings.minions
  return [
    `# Brine bench: the console, test.ping on ${n} swarm minions, ${result.startedAt}`,
    '',
    `\`${result.command.join(' ')}\` — ${m.cpus} × ${m.cpuModel}, ${(m.totalmemBytes / 1024 ** 3).toFixed(0)} GiB, Node ${m.node}, ${m.os}; load average ${result.loadAverage.join(' / ')} (1 / 5 / 15 min) at the start; ${result.chromiumVersion} (headless, playwright-core)`,
    '',
    `A master, ${n} ${result.settings.transport} swarm minions and brine-api; Chromium logs into the console at /app, waits for the Minions page it opens on, then runs \`test.ping\` on \`*\` from the Run page. Times are the page's own clock from the click on Run (a MutationObserver sees the rows change).`,
    '',
    '| figure | value |',
    '| --- | ---: |',
    `| click → the console's POST / (local_async) answered with the jid | ${result.publishAnsweredMs} ms |`,
    `| click → counts line shows the first return | ${result.firstReturnCountedMs} ms |`,
    `| click → first returned row rendered (page 1: the first 200 ids) | ${result.firstReturnRenderedMs} ms |`,
    `| click → all ${n} returned (counts line) | ${result.allReturnedRenderedMs} ms |`,
    `| rows returned, walked page by page / distinct minions | ${result.rowsReturned} / ${result.distinctIds} |`,
    `| counts line at the end | ${result.countsText} |`,
    `| main-thread tasks > 50 ms while returns arrived: count / longest / sum | ${result.longTasks.count} / ${result.longTasks.maxMs} ms / ${result.longTasks.totalMs} ms |`,
    `| before the job: log in → the Minions page's first row (its manage.status and grains.item on * done) | ${result.minionsPageLoadMs} ms |`,
    `| after the job, click on Minions → its first row shown (rows shown; the page runs manage.status and grains.item again) | ${result.minionsPageClickMs} ms (${result.minionsPageRows}) |`,
    `| page JS heap used at the end / peak while returns arrived / total | ${mib(result.jsHeapUsedBytes)} / ${mib(result.jsHeapPeakUsedBytes)} / ${mib(result.jsHeapTotalBytes)} MiB |`,
    `| page DOM nodes | ${result.domNodes} |`,
    `| Chromium browser process RSS; all ${result.browserProcesses} of its processes: RSS summed / PSS summed | ${mib(result.browserRssBytes)}; ${mib(result.browserTreeRssBytes)} / ${mib(result.browserTreePssBytes)} MiB |`,
    `| brine-api RSS / master RSS at the end | ${mib(result.apiRssBytes)} / ${mib(result.masterRssBytes)} MiB |`,
    '',
    result.error === undefined
      ? `Processes started (daemons, swarms, Chromium's): ${result.pids.length}; still alive after the stop: ${result.leftoverPids.length}.`
      : `**Failed:** ${result.error}`,
    '',
  ].join('\n')
}
