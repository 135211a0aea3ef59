import { ClosedError, TimeoutError, AddressInUseError, TransportError } from '@brine/core'
import { describe, expect, it } from 'vitest'
import { SendQueue, mapNativeError } from '../src/index.js'

/** A socket stand-in that, like zeromq.js, rejects a send while another is still pending. */
function fakeSocket() {
  let busy = false
  const sent: unknown[] = []
  return {
    sent,
    send(message: unknown): Promise<void> {
      if (busy) return Promise.reject(Object.assign(new Error('Socket is busy writing'), { code: 'EBUSY' }))
      busy = true
      return new Promise((resolve) =>
        setTimeout(() => {
          busy = false
          sent.push(message)
          resolve()
        }, 1),
      )
    },
  }
}

const context = { what: 'test socket', address: 'tcp://127.0.0.1:1' }

describe('SendQueue', () => {
  it('serialises concurrent sends so none hits EBUSY, in order', async () => {
    const socket = fakeSocket()
    const queue = new SendQueue(
      socket,
      (e) => mapNativeError(e, context),
      () => new ClosedError('test socket'),
    )
    const sends = Array.from({ length: 50 }, (_, i) => queue.send(String(i)))
    expect(queue.size).toBe(50)
    await Promise.all(sends)
    expect(socket.sent).toEqual(Array.from({ length: 50 }, (_, i) => String(i)))
    expect(queue.size).toBe(0)
  })

  it('rejects waiting and later sends with ClosedError once closed', async () => {
    const queue = new SendQueue(
      fakeSocket(),
      (e) => mapNativeError(e, context),
      () => new ClosedError('test socket'),
    )
    const first = queue.send('a')
    const second = queue.send('b')
    queue.close()
    await expect(first).rejects.toBeInstanceOf(ClosedError)
    await expect(second).rejects.toBeInstanceOf(ClosedError)
    await expect(queue.send('c')).rejects.toBeInstanceOf(ClosedError)
  })
})

describe('mapNativeError', () => {
  const native = (code: string, message = code) => Object.assign(new Error(message), { code })

  it('maps native codes to Brine errors', () => {
    expect(mapNativeError(native('EADDRINUSE'), { ...context, hostPort: '127.0.0.1:1' })).toBeInstanceOf(AddressInUseError)
    expect(mapNativeError(native('EBADF', 'Socket is closed'), context)).toBeInstanceOf(ClosedError)
    expect(mapNativeError(native('ENOTSOCK'), context)).toBeInstanceOf(ClosedError)
    expect(mapNativeError(native('ETERM'), context)).toBeInstanceOf(ClosedError)
    expect(mapNativeError(native('EAGAIN'), { ...context, closing: true })).toBeInstanceOf(ClosedError)
    const timeout = mapNativeError(native('EAGAIN'), { ...context, sendTimeout: { timeout: 100, tries: 2 } })
    expect(timeout).toBeInstanceOf(TimeoutError)
    expect(timeout).toMatchObject({ timeout: 100, tries: 2 })
    const other = mapNativeError(native('EHOSTUNREACH'), context)
    expect(other).toBeInstanceOf(TransportError)
    expect(other.message).toContain('EHOSTUNREACH')
  })
})
