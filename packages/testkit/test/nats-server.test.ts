import { readFileSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { NATS_GOMAXPROCS, NatsServerProcess } from '../src/index.js'

/** The GOMAXPROCS a running process was started with, from its environment (undefined when it has none). */
function goMaxProcsOf(pid: number): string | undefined {
  const entries = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')
  return entries.find((entry) => entry.startsWith('GOMAXPROCS='))?.slice('GOMAXPROCS='.length)
}

describe('NatsServerProcess', () => {
  const started: NatsServerProcess[] = []
  const saved = process.env.GOMAXPROCS
  afterEach(async () => {
    if (saved === undefined) delete process.env.GOMAXPROCS
    else process.env.GOMAXPROCS = saved
    await Promise.all(started.splice(0).map((server) => server.close()))
  })

  it('runs the broker on one Go processor unless told otherwise, and again after a restart', async () => {
    delete process.env.GOMAXPROCS
    const server = await NatsServerProcess.start({ name: 'one-core' })
    started.push(server)
    expect(NATS_GOMAXPROCS).toBe(1)
    expect(goMaxProcsOf(server.pid)).toBe('1')
    await server.stop()
    // An empty GOMAXPROCS is no choice (Go reads it as unset): still one.
    process.env.GOMAXPROCS = ''
    await server.restart()
    expect(goMaxProcsOf(server.pid)).toBe('1')
  })

  it("takes the environment's GOMAXPROCS, and a server's own maxProcs over both", async () => {
    process.env.GOMAXPROCS = '2'
    const fromEnvironment = await NatsServerProcess.start({ name: 'from-env' })
    started.push(fromEnvironment)
    expect(goMaxProcsOf(fromEnvironment.pid)).toBe('2')
    const own = await NatsServerProcess.start({ name: 'own', maxProcs: 3 })
    started.push(own)
    expect(goMaxProcsOf(own.pid)).toBe('3')
  })
})
