import { parseScheduleEntry, ScheduleError, Scheduler, type ScheduleEntry } from '@brine/common'
import { ConfigError } from '@brine/config'
import { silentLogger, type Logger } from '@brine/core'
import type { Caller } from './authorize.js'
import type { MasterService } from './master-service.js'

/** The master's schedule (its config's `schedule:`): runners, run as `schedule` with the master's rights and audited. */
export class MasterSchedule {
  readonly #scheduler: Scheduler

  constructor(service: Pick<MasterService, 'runner'>, entries: readonly ScheduleEntry[], logger: Logger = silentLogger) {
    this.#scheduler = new Scheduler({
      logger,
      run: async (entry) => {
        // The master's own config scheduled it: the master's rights, recorded as the schedule's.
        const caller: Caller = { user: 'schedule', auth: 'schedule', permissions: 'all', via: { client: 'schedule', name: entry.name } }
        const reply = await service.runner(caller, { fun: entry.function, arg: [...entry.args], kwarg: { ...entry.kwargs } })
        if (!reply.success) logger.warning(`schedule ${entry.name}: runner ${entry.function} (jid ${reply.jid}) failed: ${String(reply.return)}`)
      },
    })
    for (const entry of entries) this.#scheduler.set(entry)
  }

  /** Reads `schedule:` of the master's config; a bad entry is a ConfigError naming it (Salt's `enabled: false` key at the top level is honoured). */
  static entriesOf(schedule: Record<string, unknown>): { entries: ScheduleEntry[]; enabled: boolean } {
    const entries: ScheduleEntry[] = []
    for (const [name, raw] of Object.entries(schedule)) {
      if (name === 'enabled') continue
      try {
        entries.push(parseScheduleEntry(name, raw))
      } catch (error) {
        if (error instanceof ScheduleError) throw new ConfigError(`schedule: ${error.message}`, { key: 'schedule' }, { cause: error })
        throw error
      }
    }
    return { entries, enabled: schedule['enabled'] !== false }
  }

  get scheduler(): Scheduler {
    return this.#scheduler
  }

  start(): void {
    this.#scheduler.start()
  }

  stop(): void {
    this.#scheduler.stop()
  }
}
