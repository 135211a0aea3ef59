import { afterEach, describe, expect, it } from 'vitest'
import { listTransports, registerTransport, unregisterTransport } from '@brine/transport'
import { TransportUnavailableError, UnknownTransportError } from '@brine/core'
import { ZEROMQ_UNAVAILABLE_HINT, loadTransport, registerBuiltinTransports } from '../src/transports.js'

afterEach(() => {
  unregisterTransport('broken-fake')
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
})
