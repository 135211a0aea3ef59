/** Salt's `saltutil` module: the running-job table (running, find_job, kill_job) and grain refresh. */
import { constants as osConstants } from 'node:os'
import { fnmatch } from './args.js'
import { InvocationError } from '../errors.js'
import { collectGrains, replaceGrains } from './grains.js'
import { reloadCustomModules } from './loader.js'
import type { RunningJobInfo } from './running-jobs.js'
import { syncModules } from './sync.js'
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

const SYNC_ARGS = ['saltenv', 'refresh', 'extmod_whitelist', 'extmod_blacklist']
const SYNC_DEFAULTS = { saltenv: null, refresh: true, extmod_whitelist: null, extmod_blacklist: null }

function saltenvOf(value: unknown): string {
  if (value === null || value === undefined) return 'base'
  if (typeof value !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(value))
    throw new InvocationError(`saltenv must be an environment name, got ${JSON.stringify(value)}`)
  return value
}

/**
 * Salt's list of what changed; when a module failed to load, `{synced, failed}` instead (Salt only
 * logs it) and the job's retcode is 1, so the failure reaches whoever ran the sync.
 */
async function syncReport(ctx: JobContext, saltenv: unknown): Promise<unknown> {
  const report = await syncModules(ctx, saltenvOf(saltenv))
  for (const skipped of report.skipped) ctx.logger.warning(`module not synced: ${skipped}`)
  if (Object.keys(report.failed).length === 0) return report.changed
  ctx.retcode = 1
  return { synced: report.changed, failed: report.failed }
}

/** The kinds sync_all reports, as Salt 3006 lists them; Brine syncs modules only. */
const SYNC_ALL_KINDS = [
  'clouds',
  'beacons',
  'modules',
  'states',
  'sdb',
  'grains',
  'renderers',
  'returners',
  'output',
  'utils',
  'log_handlers',
  'executors',
  'proxymodules',
  'engines',
  'thorium',
  'serializers',
  'matchers',
  'pillar',
  'tops',
  'wrapper',
]

export const saltutilModule: ModuleDefinition = {
  sync_modules: {
    doc: "Sync execution modules from the master's ``_modules/`` (under ``file_roots`` of ``saltenv``, default base) into ``extension_modules`` and load them at once, without a restart. Returns the list of modules changed (``modules.<name>``); if a module fails to load, ``{synced, failed}`` naming each failed module with its error (retcode 1).\n\nCLI Example:\n\n    brine '*' saltutil.sync_modules\n    brine '*' saltutil.sync_modules saltenv=dev",
    args: SYNC_ARGS,
    defaults: SYNC_DEFAULTS,
    run: async ([saltenv], _kwargs, ctx) => syncReport(ctx, saltenv),
  },
  sync_all: {
    doc: "Sync everything the minion can sync from the master; in Brine that is execution modules (the other kinds are listed empty). Returns Salt's dict of kind → changed list.\n\nCLI Example:\n\n    brine '*' saltutil.sync_all",
    args: SYNC_ARGS,
    defaults: SYNC_DEFAULTS,
    run: async ([saltenv], _kwargs, ctx) => {
      const modules = await syncReport(ctx, saltenv)
      return Object.fromEntries(SYNC_ALL_KINDS.map((kind) => [kind, kind === 'modules' ? modules : []]))
    },
  },
  refresh_modules: {
    doc: "Reload the custom execution modules from ``extension_modules`` and ``module_dirs`` without syncing. Returns True; if a module fails to load, ``{failed}`` naming it with its error (retcode 1).\n\nCLI Example:\n\n    brine '*' saltutil.refresh_modules",
    kwargs: true,
    run: async (_args, _kwargs, ctx) => {
      const report = await reloadCustomModules(ctx.registry, ctx.opts, ctx.logger)
      if (Object.keys(report.failed).length === 0) return true
      ctx.retcode = 1
      return { failed: report.failed }
    },
  },
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
