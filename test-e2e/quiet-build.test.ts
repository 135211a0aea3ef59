import { afterAll, describe, expect, it } from 'vitest'
import { killAll, run } from './helpers/processes.js'

// The build that `npm ci` (prepare), `npm run demo` and `npm test` run: one line while it builds, the full log
// only when it fails. Driven here with stand-in commands, so the test never rebuilds the tree other tests use.
const MS = 60_000
afterAll(() => killAll())

describe('scripts/quiet-build.mjs', () => {
  it('prints one line for a build that succeeds, however much the build prints', async () => {
    const noisy = 'for (let i = 0; i < 500; i++) console.log(`line ${i} of build output`); console.error("a warning")'
    const result = await run(process.execPath, ['scripts/quiet-build.mjs', '--label', 'Building Brine', '--', process.execPath, '-e', noisy], { ms: MS })
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/^Building Brine … done in \d+ s\n$/)
    expect(result.stderr).toBe('')
  })

  it("prints the build's whole output and exits with its code when it fails", async () => {
    const failing = 'for (let i = 0; i < 3; i++) console.log(`step ${i}`); console.error("src/index.ts(3,1): error TS1005"); process.exit(3)'
    const result = await run(process.execPath, ['scripts/quiet-build.mjs', '--', process.execPath, '-e', failing], { ms: MS })
    expect(result.code).toBe(3)
    expect(result.stdout).toBe('Building Brine …\n')
    expect(result.stderr).toMatch(
      /^step 0\nstep 1\nstep 2\nsrc\/index.ts\(3,1\): error TS1005\n\nBuilding Brine failed \(exit code 3\) after \d+ s; the log above is also in .*\.tmp\/build\.log\n$/,
    )
  })
})
