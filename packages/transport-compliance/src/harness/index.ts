import type {
  Endpoint,
  PublishClient,
  PublishClientOptions,
  PublishServer,
  PublishServerOptions,
  RequestClient,
  RequestClientOptions,
  RequestHandler,
  RequestServer,
  RequestServerOptions,
  Transport,
} from '@brine/transport'
import type { WireValue } from '@brine/core'
import { canBind, deadline, portOf } from '@brine/testkit'
import type { ComplianceSetup } from '../setup.js'
import { Recorder } from './recorder.js'

export const HOST = '127.0.0.1'
/** Generous bound for one wait on a loaded 2-core machine; a failure limit, never a measurement. */
export const WAIT_MS = 15_000

export interface Tracked<T extends Endpoint> {
  endpoint: T
  recorder: Recorder
}

export interface TrackedServer<T extends Endpoint> extends Tracked<T> {
  port: number
}

/** A publish client with everything it received so far. */
export interface Subscriber extends Tracked<PublishClient> {
  received: WireValue[]
  /** Waits until `count` loads have arrived in total. */
  waitForLoads(count: number, what: string): Promise<WireValue[]>
  /** Starts reading (done at creation unless `stalled`). */
  consume(): void
}

export interface Harness {
  readonly setup: ComplianceSetup
  transport(): Promise<Transport>
  requestServer(handler: RequestHandler, options?: Partial<RequestServerOptions>): Promise<TrackedServer<RequestServer>>
  requestClient(port: number, options?: Partial<RequestClientOptions>): Promise<Tracked<RequestClient>>
  publishServer(options?: Partial<PublishServerOptions>): Promise<TrackedServer<PublishServer>>
  subscriber(port: number, id: string | undefined, options?: Partial<PublishClientOptions> & { stalled?: boolean }): Promise<Subscriber>
  /** Tracks and starts a server the test created itself (e.g. on a fixed port). */
  adopt<T extends RequestServer | PublishServer>(server: T): Promise<TrackedServer<T>>
  /** Waits until the publish server has seen `count` subscriptions to non-broadcast topics (ids). */
  waitForSubscribers(server: Tracked<PublishServer>, count: number, from?: number): Promise<void>
  /** Closes everything this test created, newest first, and checks each server port is free again. */
  cleanup(): Promise<void>
}

export function createHarness(setup: ComplianceSetup): Harness {
  let transport: Promise<Transport> | undefined
  let endpoints: Endpoint[] = []
  let serverPorts: number[] = []

  const getTransport = (): Promise<Transport> => (transport ??= Promise.resolve(setup.create()))

  const track = <T extends Endpoint>(endpoint: T): Tracked<T> => {
    endpoints.push(endpoint)
    return { endpoint, recorder: new Recorder(endpoint) }
  }

  const harness: Harness = {
    setup,
    transport: getTransport,

    async requestServer(handler, options = {}) {
      const server = (await getTransport()).createRequestServer({ host: HOST, port: 0, ...options })
      server.handle(handler)
      const tracked = track(server)
      await deadline(server.start(), WAIT_MS, `${setup.name} request server to bind`)
      const port = portOf(server)
      serverPorts.push(port)
      return { ...tracked, port }
    },

    async requestClient(port, options = {}) {
      const client = (await getTransport()).createRequestClient({ host: HOST, port, ...options })
      const tracked = track(client)
      await deadline(client.start(), WAIT_MS, `${setup.name} request client to start`)
      return tracked
    },

    async publishServer(options = {}) {
      const server = (await getTransport()).createPublishServer({ host: HOST, port: 0, ...options })
      const tracked = track(server)
      await deadline(server.start(), WAIT_MS, `${setup.name} publish server to bind`)
      const port = portOf(server)
      serverPorts.push(port)
      return { ...tracked, port }
    },

    async subscriber(port, id, options = {}) {
      const { stalled = false, ...clientOptions } = options
      const client = (await getTransport()).createPublishClient({ host: HOST, port, ...clientOptions })
      if (id !== undefined) client.subscribe(id)
      const subscriber = subscriberOf(track(client))
      if (!stalled) subscriber.consume()
      await deadline(client.start(), WAIT_MS, `${setup.name} publish client to start`)
      return subscriber
    },

    async adopt(server) {
      const tracked = track(server)
      await deadline(server.start(), WAIT_MS, `${setup.name} server to bind ${server.address}`)
      const port = portOf(server)
      serverPorts.push(port)
      return { ...tracked, port }
    },

    async waitForSubscribers(server, count, from = 0) {
      await server.recorder.until(
        () => server.recorder.count((e) => e.type === 'peer-subscribe' && e.topic !== 'broadcast', from) >= count,
        `${count} subscriber id(s) to reach the ${setup.name} publish server`,
        WAIT_MS,
      )
    },

    async cleanup() {
      const closing = endpoints.reverse()
      const ports = serverPorts
      endpoints = []
      serverPorts = []
      await closeAndCheckPorts(setup.name, closing, ports)
    },
  }
  return harness
}

/** A tracked publish client that keeps what it receives, reading once `consume()` is called. */
function subscriberOf(tracked: Tracked<PublishClient>): Subscriber {
  const received: WireValue[] = []
  let consuming = false
  return {
    ...tracked,
    received,
    consume() {
      if (consuming) return
      consuming = true
      void (async () => {
        for await (const load of tracked.endpoint) {
          received.push(load)
          tracked.recorder.poke()
        }
      })()
    },
    async waitForLoads(count, what) {
      await tracked.recorder.until(() => received.length >= count, what, WAIT_MS)
      return received
    },
  }
}

/** Closes `endpoints` (already newest first) and fails if a server port is still bound after. */
async function closeAndCheckPorts(name: string, endpoints: Endpoint[], ports: number[]): Promise<void> {
  await deadline(Promise.all(endpoints.map((endpoint) => endpoint.close())), WAIT_MS, `${name} endpoints to close`)
  for (const port of ports) {
    if (!(await canBind(port))) throw new Error(`port ${port} was still bound after its ${name} server closed`)
  }
}
