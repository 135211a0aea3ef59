/**
 * Runs one job's function the way Salt's minion does (`Minion._thread_return`): arguments parsed
 * like `load_args_and_kwargs`, the job listed in the running-job table while it runs, and the
 * outcome in Salt's return shape with Salt's messages and retcodes.
 */
import { bindArguments, isPlainObject, loadArgsAndKwargs } from './modules/args.js'
import { ArgumentError, CommandExecutionError, InvocationError, abortReason } from './errors.js'
import type { JobContext, ModuleContext, ModuleRegistry } from './modules/types.js'
import { settleWithin } from '@brine/core'

/** Salt's EX_GENERIC: the retcode of a job whose function is missing, failed or was killed. */
export const EX_GENERIC = 1

/** The publish load's job part: Salt's `fun`, `arg`, `jid`, plus `kwarg` and any of `tgt`, `user`, …. */
export interface JobRequest {
  jid: string
  fun: string
  /** Positional args; `key=value` strings and `{__kwarg__: true, …}` dicts become keyword args. */
  arg?: readonly unknown[]
  /** Keyword args sent apart from `arg`, as Brine's LocalClient does. */
  kwarg?: Readonly<Record<string, unknown>>
  tgt?: unknown
  tgt_type?: string
  user?: string
  ret?: string
  [key: string]: unknown
}

/** Salt's return fields for one job. */
export interface JobResult {
  return: unknown
  retcode: number
  success: boolean
  /** Outputter hint (`nested` for errors), as Salt sets it. */
  out?: string
  /**
   * The job was aborted (saltutil.kill_job or shutdown) before it finished. Salt's killed job
   * never returns; the caller decides whether to send this return or stay silent like Salt.
   */
  killed?: true
}

export interface ExecuteOptions {
  /** Aborts this job alone (in addition to kill_job and the registry's minion-wide signal). */
  signal?: AbortSignal
  /** How long a killed job's function may take to wind down before the job returns anyway (ms, default 5000). */
  killGraceMs?: number
}

/** Python's repr() of an exception, as in Salt's "caused an exception: Exception('boom')". */
function exceptionRepr(error: unknown): string {
  if (!(error instanceof Error)) return `Exception(${quote(String(error))})`
  return `${error.name}(${quote(error.message)})`
}

function quote(text: string): string {
  return `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'").replaceAll('\n', '\\n')}'`
}

function missingFunction(registry: ModuleRegistry, fun: string): unknown {
  const failed = registry.loadError(fun.slice(0, Math.max(0, fun.indexOf('.'))))
  const missing = failed === undefined ? `'${fun}' is not available.` : `'${fun}' is not available: its module failed to load: ${failed}`
  // Salt answers a near miss with the docs of what does exist under that prefix.
  const near = registry.names().filter((name) => name.startsWith(fun))
  if (near.length === 0) return missing
  const docs: Record<string, string> = Object.fromEntries(near.map((name) => [name, registry.get(name)?.doc ?? '']))
  docs[fun] = missing
  return docs
}

/** How long a killed job's function may take to wind down before the job returns anyway. */
const KILL_GRACE_MS = 5_000

/**
 * The context a job's function receives: the module context's fields, the job's own signal (made on
 * first use) and Salt's `__context__` pieces. A class, not an object literal with a getter: building
 * that literal per job cost more than running test.ping.
 */
class RunningJobContext implements JobContext {
  readonly id: string
  readonly grains: ModuleContext['grains']
  readonly opts: ModuleContext['opts']
  readonly logger: ModuleContext['logger']
  readonly jobs: ModuleContext['jobs']
  readonly master: ModuleContext['master']
  readonly fireMaster: ModuleContext['fireMaster']
  readonly schedule: ModuleContext['schedule']
  retcode = 0
  readonly #signalOf: () => AbortSignal

  constructor(
    context: ModuleContext,
    readonly jid: string,
    readonly fun: string,
    readonly registry: ModuleRegistry,
    signalOf: () => AbortSignal,
  ) {
    this.id = context.id
    this.grains = context.grains
    this.opts = context.opts
    this.logger = context.logger
    this.jobs = context.jobs
    this.master = context.master
    this.fireMaster = context.fireMaster
    this.schedule = context.schedule
    this.#signalOf = signalOf
  }

  get signal(): AbortSignal {
    return this.#signalOf()
  }

  trackChild(pid: number): void {
    this.jobs.addChild(this.jid, pid)
  }

  untrackChild(pid: number): void {
    this.jobs.removeChild(this.jid, pid)
  }
}

/** How a job's function ended, or that the job was aborted first. */
type Outcome = { value: unknown } | { error: unknown } | typeof ABORTED
const ABORTED = 'aborted'

