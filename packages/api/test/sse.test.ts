import type { ServerResponse } from 'node:http'
import { afterEach, describe, expect, it } from 'vitest'
import { sseRecord, sseSink, type EventSink } from '../src/sse.js'
import { startBusAndStreams } from './bus-streams.js'
import { until } from '@brine/transport-compliance'

/** An `/events` response whose peer reads only when told to: what it was sent, and the SSE sink over it. */
function stalledResponse(): { sink: EventSink; encoded: () => string[]; sent: () => string[]; resume: () => void } {
  let reading = false
  let chunks = ''
  const listeners = new Map<string, () => void>()
  const raw = {
    writableEnded: false,
    write: (chunk: Buffer) => {
      chunks += chunk.toString()
      return reading
    },
    on: (name: string, listener: () => void) => listeners.set(name, listener),
    end: () => {},
  } as unknown as ServerResponse
  const real = sseSink(raw)
  const encoded: string[] = []
  const sink: EventSink = {
    ...real,
    encode: (event, cache) => {
      encoded.push(event.tag)
      return real.encode(event, cache)
    },
  }
  // Each record's tag, or the comment it is: the order the reader sees (of the test's events).
  const ours = (tags: string[]): string[] => tags.filter((tag) => !tag.startsWith('salt/warmup'))
  const sent = (): string[] =>
    ours(chunks.split('\n\n').flatMap((record) => /^tag: (\S+)|^: (dropped \d+ events)/.exec(record)?.slice(1).filter(Boolean) ?? []))
  const resume = (): void => {
    reading = true
    listeners.get('drain')?.()
  }
  return { sink, encoded: () => ours(encoded), sent, resume }
}

describe('an /events reader that stops reading', () => {
  const cleanup: Array<() => Promise<void>> = []
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step()
  })

  it('loses events in one stretch, none of them encoded for it, and is told how many where the stretch was', async () => {
    const { bus, streams } = await startBusAndStreams(cleanup, { bufferBytes: 1024, maxStreams: 1 })
    // Warm-up events may still come after the reader is attached: what it is sent of them is left out below.
    await until(() => (bus.fire('salt/warmup', {}), streams.stats().events > 0), 10_000, 'the hub to read the bus')

    const reader = stalledResponse()
    streams.attach(reader.sink, 'ab', Date.now() / 1000 + 3600)
    // `first` fills the socket (the peer reads nothing), `queued` fits the 1 KiB bound, `big` does not, and `small`
    // would: it is lost with `big`, as is everything until the reader has caught up.
    bus.fire('salt/test/first', {})
    bus.fire('salt/test/queued', {})
    bus.fire('salt/test/big', { blob: 'x'.repeat(2048) })
    bus.fire('salt/test/small', {})
    await until(() => streams.stats().dropped === 2 || reader.encoded().includes('salt/test/small'), 10_000, 'the hub to read the four events')
    expect(reader.encoded()).toEqual(['salt/test/first', 'salt/test/queued', 'salt/test/big'])
    expect(streams.stats()).toMatchObject({ dropped: 2 })

    reader.resume()
    bus.fire('salt/test/after', {})
    await until(() => reader.sent().includes('salt/test/after'), 10_000, 'the event after the catch-up')
    expect(reader.sent()).toEqual(['salt/test/first', 'salt/test/queued', 'dropped 2 events', 'salt/test/after'])
    expect(streams.stats()).toMatchObject({ dropped: 2, queuedBytes: 0 })
  })

  it('keeps a notice of events lost before the streams that came during its own loss, and sends it after its own notice', async () => {
    const { bus, streams, restartBus } = await startBusAndStreams(cleanup, { bufferBytes: 1024, maxStreams: 1 })
    await until(() => (bus.fire('salt/warmup', {}), streams.stats().events > 0), 10_000, 'the hub to read the bus')
    const reader = stalledResponse()
    streams.attach(reader.sink, 'ab', Date.now() / 1000 + 3600)
    bus.fire('salt/test/first', {})
    bus.fire('salt/test/big', { blob: 'x'.repeat(2048) })
    await until(() => streams.stats().dropped === 1, 10_000, 'the reader to lose an event')
    // The master restarts while this reader is losing events: the gap's notice is neither lost nor counted as its loss.
    const restarted = await restartBus()
    await until(() => streams.stats().upstreamGaps === 1, 10_000, "the hub's reader to come back to the bus")
    reader.resume()
    await until(() => (restarted.fire('salt/test/after', {}), reader.sent().includes('salt/test/after')), 10_000, 'an event after the catch-up')
    expect(reader.sent().slice(0, 4)).toEqual(['salt/test/first', 'dropped 1 events', 'brine/bus/dropped', 'salt/test/after'])
    expect(streams.stats()).toMatchObject({ dropped: 1, upstreamGaps: 1, upstreamLost: 0 })
  })

  it('keeps such a notice that finds its queue full, losing nothing of its own, and sends it once it has caught up', async () => {
    const { bus, streams, restartBus } = await startBusAndStreams(cleanup, { bufferBytes: 1024, maxStreams: 1 })
    await until(() => (bus.fire('salt/warmup', {}), streams.stats().events > 0), 10_000, 'the hub to read the bus')
    const reader = stalledResponse()
    streams.attach(reader.sink, 'ab', Date.now() / 1000 + 3600)
    // `first` (or a late warm-up event) fills the socket; `nearly` then leaves the 1 KiB bound 50 bytes, too little
    // for the notice that comes next.
    bus.fire('salt/test/first', {})
    await until(() => reader.encoded().includes('salt/test/first'), 10_000, 'the hub to read the first event')
    const overhead = sseRecord({ tag: 'salt/test/nearly', data: { blob: '', _stamp: new Date().toISOString() } }).length
    bus.fire('salt/test/nearly', { blob: 'x'.repeat(1024 - streams.stats().queuedBytes - overhead - 50) })
    await until(() => reader.encoded().includes('salt/test/nearly'), 10_000, 'the hub to read the second event')
    const restarted = await restartBus()
    await until(() => streams.stats().upstreamGaps === 1, 10_000, "the hub's reader to come back to the bus")
    expect(streams.stats()).toMatchObject({ dropped: 0 })
    expect(streams.stats().queuedBytes).toBeLessThanOrEqual(1024)
    reader.resume()
    await until(() => (restarted.fire('salt/test/after', {}), reader.sent().includes('salt/test/after')), 10_000, 'an event after the catch-up')
    expect(reader.sent().slice(0, 4)).toEqual(['salt/test/first', 'salt/test/nearly', 'brine/bus/dropped', 'salt/test/after'])
    expect(streams.stats()).toMatchObject({ dropped: 0, upstreamGaps: 1 })
  })
})
