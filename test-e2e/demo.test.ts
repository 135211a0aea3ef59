import { afterAll, describe, expect, it } from 'vitest'
import { killAll, run } from './helpers/processes.js'

afterAll(() => killAll())

describe('the README demo', () => {
  it('runs against the built packages and prints real traffic over both transports', async () => {
    const result = await run(process.execPath, ['scripts/demo.mjs'], { ms: 60_000 })
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    for (const transport of ['zeromq', 'tcp']) {
      expect(result.stdout).toMatch(new RegExp(`== transport ${transport}: publish tcp://127\\.0\\.0\\.1:\\d+, ret tcp://127\\.0\\.0\\.1:\\d+`))
    }
    expect(result.stdout.match(/request {2}-> "pong from the master to web1"/g)).toHaveLength(2)
    expect(result.stdout.match(/web1 {5}<- test\.ping, grains\.items/g)).toHaveLength(2)
    expect(result.stdout.match(/db1 {6}<- test\.ping, cmd\.run, grains\.items/g)).toHaveLength(2)
  })
})