/** Runs `job.fun` from `registry` and returns Salt's `{return, retcode, success, out?}`. */
export async function executeJob(registry: ModuleRegistry, job: JobRequest, options: ExecuteOptions = {}): Promise<JobResult> {
  const context = registry.context
  // The abort controller is made only if the function asks for its signal (jobContext.signal) or the
  // job is killed: most never do, and one per job costs more than running test.ping. A kill reaches
  // the job through `abort`, which also settles `outcome` below.
  let controller: AbortController | undefined
  let abortedWith: { reason: unknown } | undefined
  const signalOf = (): AbortSignal => {
    if (controller === undefined) {
      controller = new AbortController()
      if (abortedWith !== undefined) controller.abort(abortedWith.reason)
    }
    return controller.signal
  }
  let settle: (outcome: Outcome) => void = () => {}
  const outcome = new Promise<Outcome>((resolve) => (settle = resolve))
  const abort = (reason: unknown): void => {
    if (abortedWith !== undefined) return
    abortedWith = { reason }
    controller?.abort(reason)
    settle(ABORTED)
  }
  // The registry's own signal (the minion stopping) aborts every registered job through RunningJobs.
  const outer = options.signal !== undefined && options.signal !== context.signal ? options.signal : undefined
  const onOuterAbort = (): void => abort(outer?.reason)
  outer?.addEventListener('abort', onOuterAbort, { once: true })
  // Listed with the arguments as sent: the function gets a copy of its own.
  const unregister = context.jobs.register(job, abort)
  if (context.signal?.aborted === true) abort(context.signal.reason)
  else if (outer?.aborted === true) abort(outer.reason)
  try {
    const fn = registry.get(job.fun)
    if (fn === undefined) {
      return { return: missingFunction(registry, job.fun), retcode: EX_GENERIC, success: false, out: 'nested' }
    }
    const jobContext = new RunningJobContext(context, job.jid, job.fun, registry, signalOf)
    try {
      const args = [...(job.arg ?? [])]
      if (job.kwarg !== undefined && Object.keys(job.kwarg).length > 0) args.push({ ...job.kwarg, __kwarg__: true })
      const loaded = loadArgsAndKwargs(fn, args, fn.kwargs === true ? withoutKwarg(job) : undefined)
      const bound = bindArguments(fn, loaded.args, loaded.kwargs)
      const running = fn.run(bound.args, bound.kwargs, jobContext)
      // Whichever comes first; a late rejection after a kill is handled here too, never unhandled.
      running.then(
        (value) => settle({ value }),
        (error: unknown) => settle({ error }),
      )
      const settled = await outcome
      if (settled === ABORTED) {
        // Give the function a moment to clean up (reap its children) before the job reports.
        await settleWithin(running, options.killGraceMs ?? KILL_GRACE_MS)
        throw abortReason(signalOf(), job.jid)
      }
      if ('error' in settled) throw settled.error
      const value = settled.value
      let retcode = jobContext.retcode
      // No retcode set: a dict with result/success false still fails the job, as in Salt.
      if (retcode === 0 && isPlainObject(value) && (value.result === false || value.success === false)) {
        retcode = EX_GENERIC
      }
      const result: JobResult = { return: value, retcode, success: retcode === 0 }
      if (fn.outputter !== undefined) result.out = fn.outputter
      return result
    } catch (error) {
      return failure(job, fn.doc, error, signalOf(), context.logger.child(`job ${job.jid}`))
    }
  } finally {
    unregister()
    outer?.removeEventListener('abort', onOuterAbort)
  }
}

/** The publish fields a function taking **kwargs sees as `__pub_*`: all but `kwarg`, as Salt passes them. */
function withoutKwarg(job: JobRequest): Record<string, unknown> {
  const { kwarg: _kwarg, ...publish } = job
  return publish
}

function failure(job: JobRequest, doc: string, error: unknown, signal: AbortSignal, logger: JobContext['logger']): JobResult {
  const failed = (message: string): JobResult => ({ return: message, retcode: EX_GENERIC, success: false, out: 'nested' })
  if (signal.aborted) {
    const reason = abortReason(signal, job.jid)
    logger.info(`job ${job.jid} (${job.fun}) was killed: ${reason.message}`)
    return { ...failed(`ERROR: ${reason.message}`), killed: true }
  }
  if (error instanceof ArgumentError) {
    logger.warning(`Passed invalid arguments to ${job.fun}: ${error.message}`)
    return failed(`Passed invalid arguments to ${job.fun}: ${error.message}\n${doc}`)
  }
  if (error instanceof InvocationError) {
    logger.error(`Problem executing '${job.fun}': ${error.message}`)
    return failed(`ERROR executing '${job.fun}': ${error.message}`)
  }
  if (error instanceof CommandExecutionError) {
    logger.error(`A command in '${job.fun}' had a problem: ${error.message}`)
    return failed(`ERROR: ${error.message}`)
  }
  const message = `The minion function caused an exception: ${exceptionRepr(error)}`
  logger.warning(message, error)
  const trace = error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error)
  return failed(`${message}: ${trace}`)
}
