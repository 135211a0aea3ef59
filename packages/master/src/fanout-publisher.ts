import { type EndpointStats, type PublishOptions, type PublishServer, type TransportEvent } from '@brine/transport'
import { InvalidOperationError, type WireValue } from '@brine/core'

/**
 * One PublishServer over several (one per transport in `transport_opts`): a publish goes to
 * every server, so one job reaches ZeroMQ and TCP minions alike.
 */
export class FanoutPublishServer implements PublishServer {
  readonly servers: readonly PublishServer[]
  readonly closed: Promise<void>
  #eventsTaken = false

  constructor(servers: readonly PublishServer[]) {
    this.servers = servers
    this.closed = Promise.all(servers.map((server) => server.closed)).then(() => undefined)
  }

  get address(): string {
    return this.servers.map((server) => server.address).join(', ')
  }

  async start(): Promise<void> {
    await Promise.all(this.servers.map((server) => server.start()))
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((server) => server.close()))
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  /** Resolves once queued on every server; rejects with the first failure after all were tried. */
  async publish(payload: WireValue, options?: PublishOptions): Promise<void> {
    const results = await Promise.allSettled(this.servers.map((server) => server.publish(payload, options)))
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected')
    if (failed !== undefined) throw failed.reason
  }

  /** Every server's events, interleaved as they come. */
  events(): AsyncIterable<TransportEvent> {
    if (this.#eventsTaken) throw new InvalidOperationError('fan-out publish server: events() has a consumer already')
    this.#eventsTaken = true
    const iterators = this.servers.map((server) => server.events()[Symbol.asyncIterator]())
    return {
      [Symbol.asyncIterator]: async function* () {
        const pending = new Map(iterators.map((iterator, index) => [index, iterator.next().then((result) => ({ index, result }))]))
        while (pending.size > 0) {
          const { index, result } = await Promise.race(pending.values())
          if (result.done === true) {
            pending.delete(index)
            continue
          }
          pending.set(
            index,
            iterators[index]!.next().then((next) => ({ index, result: next })),
          )
          yield result.value
        }
      },
    }
  }

  stats(): EndpointStats {
    const total: EndpointStats = {
      queued: 0,
      dropped: 0,
      framesDropped: 0,
      reconnects: 0,
      refused: 0,
      inFlight: 0,
      peers: 0,
      subscriptions: 0,
      peersRefused: 0,
      peersDropped: 0,
      slowConsumers: 0,
      coalesced: 0,
    }
    for (const server of this.servers) {
      const stats = server.stats()
      for (const key of Object.keys(total) as Array<keyof EndpointStats>) total[key] += stats[key]
    }
    return total
  }
}
