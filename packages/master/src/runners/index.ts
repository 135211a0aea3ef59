import { MalformedRequestError, UnknownRunnerError } from '@brine/protocol'
import type { RunnerArgs, RunnerContext, RunnerFunction } from './context.js'
import { CACHE_RUNNERS } from './cache.js'
import { FILESERVER_RUNNERS } from './fileserver.js'
import { JOBS_RUNNERS } from './jobs.js'
import { MANAGE_RUNNERS } from './manage.js'
import { AUTOMATION_RUNNERS } from './automation.js'
import { TEST_RUNNERS } from './test.js'
import { SYNDICS_RUNNERS } from './syndics.js'

export { jidToTime, parseTimeArgument, formatJob } from './jobs.js'
export { compareVersions } from './manage.js'
export type { GatheredJob, RunnerArgs, RunnerContext, RunnerFunction } from './context.js'
export { timeoutOf, waitsOf } from './context.js'

/** Every runner function the master provides, by Salt's `module.function` name. */
export const RUNNERS: Readonly<Record<string, RunnerFunction>> = {
  ...JOBS_RUNNERS,
  ...MANAGE_RUNNERS,
  ...FILESERVER_RUNNERS,
  ...SYNDICS_RUNNERS,
  ...TEST_RUNNERS,
  ...CACHE_RUNNERS,
  ...AUTOMATION_RUNNERS,
}

/** Looks `fun` up; an unknown name is an UnknownRunnerError listing what exists. */
export function findRunner(fun: unknown): RunnerFunction {
  if (typeof fun !== 'string' || fun === '') throw new MalformedRequestError('runner load', "field 'fun' must be a runner name, e.g. jobs.list_jobs")
  const runner = Object.hasOwn(RUNNERS, fun) ? RUNNERS[fun] : undefined
  if (runner === undefined) throw new UnknownRunnerError(fun, Object.keys(RUNNERS).sort())
  return runner
}

export async function runRunner(fun: string, args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  return findRunner(fun)(args, context)
}
