import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { getTransport, iterTransportOpts, listTransports, registerTransport, unregisterTransport, type Transport } from '@brine/transport'
import { DuplicateTransportError, TransportUnavailableError, UnknownTransportError } from '@brine/core'

const fake = (name: string): Transport => ({ name }) as Transport

describe('transport registry', () => {
  // The registry is the module's: a file that ran before this one in the same worker (the packages project shares
  // them) may have registered the built-ins. Each test starts from an empty registry and leaves one.
  const clear = (): void => {
    for (const name of listTransports()) unregisterTransport(name)
  }
  beforeEach(clear)
  afterEach(clear)

  it('loads lazily, once, and refuses duplicate names', async () => {
    let loads = 0
    registerTransport('tcp', async () => {
      loads++
      return fake('tcp')
    })
    expect(loads).toBe(0)
    expect((await getTransport('tcp')).name).toBe('tcp')
    await getTransport('tcp')
    expect(loads).toBe(1)
    expect(() => registerTransport('tcp', async () => fake('tcp'))).toThrow(DuplicateTransportError)
  })

  it('names what exists and suggests the near miss', async () => {
    registerTransport('tcp', async () => fake('tcp'))
    registerTransport('zeromq', async () => fake('zeromq'))
    for (const [given, meant] of [
      ['zmq', 'zeromq'],
      ['ZeroMQ', 'zeromq'],
      ['tpc', 'tcp'],
    ] as const) {
      const error = await getTransport(given, { source: '/etc/brine/master:4' }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(UnknownTransportError)
      expect((error as Error).message).toBe(`unknown transport '${given}' at /etc/brine/master:4 (available: tcp, zeromq); did you mean '${meant}'?`)
    }
    await expect(getTransport('carrier-pigeon')).rejects.toThrow("unknown transport 'carrier-pigeon' (available: tcp, zeromq)")
  })

  it('wraps a failing loader with its cause and hint, and retries later', async () => {
    let fail = true
    registerTransport(
      'zeromq',
      async () => {
        if (fail) throw new Error('zeromq.node: cannot open shared object file')
        return fake('zeromq')
      },
      { hint: 'Reinstall with install scripts enabled, or use `transport: tcp`.' },
    )
    const error = (await getTransport('zeromq').catch((e: unknown) => e)) as TransportUnavailableError
    expect(error).toBeInstanceOf(TransportUnavailableError)
    expect(error.message).toMatch(/cannot open shared object file.*transport: tcp/)
    expect((error.cause as Error).message).toMatch(/shared object/)
    fail = false
    expect((await getTransport('zeromq')).name).toBe('zeromq')
  })
})

describe('iterTransportOpts', () => {
  it('yields each transport_opts entry merged over the base, then the base transport', () => {
    const opts = { transport: 'zeromq', ret_port: 4506, transport_opts: { tcp: { ret_port: 4606 }, zeromq: {} } }
    const out = [...iterTransportOpts(opts)]
    expect(out.map(([name, o]) => [name, o.transport, o.ret_port])).toEqual([
      ['tcp', 'tcp', 4606],
      ['zeromq', 'zeromq', 4506],
    ])
  })

  it('adds the base transport when transport_opts does not list it', () => {
    const out = [...iterTransportOpts({ transport: 'zeromq', transport_opts: { tcp: { publish_port: 4605 } } })]
    expect(out.map(([name]) => name)).toEqual(['tcp', 'zeromq'])
    expect([...iterTransportOpts({ transport: 'tcp' })].map(([name]) => name)).toEqual(['tcp'])
  })
})
