import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { pidAlive } from '@brine/testkit'
import { CONSOLE_SETTINGS, consoleMarkdown, runConsoleScenario } from '../src/console-bench.js'
import { FILES_SETTINGS, filesMarkdown, runFilesScenario } from '../src/files-bench.js'

const SWARM = fileURLToPath(new URL('../dist/bin/brine-swarm.js', import.meta.url))
const BIN = fileURLToPath(new URL('../dist/bin/brine-bench.js', import.meta.url))

function requireBuilt(): void {
  if (!existsSync(SWARM)) throw new Error(`${SWARM} does not exist: run \`npm run build\` first (the root \`npm test\` does)`)
}

// Quick runs of the two scenarios (5 swarm minions): what they check, never how fast.
describe('brine-bench --scenario files, quick', () => {
  it('copies the file to every minion intact, then again as cache hits only, and stops every process', async () => {
    requireBuilt()
    const result = await runFilesScenario({ ...FILES_SETTINGS, minions: 5, timeoutMs: 60_000 })
    expect(result.error).toBeUndefined()
    expect(result.sha256).toMatch(/^[0-9a-f]{64}$/)
    // First run: five copies, each hashed on disk, each sent by the file server.
    expect(result.first).toMatchObject({ jobs: 5, returned: 5, intact: 5, lostOrCorrupt: 0 })
    expect(result.first.served.files_served).toBe(5)
    expect(result.first.served.bytes_served).toBe(5 * FILES_SETTINGS.fileBytes)
    // Second run: each dest already holds the file: hashes asked, nothing sent.
    expect(result.second).toMatchObject({ jobs: 5, returned: 5, intact: 5, lostOrCorrupt: 0 })
    expect(result.second.served).toMatchObject({ files_served: 0, bytes_served: 0 })
    expect(result.second.served.hashes).toBeGreaterThanOrEqual(5)
    expect(result.secondCacheHits).toBe(5)
    expect(result.first.masterPeakRssBytes).toBeGreaterThan(0)
    expect(result.first.masterAfterRssBytes).toBeGreaterThan(0)
    // A master and one swarm process, both gone.
    expect(result.pids).toHaveLength(2)
    expect(result.leftoverPids).toEqual([])
    expect(result.pids.filter(pidAlive)).toEqual([])
    expect(filesMarkdown(result)).toContain('| second (cached) | 5 | 5 | 5 | 0 |')
  }, 120_000)
})

describe('brine-bench --scenario console, quick', () => {
  it('renders every return of test.ping on * in Chromium, answers a click on Minions, and reads the page memory', async () => {
    requireBuilt()
    if (!existsSync(CONSOLE_SETTINGS.chromium))
      throw new Error(`Chromium is not installed at ${CONSOLE_SETTINGS.chromium}: run \`bash scripts/ensure-chromium.sh\` first`)
    const result = await runConsoleScenario({ ...CONSOLE_SETTINGS, minions: 5, timeoutMs: 60_000 })
    expect(result.error).toBeUndefined()
    // Every row rendered as returned, one per minion, and the counts line says so.
    expect(result.rowsReturned).toBe(5)
    expect(result.distinctIds).toBe(5)
    expect(result.countsText).toMatch(/^5 returned · 0 failed · 0 waiting · 0 did not return/)
    // The first row is rendered no later than the last.
    expect(result.firstReturnRenderedMs).toBeGreaterThanOrEqual(0)
    expect(result.allReturnedRenderedMs).toBeGreaterThanOrEqual(result.firstReturnRenderedMs)
    expect(result.firstReturnCountedMs).toBeGreaterThanOrEqual(0)
    expect(result.publishAnsweredMs).toBeGreaterThan(0)
    expect(result.firstReturnCountedMs).toBeLessThanOrEqual(result.allReturnedRenderedMs)
    expect(result.minionsPageRows).toBe(5)
    expect(result.minionsPageLoadMs).toBeGreaterThan(0)
    expect(result.jsHeapUsedBytes).toBeGreaterThan(0)
    expect(result.jsHeapPeakUsedBytes).toBeGreaterThanOrEqual(result.jsHeapUsedBytes)
    expect(result.browserRssBytes).toBeGreaterThan(0)
    expect(result.browserTreeRssBytes).toBeGreaterThanOrEqual(result.browserRssBytes)
    expect(result.browserTreePssBytes).toBeGreaterThan(0)
    // The master, the swarm, brine-api and Chromium's processes: every one gone.
    expect(result.pids.length).toBeGreaterThanOrEqual(4)
    expect(result.leftoverPids).toEqual([])
    expect(result.pids.filter(pidAlive)).toEqual([])
    expect(consoleMarkdown(result)).toContain('rows returned, walked page by page / distinct minions | 5 / 5 |')
  }, 150_000)
})

describe('brine-bench --scenario', () => {
  it('refuses an unknown scenario with exit 2, naming the ones there are', () => {
    const run = spawnSync(process.execPath, [BIN, '--scenario', 'nope'], { encoding: 'utf8', timeout: 20_000 })
    expect(run.status).toBe(2)
    expect(run.stderr).toContain("unknown scenario 'nope' (files or console)")
  })
})
