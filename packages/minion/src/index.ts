/**
 * @packageDocumentation
 * `@brine/minion` is the Brine minion: it authenticates to its masters, subscribes to their
 * publishes (on the port each master's auth reply names), matches targets, runs Salt's execution
 * modules (test, cmd, cp, grains, saltutil, sys, file, service, pkg, user, group, disk, status,
 * network, environ, and custom ones synced from the master's `_modules/` or read from `module_dirs`)
 * and returns their results in Salt's shapes, spooling returns while a master is away. Its side of
 * one master is a `MasterLink` (clients, auth with a pinned key, the master's clock, sealed sender,
 * spool, opened and fresh publishes), usable on its own: a syndic holds one to hear its upper master.
 * Its `FileClient` fetches `salt://` files from the master's file server into the cache, skipping
 * what the cache already holds.
 */
export * from './modules/index.js'
export * from './executor.js'
export * from './errors.js'
export { FileClient, fromMasterRefusal, hashLocalFile } from './file-client.js'
export type { FetchOutcome, FileClientOptions, ServerHash } from './file-client.js'
export { authIdOf, Minion, minionStartEvents } from './minion.js'
export type { MinionOptions } from './minion.js'
export { MasterLink } from './master-link.js'
export type { LinkPublish, MasterLinkOptions, MasterLinkStatus, ReturnRoute } from './master-link.js'
export { AllMastersPolicy, FailoverPolicy, failoverOrder, systemPolicyClock } from './master-policy.js'
export type { FailoverOptions, MasterPolicy, MasterPolicyContext, PolicyClock, PolicyLink } from './master-policy.js'
export type { MasterLinkEvent, MinionEvent, MinionEventType } from './lifecycle.js'
export { MinionAuth } from './auth.js'
export type { MasterSession, MinionAuthOptions } from './auth.js'
export { Returner, sendSealed, sendSealedFresh, isFinalRefusal } from './returner.js'
export { MasterTime, systemClock } from './master-time.js'
export type { Clock } from './master-time.js'
export type { ReturnerOptions, SealedSendOptions } from './returner.js'
export { ReturnSpool, spoolDir, SPOOL_DIR_MODE, SPOOL_FILE_MODE } from './spool.js'
export { JobRunner, KEPT_RETURN_BYTES, KEPT_RETURNS_TOTAL_BYTES, mutableCopy } from './job-runner.js'
export type { JobRunnerOptions } from './job-runner.js'
export { encodedBytes, fitReturn, mayNeedFitting, RETURN_FRAME_RESERVE_BYTES, truncationMarker } from './truncate-return.js'
export type { FittedReturn } from './truncate-return.js'
export { MinionSchedule, scheduleFile } from './schedule.js'
export type { MinionScheduleOptions } from './schedule.js'
