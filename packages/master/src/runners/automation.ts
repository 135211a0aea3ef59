import { tagProblem } from '@brine/protocol'
import { MalformedRequestError, PermissionDeniedError } from '@brine/protocol'
import { callerTagProblem } from '../tag-rules.js'
import { param, type RunnerArgs, type RunnerContext, type RunnerFunction } from './context.js'

const optionalString = (args: RunnerArgs, name: string): string | undefined => {
  const value = args.kwarg[name]
  return value === undefined || value === null ? undefined : String(value)
}

/**
 * jobs.audit: the audit log's records, oldest first, filtered by `user`, `fun`, `cmd` (publish, runner, wheel),
 * `result` (accepted, refused) and `jid`, at most `limit` (default 100) of the newest. Not one of Salt's runners.
 */
async function audit(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  if (context.audit === undefined) throw new MalformedRequestError('runner jobs.audit', 'this master keeps no audit log')
  const limit = args.kwarg['limit'] ?? 100
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1)
    throw new MalformedRequestError('runner jobs.audit arguments', "'limit' must be a positive integer")
  const query = {
    user: optionalString(args, 'user'),
    fun: optionalString(args, 'fun'),
    cmd: optionalString(args, 'cmd'),
    result: optionalString(args, 'result'),
    jid: optionalString(args, 'jid'),
    limit,
  }
  return context.audit.query(Object.fromEntries(Object.entries(query).filter(([, value]) => value !== undefined)))
}

/**
 * Salt's event.send runner: fires `tag` with `data` (a mapping) on the master's bus. Tags reserved for the master
 * and its minions (job and minion tags) are refused, as for the root key's fire_event.
 */
async function send(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  const tag = param(args, 0, 'tag')
  const data = param(args, 1, 'data') ?? {}
  // A tag that is no tag at all (control characters, over-long) is a malformed call; a well-formed tag of the
  // master's or its minions' own is one the caller may not fire.
  const shape = tagProblem(tag)
  if (shape !== undefined) throw new MalformedRequestError('runner event.send arguments', `'tag' ${shape}`)
  const problem = callerTagProblem(tag)
  if (problem !== undefined) throw new PermissionDeniedError('event.send', problem)
  if (typeof data !== 'object' || data === null || Array.isArray(data))
    throw new MalformedRequestError('runner event.send arguments', "'data' must be a mapping")
  context.bus.fire(tag as string, { ...(data as Record<string, unknown>) })
  return true
}

export const AUTOMATION_RUNNERS: Readonly<Record<string, RunnerFunction>> = { 'jobs.audit': audit, 'event.send': send }
