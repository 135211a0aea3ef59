import { afterEach, describe, expect, it } from 'vitest'
import { listTransports, registeredPeerSockets, registerTransport, unregisterTransport, type Transport } from '@brine/transport'
import { TransportUnavailableError, UnknownTransportError } from '@brine/core'
import { ZEROMQ_UNAVAILABLE_HINT, loadLocalChannelTransport, loadTransport, registerBuiltinTransports } from '../src/transports.js'

afterEach(() => {
  unregisterTransport('broken-fake')
  unregisterTransport('broker-fake')
})

describe('built-in transports', () => {
  it('registers zeromq and tcp once, however often it is called', () => {
    registerBuiltinTransports()
    registerBuiltinTransports()
    expect(listTransports()).toEqual(expect.arrayContaining(['tcp', 'zeromq']))
    expect(listTransports().filter((name) => name === 'zeromq')).toHaveLength(1)
  })

  it('refuses an unknown name with the source and a did-you-mean', async () => {
    const error = await loadTransport('zmq', '/etc/brine/master:4').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(UnknownTransportError)
    expect((error as Error).message).toMatch(/^unknown transport 'zmq' at \/etc\/brine\/master:4 \(available: .*tcp, zeromq.*\); did you mean 'zeromq'\?$/)
  })

  it('reports a loader that fails with its hint and cause', async () => {
    registerTransport('broken-fake', () => Promise.reject(new Error('addon missing')), { hint: ZEROMQ_UNAVAILABLE_HINT })
    const error = await loadTransport('broken-fake').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(TransportUnavailableError)
    expect((error as Error).message).toBe(
      "transport 'broken-fake' could not be loaded: addon missing. the zeromq native addon did not load; " +
        'reinstall with install scripts enabled (npm install --foreground-scripts zeromq) or set `transport: tcp`',
    )
    expect(((error as Error).cause as Error).message).toBe('addon missing')
  })

  it('loads the tcp transport lazily', async () => {
    const transport = await loadTransport('tcp')
    expect(transport.name).toBe('tcp')
  })

  it('declares at registration the peerSockets each built-in transport has once loaded', async () => {
    registerBuiltinTransports()
    for (const name of ['zeromq', 'tcp', 'nats']) {
      const declared = registeredPeerSockets(name)
      // Undefined declares nothing: such a transport is loaded to be asked.
      if (declared !== undefined) expect({ name, peerSockets: (await loadTransport(name)).peerSockets }).toEqual({ name, peerSockets: declared })
    }
    expect(registeredPeerSockets('nats')).toBe(false)
  })

  it("reaches a broker transport's local channel through tcp's framing without loading the broker's transport", async () => {
    let loads = 0
    registerTransport(
      'broker-fake',
      async () => {
        loads++
        return { name: 'broker-fake', peerSockets: false } as unknown as Transport
      },
      { peerSockets: false },
    )
    expect((await loadLocalChannelTransport('broker-fake')).name).toBe('tcp')
    expect(loads).toBe(0)
    // A socket transport's local channel is its own; an unknown name fails as loadTransport fails.
    expect((await loadLocalChannelTransport('tcp')).name).toBe('tcp')
    expect((await loadLocalChannelTransport('zeromq')).name).toBe('zeromq')
    await expect(loadLocalChannelTransport('zmq')).rejects.toBeInstanceOf(UnknownTransportError)
  })
})
