import { readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { json } from './helpers/output.js'
import { TRANSPORTS, useSharedFleets } from './helpers/fleets.js'

const startFleet = useSharedFleets()

/** A process's argv and environment, as the kernel has them after any execve. */
function processOf(pid: number): { argv: string[]; env: string[] } {
  const read = (what: string): string[] =>
    readFileSync(`/proc/${pid}/${what}`, 'utf8')
      .split('\0')
      .filter((item) => item !== '')
  return { argv: read('cmdline'), env: read('environ') }
}

let server: Server
let base: string
let dir: string

beforeAll(async () => {
  server = createServer((request, response) => response.end(`served ${request.url}`))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  dir = await mkdtemp(join(tmpdir(), 'brine-runtime-'))
})

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()))
  await rm(dir, { recursive: true, force: true })
})

describe.each(TRANSPORTS)('the daemons in their runtime over %s', (transport) => {
  it('the master re-executed itself (same pid) with its flags, the minion set its own as it ran; the minion still fetches over HTTP', async () => {
    const fleet = await startFleet({ minions: [{ id: 'rt1', transport }] })
    const master = processOf(fleet.master.pid)
    expect(master.argv.slice(1, 2)).toEqual(['--max-semi-space-size=8'])
    expect(master.argv[2]).toMatch(/brine-master\.js$/)
    expect(master.env).toContain('MALLOC_ARENA_MAX=2')
    const minion = processOf(fleet.minions.get('rt1')!.pid)
    // Not re-executed: its compiler flag is set in the running process (packages/cli/test/daemon-runtime.test.ts).
    expect(minion.argv[1]).toMatch(/brine-minion\.js$/)

    // Node's fetch needs WebAssembly (its HTTP parser), which --jitless would have taken away.
    const dest = join(dir, `${transport}.txt`)
    const got = await fleet.run('brine', ['rt1', 'cp.get_url', `${base}/${transport}.txt`, dest, '--out', 'json', '--static'])
    expect(json(got.stdout)).toEqual({ rt1: dest })
    expect(await readFile(dest, 'utf8')).toBe(`served /${transport}.txt`)
  })
})
