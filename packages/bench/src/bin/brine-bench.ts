import { rmSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import cliProgress from 'cli-progress'
import {
  benchMatrix,
  FULL_SETTINGS,
  machineInfo,
  PHASES,
  QUICK_SETTINGS,
  runCase,
  waitGone,
  type BenchCase,
  type BenchResult,
  type BenchTransport,
  type CaseResult,
} from '../bench.js'
import { killAllProcesses } from '@brine/testkit'
import { type Fleet } from '@brine/harness'
import { markdownReport, svgChart } from '../report.js'
import { FILES_SETTINGS, filesMarkdown, runFilesScenario } from '../files-bench.js'
import { CONSOLE_SETTINGS, consoleMarkdown, runConsoleScenario } from '../console-bench.js'

const USAGE = `usage: brine-bench [options]

Starts a real master and N minions per transport on loopback, measures connect, latency,
throughput, memory, restart and overload, and writes <out-dir>/<timestamp>.{json,md,svg}.

  --quick                 reduced matrix for CI: zeromq, tcp, nats, both × N ∈ {1, 10}, fewer calls
  --transports <list>     zeromq,tcp,nats,both (default all four); nats runs on a nats-server of the
                          bench's own, on a free loopback port, stopped by pid with its case
  --n <list>              minion counts (default 1,10,50,1000; quick 1,10)
  --procs <max>           N up to this runs one process per minion, larger N a swarm (default 50)
  --swarm                 run every N as swarm minions
  --swarm-size <k>        minions per brine-swarm process (default 500)
  --swarm-nice <n>        the swarm processes' nice value, 1–19 (default 0): a swarm of tens of thousands stands in for
                          machines of their own; niced, it leaves the master the CPU it needs (the report says when set)
  --recon-default <ms>    the minions' recon_default (default: Salt's 1000 ms): an operator's choice for a fleet tuned to
                          come back fast after a master restart; the report's restart section says when it is set
  --keys-at-launch        swarm minions make their key pairs as they start, inside the timed launch (a fleet's
                          first start); by default they are made before it, and the time it took is reported apart
  --nats-servers <k>      a NATS case runs on a cluster of k nats-servers routed on loopback (default 1): the
                          master on the first, swarms spread over all; each NATS minion holds one connection,
                          so k > 1 keeps every server within its open-file limit past ~19,000 minions
  --syndics <k>           a tree: a top master (order_masters) and k syndic nodes with N/k minions under
                          each; jobs go to the top (zeromq, tcp or nats; phases connect, latency, throughput)
  --calls <n>             timed test.ping calls (default 50; quick 20)
  --warmup <n>            untimed test.ping calls before them, 0 or more (default 30; quick 3): the fleet's
                          code warmed as a running fleet's is
  --jobs <n>              throughput jobs, --window of them in flight (default 200; quick 50)
  --window <k>            throughput jobs in flight at once (default 5); compare the scale curve's CPU per return at
                          one window: at N=5,000 a window of 5 sends 25,000 returns at once, more than a loaded 2-core
                          machine serves within a minion's return try (return_retry_timer, 5–10 s)
  --burst <n>             overload burst jobs (default 200; quick 50; 0 leaves the overload phase out)
  --api-calls <n>         the api phase's timed POST / pings (default 50; quick 20)
  --cli-calls <n>         the api phase's timed \`brine\` process pings (default 10; quick 5)
  --out-dir <dir>         where results go (default ./bench-results)
  -l, --log-level <lvl>   daemons' log level (default warning)
  --cpu-prof <dir>        profile the master, minions and swarms (node --cpu-prof) into <dir>
  --scenario <name>       one scenario instead of the matrix, written to <out-dir>/<timestamp>-<name>.{json,md}:
                            files    cp.get_file of a 1 MiB salt:// file to --minions swarm minions at once
                                     (default 100), twice: files/s, MiB/s, every copy hash-checked, master RSS,
                                     the second run's cache hits
                            console  brine-api + --minions swarm minions (default 1000); Chromium runs test.ping
                                     on * from the console's Run page: time to the first and to every return
                                     rendered, the page's JS heap, the browser's RSS
  --minions <n>           minions of a --scenario (its transport: the first of --transports, default tcp)
  -h, --help
`

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    transports: { type: 'string' },
    n: { type: 'string' },
    procs: { type: 'string', default: '50' },
    swarm: { type: 'boolean', default: false },
    'swarm-size': { type: 'string' },
    'keys-at-launch': { type: 'boolean', default: false },
    'recon-default': { type: 'string' },
    'swarm-nice': { type: 'string' },
    'nats-servers': { type: 'string' },
    syndics: { type: 'string' },
    calls: { type: 'string' },
    warmup: { type: 'string' },
    jobs: { type: 'string' },
    window: { type: 'string' },
    burst: { type: 'string' },
    'api-calls': { type: 'string' },
    'cli-calls': { type: 'string' },
    'out-dir': { type: 'string', default: 'bench-results' },
    'log-level': { type: 'string', short: 'l', default: 'warning' },
    'cpu-prof': { type: 'string' },
    scenario: { type: 'string' },
    minions: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
})
if (values.help) {
  process.stdout.write(USAGE)
  process.exit(0)
}

