import { BrineError, registerErrors } from '@brine/core'

/** A schedule entry (config `schedule:` or `schedule.add`) that cannot run: no function, no interval, a bad cron expression. */
export class ScheduleError extends BrineError {
  override name = 'ScheduleError'
  readonly job: string

  constructor(job: string, problem: string, options?: ErrorOptions) {
    super(`schedule job ${JSON.stringify(job.slice(0, 120))}: ${problem}`, { job: job.slice(0, 120), problem }, options)
    this.job = job
  }
}

registerErrors({ ScheduleError })
