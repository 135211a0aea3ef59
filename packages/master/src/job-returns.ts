import type { JobCache, ReturnLoad } from '@brine/common'
import { UnstorableValueError } from '@brine/returners'
import { ReturnRefusedError } from './errors.js'

/**
 * Stores `ret` in the job cache; false for a duplicate. A return no retry can store (a NaN in PostgreSQL's
 * jsonb) is a ReturnRefusedError, so its sender drops it instead of spooling it forever.
 */
export function saveReturn(jobs: JobCache, ret: ReturnLoad): Promise<boolean> {
  return jobs.saveReturn(ret.jid, ret.id, ret).catch((error: unknown) => {
    if (error instanceof UnstorableValueError) throw new ReturnRefusedError(ret.jid, ret.id, 'unstorable', error.message)
    throw error
  })
}

/**
 * Salt's `salt/job/<jid>/ret/<id>` data: exactly the return load's fields (cmd, id, jid, fun,
 * fun_args, return, retcode, success, and out/master_id when set); anything else a minion added is
 * left out, so programs written against Salt's events see the same keys.
 */
export function returnEventData(ret: ReturnLoad): Record<string, unknown> {
  const data: Record<string, unknown> = {
    cmd: '_return',
    id: ret.id,
    jid: ret.jid,
    fun: ret.fun,
    fun_args: ret.fun_args,
    return: ret.return,
    retcode: ret.retcode,
    success: ret.success,
  }
  if (ret.out !== undefined) data['out'] = ret.out
  if (ret.master_id !== undefined) data['master_id'] = ret.master_id
  // Stamped here, so the bus fires this fresh object as it is instead of copying it to add the stamp.
  data['_stamp'] = new Date().toISOString()
  return data
}
