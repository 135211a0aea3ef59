import { spawnSync } from 'node:child_process'
import { createServer, Socket, type AddressInfo } from 'node:net'
import { TLSSocket as NodeTLSSocket } from 'node:tls'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { connect, TLSSocket } from '../src/bundle/lazy-tls.js'

const shim = fileURLToPath(new URL('../src/bundle/lazy-tls.ts', import.meta.url))

describe("the minion bundle's node:tls for the NATS client", () => {
  it('loads nothing until its first connect', () => {
    const script = `const { TLSSocket } = await import(${JSON.stringify(shim)})
const plain = new (await import('node:net')).Socket()
console.log(JSON.stringify([plain instanceof TLSSocket, process.moduleLoadList.includes('NativeModule tls')]))`
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })
    expect(result.status, result.stderr).toBe(0)
    expect(JSON.parse(result.stdout)).toEqual([false, false])
  })

  it("connects as tls.connect does, and tells its sockets from plain ones as tls's TLSSocket does", async () => {
    const server = createServer((peer) => peer.destroy())
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = server.address() as AddressInfo
      const socket = connect(port, '127.0.0.1', { rejectUnauthorized: false })
      socket.on('error', () => {})
      expect(socket).toBeInstanceOf(NodeTLSSocket)
      expect(socket instanceof TLSSocket).toBe(true)
      expect(new Socket() instanceof TLSSocket).toBe(false)
      socket.destroy()
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
