import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
// @ts-expect-error: a plain-JavaScript launcher module (bin/ is not compiled), exercised as the bins run it
import { boundedArgv, MASTER_SEMI_SPACE_MB } from '../bin/young-generation.js'

const moduleUrl = pathToFileURL(fileURLToPath(new URL('../bin/young-generation.js', import.meta.url))).href
const bounded = boundedArgv as (argv: string[], execArgv: string[], nodeOptions: string | undefined, megabytes: number) => string[] | undefined

/** Runs `script` (ESM) in a fresh Node with `env` added; its stdout lines, parsed as JSON. */
function runNode(script: string, env: Record<string, string> = {}): unknown[] {
  const dir = mkdtempSync(join(tmpdir(), 'brine-young-'))
  try {
    const file = join(dir, 'probe.mjs')
    writeFileSync(file, script)
    const run = spawnSync(process.execPath, [file], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '', ...env }, timeout: 60_000 })
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
import { boundYoungGeneration } from ${JSON.stringify(moduleUrl)}
writeSync(1, JSON.stringify({ pid: process.pid, execArgv: process.execArgv }) + '\\n')
boundYoungGeneration(${megabytes})
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
