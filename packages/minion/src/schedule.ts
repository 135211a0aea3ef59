/**
 * The minion's schedule (Salt's `schedule:` in the minion config and the `schedule.*` execution functions): the
 * entries, what of them is persisted, and their timers (@brine/common's Scheduler). What a run does — the
 * function and its return to the master — is the minion's ({@link MinionScheduleOptions.run}).
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { parseScheduleEntry, scheduleEntryKeys, Scheduler, type ScheduleEntry } from '@brine/common'
import type { Logger } from '@brine/core'

/** `<cachedir>/minion/schedule.json`: what `schedule.*` changed at run time, kept across restarts. */
export const scheduleFile = (cachedir: string): string => join(cachedir, 'minion', 'schedule.json')

/** What the schedule file holds: the entries added or changed at run time, the config entries deleted, and the on/off switch. */
interface Persisted {
  enabled?: boolean
  entries?: Record<string, Record<string, unknown>>
  deleted?: string[]
}

export interface MinionScheduleOptions {
  /** The config's `schedule:` mapping. */
  config: Record<string, unknown>
  file: string
  run(entry: ScheduleEntry): Promise<void>
  logger: Logger
}

export class MinionSchedule {
  readonly #o: MinionScheduleOptions
  readonly #scheduler: Scheduler
  /** Each entry's Salt keys as given (what schedule.list shows and the file keeps). */
  readonly #raw = new Map<string, Record<string, unknown>>()
  #persisted: Persisted = {}
  #writing: Promise<void> = Promise.resolve()

  constructor(options: MinionScheduleOptions) {
    this.#o = options
    this.#scheduler = new Scheduler({ run: options.run, logger: options.logger })
  }

  /** Reads the config's entries, then the file's (which win); a bad entry is logged and left out, never fatal. */
  async load(): Promise<void> {
    try {
      this.#persisted = JSON.parse(await readFile(this.#o.file, 'utf8')) as Persisted
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
        this.#o.logger.warning(`schedule file ${this.#o.file} is unreadable (${(error as Error).message}); starting from the config's schedule`)
    }
    const deleted = new Set(this.#persisted.deleted ?? [])
    const entries = { ...this.#o.config, ...(this.#persisted.entries ?? {}) }
    for (const [name, raw] of Object.entries(entries)) {
      if (name === 'enabled' || deleted.has(name)) continue
      try {
        this.#put(name, raw)
      } catch (error) {
        this.#o.logger.warning(`${(error as Error).message}; that entry is not scheduled`)
      }
    }
    this.#scheduler.setEnabled(this.#persisted.enabled ?? this.#o.config['enabled'] !== false)
  }

  start(): void {
    this.#scheduler.start()
  }

  stop(): Promise<void> {
    this.#scheduler.stop()
    return this.#writing.catch(() => {})
  }

  get enabled(): boolean {
    return this.#scheduler.enabled
  }

  /** Adds (or replaces) entry `name`; ScheduleError when it cannot run. */
  async add(name: string, raw: Record<string, unknown>, persist: boolean): Promise<void> {
    this.#put(name, raw)
    if (persist)
      await this.#save((state) => {
        state.entries = { ...state.entries, [name]: scheduleEntryKeys(raw) }
        state.deleted = (state.deleted ?? []).filter((other) => other !== name)
      })
  }

  /** Deletes entry `name`; false when there is none. */
  async delete(name: string, persist: boolean): Promise<boolean> {
    this.#raw.delete(name)
    if (!this.#scheduler.delete(name)) return false
    if (persist)
      await this.#save((state) => {
        const { [name]: _gone, ...rest } = state.entries ?? {}
        state.entries = rest
        state.deleted = [...new Set([...(state.deleted ?? []), name])]
      })
    return true
  }

  /** Turns entry `name` on or off (Salt's enable_job / disable_job); false when there is none. */
  async setJobEnabled(name: string, enabled: boolean, persist: boolean): Promise<boolean> {
    const raw = this.#raw.get(name)
    if (raw === undefined) return false
    await this.add(name, { ...raw, enabled }, persist)
    return true
  }

  /** Turns the whole schedule on or off (Salt's schedule.enable / disable). */
  async setEnabled(enabled: boolean, persist: boolean): Promise<void> {
    this.#scheduler.setEnabled(enabled)
    if (persist) await this.#save((state) => void (state.enabled = enabled))
  }

  /** Runs entry `name` now; false when there is none. */
  runNow(name: string): boolean {
    return this.#scheduler.runNow(name)
  }

  get(name: string): ScheduleEntry | undefined {
    return this.#scheduler.get(name)
  }

  /** Every entry's Salt keys by name, and `enabled: false` when the schedule is off (what schedule.list shows). */
  list(): Record<string, unknown> {
    const out: Record<string, unknown> = Object.fromEntries([...this.#raw].map(([name, raw]) => [name, { ...scheduleEntryKeys(raw), name }]))
    if (!this.#scheduler.enabled) out['enabled'] = false
    return out
  }

  #put(name: string, raw: unknown): void {
    const entry = parseScheduleEntry(name, raw)
    this.#raw.set(name, scheduleEntryKeys(raw as Record<string, unknown>))
    this.#scheduler.set(entry)
  }

  /** Changes the persisted state and writes it (one write at a time, replaced atomically). */
  #save(change: (state: Persisted) => void): Promise<void> {
    change(this.#persisted)
    const text = JSON.stringify(this.#persisted, null, 2)
    const file = this.#o.file
    this.#writing = this.#writing
      .catch(() => {})
      .then(async () => {
        await mkdir(dirname(file), { recursive: true, mode: 0o700 })
        await writeFile(`${file}.tmp`, text, { mode: 0o600 })
        await rename(`${file}.tmp`, file)
      })
    return this.#writing
  }
}
