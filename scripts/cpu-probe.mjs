// Where a test run's CPU goes, by the kind of Node process that spent it (docs/development.md, "Where the time goes").
//
//   BRINE_CPU_PROBE=/tmp/probe.jsonl NODE_OPTIONS=--import=$PWD/scripts/cpu-probe.mjs ./dev npx vitest run <files>
//   ./dev node scripts/cpu-probe.mjs /tmp/probe.jsonl
//
// Preloaded (NODE_OPTIONS reaches every Node process the tests start: daemons, CLIs, npm), it appends one line per
// process as it exits: its script and CPU seconds. Run with a log path, it prints the processes and CPU per script.
// A process killed with SIGKILL writes nothing; nats-server, dpkg and Chromium are not Node: the difference between
// the total here and /usr/bin/time's is theirs and the killed processes'.
import { appendFileSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const log = process.env['BRINE_CPU_PROBE']
const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]

if (isMain) {
  const path = process.argv[2]
  if (path === undefined) {
    process.stderr.write('usage: node scripts/cpu-probe.mjs <probe log>\n')
    process.exit(2)
  }
  const byScript = new Map()
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (line === '') continue
    const { script, cpu } = JSON.parse(line)
    // tsup's chunk names carry a hash: brine-CFYM7EFO.js is brine.js's.
    const name = script.replace(/-[A-Z0-9]{8}\.js$/, '.js')
    const entry = byScript.get(name) ?? { processes: 0, cpu: 0 }
    entry.processes++
    entry.cpu += cpu
    byScript.set(name, entry)
  }
  let total = 0
  for (const [name, entry] of [...byScript].sort((a, b) => b[1].cpu - a[1].cpu)) {
    total += entry.cpu
    process.stdout.write(`${name.padEnd(40)} ${String(entry.processes).padStart(5)} processes ${entry.cpu.toFixed(1).padStart(7)} s\n`)
  }
  process.stdout.write(`${'total'.padEnd(40)} ${' '.repeat(15)} ${total.toFixed(1).padStart(7)} s\n`)
} else if (log !== undefined && log !== '') {
  process.on('exit', () => {
    const usage = process.resourceUsage()
    const script = (process.argv[1] ?? '').split('/').slice(-2).join('/')
    try {
      appendFileSync(log, `${JSON.stringify({ script, cpu: (usage.userCPUTime + usage.systemCPUTime) / 1e6 })}\n`)
    } catch {
      // A probe must never change how the process ends.
    }
  })
}
