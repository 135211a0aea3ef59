import { DEFAULT_SALTENV } from '@brine/protocol'
import { MalformedRequestError } from '@brine/protocol'
import type { FileServer } from '../file-server/file-server.js'
import { param, type RunnerArgs, type RunnerContext, type RunnerFunction } from './context.js'

function filesOf(context: RunnerContext, fun: string): FileServer {
  if (context.files === undefined) throw new MalformedRequestError(`runner ${fun}`, 'this master has no file server')
  return context.files
}

/** `saltenv` (Salt 3006's name; `backend` is accepted and ignored: roots is the only backend). */
function saltenvOf(args: RunnerArgs, fun: string): string {
  const value = param(args, 0, 'saltenv') ?? DEFAULT_SALTENV
  if (typeof value !== 'string' || value === '') throw new MalformedRequestError(`runner ${fun} arguments`, "'saltenv' must be an environment name")
  return value
}

/** Salt's fileserver.file_list / dir_list: what the roots of `saltenv` hold, sorted. */
const listing =
  (kind: 'files' | 'dirs', fun: string): RunnerFunction =>
  async (args, context) =>
    filesOf(context, fun).roots.list(saltenvOf(args, fun), kind)

export const FILESERVER_RUNNERS: Record<string, RunnerFunction> = {
  'fileserver.file_list': listing('files', 'fileserver.file_list'),
  'fileserver.dir_list': listing('dirs', 'fileserver.dir_list'),
  'fileserver.envs': async (_args, context) => filesOf(context, 'fileserver.envs').roots.envs(),
  // Brine's own: what the file server has served and received since the master started.
  'fileserver.stats': async (_args, context) => filesOf(context, 'fileserver.stats').stats(),
}
