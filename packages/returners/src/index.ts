/**
 * @packageDocumentation
 * `@brine/returners` is the master's job cache (DESIGN.md §7), the `JobCache` interface of
 * `@brine/common` implemented twice: `local_cache`, the embedded default, an append-only log under
 * `cachedir` that survives kill -9 and power loss once a return is acknowledged; and `postgres`, shared by
 * several masters, storing a return written twice once. `openJobCache` picks one from
 * `master_job_cache` (the master calls it when it starts). A minion's returners (`brine --return`):
 * `MinionReturners`, and `checkReturners`, which the master applies to a publish.
 */
export { LocalJobCache, type LocalJobCacheOptions } from './local-cache.js'
export { PostgresJobCache, type PostgresConnection, type PostgresJobCacheOptions } from './postgres-cache.js'
export { openJobCache, postgresConnection, JOB_CACHE_BACKENDS, type JobCacheBackend, type OpenJobCacheOptions } from './open.js'
export { FutureJidError, JobCacheError, UnknownReturnerError, UnstorableValueError } from './errors.js'
export {
  checkReturners,
  MinionReturners,
  RETURNERS,
  returnerNames,
  type MinionReturnersOptions,
  type ReturnedJob,
  type ReturnerName,
} from './minion-returners.js'
export { BYTES_MARKER, NUL_STRING_MARKER, toJsonValue, fromJsonValue } from './json.js'
