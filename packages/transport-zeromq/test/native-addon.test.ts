import { describe, expect, it } from 'vitest'

describe('zeromq native addon', () => {
  it('loads, reports a libzmq 4.x version and opens and closes a socket', async () => {
    const zmq = await import('zeromq')
    expect(zmq.version).toMatch(/^4\.\d+\.\d+$/)
    const socket = new zmq.Dealer({ linger: 0 })
    expect(socket.closed).toBe(false)
    socket.close()
    expect(socket.closed).toBe(true)
  })
})
