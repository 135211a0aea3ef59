/** Records an event stream (a minion's or a master link's) so a test can wait for the first event of a kind. */
import { Changes } from './changes.js'

export class Recorder<E extends { type: string }> {
  readonly events: E[] = []
  readonly #changes = new Changes()

  constructor(source: { events(): AsyncIterable<E> }) {
    void (async () => {
      for await (const event of source.events()) {
        this.events.push(event)
        this.#changes.notify()
      }
    })()
  }

  of<T extends E['type']>(type: T): Extract<E, { type: T }>[] {
    return this.events.filter((event): event is Extract<E, { type: T }> => event.type === type)
  }

  waitFor<T extends E['type']>(
    type: T,
    predicate: (event: Extract<E, { type: T }>) => boolean = () => true,
    what: string = type,
    ms = 8000,
  ): Promise<Extract<E, { type: T }>> {
    return this.#changes.until(() => this.of(type).find(predicate), `event ${what}`, ms)
  }
}
