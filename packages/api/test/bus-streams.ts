import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MasterEvent } from '@brine/client'
import { EventBus } from '../../master/src/index.js'
import { EventStreams } from '../src/sse.js'

/**
 * A real bus in a fresh `sock_dir` and the API's event hub reading it, started; each part's stop pushed onto `cleanup`
 * (run in reverse by the caller's afterEach). `busHwm` bounds the bus's queue for each reader in events;
 * `restartBus` closes the bus and starts a new one on the same socket, as a master restart does.
 */
export async function startBusAndStreams(
  cleanup: Array<() => Promise<void>>,
  options: { bufferBytes: number; maxStreams: number; busHwm?: number },
): Promise<{ bus: EventBus; streams: EventStreams; events: MasterEvent; restartBus: () => Promise<EventBus> }> {
  const sockDir = await mkdtemp(join(tmpdir(), 'bs-'))
  cleanup.push(() => rm(sockDir, { recursive: true, force: true }))
  const startBus = async (): Promise<EventBus> => {
    const bus = new EventBus({ sockDir, ...(options.busHwm === undefined ? {} : { hwm: options.busHwm }) })
    await bus.start()
    cleanup.push(() => bus.close())
    return bus
  }
  let bus = await startBus()
  const events = new MasterEvent({ sockDir, reconnect: { initial: 20, max: 200 } })
  cleanup.push(() => events.close())
  const streams = new EventStreams({ events, bufferBytes: options.bufferBytes, maxStreams: options.maxStreams, recheckMs: 60_000, tokenLive: async () => true })
  streams.start()
  cleanup.push(() => streams.close())
  const restartBus = async (): Promise<EventBus> => {
    await bus.close()
    bus = await startBus()
    return bus
  }
  return { bus, streams, events, restartBus }
}
