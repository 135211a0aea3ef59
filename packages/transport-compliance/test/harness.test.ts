import { describe, expect, it } from 'vitest'
import { type Endpoint, type TransportEvent } from '@brine/transport'
import { BoundedQueue } from '@brine/core'
import { Recorder } from '@brine/transport-compliance'

/** Just enough of an endpoint for the recorder: an events() stream the test feeds. */
function fakeEndpoint(): { endpoint: Endpoint; emit: (event: TransportEvent) => void } {
  const queue = new BoundedQueue<TransportEvent>(100)
  const endpoint = { address: 'tcp://127.0.0.1:4506', events: () => queue } as unknown as Endpoint
  return { endpoint, emit: (event) => queue.push(event) }
}

describe('harness', () => {
  it('recorder finds past events and waits for later ones after a mark', async () => {
    const { endpoint, emit } = fakeEndpoint()
    const recorder = new Recorder(endpoint)
    emit({ type: 'peer-connect', peer: 'a' })
    await recorder.waitFor((e) => e.type === 'peer-connect', 'the first connect')
    const mark = recorder.mark()
    const later = recorder.waitFor((e) => e.type === 'peer-connect', 'a second connect', { from: mark })
    emit({ type: 'peer-disconnect', peer: 'a' })
    emit({ type: 'peer-connect', peer: 'b' })
    expect(await later).toEqual({ type: 'peer-connect', peer: 'b' })
    expect(recorder.count((e) => e.type === 'peer-connect')).toBe(2)
  })

  it('recorder wakes a waiter on poke, and fails by name when nothing comes', async () => {
    const { endpoint } = fakeEndpoint()
    const recorder = new Recorder(endpoint)
    let ready = false
    const waiting = recorder.until(() => ready, 'ready to be set')
    ready = true
    recorder.poke()
    await waiting
    await expect(recorder.until(() => false, 'something that never happens', 20)).rejects.toThrow('waiting for something that never happens')
  })
})