const fail = (message: string): never => {
  process.stderr.write(`brine-bench: ${message}\n${USAGE}`)
  process.exit(2)
}
const positive = (text: string | undefined, flag: string): number | undefined => {
  if (text === undefined) return undefined
  const value = Number(text)
  if (!Number.isInteger(value) || value <= 0) fail(`${flag} wants a positive integer, not '${text}'`)
  return value
}

if (values.scenario !== undefined) await runScenario(values.scenario)

/** `--scenario files|console`: one fleet, one report (`<stamp>-<name>.json` and `.md`); exits. */
async function runScenario(name: string): Promise<never> {
  if (name !== 'files' && name !== 'console') fail(`unknown scenario '${name}' (files or console)`)
  const named = (values.transports ?? 'tcp').split(',')[0]!.trim()
  if (named !== 'zeromq' && named !== 'tcp') fail(`a scenario runs on zeromq or tcp, not '${named}'`)
  const transport = named as 'zeromq' | 'tcp'
  const minions = positive(values.minions, '--minions')
  const live = new Set<Fleet>()
  const onSignal = (signal: NodeJS.Signals): void => {
    process.stderr.write(`\nbrine-bench: ${signal}: stopping every process it started\n`)
    const pids = [...live].flatMap((fleet) => fleet.spawnedPids)
    killAllProcesses()
    void waitGone(pids, 5000).then((alive) => {
      for (const fleet of live) rmSync(fleet.root, { recursive: true, force: true })
      process.stderr.write(alive.length > 0 ? `brine-bench: still alive: ${alive.join(', ')}\n` : `brine-bench: stopped pids ${pids.join(',')}; none left\n`)
      process.exit(130)
    })
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  const hooks = {
    logLevel: values['log-level'],
    onFleet: (fleet: Fleet, isLive: boolean) => (isLive ? live.add(fleet) : live.delete(fleet)),
    onPhase: (phase: string) => process.stderr.write(`brine-bench: ${name}: ${phase}\n`),
  }
  const result =
    name === 'files'
      ? await runFilesScenario({ ...FILES_SETTINGS, transport, minions: minions ?? FILES_SETTINGS.minions }, hooks)
      : await runConsoleScenario({ ...CONSOLE_SETTINGS, transport, minions: minions ?? CONSOLE_SETTINGS.minions }, hooks)
  result.command = ['brine-bench', ...process.argv.slice(2)]
  const markdown = result.scenario === 'files' ? filesMarkdown(result) : consoleMarkdown(result)
  const outDir = resolve(values['out-dir'])
  await mkdir(outDir, { recursive: true })
  const base = join(outDir, `${result.startedAt.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z')}-${name}`)
  await writeFile(`${base}.json`, `${JSON.stringify(result, null, 2)}\n`)
  await writeFile(`${base}.md`, markdown)
  process.stdout.write(`${markdown}\nWrote ${base}.json and .md\n`)
  process.exit(result.error !== undefined || result.leftoverPids.length > 0 ? 1 : 0)
}

const quick = values.quick
const settings = { ...(quick ? QUICK_SETTINGS : FULL_SETTINGS) }
settings.latencyCalls = positive(values.calls, '--calls') ?? settings.latencyCalls
settings.warmupCalls = values.warmup === '0' ? 0 : (positive(values.warmup, '--warmup') ?? settings.warmupCalls)
settings.throughputJobs = positive(values.jobs, '--jobs') ?? settings.throughputJobs
settings.window = positive(values.window, '--window') ?? settings.window
// --burst 0 leaves the overload phase out (a swarm of tens of thousands measured for connect and latency only).
settings.overloadJobs = values.burst === '0' ? 0 : (positive(values.burst, '--burst') ?? settings.overloadJobs)
settings.apiCalls = positive(values['api-calls'], '--api-calls') ?? settings.apiCalls
settings.cliCalls = positive(values['cli-calls'], '--cli-calls') ?? settings.cliCalls
settings.swarmSize = positive(values['swarm-size'], '--swarm-size') ?? settings.swarmSize
settings.keysAtLaunch = values['keys-at-launch']
// In milliseconds, Salt's unit for recon_default.
const reconDefault = positive(values['recon-default'], '--recon-default')
if (reconDefault !== undefined) settings.reconDefault = reconDefault
const swarmNice = positive(values['swarm-nice'], '--swarm-nice')
if (swarmNice !== undefined && swarmNice > 19) fail(`--swarm-nice wants a nice value from 1 to 19, not '${swarmNice}'`)
if (swarmNice !== undefined) settings.swarmNice = swarmNice
settings.natsServers = positive(values['nats-servers'], '--nats-servers') ?? 1
const procsMax = positive(values.procs, '--procs') ?? 50
const transports = (values.transports ?? 'zeromq,tcp,nats,both').split(',').map((name) => name.trim())
for (const name of transports) if (!['zeromq', 'tcp', 'nats', 'both'].includes(name)) fail(`unknown transport '${name}' (zeromq, tcp, nats or both)`)
let cases: BenchCase[] = benchMatrix(quick, transports as BenchTransport[])
if (values.n !== undefined) {
  const sizes = values.n.split(',').map((text) => positive(text.trim(), '--n')!)
  cases = (transports as BenchTransport[]).flatMap((transport) =>
    sizes.filter((n) => transport !== 'both' || n >= 2).map((n): BenchCase => ({ transport, n, mode: n > procsMax ? 'swarm' : 'procs' })),
  )
}
if (values.swarm) cases = cases.map((benchCase) => ({ ...benchCase, mode: 'swarm' }))
const syndics = positive(values.syndics, '--syndics')
if (syndics !== undefined) {
  if (transports.includes('both')) fail('--syndics runs a tree on one transport: give --transports zeromq, tcp, nats or a list of them')
  cases = cases.map((benchCase) => ({ ...benchCase, syndics }))
}

// Progress: a bar on a terminal, plain lines otherwise (CI logs).
const total = cases.length * PHASES.length
const bar = process.stderr.isTTY
  ? new cliProgress.SingleBar(
      { format: 'brine-bench {bar} {value}/{total} | {label}', stream: process.stderr, hideCursor: true, clearOnComplete: false },
      cliProgress.Presets.shades_classic,
    )
  : undefined
bar?.start(total, 0, { label: 'starting' })
let step = 0
const onPhase = (benchCase: BenchCase, phase: string): void => {
  const label = `${benchCase.transport} N=${benchCase.n} (${benchCase.mode}${benchCase.syndics === undefined ? '' : `, ${benchCase.syndics} syndics`}): ${phase}`
  if (bar !== undefined) bar.update(step, { label })
  else process.stderr.write(`brine-bench: ${label}\n`)
  step++
}

// Ctrl-C / SIGTERM: kill every process the fleets started (by pid, as groups), check each is gone, exit 130.
const liveFleets = new Set<Fleet>()
const startedPids = new Set<number>()
let interrupted = false
const onSignal = (signal: NodeJS.Signals): void => {
  if (interrupted) return
  interrupted = true
  bar?.stop()
  process.stderr.write(`\nbrine-bench: ${signal}: stopping every process it started\n`)
  for (const fleet of liveFleets) for (const pid of fleet.spawnedPids) startedPids.add(pid)
  killAllProcesses()
  void waitGone([...startedPids], 5000).then((alive) => {
    for (const fleet of liveFleets) rmSync(fleet.root, { recursive: true, force: true })
    if (alive.length > 0) process.stderr.write(`brine-bench: still alive: ${alive.join(', ')}\n`)
    else process.stderr.write(`brine-bench: stopped pids ${[...startedPids].join(',')}; none left\n`)
    process.exit(130)
  })
}
process.on('SIGINT', onSignal)
process.on('SIGTERM', onSignal)

const startedAt = new Date()
const results: CaseResult[] = []
for (const benchCase of cases) {
  const result = await runCase(benchCase, settings, {
    onPhase,
    logLevel: values['log-level'],
    nodeArgs: values['cpu-prof'] === undefined ? undefined : ['--cpu-prof', '--cpu-prof-dir', resolve(values['cpu-prof'])],
    onFleet: (fleet, live) => (live ? liveFleets.add(fleet) : liveFleets.delete(fleet)),
  })
  for (const pid of result.pids) startedPids.add(pid)
  results.push(result)
  if (bar === undefined && result.error !== undefined) process.stderr.write(`brine-bench: ${benchCase.transport} N=${benchCase.n}: ${result.error}\n`)
}
bar?.update(total, { label: 'done' })
bar?.stop()

const result: BenchResult = {
  version: 1,
  startedAt: startedAt.toISOString(),
  finishedAt: new Date().toISOString(),
  command: ['brine-bench', ...process.argv.slice(2)],
  machine: machineInfo(),
  quick,
  settings,
  cases: results,
  leftoverPids: await waitGone([...startedPids], 5000),
}
const outDir = resolve(values['out-dir'])
await mkdir(outDir, { recursive: true })
const stamp = result.startedAt.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z')
const base = join(outDir, stamp)
const markdown = markdownReport(result)
await writeFile(`${base}.json`, `${JSON.stringify(result, null, 2)}\n`)
await writeFile(`${base}.md`, markdown)
await writeFile(`${base}.svg`, svgChart(result))
process.stdout.write(`${markdown}\nWrote ${base}.json, .md and .svg\n`)
const failed = results.filter((item) => item.error !== undefined).length
process.exit(failed > 0 || result.leftoverPids.length > 0 ? 1 : 0)
