/** Salt's `saltutil` module: the running-job table (running, find_job, kill_job) and grain refresh. */
import { constants as osConstants } from 'node:os'
import { fnmatch } from './args.js'
import { InvocationError } from '../errors.js'
import { collectGrains, replaceGrains } from './grains.js'
import type { RunningJobInfo } from './running-jobs.js'
import type { JobContext, ModuleDefinition } from './types.js'

/** saltutil.running: every job but the one asking, as Salt's proc files list them. */
function running(ctx: JobContext): RunningJobInfo[] {
  return ctx.jobs.list().filter((job) => job.jid !== ctx.jid)
}

function signalNumber(value: unknown): number {
  if (typeof value === 'number' && Number.isInteger(value)) return value
  const text = String(value)
  if (/^\d+$/.test(text)) return Number(text)
  const name = (text.startsWith('SIG') ? text : `SIG${text}`).toUpperCase() as NodeJS.Signals
  const number = osConstants.signals[name]
  if (number === undefined) throw new InvocationError(`unknown signal '${text}'`)
  return number
}

/** salt.modules.saltutil.signal_job: "Signal N sent to job JID at pid PID", or '' if not running. */
function signalJob(ctx: JobContext, jid: unknown, sig: unknown): string {
  const id = String(jid)
  if (id === ctx.jid) return '' // a job cannot signal itself; Salt's running() never lists it either
  const number = signalNumber(sig)
  const info = ctx.jobs.kill(id, number)
  return info === undefined ? '' : `Signal ${number} sent to job ${id} at pid ${info.pid}`
}

async function syncGrains(ctx: JobContext): Promise<string[]> {
  replaceGrains(ctx.grains, await collectGrains(ctx.id, ctx.opts))
  return []
}

export const saltutilModule: ModuleDefinition = {
  running: {
    doc: "Return the data on all running salt processes on the minion\n\nCLI Example:\n\n    brine '*' saltutil.running",
    run: async (_args, _kwargs, ctx) => running(ctx),
  },
  find_job: {
    doc: "Return the data for a specific job id that is currently running, or {} if it is not.\n\nCLI Example:\n\n    brine '*' saltutil.find_job <job id>",
    args: ['jid'],
    run: async ([jid], _kwargs, ctx) => running(ctx).find((job) => job.jid === String(jid)) ?? {},
  },
  is_running: {
    doc: "If the named function is running return the data associated with it/them. The argument can be a glob.\n\nCLI Example:\n\n    brine '*' saltutil.is_running state.highstate",
    args: ['fun'],
    run: async ([fun], _kwargs, ctx) => running(ctx).filter((job) => fnmatch(job.fun, String(fun))),
  },
  signal_job: {
    doc: "Sends a signal to the named salt job's process (and aborts it)\n\nCLI Example:\n\n    brine '*' saltutil.signal_job <job id> 15",
    args: ['jid', 'sig'],
    run: async ([jid, sig], _kwargs, ctx) => signalJob(ctx, jid, sig),
  },
  term_job: {
    doc: "Sends a termination signal (SIGTERM 15) to the named salt job's process\n\nCLI Example:\n\n    brine '*' saltutil.term_job <job id>",
    args: ['jid'],
    run: async ([jid], _kwargs, ctx) => signalJob(ctx, jid, 'SIGTERM'),
  },
  kill_job: {
    doc: "Sends a kill signal (SIGKILL 9) to the named salt job's process: the job is aborted and its child processes are killed.\n\nCLI Example:\n\n    brine '*' saltutil.kill_job <job id>",
    args: ['jid'],
    run: async ([jid], _kwargs, ctx) => signalJob(ctx, jid, 'SIGKILL'),
  },
  sync_grains: {
    doc: "Sync custom grains modules and refresh the grains. Brine has no custom grain modules to sync, so this recomputes the grains and returns [].\n\nCLI Example:\n\n    brine '*' saltutil.sync_grains",
    args: ['saltenv', 'refresh', 'extmod_whitelist', 'extmod_blacklist'],
    defaults: { saltenv: null, refresh: true, extmod_whitelist: null, extmod_blacklist: null },
    run: async (_args, _kwargs, ctx) => syncGrains(ctx),
  },
  refresh_grains: {
    doc: "Refresh the minion's grains without syncing custom grains modules\n\nCLI Example:\n\n    brine '*' saltutil.refresh_grains",
    kwargs: true,
    run: async (_args, _kwargs, ctx) => {
      await syncGrains(ctx)
      return true
    },
  },
}
