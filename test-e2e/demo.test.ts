import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { killAllProcesses, runProcess } from '@brine/testkit'

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url))

afterAll(() => killAllProcesses())

describe('the README demo', () => {
  it('starts a master and four minions over three transports (NATS too), runs real jobs, and stops everything', async () => {
    const result = await runProcess(process.execPath, ['scripts/demo.mjs'], { ms: 120_000, cwd: REPO_ROOT })
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    const uname = execFileSync('uname', ['-sr']).toString().trim()
    expect(result.stdout).toMatch(/master zeromq: publish_port \d+, ret_port \d+/)
    expect(result.stdout).toMatch(/master tcp: publish_port \d+, ret_port \d+/)
    expect(result.stdout).toMatch(/master nats: publish_port \d+, ret_port \d+/)
    expect(result.stdout).toMatch(/nats-server: nats:\/\/127\.0\.0\.1:\d+/)
    expect(result.stdout).toContain("$ brine '*' test.ping\n")
    for (const id of ['web1', 'web2', 'db1', 'cache1']) {
      expect(result.stdout).toContain(`${id}:\n    True\n`)
      expect(result.stdout).toContain(`${id}:\n    ${uname}\n`)
    }
    expect(result.stdout).toContain('Accepted Keys:\ncache1\ndb1\nweb1\nweb2\n')
    expect(result.stdout).toContain('Demo finished: every process it started has been stopped.')
  })
})
