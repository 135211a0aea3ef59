import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { canBind, deferred, freeLoopbackPort, portOf } from '../src/index.js'

describe('freeLoopbackPort', () => {
  it('returns distinct bindable ports below the kernel ephemeral range', async () => {
    const [ephemeralLow] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
    const ports = await Promise.all(Array.from({ length: 20 }, () => freeLoopbackPort()))
    expect(new Set(ports).size).toBe(20)
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(1024)
      expect(port).toBeLessThan(ephemeralLow!)
    }
    const server = createServer()
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(ports[0], '127.0.0.1', () => resolve()))
    await new Promise((resolve) => server.close(resolve))
  })
})

describe('canBind and portOf', () => {
  it('portOf reads the port of an address or an endpoint, and canBind sees a port in use', async () => {
    expect(portOf('tcp://127.0.0.1:4505')).toBe(4505)
    expect(portOf({ address: 'tcp://[::1]:4506' })).toBe(4506)
    expect(() => portOf('tcp://127.0.0.1')).toThrow(RangeError)
    const server = createServer()
    const listening = deferred()
    server.listen(0, '127.0.0.1', () => listening.resolve())
    await listening.promise
    const port = (server.address() as { port: number }).port
    expect(await canBind(port)).toBe(false)
    await new Promise((resolve) => server.close(resolve))
    expect(await canBind(port)).toBe(true)
  })
})
