import { createRequire } from 'node:module'
import type { SingleBar } from 'cli-progress'
import type { CommandIO, OutputStream } from './io.js'

// cli-progress is loaded on the first draw: a run whose stderr is not a terminal (a script, `--static`) never pays for it.
const load = createRequire(import.meta.url)
let singleBar: typeof SingleBar | undefined
const SingleBarClass = (): typeof SingleBar => (singleBar ??= (load('cli-progress') as typeof import('cli-progress')).SingleBar)

/**
 * A live status line on a terminal's stderr (cli-progress), kept out of the way of stdout: `write`
 * clears it, prints, and draws it again, so it never mixes into the output. Disabled (stderr not a
 * TTY, or `--static`), `write` only prints and the rest does nothing.
 *
 * `format` is cli-progress's: `{value}`, `{total}`, `{bar}` and any payload field, e.g. `{running}`.
 */
export class LiveLine {
  readonly #io: CommandIO
  readonly #format: string
  readonly #enabled: boolean
  #bar: SingleBar | undefined
  #total = 0
  #value = 0
  #payload: Record<string, unknown> = {}

  constructor(io: CommandIO, format: string, options: { enabled?: boolean } = {}) {
    this.#io = io
    this.#format = format
    this.#enabled = options.enabled ?? io.stderr.isTTY === true
  }

  /** Shows the line with `total`, `value` and `payload`. */
  start(total: number, value = 0, payload: Record<string, unknown> = {}): void {
    this.#total = total
    this.#set(value, payload)
    if (!this.#enabled) return
    this.#bar?.stop()
    this.#draw()
  }

  /** Redraws the line with a new value (and payload fields). */
  set(value: number, payload: Record<string, unknown> = {}): void {
    this.#set(value, payload)
    if (this.#bar === undefined) return
    this.#bar.stop()
    this.#draw()
  }

  /**
   * Prints `text` on stdout (or `to`: an `--out-file`) with the line cleared first and drawn again after, with
   * `value` and `payload` when given.
   */
  write(text: string, options: { value?: number; payload?: Record<string, unknown>; to?: OutputStream } = {}): void {
    if (options.value !== undefined) this.#set(options.value, options.payload ?? {})
    const shown = this.#bar !== undefined
    this.#bar?.stop()
    const to = options.to ?? this.#io.stdout
    to.write(text)
    if (shown) this.#draw()
  }

  /** Clears the line for good. */
  stop(): void {
    this.#bar?.stop()
    this.#bar = undefined
  }

  #set(value: number, payload: Record<string, unknown>): void {
    this.#value = value
    this.#payload = { ...this.#payload, ...payload }
  }

  #draw(): void {
    this.#bar = new (SingleBarClass())({ format: this.#format, stream: this.#io.stderr as NodeJS.WritableStream, clearOnComplete: true, hideCursor: null })
    this.#bar.start(this.#total, this.#value, this.#payload)
  }
}
