import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { canBind, deferred, freeLoopbackPort, portOf } from '../src/index.js'
import { claimPort, claimsDir, releasePortClaims } from '../src/ports.js'

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

describe('port claims across processes', () => {
  it("a port a living process claimed is not handed out again; a dead one's claim is taken over", () => {
    mkdirSync(claimsDir, { recursive: true })
    const held = 1024 + Math.floor(Math.random() * 20_000)
    const heldFile = join(claimsDir, String(held))
    writeFileSync(heldFile, String(process.ppid)) // the runner that started this worker: alive for the whole test
    expect(claimPort(held)).toBe(false)
    expect(readFileSync(heldFile, 'utf8')).toBe(String(process.ppid))

    const dead = spawnSync(process.execPath, ['-e', '0']).pid!
    writeFileSync(heldFile, String(dead))
    expect(claimPort(held)).toBe(true)
    expect(readFileSync(heldFile, 'utf8')).toBe(String(process.pid))
  })

  it("a process's claims are recorded while it runs and removed when it exits", async () => {
    const mine = await freeLoopbackPort()
    expect(readFileSync(join(claimsDir, String(mine)), 'utf8')).toBe(String(process.pid))
    const built = new URL('../dist/index.js', import.meta.url).href
    const script = `import('${built}').then(async ({ freeLoopbackPort }) => {
      const port = await freeLoopbackPort()
      const { readFileSync } = await import('node:fs')
      process.stdout.write(JSON.stringify({ port, owner: readFileSync('${claimsDir}/' + port, 'utf8') }))
    })`
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })
    expect(child.stderr).toBe('')
    const { port, owner } = JSON.parse(child.stdout) as { port: number; owner: string }
    expect(owner).toBe(String(child.pid))
    expect(port).not.toBe(mine)
    expect(existsSync(join(claimsDir, String(port)))).toBe(false)
  })
})

describe('releasePortClaims', () => {
  it("removes this process's claims, and a released port may be handed out again", async () => {
    const ports = await Promise.all(Array.from({ length: 3 }, () => freeLoopbackPort()))
    for (const port of ports) expect(readFileSync(join(claimsDir, String(port)), 'utf8')).toBe(String(process.pid))
    releasePortClaims()
    for (const port of ports) expect(existsSync(join(claimsDir, String(port)))).toBe(false)
    // claimPort alone records a claim without handing the port out: removed here, as nothing else would
    expect(claimPort(ports[0]!)).toBe(true)
    unlinkSync(join(claimsDir, String(ports[0])))
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
