/**
 * The syndic's master's other events (neither a job's nor a lower syndic's announcement), forwarded once to
 * every upper master that is connected, as `_syndic_event` requests every `syndic_event_forward_timeout`.
 * Best effort, as in Salt: bounded while they wait, and an event too big for a frame or with a tag the master
 * above would refuse is dropped here, logged.
 */
import { JOB_TAG_PREFIX, tagProblem, type BusEvent, type EventLoad } from '@brine/protocol'
import { encodedBytes, RETURN_FRAME_RESERVE_BYTES, type MasterLink } from '@brine/link'
import type { Logger } from '@brine/core'

/** Other events held for forwarding at most; past it the oldest are dropped (they are best effort, as in Salt). */
const RAW_EVENTS_LIMIT = 10_000
/** Events per `_syndic_event` request. */
const RAW_EVENTS_PER_SEND = 1000

export interface EventForwarderOptions {
  /** The syndic's id, as the requests name it. */
  id: string
  /** max_frame_bytes: what one request may hold. */
  maxFrameBytes: number
  /** The links to the upper masters now. */
  links: () => Iterable<MasterLink>
  logger: Logger
  signal: AbortSignal
  /** Background work the syndic waits for as it stops. */
  track: (task: Promise<unknown>) => void
}

export class EventForwarder {
  readonly #o: EventForwarderOptions
  readonly #waiting: EventLoad[] = []
  #dropped = 0

  constructor(options: EventForwarderOptions) {
    this.#o = options
  }

  /** Holds `event` for the next forward; the master's own job events stay here (a job goes up as announcements and returns). */
  add(event: BusEvent): void {
    if (event.tag.startsWith(JOB_TAG_PREFIX)) return
    this.#waiting.push({ tag: event.tag, data: event.data })
    if (this.#waiting.length > RAW_EVENTS_LIMIT) {
      this.#waiting.shift()
      this.#dropped++
    }
  }

  /** Sends what waits, once, to every upper master that is connected and authenticated. */
  forward(): void {
    const { logger, signal, id } = this.#o
    if (this.#dropped > 0) {
      logger.warning(`${this.#dropped} event(s) of this master not forwarded: more than ${RAW_EVENTS_LIMIT} were waiting`)
      this.#dropped = 0
    }
    if (this.#waiting.length === 0) return
    const events = this.#take()
    if (events.length === 0) return
    for (const link of this.#o.links()) {
      const status = link.status
      if (!status.authenticated || !status.connected) continue
      this.#o.track(
        link.send({ cmd: '_syndic_event', id, events }, { tries: 1 }).catch((error: unknown) => {
          if (!signal.aborted) logger.debug(`${events.length} event(s) not forwarded to ${link.master}: ${(error as Error).message}`)
        }),
      )
    }
  }

  /**
   * The next events to forward: at most {@link RAW_EVENTS_PER_SEND}, within one frame of `max_frame_bytes`.
   * An event too big for a frame on its own, or whose tag the master above would refuse, is dropped here.
   */
  #take(): EventLoad[] {
    const budget = Math.max(1024, this.#o.maxFrameBytes - RETURN_FRAME_RESERVE_BYTES)
    const events: EventLoad[] = []
    let bytes = 0
    while (events.length < RAW_EVENTS_PER_SEND && this.#waiting.length > 0) {
      const size = this.#sizeOrDrop(this.#waiting[0]!, budget)
      if (size === undefined) continue
      if (bytes + size > budget) break
      events.push(this.#waiting.shift()!)
      bytes += size
    }
    return events
  }

  /** The encoded size of the first waiting event, or undefined when it cannot go up (and was dropped). */
  #sizeOrDrop(event: EventLoad, budget: number): number | undefined {
    // The master above refuses a batch holding a tag that is not printable text: leave such an event here.
    const problem = tagProblem(event.tag)
    if (problem !== undefined) {
      this.#waiting.shift()
      this.#o.logger.warning(`event ${JSON.stringify(event.tag.slice(0, 120))} of this master not forwarded: its tag ${problem}`)
      return undefined
    }
    const size = encodedBytes(event)
    if (size > budget) {
      this.#waiting.shift()
      this.#o.logger.warning(
        `event ${event.tag.slice(0, 120)} of this master not forwarded: ${size} bytes, more than fits in max_frame_bytes (${this.#o.maxFrameBytes})`,
      )
      return undefined
    }
    return size
  }
}
