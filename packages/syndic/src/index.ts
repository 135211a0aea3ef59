/**
 * @packageDocumentation
 * `@brine/syndic` is the Brine syndic (Salt's `salt-syndic`): run beside a master, it hears one or more
 * upper masters as a minion does, passes each of their jobs down into its own master with the same jid,
 * and forwards upward what comes back — first the minions that will answer (announcements), then their
 * returns — in sealed `_syndic_return` batches every `syndic_event_forward_timeout` (each within
 * `max_frame_bytes`, see `splitBatches`), and the master's other events once as `syndic/<id>/<tag>`. It reads returns from its master's event bus and, whenever that
 * reader may have missed some, back from the master's job cache; batches an upper master did not
 * acknowledge wait in a bounded disk spool until it is back.
 */
export { Syndic, type SyndicEvent, type SyndicOptions } from './syndic.js'
export {
  UpperForwarder,
  MAX_RETURNS_PER_BATCH,
  splitBatches,
  type ForwarderEvent,
  type ForwarderOptions,
  type JobMeta,
  type PendingJob,
  type SplitOptions,
} from './forwarder.js'
export { BatchSpool, type SpooledBatch } from './batch-spool.js'
export { OpenJobs, type OpenJob, type OpenJobsOptions } from './open-jobs.js'
export * from './errors.js'
