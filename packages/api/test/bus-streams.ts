import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MasterEvent } from '@brine/client'
import { EventBus } from '../../master/src/index.js'
import { EventStreams } from '../src/sse.js'

/**
 * A real bus in a fresh `sock_dir` and the API's event hub reading it, started; each part's stop pushed onto `cleanup`
 * (run in reverse by the caller's afterEach).
 */
export async function startBusAndStreams(
  cleanup: Array<() => Promise<void>>,
  options: { bufferBytes: number; maxStreams: number },
): Promise<{ bus: EventBus; streams: EventStreams }> {
  const sockDir = await mkdtemp(join(tmpdir(), 'bs-'))
  cleanup.push(() => rm(sockDir, { recursive: true, force: true }))
  const bus = new EventBus({ sockDir })
  await bus.start()
  cleanup.push(() => bus.close())
  const events = new MasterEvent({ sockDir })
  cleanup.push(() => events.close())
  const streams = new EventStreams({ events, ...options, recheckMs: 60_000, tokenLive: async () => true })
  streams.start()
  cleanup.push(() => streams.close())
  return { bus, streams }
}
