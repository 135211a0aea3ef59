/** Salt's `schedule` module: the minion's schedule at run time (persisted unless `persist=False`). */
import { ScheduleError } from '@brine/common'
import { cleanKwargs } from './args.js'
import { InvocationError } from '../errors.js'
import type { JobContext, ModuleDefinition, ScheduleControl } from './types.js'

function control(ctx: JobContext): ScheduleControl {
  if (ctx.schedule === undefined) throw new InvocationError('this minion has no schedule (not running as a daemon)')
  return ctx.schedule
}

const persistOf = (kwargs: Record<string, unknown>): boolean => kwargs['persist'] !== false && kwargs['persist'] !== 'False' && kwargs['persist'] !== 'false'
const outcome = (result: boolean, comment: string, changes: Record<string, unknown> = {}): Record<string, unknown> => ({ comment, result, changes })

/** schedule.add's keyword arguments → a schedule entry (Salt names them job_args and job_kwargs there). */
function entryOf(kwargs: Record<string, unknown>): Record<string, unknown> {
  const { persist: _persist, job_args: jobArgs, job_kwargs: jobKwargs, ...rest } = kwargs
  return { ...rest, ...(jobArgs === undefined ? {} : { args: jobArgs }), ...(jobKwargs === undefined ? {} : { kwargs: jobKwargs }) }
}

async function add(name: unknown, kwargs: Record<string, unknown>, ctx: JobContext): Promise<Record<string, unknown>> {
  const schedule = control(ctx)
  const job = String(name)
  if (schedule.get(job) !== undefined) return outcome(false, `Job ${job} already exists in schedule.`)
  try {
    await schedule.add(job, entryOf(kwargs), persistOf(kwargs))
  } catch (error) {
    if (error instanceof ScheduleError) return outcome(false, error.message)
    throw error
  }
  return outcome(true, `Added job: ${job} to schedule.`, { [job]: 'added' })
}

async function setJob(name: unknown, enabled: boolean, kwargs: Record<string, unknown>, ctx: JobContext): Promise<Record<string, unknown>> {
  const job = String(name)
  const found = await control(ctx).setJobEnabled(job, enabled, persistOf(kwargs))
  if (!found) return outcome(false, `Job ${job} does not exist.`)
  return outcome(true, `${enabled ? 'Enabled' : 'Disabled'} Job ${job} in schedule.`, { [job]: enabled ? 'enabled' : 'disabled' })
}

export const scheduleModule: ModuleDefinition = {
  add: {
    doc: "Add a job to the schedule: function, seconds/minutes/hours/days or cron, job_args, job_kwargs, splay, maxrunning, return_job, enabled; persist=False keeps it until restart.\n\nCLI Example:\n\n    brine '*' schedule.add job1 function='test.ping' seconds=3600\n    brine '*' schedule.add job2 function='cmd.run' job_args=\"['date']\" cron='*/5 * * * *'",
    args: ['name'],
    kwargs: true,
    run: async ([name], kwargs, ctx) => add(name, cleanKwargs(kwargs), ctx),
  },
  delete: {
    doc: "Delete a job from the schedule.\n\nCLI Example:\n\n    brine '*' schedule.delete job1",
    args: ['name'],
    kwargs: true,
    run: async ([name], kwargs, ctx) => {
      const job = String(name)
      if (!(await control(ctx).delete(job, persistOf(cleanKwargs(kwargs))))) return outcome(false, `Job ${job} does not exist.`)
      return outcome(true, `Deleted Job ${job} from schedule.`, { [job]: 'removed' })
    },
  },
  list: {
    doc: "List the jobs in the schedule (Brine returns the mapping, not YAML text).\n\nCLI Example:\n\n    brine '*' schedule.list",
    kwargs: true,
    run: async (_args, _kwargs, ctx) => ({ schedule: control(ctx).list() }),
  },
  enable: {
    doc: "Enable all scheduled jobs on the minion.\n\nCLI Example:\n\n    brine '*' schedule.enable",
    kwargs: true,
    run: async (_args, kwargs, ctx) => {
      await control(ctx).setEnabled(true, persistOf(cleanKwargs(kwargs)))
      return outcome(true, 'Enabled schedule on minion.', { schedule: 'enabled' })
    },
  },
  disable: {
    doc: "Disable all scheduled jobs on the minion.\n\nCLI Example:\n\n    brine '*' schedule.disable",
    kwargs: true,
    run: async (_args, kwargs, ctx) => {
      await control(ctx).setEnabled(false, persistOf(cleanKwargs(kwargs)))
      return outcome(true, 'Disabled schedule on minion.', { schedule: 'disabled' })
    },
  },
  enable_job: {
    doc: "Enable a job in the schedule.\n\nCLI Example:\n\n    brine '*' schedule.enable_job job1",
    args: ['name'],
    kwargs: true,
    run: async ([name], kwargs, ctx) => setJob(name, true, cleanKwargs(kwargs), ctx),
  },
  disable_job: {
    doc: "Disable a job in the schedule.\n\nCLI Example:\n\n    brine '*' schedule.disable_job job1",
    args: ['name'],
    kwargs: true,
    run: async ([name], kwargs, ctx) => setJob(name, false, cleanKwargs(kwargs), ctx),
  },
  run_job: {
    doc: "Run a scheduled job on the minion now; a disabled job runs only with force=True.\n\nCLI Example:\n\n    brine '*' schedule.run_job job1 force=True",
    args: ['name'],
    kwargs: true,
    run: async ([name], kwargs, ctx) => {
      const job = String(name)
      const schedule = control(ctx)
      const entry = schedule.get(job)
      if (entry === undefined) return outcome(false, `Job ${job} does not exist.`)
      const force = kwargs['force'] === true || kwargs['force'] === 'True'
      if (!entry.enabled && !force) return outcome(false, `Job ${job} is disabled.`)
      schedule.runNow(job)
      return outcome(true, `Scheduling Job ${job} on minion.`)
    },
  },
}
