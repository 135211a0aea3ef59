import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { freeLoopbackPort } from '../src/index.js'

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
