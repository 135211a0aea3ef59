import { describe, expect, it } from 'vitest'
import { InvalidOperationError, silentLogger } from '@brine/core'
import type { Transport } from '@brine/transport'
import type { MasterSession } from '../src/auth.js'
import { PublishSubscription } from '../src/publish-subscription.js'

/** A transport that counts the publish clients asked of it (none are made: each ask throws). */
function countingTransport(): { transport: Transport; asked: () => number } {
  let asked = 0
  const transport = {
    name: 'counting',
    createPublishClient: () => {
      asked++
      throw new Error('no publish client expected')
    },
  } as unknown as Transport
  return { transport, asked: () => asked }
}

const subscription = (transport: Transport, publishPort?: number) =>
  new PublishSubscription({
    id: 'm1',
    transport,
    master: '127.0.0.1:4506',
    client: { host: '127.0.0.1' },
    ...(publishPort === undefined ? {} : { publishPort }),
    logger: silentLogger,
    signal: new AbortController().signal,
    closing: () => false,
    track: () => {},
    requestsOnly: true,
  })

describe('a requests-only publish subscription (brine-call)', () => {
  it('never asks for a publish client, not for a configured port nor for the one an auth names; its waits end at once; it has no stream', async () => {
    const { transport, asked } = countingTransport()
    const configured = subscription(transport, 4505)
    const named = subscription(transport)
    named.subscribeAt({ publishPort: 4510 } as MasterSession)
    for (const each of [configured, named]) {
      await each.start()
      await each.whenConnected()
      await each.connected
      expect(each.address).toBeUndefined()
      expect(() =>
        each.stream(
          () => undefined,
          (job) => job,
        ),
      ).toThrow(InvalidOperationError)
      await each.close()
    }
    expect(asked()).toBe(0)
  })
})
