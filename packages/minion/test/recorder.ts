/** Records an event stream (a minion's or a master link's) so a test can wait for the first event of a kind. */
import { deadline } from './modules-fixture.js'

export class Recorder<E extends { type: string }> {
  readonly events: E[] = []
  readonly #waiters = new Set<() => void>()

  constructor(source: { events(): AsyncIterable<E> }) {
    void (async () => {
      for await (const event of source.events()) {
        this.events.push(event)
        for (const waiter of this.#waiters) waiter()
      }
    })()
  }

  of<T extends E['type']>(type: T): Extract<E, { type: T }>[] {
    return this.events.filter((event): event is Extract<E, { type: T }> => event.type === type)
  }

  async waitFor<T extends E['type']>(
    type: T,
    predicate: (event: Extract<E, { type: T }>) => boolean = () => true,
    what: string = type,
    ms = 8000,
  ): Promise<Extract<E, { type: T }>> {
    let wake: () => void = () => {}
    const waiter = (): void => wake()
    this.#waiters.add(waiter)
    try {
      return await deadline(
        (async () => {
          for (;;) {
            const found = this.of(type).find(predicate)
            if (found !== undefined) return found
            await new Promise<void>((resolve) => (wake = resolve))
          }
        })(),
        ms,
        `event ${what}`,
      )
    } finally {
      this.#waiters.delete(waiter)
    }
  }
}
