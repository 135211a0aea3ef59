import type { JobCache, SaveReturnOptions } from '@brine/common'
import type { ReturnLoad } from '@brine/protocol'
import { UnstorableValueError } from '@brine/returners'
import { ReturnRefusedError } from '@brine/protocol'

/**
 * Stores `ret` in the job cache; false for a duplicate. A return no retry can store (a NaN in PostgreSQL's
 * jsonb) is a ReturnRefusedError, so its sender drops it instead of spooling it forever.
 */
export function saveReturn(jobs: JobCache, ret: ReturnLoad, options?: SaveReturnOptions): Promise<boolean> {
  return jobs.saveReturn(ret.jid, ret.id, ret, options).catch((error: unknown) => {
    throw storeFailure(ret, error)
  })
}

/** What a failure to store `ret` is to its sender: a ReturnRefusedError for a return no retry can store, else itself. */
export function storeFailure(ret: ReturnLoad, error: unknown): unknown {
  return error instanceof UnstorableValueError ? new ReturnRefusedError(ret.jid, ret.id, 'unstorable', error.message) : error
}
