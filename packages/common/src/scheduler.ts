import { silentLogger, type Logger } from '@brine/core'
import { nextScheduleRun, type ScheduleEntry } from './schedule.js'

/** Longest delay setTimeout holds (2^31-1 ms); a later run is reached in steps of it. */
const MAX_TIMER_MS = 2 ** 31 - 1

export interface SchedulerOptions {
  /** Runs one entry (its function, its return); a rejection is logged, never thrown. */
  run(entry: ScheduleEntry): Promise<void>
  logger?: Logger
  /** ms since the epoch (default Date.now). */
  now?: () => number
}

interface Armed {
  entry: ScheduleEntry
  timer: NodeJS.Timeout | undefined
  running: number
}

/**
 * The timing half of Salt's schedule, shared by the minion (execution functions) and the master (runners): one
 * timer per entry, armed for its next interval or cron time plus splay; a run is skipped while the schedule or
 * the entry is disabled, or while `maxrunning` runs of it are still going. What a run does is the owner's.
 */
export class Scheduler {
  readonly #o: SchedulerOptions
  readonly #logger: Logger
  readonly #armed = new Map<string, Armed>()
  #enabled = true
  #started = false

  constructor(options: SchedulerOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
  }

  get enabled(): boolean {
    return this.#enabled
  }

  /** Salt's `schedule.enable` / `schedule.disable`: every entry runs, or none does (their timers keep time). */
  setEnabled(enabled: boolean): void {
    this.#enabled = enabled
  }

  entries(): ScheduleEntry[] {
    return [...this.#armed.values()].map((armed) => armed.entry)
  }

  get(name: string): ScheduleEntry | undefined {
    return this.#armed.get(name)?.entry
  }

  /** Adds or replaces an entry (a replaced one keeps counting its runs still going). */
  set(entry: ScheduleEntry): void {
    const old = this.#armed.get(entry.name)
    if (old?.timer !== undefined) clearTimeout(old.timer)
    const armed: Armed = { entry, timer: undefined, running: old?.running ?? 0 }
    this.#armed.set(entry.name, armed)
    if (this.#started) this.#arm(armed)
  }

  delete(name: string): boolean {
    const armed = this.#armed.get(name)
    if (armed?.timer !== undefined) clearTimeout(armed.timer)
    return this.#armed.delete(name)
  }

  /** Arms every entry; those with `run_on_start` run at once. */
  start(): void {
    if (this.#started) return
    this.#started = true
    for (const armed of this.#armed.values()) {
      if (armed.entry.runOnStart) this.#fire(armed, false)
      this.#arm(armed)
    }
  }

  stop(): void {
    this.#started = false
    for (const armed of this.#armed.values()) {
      if (armed.timer !== undefined) clearTimeout(armed.timer)
      armed.timer = undefined
    }
  }

  /** Salt's `schedule.run_job`: runs entry `name` now, whether enabled or not (still within maxrunning); false if unknown. */
  runNow(name: string): boolean {
    const armed = this.#armed.get(name)
    if (armed === undefined) return false
    this.#fire(armed, true)
    return true
  }

  #arm(armed: Armed, from = (this.#o.now ?? Date.now)()): void {
    const at = nextScheduleRun(armed.entry, from)
    if (at === undefined) return
    const delay = Math.max(0, at - from)
    armed.timer = setTimeout(
      () => {
        armed.timer = undefined
        if (this.#armed.get(armed.entry.name) !== armed || !this.#started) return
        if (delay > MAX_TIMER_MS) return this.#arm(armed, from + MAX_TIMER_MS)
        this.#fire(armed, false)
        this.#arm(armed)
      },
      Math.min(delay, MAX_TIMER_MS),
    )
    armed.timer.unref?.()
  }

  #fire(armed: Armed, forced: boolean): void {
    const { entry } = armed
    if (!forced && (!this.#enabled || !entry.enabled)) return
    if (armed.running >= entry.maxrunning) {
      this.#logger.info(`schedule ${entry.name}: maxrunning (${entry.maxrunning}) runs are still going; this run is skipped`)
      return
    }
    armed.running++
    void this.#o
      .run(entry)
      .catch((error: unknown) => this.#logger.warning(`schedule ${entry.name}: ${entry.function} failed: ${(error as Error).message}`))
      .finally(() => armed.running--)
  }
}
